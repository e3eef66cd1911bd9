// SPDX-License-Identifier: Apache-2.0
/*
 * What a peer sends on an established link (plugin/link.c over plugin/oob.c): the framed
 * reader (header, length, checksum) and the goodbye and error messages, fed as the bytes
 * on the socket. Byte 0: bit 0 hangs up after the bytes; bit 1 judges the requests as a
 * sender. Then whatever the peer said is used as the plugin uses it: which of a few
 * pending buffers the goodbye covers.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugin/link.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t bufs[] = { 0, 1, 63, 64, 255, 256, 1000, UINT64_MAX };
	struct braid_link *lk;
	int sv[2];

	/* what a socket buffer takes in one go: the reader never waits for more */
	if (size < 1 || size > 65536)
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	if (size > 1 && write(sv[1], data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	if (data[0] & 1) {
		close(sv[1]);
		sv[1] = -1;
	}
	lk = calloc(1, sizeof(*lk));
	if (!lk)
		abort();
	braid_oob_chan_init(&lk->chan, sv[0]);
	snprintf(lk->peer, sizeof(lk->peer), "10.0.0.1:4242");
	lk->state = BRAID_LINK_UP;
	braid_link_check(lk, 1);
	if (lk->state == BRAID_LINK_BYE) {
		int n = sizeof(bufs) / sizeof(bufs[0]);

		braid_link_bye_covers(lk, bufs, n);
		for (int i = 0; i < n; i++)
			braid_link_judge(lk, &bufs[i], 1, data[0] & 2, "fuzz");
	}
	if (lk->state == BRAID_LINK_FAILED)
		fuzz_check_why(lk->peer_why, sizeof(lk->peer_why));
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	free(lk);
	return 0;
}
