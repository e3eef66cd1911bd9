// SPDX-License-Identifier: Apache-2.0
/*
 * Loads the plugin the way NCCL 2.30 does (dlopen RTLD_NOW|RTLD_LOCAL, then the first of
 * ncclNetPlugin_v12, v11, ... v6 that it exports: src/plugin/net.cc's getNcclNet[]),
 * prints which it found, and runs init (v11 or v12: the same call) with a logger that
 * prints every line. Exit status: 0 init succeeded, 1 init
 * failed (the lines say why), 2 the plugin did not even load.
 *
 * --dlclose: no finalize, then dlclose, as a process that uses v8 to v10 (which have no
 * finalize) and unloads the plugin: prints how many rtnetlink sockets listening for link
 * changes the process holds after init and after dlclose (net_ofi's link watcher holds
 * one while it runs), and exits 1 if any is left after dlclose.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

static int own_socket(unsigned long inode)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		char path[300], link[64];
		unsigned long ino;
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		found = sscanf(link, "socket:[%lu]", &ino) == 1 && ino == inode;
	}
	closedir(d);
	return found;
}

/* This process's NETLINK_ROUTE sockets bound to RTMGRP_LINK (/proc/self/net/netlink lists
 * the namespace's; its fds say which are ours). */
static int link_listeners(void)
{
	FILE *f = fopen("/proc/self/net/netlink", "r");
	char line[256];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long inode;
		unsigned groups;
		int proto;

		if (sscanf(line, "%*s %d %*u %x %*d %*d %*d %*d %*d %lu", &proto, &groups,
			   &inode) == 3 &&
		    proto == 0 && (groups & 1) && own_socket(inode))
			n++;
	}
	fclose(f);
	return n;
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

	int unload = argc == 3 && !strcmp(argv[2], "--dlclose");

	if (argc != 2 && !unload) {
		fprintf(stderr, "usage: %s PLUGIN.so [--dlclose]\n", argv[0]);
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
	if (rc == ncclSuccess && unload) {
		int before = link_listeners(), after;

		dlclose(lib);
		after = link_listeners();
		printf("link listeners after init: %d, after dlclose: %d\n", before, after);
		fflush(stdout); /* LeakSanitizer's exit flushes nothing */
		return after ? 1 : 0;
	}
	if (rc == ncclSuccess)
		net->finalize(ctx);
	return rc == ncclSuccess ? 0 : 1;
}
