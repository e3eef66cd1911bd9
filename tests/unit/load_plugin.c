// SPDX-License-Identifier: Apache-2.0
/*
 * Loads the plugin the way NCCL does (dlopen RTLD_NOW|RTLD_LOCAL, ncclNetPlugin_v11) and
 * runs init with a logger that prints every line. Exit status: 0 init succeeded, 1 init
 * failed (the lines say why), 2 the plugin did not even load.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>

#include "nccl_net_abi.h"

static void print_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		      const char *fmt, ...)
{
	va_list ap;

	(void)flags, (void)file, (void)line;
	printf("%s ", level == NCCL_LOG_WARN ? "WARN" : "INFO");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

int main(int argc, char **argv)
{
	ncclNet_v11_t *net;
	void *lib, *ctx = NULL;
	ncclResult_t rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("dlopen failed: %s\n", dlerror());
		return 2;
	}
	net = dlsym(lib, "ncclNetPlugin_v11");
	if (!net) {
		printf("no ncclNetPlugin_v11\n");
		return 2;
	}
	rc = net->init(&ctx, 1, NULL, print_log, NULL);
	printf("init: %d\n", rc);
	if (rc == ncclSuccess)
		net->finalize(ctx);
	return rc == ncclSuccess ? 0 : 1;
}
