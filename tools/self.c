// SPDX-License-Identifier: Apache-2.0
/*
 * Where this binary is, and the plugin a subcommand loads when not told (tools/cmds.h).
 * Apart from the dispatcher (tools/braid.c) so that the subcommands, which the
 * dispatcher calls, do not call back into it.
 */
#include "tools/cmds.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

int braid_self_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* The plugin beside this binary (the build tree), then in ../lib (an installed
 * PREFIX/bin and PREFIX/lib), else by name through the dynamic loader. */
void braid_default_plugin(char *buf, size_t len)
{
	static const char *const rel[] = { "", "/../lib" };
	char self[PATH_MAX], cand[PATH_MAX + 32];

	if (braid_self_path(self, sizeof(self)) == 0) {
		const char *dir = dirname(self);

		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(cand, sizeof(cand), "%s%s/libnccl-net-braid.so", dir, rel[i]);
			if (access(cand, R_OK) == 0) {
				snprintf(buf, len, "%s", cand);
				return;
			}
		}
	}
	snprintf(buf, len, "libnccl-net-braid.so");
}
