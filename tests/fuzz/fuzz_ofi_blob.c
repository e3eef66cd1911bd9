// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi's handshake blob, as the peer sends it (net_ofi/ofi_conn.c ofi_blob_check).
 * Input: the blob, copied into a buffer of exactly its length. Our provider is
 * "tcp;ofi_rxm", as the seeds' peers.
 */
#include <stdlib.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ofi_peer_addr a;
	char why[256];
	uint8_t *blob;
	int rc;

	if (size > 65536)
		return 0;
	blob = malloc(size ? size : 1);
	if (!blob)
		return 0;
	memcpy(blob, data, size);
	memset(&a, 0xa5, sizeof(a));
	why[0] = '\0';
	rc = ofi_blob_check(blob, (uint32_t)size, "tcp;ofi_rxm", &a, why, sizeof(why));
	if (rc) {
		fuzz_check_why(why, sizeof(why));
		if (!why[0])
			__builtin_trap();
	} else if (a.name_len < 1 || a.name_len > sizeof(a.name) || a.comm_id == 0) {
		__builtin_trap(); /* av_get() trusts name_len; the comm id 0 is never given */
	}
	free(blob);
	return 0;
}
