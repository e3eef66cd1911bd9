// SPDX-License-Identifier: Apache-2.0
/*
 * The verbs backend's entry as far as it exists today: it opens libibverbs (dlopen, never
 * linked) and counts verbs ports that are ACTIVE, so that BRAID_BACKEND=auto can say what
 * it saw. The RC data path is not built yet (tracked by the net_ib issue); until then
 * init always declines, naming what it found, and the core moves on to libfabric.
 */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

#include "plugin/backend.h"

#define IBV_LIB "libibverbs.so.1"

struct ibv_probe_dl {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	/* The exported (non-inline) entry: it fills the leading, stable part of the attr. */
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
};

static int resolve(void *lib, struct ibv_probe_dl *dl, char *why, size_t whylen)
{
	static const char *const names[] = {
		"ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name",
		"ibv_open_device",     "ibv_close_device",     "ibv_query_device",
		"ibv_query_port",
	};
	void **slots = (void **)dl;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		slots[i] = dlsym(lib, names[i]);
		if (!slots[i]) {
			snprintf(why, whylen, "%s has no %s", IBV_LIB, names[i]);
			return -1;
		}
	}
	return 0;
}

/* "mlx5_0:1 mlx5_1:1" into list; returns the number of active ports. */
static int count_active_ports(const struct ibv_probe_dl *dl, char *list, size_t len)
{
	struct ibv_device **devs;
	int ndev = 0, active = 0;
	size_t used = 0;

	devs = dl->get_device_list(&ndev);
	if (!devs)
		return 0;
	for (int i = 0; i < ndev; i++) {
		struct ibv_context *ctx = dl->open_device(devs[i]);
		struct ibv_device_attr dattr;

		if (!ctx)
			continue;
		if (dl->query_device(ctx, &dattr) == 0) {
			for (int p = 1; p <= dattr.phys_port_cnt; p++) {
				struct ibv_port_attr pattr;

				memset(&pattr, 0, sizeof(pattr));
				if (dl->query_port(ctx, (uint8_t)p, &pattr) || pattr.state != IBV_PORT_ACTIVE)
					continue;
				active++;
				if (used < len)
					used += (size_t)snprintf(list + used, len - used, "%s%s:%d",
								 used ? " " : "",
								 dl->get_device_name(devs[i]), p);
			}
		}
		dl->close_device(ctx);
	}
	dl->free_device_list(devs);
	return active;
}

static int ib_init(char *why, size_t whylen)
{
	struct ibv_probe_dl dl;
	char ports[256] = "";
	void *lib = dlopen(IBV_LIB, RTLD_NOW | RTLD_LOCAL);
	int active;

	if (!lib) {
		snprintf(why, whylen, "cannot open %s (%s)", IBV_LIB, dlerror());
		return -1;
	}
	if (resolve(lib, &dl, why, whylen))
		return -1; /* the library stays mapped: see net_ofi/ofi_dl.c */
	active = count_active_ports(&dl, ports, sizeof(ports));
	if (active == 0)
		snprintf(why, whylen, "no verbs device has an active port");
	else
		snprintf(why, whylen,
			 "%d active verbs port(s) (%s), but braid's verbs data path is not built "
			 "yet: using libfabric instead (its verbs provider can serve these NICs)",
			 active, ports);
	return -1;
}

static void ib_fini(void)
{
}

static int ib_ndevs(void)
{
	return 0;
}

/* Only init, fini and ndevs are reachable while init declines. */
const struct braid_backend_ops braid_ib_ops = {
	.name = "ib",
	.kind = BRAID_BACKEND_IB,
	.init = ib_init,
	.fini = ib_fini,
	.ndevs = ib_ndevs,
};
