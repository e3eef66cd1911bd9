// SPDX-License-Identifier: Apache-2.0
/*
 * Transfer plans: which messages, of which sizes, into which receive buffers, grouped
 * how. Built from the seed alone so that both sides build the same plan.
 */
#include "tests/conformance/conf.h"

#include <stdlib.h>
#include <string.h>

#include "tools/pattern.h"

#define MiB (1024 * 1024)

static void alloc_plan(struct xfer_plan *p, int nmsgs, int ngroups)
{
	memset(p, 0, sizeof(*p));
	p->msgs = calloc(nmsgs ? nmsgs : 1, sizeof(*p->msgs));
	p->groups = calloc(ngroups ? ngroups : 1, sizeof(*p->groups));
	if (!p->msgs || !p->groups)
		abort(); /* a few KiB: nothing sensible to do without them */
	p->nmsgs = nmsgs;
	p->ngroups = ngroups;
	p->recv_window = NCCL_NET_MAX_REQUESTS;
	p->send_window = NCCL_NET_MAX_REQUESTS;
	p->inflight_bytes = 160 * (size_t)MiB;
}

/* Receive buffers: mostly exact, often a little larger, sometimes twice the message. */
static size_t cap_for(uint64_t *st, size_t size)
{
	uint64_t roll = prng_range(st, 0, 9);

	if (roll < 5)
		return size;
	if (roll < 8)
		return size + prng_range(st, 1, 8192);
	return size ? 2 * size : 4096;
}

/* Log-uniform in [0, max]: every order of magnitude gets its share. */
static size_t random_size(uint64_t *st, size_t max)
{
	int bits = 0;

	while (bits < 62 && ((size_t)1 << (bits + 1)) <= max)
		bits++;
	size_t hi = (size_t)1 << prng_range(st, 0, bits);

	if (hi > max)
		hi = max;
	return prng_range(st, hi / 2, hi);
}

static void single_groups(struct xfer_plan *p)
{
	for (int i = 0; i < p->nmsgs; i++) {
		p->groups[i].first = i;
		p->groups[i].n = 1;
		p->groups[i].send_order[0] = 0;
	}
}

void plan_stream(struct xfer_plan *p, uint64_t seed, int nrandom, size_t max_random, bool with_huge)
{
	/* 0, 1, odd, around pages and around the sizes where protocols usually switch */
	static const size_t fixed[] = {
		0,           1,
		2,           3,
		7,           8,
		9,           63,
		64,          65,
		4095,        4096,
		4097,        8191,
		8192,        12289,
		65535,       65536 + 7,
		MiB - 1,     MiB,
		4 * MiB + 3, 16 * MiB + 1,
	};
	int nfixed = sizeof(fixed) / sizeof(fixed[0]);
	int n = nfixed + nrandom + (with_huge ? 1 : 0);
	uint64_t st = seed;

	alloc_plan(p, n, n);
	for (int i = 0; i < n; i++) {
		size_t size = i < nfixed             ? fixed[i]
			      : i < nfixed + nrandom ? random_size(&st, max_random)
						     : 64 * (size_t)MiB;

		p->msgs[i].size = size;
		p->msgs[i].cap = size >= 16 * (size_t)MiB ? size + prng_range(&st, 0, 1) * 4096
							  : cap_for(&st, size);
		p->msgs[i].tag = (int)prng_range(&st, 0, 1023);
	}
	/* mix the order, so that big and small messages are in flight together */
	for (int i = n - 1; i > 0; i--) {
		int j = (int)prng_range(&st, 0, i);
		struct xfer_msg t = p->msgs[i];

		p->msgs[i] = p->msgs[j];
		p->msgs[j] = t;
	}
	for (int i = 0; i < n; i++)
		p->msgs[i].id = i;
	single_groups(p);
}

void plan_groups(struct xfer_plan *p, uint64_t seed, int ngroups, int max_recvs, size_t max_size)
{
	uint64_t st = seed;
	int nmsgs = 0, *ns;

	if (max_recvs > XFER_MAX_GROUP)
		max_recvs = XFER_MAX_GROUP;
	ns = malloc(sizeof(int) * ngroups);
	if (!ns)
		abort();
	for (int g = 0; g < ngroups; g++) {
		/* every group size appears; full groups are the common NCCL case */
		ns[g] = g < max_recvs ? g + 1 : (int)prng_range(&st, 1, max_recvs);
		nmsgs += ns[g];
	}
	alloc_plan(p, nmsgs, ngroups);
	p->send_window = NCCL_NET_MAX_REQUESTS * max_recvs;
	p->arena = true;
	for (int g = 0, m = 0; g < ngroups; g++) {
		struct xfer_group *gr = &p->groups[g];

		gr->first = m;
		gr->n = ns[g];
		for (int i = 0; i < gr->n; i++, m++) {
			struct xfer_msg *msg = &p->msgs[m];
			int tag, dup;

			do { /* distinct tags in a group: NCCL uses peer ranks */
				tag = (int)prng_range(&st, 0, 255);
				dup = 0;
				for (int k = gr->first; k < m; k++)
					dup |= p->msgs[k].tag == tag;
			} while (dup);
			msg->id = m;
			msg->tag = tag;
			msg->size = prng_range(&st, 0, 9) == 0 ? 0 : random_size(&st, max_size);
			msg->cap = cap_for(&st, msg->size);
			gr->send_order[i] = i;
		}
		for (int i = gr->n - 1; i > 0; i--) {
			int j = (int)prng_range(&st, 0, i), t = gr->send_order[i];

			gr->send_order[i] = gr->send_order[j];
			gr->send_order[j] = t;
		}
	}
	free(ns);
}

void plan_fixed(struct xfer_plan *p, int nmsgs, size_t size, size_t cap, uint64_t id0)
{
	alloc_plan(p, nmsgs, nmsgs);
	for (int i = 0; i < nmsgs; i++) {
		p->msgs[i].id = id0 + i;
		p->msgs[i].size = size;
		p->msgs[i].cap = cap;
		p->msgs[i].tag = 7;
	}
	single_groups(p);
}

void plan_free(struct xfer_plan *p)
{
	free(p->msgs);
	free(p->groups);
	memset(p, 0, sizeof(*p));
}
