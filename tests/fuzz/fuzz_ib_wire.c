// SPDX-License-Identifier: Apache-2.0
/*
 * net_ib's handshake blob, as the peer sends it (net_ib/ib_wire.c ib_wire_check). Input:
 * one byte of settings (our link layer, whether we wait for a reply and with how many
 * QPs), then the blob, copied into a buffer of exactly its length so that a read past
 * what the peer sent is caught.
 */
#include <stdlib.h>
#include <string.h>

#include "net_ib/ib_wire.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ib_dev local;
	char why[320];
	uint8_t *blob;
	int want_nqps, rc;

	if (size < 1 || size > 65536)
		return 0;
	memset(&local, 0, sizeof(local));
	snprintf(local.name, sizeof(local.name), "mlx5_0");
	local.port = 1;
	local.link_layer = (data[0] & 1) ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
	want_nqps = (data[0] >> 1) & 0x1f; /* 0: the listener's check of a hello */
	blob = malloc(size - 1 ? size - 1 : 1);
	if (!blob)
		return 0;
	memcpy(blob, data + 1, size - 1);
	why[0] = '\0';
	rc = ib_wire_check(blob, (uint32_t)(size - 1), want_nqps, &local, why, sizeof(why));
	if (rc) {
		fuzz_check_why(why, sizeof(why));
		if (!why[0])
			__builtin_trap();
	} else {
		const struct ib_wire *w = (const struct ib_wire *)blob;

		/* what the caller then trusts: in range, and the QP count it asked for */
		if (size - 1 != sizeof(*w) || w->nqps < 1 || w->nqps > IB_MAX_QPS ||
		    w->nrails < 1 || w->nrails > BRAID_VDEV_MAX_NICS ||
		    (want_nqps && w->nqps != want_nqps))
			__builtin_trap();
		/* each QP's rail, and on a hello the listener's NIC it goes to */
		for (int i = 0; i < w->nqps; i++)
			if (w->qp_rail[i] >= w->nrails ||
			    (!want_nqps && w->qp_peer_rail[i] >= BRAID_VDEV_MAX_NICS))
				__builtin_trap();
	}
	free(blob);
	return 0;
}
