// SPDX-License-Identifier: Apache-2.0
/*
 * Loads the plugin the way NCCL 2.30 does (dlopen RTLD_NOW|RTLD_LOCAL, then the first of
 * ncclNetPlugin_v12, v11, ... v6 that it exports: src/plugin/net.cc's getNcclNet[]),
 * prints which it found, and runs init (v11 or v12: the same call) with a logger that
 * prints every line. Exit status: 0 init succeeded, 1 init
 * failed (the lines say why), 2 the plugin did not even load.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
	static const char *const order[] = { "ncclNetPlugin_v12", "ncclNetPlugin_v11",
					     "ncclNetPlugin_v10", "ncclNetPlugin_v9",
					     "ncclNetPlugin_v8",  "ncclNetPlugin_v7",
					     "ncclNetPlugin_v6" };
	const char *found = NULL;
	ncclNet_v11_t *net = NULL;
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
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && !net; i++) {
		net = dlsym(lib, order[i]);
		found = order[i];
	}
	if (!net) {
		printf("no ncclNetPlugin_v6..v12\n");
		return 2;
	}
	printf("found %s\n", found);
	if (strcmp(found, "ncclNetPlugin_v12") && strcmp(found, "ncclNetPlugin_v11")) {
		printf("%s: this loader inits v11 and v12 only\n", found);
		return 2;
	}
	/* ncclNet_v12_t's init is v11's, at the same offset (test_abi) */
	rc = net->init(&ctx, 1, NULL, print_log, NULL);
	printf("init: %d\n", rc);
	if (rc == ncclSuccess)
		net->finalize(ctx);
	return rc == ncclSuccess ? 0 : 1;
}
