// SPDX-License-Identifier: Apache-2.0
/*
 * The version-neutral core: reference-counted init, backend choice, argument checks,
 * dispatch. No data-path state lives here: after the checks every call goes straight to
 * the backend.
 */
#include "plugin/core.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "plugin/counters.h"
#include "plugin/gpudirect.h"
#include "plugin/log.h"
#include "plugin/ncclib_env.h"
#include "plugin/net_ids.h"
#include "plugin/params.h"
#include "plugin/profiler.h"
#include "plugin/require.h"
#include "plugin/vdev.h"
#include "topo/topo.h"

/* init/finalize may come from several communicator threads at once (v11). */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_refs;
/* Set once under init_lock before init returns success; read-only afterwards. */
static const struct braid_backend_ops *be;
static int be_ndevs;
static struct braid_dev_props *dev_props;
static struct braid_topo *topology;

static void load_topology(void)
{
	char err[256];

	topology = braid_topo_load(NULL, err, sizeof(err));
	if (!topology)
		BRAID_INFO(NCCL_INIT, "topology: %s; NIC PCI paths and NUMA placement unknown",
			   err);
}

#define CHECK_OBJ(ptr, want, what)                                                          \
	do {                                                                                \
		if (!(ptr) || ((const struct braid_obj *)(ptr))->magic != (want)) {         \
			BRAID_WARN("%s: %p is not a live braid %s (NCCL misuse or a stale " \
				   "pointer)",                                              \
				   __func__, (void *)(ptr), what);                          \
			return ncclInternalError;                                           \
		}                                                                           \
	} while (0)

#define CHECK_INIT()                                                                \
	do {                                                                        \
		if (!__atomic_load_n(&be, __ATOMIC_ACQUIRE)) {                      \
			BRAID_WARN("%s called before a successful init", __func__); \
			return ncclInvalidUsage;                                    \
		}                                                                   \
	} while (0)

/*
 * The fallback record's why: what the chosen backend wrote during its init (its own
 * reason, e.g. net_ib's "verbs: 1 active port(s): mlx5_0:1"), then the core's word on the
 * choice ("first choice", or why the backends before it were not used).
 */
static void record_choice(const struct braid_backend_ops *ops, const char *why)
{
	struct braid_ctr_fallback *fb = &braid_counters()->fallback;
	size_t used = strlen(fb->why);

	snprintf(fb->backend, sizeof(fb->backend), "%s", ops ? ops->name : "");
	if (!ops)
		snprintf(fb->why, sizeof(fb->why), "%s", why);
	else if (used < sizeof(fb->why) - 1)
		snprintf(fb->why + used, sizeof(fb->why) - used, "%s%s%s", used ? "; " : "",
			 why[0] ? "not used: " : "first choice", why);
}

/* Try one backend; on failure append "name: reason" to why_all and forget what it may
 * have written in the fallback record. */
static int try_backend(const struct braid_backend_ops *ops, char *why_all, size_t len)
{
	const struct braid_backend_env env = { .topo = topology };
	char why[512] = "";
	size_t used = strlen(why_all);

	if (ops->init(&env, why, sizeof(why)) == 0) {
		if (ops->ndevs() > 0)
			return 0;
		snprintf(why, sizeof(why), "no devices");
		ops->fini();
	}
	memset(&braid_counters()->fallback, 0, sizeof(braid_counters()->fallback));
	BRAID_INFO(NCCL_INIT | NCCL_NET, "%s backend not usable: %s", ops->name, why);
	snprintf(why_all + used, len - used, "%s%s: %s", used ? "; " : "", ops->name, why);
	return -1;
}

/*
 * GPUDirect as NCCL will see it from the devices' ptrSupport: the fallback record's
 * gpudirect fields, and one WARN when the topology has GPUs and NCCL will not use
 * GPUDirect RDMA with some device (the README's promise).
 */
static void report_gpudirect(const struct braid_backend_ops *ops)
{
	struct braid_ctr_fallback *fb = &braid_counters()->fallback;
	struct braid_gdr_in in = {
		.backend = ops->kind,
		.nccl_dmabuf = braid_gdr_nccl_dmabuf(),
		.ngpus = topology ? braid_topo_gpu_count(topology) : -1,
	};
	struct braid_gdr_out out, first = { .mode = "none" };
	int off = 0, first_off = -1;

	for (int d = 0; d < be_ndevs; d++) {
		in.ptr_support = dev_props[d].ptr_support;
		braid_gdr_decide(&in, &out);
		if (d == 0)
			first = out;
		if (!out.on && off++ == 0) {
			first = out;
			first_off = d;
		}
	}
	fb->gpudirect = !off;
	snprintf(fb->gpudirect_mode, sizeof(fb->gpudirect_mode), "%s", first.mode);
	snprintf(fb->gpudirect_why, sizeof(fb->gpudirect_why), "%s", first.why);
	BRAID_INFO(NCCL_INIT | NCCL_NET, "GPUDirect for NCCL: %s%s: %s", off ? "off" : "on",
		   in.ngpus < 0    ? " (GPUs unknown: no topology)"
		   : in.ngpus == 0 ? " (no GPU)"
				   : "",
		   first.why);
	if (first_off >= 0 && first.warn)
		BRAID_WARN("GPUDirect RDMA is off for %d of %d %s device(s) (first: %s) although the "
			   "topology has %d GPU(s): %s. NCCL will copy GPU buffers through host "
			   "memory. Fix: %s.",
			   off, be_ndevs, ops->name, dev_props[first_off].name, in.ngpus, first.why,
			   first.fix);
}

static ncclResult_t choose_backend(int api_version)
{
	static const char *const names[] = { "auto", "ib", "ofi" };
	int want = (int)braid_param_int(BRAID_P_BACKEND);
	char why[1024] = "";
	const struct braid_backend_ops *chosen = NULL;
	ncclResult_t rc;

	if ((want == 0 || want == 1) && try_backend(&braid_ib_ops, why, sizeof(why)) == 0)
		chosen = &braid_ib_ops;
	if (!chosen && (want == 0 || want == 2) &&
	    try_backend(&braid_ofi_ops, why, sizeof(why)) == 0)
		chosen = &braid_ofi_ops;

	if (!chosen) {
		BRAID_WARN("no usable network backend (BRAID_BACKEND=%s): %s. NCCL will use another "
			   "network; set NCCL_NET=braid to make this an error instead.",
			   names[want], why);
		record_choice(NULL, why);
		return ncclSystemError;
	}
	if (why[0])
		BRAID_INFO(NCCL_INIT | NCCL_NET, "using the %s backend; not used: %s", chosen->name,
			   why);
	record_choice(chosen, why);
	if (chosen->kind == BRAID_BACKEND_IB)
		braid_ncclib_report(); /* a job moved from NCCL's IB transport keeps its env */
	be_ndevs = chosen->ndevs();
	dev_props = calloc((size_t)be_ndevs, sizeof(*dev_props));
	if (!dev_props) {
		chosen->fini();
		return ncclSystemError;
	}
	for (int d = 0; d < be_ndevs; d++) {
		rc = chosen->get_props(d, &dev_props[d]);

		if (rc != ncclSuccess) {
			free(dev_props);
			dev_props = NULL;
			chosen->fini();
			return rc;
		}
	}
	braid_net_ids_assign(dev_props, be_ndevs, topology,
			     chosen->kind == BRAID_BACKEND_IB ? braid_param_str(BRAID_P_IB_HCA)
							      : NULL);
	for (int d = 0; d < be_ndevs; d++) {
		int ps = dev_props[d].ptr_support;

		BRAID_INFO(NCCL_INIT | NCCL_NET,
			   "%s dev %d: %s, %d Mbps, PCI %s, NUMA node %d, rail %d, plane %d%s%s",
			   chosen->name, d, dev_props[d].name, dev_props[d].speed_mbps,
			   dev_props[d].pci_path[0] ? dev_props[d].pci_path : "unknown",
			   dev_props[d].numa_node, dev_props[d].rail_id, dev_props[d].plane_id,
			   ps & NCCL_PTR_CUDA ? ", CUDA by peer memory" : "",
			   ps & NCCL_PTR_DMABUF ? ", dma-buf" : "");
	}
	report_gpudirect(chosen);
	if (braid_vdev_setup(dev_props, be_ndevs, topology, api_version, chosen->max_nics)) {
		free(dev_props);
		dev_props = NULL;
		chosen->fini();
		return ncclInvalidUsage;
	}
	rc = braid_require_check(chosen, dev_props, be_ndevs, topology);
	if (rc != ncclSuccess) {
		braid_vdev_teardown();
		free(dev_props);
		dev_props = NULL;
		chosen->fini();
		return rc;
	}
	braid_counters()->ndevs = (uint32_t)(be_ndevs < BRAID_CTR_MAX_DEVS ? be_ndevs
									   : BRAID_CTR_MAX_DEVS);
	__atomic_store_n(&be, chosen, __ATOMIC_RELEASE);
	return ncclSuccess;
}

ncclResult_t braid_init(ncclDebugLogger_t logger, int api_version)
{
	ncclResult_t rc = ncclSuccess;

	pthread_mutex_lock(&init_lock);
	if (logger)
		braid_log_set_logger(logger);
	if (init_refs == 0) {
		braid_params_load();
		if (braid_counters_open()) {
			rc = ncclSystemError;
		} else {
			load_topology();
			rc = choose_backend(api_version);
			if (rc != ncclSuccess) {
				braid_counters_close();
				braid_topo_free(topology);
				topology = NULL;
			}
		}
	}
	if (rc == ncclSuccess)
		init_refs++;
	pthread_mutex_unlock(&init_lock);
	return rc;
}

ncclResult_t braid_finalize(void)
{
	pthread_mutex_lock(&init_lock);
	if (init_refs == 0) {
		pthread_mutex_unlock(&init_lock);
		BRAID_WARN("finalize without a matching init");
		return ncclInvalidUsage;
	}
	if (--init_refs == 0) {
		braid_counters_print_summary();
		be->fini();
		__atomic_store_n(&be, NULL, __ATOMIC_RELEASE);
		braid_vdev_teardown();
		free(dev_props);
		dev_props = NULL;
		be_ndevs = 0;
		braid_topo_free(topology);
		topology = NULL;
		braid_counters_close();
	}
	pthread_mutex_unlock(&init_lock);
	return ncclSuccess;
}

ncclResult_t braid_devices(int *ndev)
{
	CHECK_INIT();
	if (!ndev)
		return ncclInvalidArgument;
	*ndev = braid_vdev_count();
	return ncclSuccess;
}

static ncclResult_t check_dev(int dev, const char *fn)
{
	int n = braid_vdev_count();

	if (dev < 0 || dev >= n) {
		BRAID_WARN("%s: device %d does not exist (braid has %d)", fn, dev, n);
		return ncclInvalidArgument;
	}
	return ncclSuccess;
}

ncclResult_t braid_get_properties(int dev, const struct braid_dev_props **props)
{
	CHECK_INIT();
	if (check_dev(dev, __func__) || !props)
		return ncclInvalidArgument;
	*props = braid_vdev_props(dev);
	return ncclSuccess;
}

ncclResult_t braid_listen(int dev, void *handle, void **listen_comm)
{
	return braid_listen_opts(dev, NULL, handle, listen_comm);
}

ncclResult_t braid_listen_opts(int dev, const struct braid_conn_opts *opts, void *handle,
			       void **listen_comm)
{
	ncclProfilerCallback_t prof = braid_prof_use(opts ? opts->prof : NULL);
	ncclResult_t rc;

	CHECK_INIT();
	if (check_dev(dev, __func__) || !handle || !listen_comm)
		return ncclInvalidArgument;
	*listen_comm = NULL;
	rc = be->listen(braid_vdev_get(dev), handle, listen_comm);
	if (rc == ncclSuccess && prof && be->prof_attach &&
	    braid_prof_listen_set(*listen_comm, prof))
		BRAID_WARN("listen: no memory to keep the profiler callback: the comms it accepts "
			   "emit no profiler events");
	return rc;
}

ncclResult_t braid_connect(int dev, const struct braid_conn_opts *opts, void *handle,
			   void **send_comm, ncclNetDeviceHandle_t **dev_handle)
{
	static const struct braid_conn_opts no_opts = {
		.traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF
	};
	ncclProfilerCallback_t prof = braid_prof_use(opts ? opts->prof : NULL);
	ncclResult_t rc;

	(void)dev_handle; /* no device offload: the host handle type needs none */
	CHECK_INIT();
	if (check_dev(dev, __func__) || !handle || !send_comm)
		return ncclInvalidArgument;
	*send_comm = NULL;
	rc = be->connect(braid_vdev_get(dev), opts ? opts : &no_opts, handle, send_comm);
	if (rc == ncclSuccess && *send_comm && prof && be->prof_attach)
		be->prof_attach(*send_comm, prof);
	return rc;
}

ncclResult_t braid_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev_handle)
{
	ncclProfilerCallback_t prof;
	ncclResult_t rc;

	(void)dev_handle;
	CHECK_INIT();
	CHECK_OBJ(listen_comm, BRAID_MAGIC_LISTEN, "listen comm");
	if (!recv_comm)
		return ncclInvalidArgument;
	*recv_comm = NULL;
	rc = be->accept(listen_comm, recv_comm);
	if (rc == ncclSuccess && *recv_comm && be->prof_attach) {
		prof = braid_prof_listen_get(listen_comm);
		if (prof)
			be->prof_attach(*recv_comm, prof);
	}
	return rc;
}

static ncclResult_t check_any_comm(void *comm, const char *fn)
{
	uint32_t m = comm ? ((const struct braid_obj *)comm)->magic : 0;

	if (m != BRAID_MAGIC_SEND && m != BRAID_MAGIC_RECV) {
		BRAID_WARN("%s: %p is not a live braid send or receive comm", fn, comm);
		return ncclInternalError;
	}
	return ncclSuccess;
}

/* A registration that worked: what it says of NCCL's use of GPUDirect (gpudirect.h). */
static ncclResult_t note_reg(void *comm, int gpu, ncclResult_t rc)
{
	if (rc == ncclSuccess)
		braid_gdr_note_reg(((const struct braid_obj *)comm)->magic == BRAID_MAGIC_RECV, gpu,
				   braid_counters()->fallback.gpudirect);
	return rc;
}

ncclResult_t braid_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	CHECK_INIT();
	if (check_any_comm(comm, __func__))
		return ncclInternalError;
	if (!mhandle || (!data && size)) {
		BRAID_WARN("regMr: bad arguments (data %p, size %zu, mhandle %p)", data, size,
			   (void *)mhandle);
		return ncclInvalidArgument;
	}
	if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
		BRAID_WARN("regMr: unknown pointer type %d", type);
		return ncclInvalidArgument;
	}
	return note_reg(comm, type == NCCL_PTR_CUDA, be->reg_mr(comm, data, size, type, mhandle));
}

ncclResult_t braid_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				 int fd, void **mhandle)
{
	CHECK_INIT();
	if (check_any_comm(comm, __func__))
		return ncclInternalError;
	if (!mhandle || (!data && size))
		return ncclInvalidArgument;
	if (!be->reg_mr_dmabuf) {
		BRAID_WARN("regMrDmaBuf: the %s backend does not support dma-buf here (it was not "
			   "advertised in ptrSupport)",
			   be->name);
		return ncclInvalidUsage;
	}
	return note_reg(comm, type == NCCL_PTR_CUDA,
			be->reg_mr_dmabuf(comm, data, size, type, offset, fd, mhandle));
}

ncclResult_t braid_dereg_mr(void *comm, void *mhandle)
{
	CHECK_INIT();
	if (check_any_comm(comm, __func__))
		return ncclInternalError;
	CHECK_OBJ(mhandle, BRAID_MAGIC_MR, "memory registration");
	return be->dereg_mr(comm, mhandle);
}

/* isend's checks: 0 to go on, else what to return. */
static inline __attribute__((always_inline)) ncclResult_t
isend_check(void *send_comm, const void *data, size_t size, void *mhandle, void **request)
{
	CHECK_OBJ(send_comm, BRAID_MAGIC_SEND, "send comm");
	CHECK_OBJ(mhandle, BRAID_MAGIC_MR, "memory registration");
	if (!request || (!data && size))
		return ncclInvalidArgument;
	*request = NULL;
	return ncclSuccess;
}

ncclResult_t braid_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			 void **request)
{
	ncclResult_t rc = isend_check(send_comm, data, size, mhandle, request);

	return rc != ncclSuccess ? rc : be->isend(send_comm, data, size, tag, mhandle, request);
}

ncclResult_t braid_isend_ph(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			    void *phandle, void **request)
{
	ncclResult_t rc = isend_check(send_comm, data, size, mhandle, request);

	if (rc != ncclSuccess)
		return rc;
	/* NCCL gives a phandle from v10 on; isend_ph takes NULL too */
	if (be->isend_ph)
		return be->isend_ph(send_comm, data, size, tag, mhandle, phandle, request);
	return be->isend(send_comm, data, size, tag, mhandle, request);
}

static inline __attribute__((always_inline)) ncclResult_t
irecv_check(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
	    void **mhandles, void **request)
{
	CHECK_OBJ(recv_comm, BRAID_MAGIC_RECV, "receive comm");
	if (n < 1 || n > BRAID_MAX_RECVS) {
		BRAID_WARN("irecv: %d buffers in one grouped receive; braid takes 1 to %d (maxRecvs)",
			   n, BRAID_MAX_RECVS);
		return ncclInternalError;
	}
	if (!request || !data || !sizes || !tags || !mhandles)
		return ncclInvalidArgument;
	for (int i = 0; i < n; i++) {
		CHECK_OBJ(mhandles[i], BRAID_MAGIC_MR, "memory registration");
		if (!data[i] && sizes[i])
			return ncclInvalidArgument;
	}
	/* On input *request may be NCCL_NET_OPTIONAL_RECV_COMPLETION: braid always completes. */
	*request = NULL;
	return ncclSuccess;
}

ncclResult_t braid_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
			 void **mhandles, void **request)
{
	ncclResult_t rc = irecv_check(recv_comm, n, data, sizes, tags, mhandles, request);

	return rc != ncclSuccess ? rc
				 : be->irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t braid_irecv_ph(void *recv_comm, int n, void **data, const size_t *sizes,
			    const int *tags, void **mhandles, void **phandles, void **request)
{
	ncclResult_t rc = irecv_check(recv_comm, n, data, sizes, tags, mhandles, request);

	if (rc != ncclSuccess)
		return rc;
	if (be->irecv_ph)
		return be->irecv_ph(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
	return be->irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t braid_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			  void **request)
{
	CHECK_OBJ(recv_comm, BRAID_MAGIC_RECV, "receive comm");
	if (!request || n < 0 || n > BRAID_MAX_RECVS || (n && (!data || !sizes || !mhandles)))
		return ncclInvalidArgument;
	*request = NULL;
	return be->iflush(recv_comm, n, data, sizes, mhandles, request);
}

/* Not a data request: a backend's flush request, or NCCL's misuse. */
static __attribute__((cold, noinline)) ncclResult_t test_other(void *request, int *done, int *sizes)
{
	if (request && ((const struct braid_obj *)request)->magic == BRAID_MAGIC_FLUSH &&
	    be->test_flush)
		return done ? be->test_flush(request, done, sizes) : ncclInvalidArgument;
	BRAID_WARN("braid_test: %p is not a live braid request (NCCL misuse or a stale pointer)",
		   request);
	return ncclInternalError;
}

ncclResult_t braid_test(void *request, int *done, int *sizes)
{
	if (__builtin_expect(!request ||
				     ((const struct braid_obj *)request)->magic != BRAID_MAGIC_REQ,
			     0))
		return test_other(request, done, sizes);
	if (!done)
		return ncclInvalidArgument;
	return be->test(request, done, sizes);
}

ncclResult_t braid_close_send(void *send_comm)
{
	if (!send_comm)
		return ncclSuccess;
	CHECK_OBJ(send_comm, BRAID_MAGIC_SEND, "send comm");
	if (be->prof_detach)
		be->prof_detach(send_comm);
	return be->close_send(send_comm);
}

ncclResult_t braid_close_recv(void *recv_comm)
{
	if (!recv_comm)
		return ncclSuccess;
	CHECK_OBJ(recv_comm, BRAID_MAGIC_RECV, "receive comm");
	if (be->prof_detach)
		be->prof_detach(recv_comm);
	return be->close_recv(recv_comm);
}

ncclResult_t braid_close_listen(void *listen_comm)
{
	if (!listen_comm)
		return ncclSuccess;
	CHECK_OBJ(listen_comm, BRAID_MAGIC_LISTEN, "listen comm");
	braid_prof_listen_set(listen_comm, NULL);
	return be->close_listen(listen_comm);
}

ncclResult_t braid_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
	/* Only meaningful for device offload (netDeviceType != HOST), which braid has not. */
	(void)comm;
	(void)mhandle;
	if (dptr_mhandle)
		*dptr_mhandle = NULL;
	return ncclSuccess;
}

ncclResult_t braid_irecv_consumed(void *recv_comm, int n, void *request)
{
	(void)recv_comm;
	(void)n;
	(void)request;
	return ncclSuccess;
}

ncclResult_t braid_make_vdevice(int *d, int ndevs, const int *devs, int api_version)
{
	int nccl_max = api_version >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12
					 : NCCL_NET_MAX_DEVS_PER_NIC;

	CHECK_INIT();
	if (!d || !devs) {
		BRAID_WARN("makeVDevice: NULL %s", d ? "properties" : "device pointer");
		return ncclInvalidArgument;
	}
	if (ndevs < 1 || ndevs > nccl_max) {
		BRAID_WARN("makeVDevice: %d devices; ncclNet v%d fuses 1 to %d", ndevs, api_version,
			   nccl_max);
		return ncclInvalidUsage;
	}
	_Static_assert(BRAID_VDEV_MAX_NICS >= NCCL_NET_MAX_DEVS_PER_NIC_V12,
		       "braid fuses as many NICs as any ncclNet version allows");
	return braid_vdev_make(d, ndevs, devs);
}

ncclResult_t braid_ctx_check(void *ctx, const char *what)
{
	if (!ctx || ((const struct braid_ctx *)ctx)->magic != BRAID_MAGIC_CTX) {
		BRAID_WARN("%s: %p is not a context from braid's init", what, ctx);
		return ncclInternalError;
	}
	return ncclSuccess;
}
