// SPDX-License-Identifier: Apache-2.0
/*
 * Rail groups: which NICs each GPU should use. The rule (docs/topology.md):
 *
 *  1. Candidates. Only RDMA NICs (verbs, EFA) take part when the machine has any; plain
 *     network interfaces only when it has none. A GPU's key to a NIC is (path type,
 *     distance), smaller is closer; a NIC without PCI is farthest.
 *  2. A GPU's closest NICs are those at its smallest key: all of them on a tie, since
 *     striping over equally close NICs is what a rail is for.
 *  3. A GPU and a NIC are linked when each is among the other's closest (the NIC's
 *     closest GPUs are those at its smallest key). Rails are the connected groups of
 *     linked GPUs and NICs: NICs shared by GPUs (one NIC per GPU pair) give one rail for
 *     both GPUs, and every NIC is in at most one rail.
 *  4. A GPU with no link (each of its closest NICs has a closer GPU elsewhere) joins, of
 *     the rails holding one of its closest NICs, the one with the fewest GPUs so far
 *     (then the lowest number); if none of them is in a rail yet, its closest NICs make
 *     a new rail. GPUs are taken in bus id order. A far GPU therefore never merges two
 *     near rails.
 *  5. Rails are numbered in the order of their first GPU (bus id order). A NIC no GPU
 *     chose has rail -1; without GPUs or NICs there are no rails.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "topo/topo_int.h"

static long link_key(const struct braid_topo_link *l)
{
	long d = l->distance < 0 ? 99999 : (l->distance > 99998 ? 99998 : l->distance);

	return (long)l->path * 100000L + d;
}

static int find(int *parent, int x)
{
	while (parent[x] != x) {
		parent[x] = parent[parent[x]];
		x = parent[x];
	}
	return x;
}

static void unite(int *parent, int a, int b)
{
	a = find(parent, a);
	b = find(parent, b);
	if (a != b)
		parent[a < b ? b : a] = a < b ? a : b;
}

struct rail_work {
	long *gbest, *nbest;
	int *parent, *glinked, *nlinked, *railof, *count, *renum;
};

static int eligible(const struct braid_topo *t, int n, int any_rdma)
{
	return !any_rdma || t->nics[n].info.rdma;
}

static void link_mutual(struct braid_topo *t, struct rail_work *w, int any_rdma)
{
	int g, n;

	for (g = 0; g < t->ngpus; g++)
		w->gbest[g] = LONG_MAX;
	for (n = 0; n < t->nnics; n++)
		w->nbest[n] = LONG_MAX;
	for (g = 0; g < t->ngpus; g++)
		for (n = 0; n < t->nnics; n++) {
			long k = link_key(braid_topo_link_at(t, g, n));

			if (!eligible(t, n, any_rdma))
				continue;
			if (k < w->gbest[g])
				w->gbest[g] = k;
			if (k < w->nbest[n])
				w->nbest[n] = k;
		}
	for (g = 0; g < t->ngpus + t->nnics; g++)
		w->parent[g] = g;
	for (g = 0; g < t->ngpus; g++)
		for (n = 0; n < t->nnics; n++) {
			long k = link_key(braid_topo_link_at(t, g, n));

			if (!eligible(t, n, any_rdma) || k != w->gbest[g] || k != w->nbest[n])
				continue;
			unite(w->parent, g, t->ngpus + n);
			w->glinked[g] = w->nlinked[n] = 1;
		}
}

/* Rule 4 for GPU g: the rail it joins, creating one if needed. */
static int place_unlinked(struct braid_topo *t, struct rail_work *w, int g, int any_rdma)
{
	int n, best = -1;

	for (n = 0; n < t->nnics; n++) {
		int r = t->nics[n].info.rail;

		if (!eligible(t, n, any_rdma) || r < 0 ||
		    link_key(braid_topo_link_at(t, g, n)) != w->gbest[g])
			continue;
		if (best < 0 || w->count[r] < w->count[best] ||
		    /* cppcheck-suppress arrayIndexThenCheck ; r < best breaks ties: r >= 0 above */
		    (w->count[r] == w->count[best] && r < best))
			best = r;
	}
	if (best >= 0)
		return best;
	best = t->nrails++;
	for (n = 0; n < t->nnics; n++)
		if (eligible(t, n, any_rdma) && t->nics[n].info.rail < 0 &&
		    link_key(braid_topo_link_at(t, g, n)) == w->gbest[g])
			t->nics[n].info.rail = best;
	return best;
}

static void assign(struct braid_topo *t, struct rail_work *w, int any_rdma)
{
	int g, n, r;

	for (g = 0; g < t->ngpus + t->nnics; g++)
		w->railof[g] = -1;
	for (g = 0; g < t->ngpus; g++) {
		int root;

		if (!w->glinked[g])
			continue;
		root = find(w->parent, g);
		if (w->railof[root] < 0)
			w->railof[root] = t->nrails++;
		t->gpus[g].info.rail = w->railof[root];
		w->count[t->gpus[g].info.rail]++;
	}
	for (n = 0; n < t->nnics; n++)
		if (w->nlinked[n])
			t->nics[n].info.rail = w->railof[find(w->parent, t->ngpus + n)];
	for (g = 0; g < t->ngpus; g++) {
		if (w->glinked[g] || w->gbest[g] == LONG_MAX)
			continue;
		r = place_unlinked(t, w, g, any_rdma);
		t->gpus[g].info.rail = r;
		w->count[r]++;
	}
	/* Rule 5: number rails by their first GPU. */
	for (r = 0; r < t->nrails; r++)
		w->renum[r] = -1;
	r = 0;
	for (g = 0; g < t->ngpus; g++) {
		int old = t->gpus[g].info.rail;

		if (old >= 0 && w->renum[old] < 0)
			w->renum[old] = r++;
	}
	for (g = 0; g < t->ngpus; g++)
		if (t->gpus[g].info.rail >= 0)
			t->gpus[g].info.rail = w->renum[t->gpus[g].info.rail];
	for (n = 0; n < t->nnics; n++)
		if (t->nics[n].info.rail >= 0)
			t->nics[n].info.rail = w->renum[t->nics[n].info.rail];
}

int braid_topo_build_rails(struct braid_topo *t)
{
	struct rail_work w;
	size_t all;
	int n, any_rdma = 0, rc = 0;

	t->nrails = 0;
	if (!t->ngpus || !t->nnics)
		return 0;
	for (n = 0; n < t->nnics; n++)
		any_rdma |= t->nics[n].info.rdma;
	all = (size_t)t->ngpus + (size_t)t->nnics;
	w.gbest = calloc((size_t)t->ngpus, sizeof(long));
	w.nbest = calloc((size_t)t->nnics, sizeof(long));
	w.parent = calloc(all, sizeof(int));
	w.glinked = calloc((size_t)t->ngpus, sizeof(int));
	w.nlinked = calloc((size_t)t->nnics, sizeof(int));
	w.railof = calloc(all, sizeof(int));
	/* Every rail has a GPU, so there are at most ngpus of them. */
	w.count = calloc((size_t)t->ngpus, sizeof(int));
	w.renum = calloc((size_t)t->ngpus, sizeof(int));
	if (w.gbest && w.nbest && w.parent && w.glinked && w.nlinked && w.railof && w.count &&
	    w.renum) {
		link_mutual(t, &w, any_rdma);
		assign(t, &w, any_rdma);
	} else {
		rc = -ENOMEM;
	}
	free(w.gbest);
	free(w.nbest);
	free(w.parent);
	free(w.glinked);
	free(w.nlinked);
	free(w.railof);
	free(w.count);
	free(w.renum);
	return rc;
}
