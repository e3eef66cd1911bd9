// SPDX-License-Identifier: Apache-2.0
/*
 * `braid perf`: streaming bandwidth and ping-pong latency between two processes through
 * the plugin's exported API, driven as NCCL drives it (listen/connect/accept polled,
 * registered buffers, a window of isend/irecv requests, test() until done).
 *
 * The server side streams and prints; the client side receives and verifies. Data are
 * checked byte by byte on the first and last timed iteration of every size. The parts:
 * tools/perf.h.
 */
#include "tools/cmds.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bootstrap.h"
#include "tools/perf.h"

int braid_cmd_perf(int argc, char **argv)
{
	struct perf p;
	char err[512];
	pid_t child = -1;
	int rc, lfd;

	memset(&p, 0, sizeof(p));
	p.boot = -1;
	if (perf_parse_opts(argc, argv, &p.o))
		return 2;
	/* the plugin reads these at init; the local peer inherits them */
	if (p.o.backend)
		setenv("BRAID_BACKEND", p.o.backend, 1);
	if (p.o.provider)
		setenv("BRAID_OFI_PROVIDER", p.o.provider, 1);
	signal(SIGPIPE, SIG_IGN);

	snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "braid-perf%s",
		 p.o.mode != MODE_CLIENT ? ""
		 : p.o.local_child       ? "(peer)"
					 : "(client)");
	switch (p.o.mode) {
	case MODE_LOCAL:
	case MODE_SERVER: {
		int port = 0;

		p.streamer = true;
		lfd = boot_listen(p.o.mode == MODE_LOCAL ? "127.0.0.1" : NULL,
				  p.o.mode == MODE_LOCAL ? 0 : p.o.port, &port, err, sizeof(err));
		if (lfd < 0)
			return perf_err(&p, "bootstrap: %s", err), 1;
		if (p.o.mode == MODE_LOCAL) {
			child = perf_spawn_local_peer(argc, argv, port);
			if (child < 0) {
				close(lfd);
				return perf_err(&p, "cannot start the local peer process"), 1;
			}
		} else {
			fprintf(stderr, "braid perf: waiting for a client on port %d (%.0f s)\n",
				port, p.o.timeout);
		}
		p.boot = boot_accept(lfd, p.o.timeout, err, sizeof(err));
		close(lfd);
		if (p.boot < 0) {
			perf_err(&p, "bootstrap: %s", err);
			if (child > 0)
				perf_reap(child, 0);
			return 1;
		}
		break;
	}
	case MODE_CLIENT:
		snprintf(p.who, sizeof(p.who), p.o.local_child ? " (peer)" : " (client)");
		p.boot = boot_connect(p.o.host, p.o.port, p.o.timeout, err, sizeof(err));
		if (p.boot < 0)
			return perf_err(&p, "bootstrap to %s:%d: %s", p.o.host, p.o.port, err), 1;
		break;
	}
	rc = perf_run_session(&p);
	close(p.boot);
	if (child > 0) {
		/* the peer has finished too, or fails on its own; wait for it, bounded */
		int prc = perf_reap(child, rc ? 5 : 30);

		if (prc != 0) {
			perf_err(&p, "the local peer process ended with status %d", prc);
			rc = -1;
		}
	}
	if (p.o.mode == MODE_CLIENT && !p.o.local_child && rc == 0)
		printf("braid perf: client done; the server printed the results\n");
	return rc ? 1 : 0;
}
