// SPDX-License-Identifier: Apache-2.0
#include "plugin/fsroot.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plugin/params.h"

const char *braid_fsroot(void)
{
	return braid_param_str(BRAID_P_FSROOT);
}

int braid_fsroot_path(char *buf, size_t len, const char *path)
{
	const char *root = braid_fsroot();
	size_t n = strlen(root);
	int w;

	while (n > 0 && root[n - 1] == '/') /* "/" and "/x/" are "" and "/x" */
		n--;
	w = snprintf(buf, len, "%.*s%s", (int)n, root, path);
	if (w < 0 || (size_t)w >= len) {
		if (len)
			buf[0] = '\0';
		return -1;
	}
	return 0;
}

int braid_fsroot_exists(const char *path)
{
	char full[PATH_MAX];

	return braid_fsroot_path(full, sizeof(full), path) == 0 && access(full, F_OK) == 0;
}
