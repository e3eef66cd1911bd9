// SPDX-License-Identifier: Apache-2.0
/*
 * The connection handle as connect() gets it from NCCL: any 128 bytes (plugin/handle.c).
 * Decoding either refuses with a reason or gives a handle that encodes back to the same
 * wire bytes (the part the checksum covers).
 */
#include <string.h>

#include "plugin/handle.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t in[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	uint8_t out[NCCL_NET_HANDLE_MAXSIZE];
	struct braid_handle h, again;
	char why[256];

	memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
	why[0] = '\0';
	if (braid_handle_decode(in, &h, why, sizeof(why))) {
		fuzz_check_why(why, sizeof(why));
		if (!why[0])
			__builtin_trap(); /* a refusal always says why */
		return 0;
	}
	braid_handle_encode(&h, out);
	/* the fields decode reads round-trip; reserved bytes and the rest are the sender's */
	if (braid_handle_decode(out, &again, why, sizeof(why)) || again.backend != h.backend ||
	    again.dev != h.dev || again.nonce != h.nonce ||
	    memcmp(&again.addr, &h.addr, sizeof(h.addr)))
		__builtin_trap();
	braid_handle_stage_get(in); /* connect() also reads the stage from the same bytes */
	return 0;
}
