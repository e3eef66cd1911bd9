// SPDX-License-Identifier: Apache-2.0
/*
 * The peer process of a local `braid perf` run (no --server or --client): the same
 * command started again as the client, and reaped with a bound.
 */
#include "tools/cmds.h"
#include "tools/perf.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t perf_spawn_local_peer(int argc, char **argv, int port)
{
	char self[PATH_MAX], portstr[16];
	char **args = calloc(argc + 8, sizeof(char *));
	pid_t pid;
	int n = 0;

	if (!args || braid_self_path(self, sizeof(self))) {
		free(args);
		return -1;
	}
	snprintf(portstr, sizeof(portstr), "%d", port);
	args[n++] = self;
	for (int i = 0; i < argc; i++)
		args[n++] = argv[i]; /* argv[0] is "perf" */
	args[n++] = "--client";
	args[n++] = "127.0.0.1";
	args[n++] = "--port";
	args[n++] = portstr;
	args[n++] = "--local-child";
	args[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		execv(self, args);
		fprintf(stderr, "braid perf: exec(%s): %s\n", self, strerror(errno));
		_exit(127);
	}
	free(args);
	return pid;
}

/* Wait for the local peer with a bound; a peer that outlives us is killed. */
int perf_reap(pid_t pid, double timeout_s)
{
	double deadline = perf_now_us() + timeout_s * 1e6;
	int status;

	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (w < 0)
			return -1;
		if (perf_now_us() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		perf_sleep_us(10000);
	}
}
