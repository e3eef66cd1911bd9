// SPDX-License-Identifier: Apache-2.0
#include "plugin/peermem.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *const braid_peermem_files[BRAID_PEERMEM_NFILES] = {
	"/sys/kernel/mm/memory_peers/nv_mem/version",
	"/sys/kernel/mm/memory_peers/nv_mem_nc/version",
	"/sys/module/nvidia_peermem/version",
};

const char *braid_peermem_file(const char *root)
{
	char path[PATH_MAX];
	size_t n = strlen(root);

	while (n > 0 && root[n - 1] == '/') /* "/" and "/x/" are "" and "/x" */
		n--;
	for (int i = 0; i < BRAID_PEERMEM_NFILES; i++) {
		int w = snprintf(path, sizeof(path), "%.*s%s", (int)n, root,
				 braid_peermem_files[i]);

		if (w > 0 && (size_t)w < sizeof(path) && access(path, F_OK) == 0)
			return braid_peermem_files[i];
	}
	return NULL;
}
