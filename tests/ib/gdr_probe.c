// SPDX-License-Identifier: Apache-2.0
/*
 * gdr-probe: what NCCL sees of GPUDirect. Loads the built plugin as NCCL does, inits it,
 * and prints (key=value on stdout, the plugin's log on stderr):
 *   devices       the device count, then devN: each device's name, forceFlush and PCI path
 *   ptr_support   device 0's ptrSupport, and the HOST / CUDA / DMABUF bits by name
 *   init_warns    WARN lines logged by init
 *   fb_*          the fallback record, read from /dev/shm/braid-<pid> as a tool would
 *                 (again after GDR_PROBE_RECV_REGS's registrations: fb_recv_regs_*)
 *   regmr_cuda    the result of regMr(NCCL_PTR_CUDA) on a comm of device 0, and the
 *                 WARN lines it logged (regmr_warns)
 * tests/ib/gpudirect.sh runs it over softverbs with fixture host roots (BRAID_FSROOT).
 *
 *   gdr-probe PLUGIN [VERSION]     (VERSION 8..11, default 11)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin/counters.h"
#include "tools/ctr_self.h"
#include "tools/netapi.h"

static int read_fallback(void)
{
	const struct braid_ctr_region *r;
	char why[160];

	if (ctr_self_map(&r, why, sizeof(why))) {
		fprintf(stderr, "gdr-probe: %s\n", why);
		return -1;
	}
	printf("fb_backend=%.*s\n", (int)sizeof(r->fallback.backend), r->fallback.backend);
	printf("fb_why=%.*s\n", (int)sizeof(r->fallback.why), r->fallback.why);
	printf("fb_gpudirect=%d\n", r->fallback.gpudirect);
	printf("fb_gpudirect_mode=%.*s\n", (int)sizeof(r->fallback.gpudirect_mode),
	       r->fallback.gpudirect_mode);
	printf("fb_gpudirect_why=%.*s\n", (int)sizeof(r->fallback.gpudirect_why),
	       r->fallback.gpudirect_why);
	printf("fb_recv_regs_gpu=%u\n", r->fallback.recv_regs_gpu);
	printf("fb_recv_regs_host=%u\n", r->fallback.recv_regs_host);
	ctr_self_unmap(r);
	return 0;
}

/* A send and a receive comm on device 0, in this process. */
static int connect_pair(struct net_api *api, void *ctx, void **lc, void **sc, void **rc)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	time_t until = time(NULL) + 20;

	*lc = *sc = *rc = NULL;
	if (api->listen(api, ctx, 0, handle, lc) != ncclSuccess)
		return -1;
	while ((!*sc || !*rc) && time(NULL) < until) {
		if (!*sc && api->connect(api, ctx, 0, handle, sc) != ncclSuccess)
			return -1;
		if (!*rc && api->accept(api, *lc, rc) != ncclSuccess)
			return -1;
		if (!*sc || !*rc)
			usleep(1000);
	}
	return *sc && *rc ? 0 : -1;
}

int main(int argc, char **argv)
{
	static char buf[1 << 16] __attribute__((aligned(4096)));
	struct net_api api;
	struct net_props p;
	char loaded[256], err[1024];
	void *dl, *ctx = NULL, *lc, *sc, *rc, *mh = NULL, *cuda;
	int version = argc > 2 ? atoi(argv[2]) : 11, ndev = 0;
	unsigned long w0;
	ncclResult_t r;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PLUGIN [VERSION]\n", argv[0]);
		return 2;
	}
	snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "gdr-probe");
	/* As NCCL: the CUDA driver, where there is one (tests/cuda's stand-in), is initialised
	 * before any network plugin call. */
	cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cuda) {
		int (*cu_init)(unsigned int) = (int (*)(unsigned int))dlsym(cuda, "cuInit");

		printf("cuinit=%d\n", cu_init ? cu_init(0) : -1);
	}
	dl = netapi_open(argv[1], loaded, sizeof(loaded), err, sizeof(err));
	if (!dl || netapi_bind(dl, version, &api)) {
		fprintf(stderr, "cannot load %s v%d: %s\n", argv[1], version, err);
		return 2;
	}
	r = api.init(&api, &ctx, 1);
	printf("init=%s\n", netapi_result_str(r));
	printf("init_warns=%lu\n", netapi_warn_count());
	if (r != ncclSuccess)
		return 1;
	if (api.devices(&api, &ndev) != ncclSuccess || ndev < 1 ||
	    api.get_props(&api, 0, &p) != ncclSuccess) {
		fprintf(stderr, "no device 0\n");
		return 1;
	}
	printf("devices=%d\n", ndev);
	for (int i = 0; i < ndev; i++) {
		struct net_props q;

		if (api.get_props(&api, i, &q) == ncclSuccess)
			printf("dev%d=%s force_flush=%d pci=%s\n", i, q.name, q.force_flush,
			       q.pci_path);
	}
	printf("ptr_support=0x%x%s%s%s\n", (unsigned)p.ptr_support,
	       p.ptr_support & NCCL_PTR_HOST ? " HOST" : "",
	       p.ptr_support & NCCL_PTR_CUDA ? " CUDA" : "",
	       p.ptr_support & NCCL_PTR_DMABUF ? " DMABUF" : "");
	if (read_fallback())
		return 1;
	if (connect_pair(&api, ctx, &lc, &sc, &rc)) {
		fprintf(stderr, "cannot connect a pair on device 0\n");
		return 1;
	}
	/* GDR_PROBE_RECV_REGS=HCH...: register these on the receive comm, H host memory, C
	 * "CUDA" memory, as NCCL registers a connection's protocol buffers (recv_regs_warns:
	 * the WARNs they logged); the regMr(NCCL_PTR_CUDA) check below is skipped. */
	if (getenv("GDR_PROBE_RECV_REGS")) {
		const char *seq = getenv("GDR_PROBE_RECV_REGS");
		static char bufs[16][4096];
		void *mhs[16];
		int n = 0;

		w0 = netapi_warn_count();
		for (; seq[n] && n < 16; n++) {
			r = api.reg_mr_type(&api, rc, bufs[n], sizeof(bufs[n]),
					    seq[n] == 'C' ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &mhs[n]);
			if (r != ncclSuccess) {
				fprintf(stderr, "regMr #%d (%c): %s\n", n, seq[n],
					netapi_result_str(r));
				return 1;
			}
		}
		printf("recv_regs_warns=%lu\n", netapi_warn_count() - w0);
		while (n--)
			api.dereg_mr(&api, rc, mhs[n]);
		if (read_fallback()) /* what braid stat shows of them */
			return 1;
		goto out;
	}
	/* softverbs has no GPU: "CUDA memory" is host memory, which is all a registration
	 * through peer memory would need here. */
	w0 = netapi_warn_count();
	r = api.reg_mr_type(&api, rc, buf, sizeof(buf), NCCL_PTR_CUDA, &mh);
	printf("regmr_cuda=%s\n", netapi_result_str(r));
	printf("regmr_warns=%lu\n", netapi_warn_count() - w0);
	if (r == ncclSuccess)
		api.dereg_mr(&api, rc, mh);
out:
	api.close_send(&api, sc);
	api.close_recv(&api, rc);
	api.close_listen(&api, lc);
	api.finalize(&api, ctx);
	fflush(stdout);
	return 0;
}
