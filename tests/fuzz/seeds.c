// SPDX-License-Identifier: Apache-2.0
/*
 * Writes the generated part of the seed corpus (tests/fuzz/corpus/<target>/gen-*): valid
 * handles from braid_handle_encode, valid handshake blobs of both backends, a value of
 * every knob, valid lists, and counters regions, so that each target starts past its
 * magic and checksum checks. `make fuzz-seeds` runs it; the output is committed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net_ib/ib_wire.h"
#include "net_ofi/ofi.h"
#include "plugin/handle.h"
#include "plugin/link.h"
#include "plugin/params.h"

static const char *root;

static void put(const char *target, const char *name, const void *a, size_t alen, const void *b,
		size_t blen)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0755) && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/gen-%s", root, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) ||
	    fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void handles(void)
{
	uint8_t out[NCCL_NET_HANDLE_MAXSIZE];
	struct braid_handle h = { .backend = 1, .dev = 0, .nonce = 0x0123456789abcdefull };
	struct sockaddr_in *sin = (struct sockaddr_in *)&h.addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&h.addr;

	sin->sin_family = AF_INET;
	sin->sin_port = htons(40000);
	sin->sin_addr.s_addr = htonl(0x7f000001);
	braid_handle_encode(&h, out);
	put("handle", "ipv4", out, sizeof(out), NULL, 0);
	memset(&h.addr, 0, sizeof(h.addr));
	h.backend = 2;
	h.dev = 3;
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(40001);
	sin6->sin6_addr = in6addr_loopback;
	braid_handle_encode(&h, out);
	put("handle", "ipv6", out, sizeof(out), NULL, 0);
}

static void ib_wires(void)
{
	struct ib_wire w;

	for (int v = 0; v < 3; v++) {
		/* v 0: a hello over InfiniBand; 1: a reply with 4 QPs over RoCE; 2: 2 NICs */
		uint8_t how = v == 0 ? 0 : (uint8_t)(1 | (v == 1 ? 4 : 2) << 1);
		char name[16];

		memset(&w, 0, sizeof(w));
		w.magic = IB_WIRE_MAGIC;
		w.version = IB_WIRE_VERSION;
		w.len = sizeof(w);
		w.nqps = v == 1 ? 4 : v == 2 ? 2 : 1;
		w.nrails = v == 2 ? 2 : 1;
		w.fifo_addr = 0x7f0000001000ull;
		w.fifo_rkey = 0x1234;
		for (int i = 0; i < w.nqps; i++) {
			w.qpn[i] = 0x100 + (uint32_t)i;
			w.psn[i] = 0x4242 + (uint32_t)i;
		}
		for (int k = 0; k < w.nrails; k++) {
			w.rails[k].link_layer = v ? IBV_LINK_LAYER_ETHERNET
						  : IBV_LINK_LAYER_INFINIBAND;
			w.rails[k].mtu = 5;
			w.rails[k].port = 1;
			w.rails[k].lid = v ? 0 : (uint16_t)(1 + k);
			w.rails[k].gid_index = 3;
			snprintf(w.rails[k].dev, sizeof(w.rails[k].dev), "mlx5_%d", k);
		}
		snprintf(name, sizeof(name), "wire%d", v);
		put("ib_wire", name, &how, 1, &w, sizeof(w));
	}
}

static void ofi_blobs(void)
{
	struct ofi_blob b = { .name_len = 16, .comm_id = 7, .token = 0xabcdef };

	snprintf(b.provider, sizeof(b.provider), "tcp;ofi_rxm");
	for (uint32_t i = 0; i < b.name_len; i++)
		b.name[i] = (uint8_t)(0x10 + i);
	put("ofi_blob", "tcp", &b, sizeof(b), NULL, 0);
}

static void env(void)
{
	static const char *const more[][2] = {
		{ "\x01\x00", "^=mlx5_0:1,eth" },
		{ "\x01\x00", "mlx5,ib0:2" },
		{ "\x02\x00", "mlx5_0:1+mlx5_0:2,mlx5_1" },
		{ "\x02\x00", "mlx5_1+eth0" },
		{ "\x03\x00", "rdma, gdr,rails=2,nics=4,nic_speed=100,backend=ib,provider=efa" },
		{ "\x03\x00", "none" },
	};
	char name[64];

	for (int id = 0; id < BRAID_P_COUNT; id++) {
		const struct braid_param_desc *d = braid_param_desc((enum braid_param_id)id);
		uint8_t head[2] = { 0, (uint8_t)id };

		snprintf(name, sizeof(name), "param-%s", d->name);
		put("env", name, head, 2, d->def, strlen(d->def));
		if (d->alias) {
			head[1] |= 0x80;
			snprintf(name, sizeof(name), "param-%s", d->alias);
			put("env", name, head, 2, d->def, strlen(d->def));
		}
	}
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
		snprintf(name, sizeof(name), "list%zu", i);
		put("env", name, more[i][0], 2, more[i][1], strlen(more[i][1]));
	}
}

static void regions(void)
{
	/* the region as the target builds it, seen through each output; and a short file */
	static const uint8_t hows[] = { 0x00, 0x10, 0x20, 0x40, 0x08, 0x02, 0x03 };
	uint8_t body[64] = { 0 };
	char name[16];

	for (size_t i = 0; i < sizeof(hows); i++) {
		snprintf(name, sizeof(name), "how%02x", hows[i]);
		put("stat_region", name, &hows[i], 1, body, (hows[i] & 3) ? sizeof(body) : 0);
	}
}

/* Frames as a peer writes them: its error report (braid_link_report_error) and a
 * goodbye (type 4, plugin/link.c's MSG_BYE) of buffers 0..99 with 64..95 written. */
static void links(void)
{
	struct braid_link lk;
	struct braid_link_bye bye;
	uint8_t head = 0, buf[8192];
	uint8_t payload[16 + BRAID_BYE_WINDOW / 8] = { 0 };
	int sv[2];
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		exit(1);
	}
	memset(&lk, 0, sizeof(lk));
	braid_oob_chan_init(&lk.chan, sv[0]);
	braid_link_report_error(&lk, 3, "ib: a work request failed");
	n = read(sv[1], buf, sizeof(buf));
	put("link", "peer-error", &head, 1, buf, n > 0 ? (size_t)n : 0);

	braid_bye_init(&bye, 0, 100);
	for (uint64_t b = 64; b < 96; b++)
		braid_bye_add(&bye, b);
	for (int i = 0; i < 8; i++) { /* big-endian, as link.c sends it */
		payload[i] = (uint8_t)(bye.base >> (56 - 8 * i));
		payload[8 + i] = (uint8_t)(bye.upto >> (56 - 8 * i));
		for (int w = 0; w < BRAID_BYE_WINDOW / 64; w++)
			payload[16 + 8 * w + i] = (uint8_t)(bye.bits[w] >> (56 - 8 * i));
	}
	braid_oob_chan_init(&lk.chan, sv[0]);
	if (braid_oob_chan_post(&lk.chan, 4, payload, sizeof(payload)) ||
	    braid_oob_chan_flush(&lk.chan)) {
		fprintf(stderr, "posting the goodbye seed failed\n");
		exit(1);
	}
	n = read(sv[1], buf, sizeof(buf));
	head = 1; /* and then hangs up */
	put("link", "bye", &head, 1, buf, n > 0 ? (size_t)n : 0);
	close(sv[0]);
	close(sv[1]);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	root = argv[1];
	if (mkdir(root, 0755) && errno != EEXIST) {
		perror(root);
		return 1;
	}
	handles();
	ib_wires();
	ofi_blobs();
	env();
	regions();
	links();
	return 0;
}
