// SPDX-License-Identifier: Apache-2.0
/*
 * A thin shim per ABI version: each converts the neutral calls of struct net_api to one
 * ncclNet_vN_t, the way NCCL's own adapters do (int vs size_t sizes, per-communicator
 * ctx in v11 and v12, a comm config in v10), and nothing else.
 */
#include "tools/netapi.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

char netapi_log_prefix[128] = "braid-test";
static atomic_ulong warn_count;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER; /* stderr lines, last_warn */
static char last_warn[1024];

void netapi_last_warn(char *buf, size_t len)
{
	pthread_mutex_lock(&log_lock);
	snprintf(buf, len, "%s", last_warn);
	pthread_mutex_unlock(&log_lock);
}

unsigned long netapi_warn_count(void)
{
	return atomic_load(&warn_count);
}

static int log_level_wanted(void)
{
	static int level = -1;
	const char *env;

	if (level >= 0)
		return level;
	env = getenv("NCCL_DEBUG");
	if (env && !strcasecmp(env, "TRACE"))
		level = NCCL_LOG_TRACE;
	else if (env && !strcasecmp(env, "INFO"))
		level = NCCL_LOG_INFO;
	else
		level = NCCL_LOG_WARN;
	return level;
}

void netapi_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	const char *tag;
	char msg[1024];
	va_list ap;

	if (level == NCCL_LOG_WARN)
		atomic_fetch_add(&warn_count, 1);
	if (level == NCCL_LOG_NONE || level == NCCL_LOG_VERSION)
		return;
	/* ABORT and WARN always print; INFO and TRACE when NCCL_DEBUG asks, like NCCL. */
	if ((level == NCCL_LOG_INFO && log_level_wanted() < NCCL_LOG_INFO) ||
	    (level == NCCL_LOG_TRACE && log_level_wanted() < NCCL_LOG_TRACE))
		return;
	tag = level == NCCL_LOG_WARN    ? "WARN"
	      : level == NCCL_LOG_INFO  ? "INFO"
	      : level == NCCL_LOG_TRACE ? "TRACE"
					: "ABORT";
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_lock);
	if (level == NCCL_LOG_WARN)
		snprintf(last_warn, sizeof(last_warn), "%s", msg);
	fprintf(stderr, "%s:%d:%ld NCCL %s %s%s%s:%d\n", netapi_log_prefix, (int)getpid(),
		(long)syscall(SYS_gettid), tag, msg,
		level == NCCL_LOG_TRACE || level == NCCL_LOG_WARN ? "  @" : "",
		level == NCCL_LOG_TRACE || level == NCCL_LOG_WARN ? (file ? file : "?") : "", line);
	pthread_mutex_unlock(&log_lock);
	(void)flags;
}

const char *netapi_result_str(ncclResult_t r)
{
	static const char *const names[] = {
		"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
		"ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
		"ncclRemoteError",   "ncclInProgress",
	};

	if ((unsigned)r < sizeof(names) / sizeof(names[0]))
		return names[r];
	return "ncclResult(unknown)";
}

void *netapi_open(const char *value, char *loaded, size_t loaded_len, char *err, size_t err_len)
{
	char name[PATH_MAX];
	void *dl;
	int used = 0;

	err[0] = '\0';
	if (!value || !*value) {
		snprintf(name, sizeof(name), "libnccl-net.so");
		dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		if (!dl)
			snprintf(err, err_len, "dlopen(%s): %s", name, dlerror());
		goto out;
	}
	snprintf(name, sizeof(name), "%s", value);
	dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (dl)
		goto out;
	used = snprintf(err, err_len, "dlopen(%s): %s; ", name, dlerror());
	snprintf(name, sizeof(name), "libnccl-net-%s.so", value);
	dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!dl && used >= 0 && (size_t)used < err_len)
		snprintf(err + used, err_len - used, "dlopen(%s): %s", name, dlerror());
out:
	if (dl)
		snprintf(loaded, loaded_len, "%s", name);
	return dl;
}

/* ---- v8 ---- */

#define T8(api) ((const ncclNet_v8_t *)(api)->table)

static ncclResult_t v8_init(const struct net_api *api, void **ctx, uint64_t comm_id)
{
	*ctx = NULL;
	return T8(api)->init(netapi_logger);
}

static ncclResult_t v8_get_props(const struct net_api *api, int dev, struct net_props *p)
{
	ncclNetProperties_v8_t raw;
	ncclResult_t r;

	memset(&raw, 0, sizeof(raw));
	memset(p, 0, sizeof(*p));
	r = T8(api)->getProperties(dev, &raw);
	if (r != ncclSuccess)
		return r;
	snprintf(p->name, sizeof(p->name), "%s", raw.name ? raw.name : "");
	snprintf(p->pci_path, sizeof(p->pci_path), "%s", raw.pciPath ? raw.pciPath : "");
	p->guid = raw.guid;
	p->ptr_support = raw.ptrSupport;
	p->reg_is_global = raw.regIsGlobal;
	p->speed = raw.speed;
	p->port = raw.port;
	p->latency = raw.latency;
	p->max_comms = raw.maxComms;
	p->max_recvs = raw.maxRecvs;
	p->net_device_type = raw.netDeviceType;
	p->vdev_ndevs = 1;
	p->vdev_devs[0] = dev; /* v8: NCCL fills {dev} itself */
	p->rail_id = p->plane_id = NCCL_NET_ID_UNDEF;
	return ncclSuccess;
}

static ncclResult_t v8_listen(const struct net_api *api, void *ctx, int dev, void *handle,
			      void **lc)
{
	return T8(api)->listen(dev, handle, lc);
}

static ncclResult_t v8_connect(const struct net_api *api, void *ctx, int dev, void *handle,
			       void **sc)
{
	ncclNetDeviceHandle_t *dh = NULL;

	return T8(api)->connect(dev, handle, sc, &dh);
}

static ncclResult_t v8_isend(const struct net_api *api, void *sc, void *data, size_t size, int tag,
			     void *mh, void **req)
{
	if (size > INT_MAX)
		return ncclInvalidArgument; /* v8 cannot express it; NCCL never asks */
	return T8(api)->isend(sc, data, (int)size, tag, mh, req);
}

static ncclResult_t v8_irecv(const struct net_api *api, void *rc, int n, void **data,
			     const size_t *sizes, const int *tags, void **mh, void **req)
{
	int isizes[NCCL_NET_MAX_REQUESTS];
	int itags[NCCL_NET_MAX_REQUESTS];

	if (n < 0 || n > NCCL_NET_MAX_REQUESTS)
		return ncclInvalidArgument;
	for (int i = 0; i < n; i++) {
		if (sizes[i] > INT_MAX)
			return ncclInvalidArgument;
		isizes[i] = (int)sizes[i];
		itags[i] = tags[i];
	}
	return T8(api)->irecv(rc, n, data, isizes, itags, mh, req);
}

/* ---- v9 ---- */

#define T9(api) ((const ncclNet_v9_t *)(api)->table)

static void props_from_v9(struct net_props *p, const ncclNetProperties_v9_t *raw)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", raw->name ? raw->name : "");
	snprintf(p->pci_path, sizeof(p->pci_path), "%s", raw->pciPath ? raw->pciPath : "");
	p->guid = raw->guid;
	p->ptr_support = raw->ptrSupport;
	p->reg_is_global = raw->regIsGlobal;
	p->force_flush = raw->forceFlush;
	p->speed = raw->speed;
	p->port = raw->port;
	p->latency = raw->latency;
	p->max_comms = raw->maxComms;
	p->max_recvs = raw->maxRecvs;
	p->net_device_type = raw->netDeviceType;
	p->vdev_ndevs = raw->vProps.ndevs;
	for (int i = 0; i < raw->vProps.ndevs && i < 4; i++)
		p->vdev_devs[i] = raw->vProps.devs[i];
	p->max_p2p_bytes = raw->maxP2pBytes;
	p->max_coll_bytes = raw->maxCollBytes;
	p->rail_id = p->plane_id = NCCL_NET_ID_UNDEF;
}

static ncclResult_t v9_init(const struct net_api *api, void **ctx, uint64_t comm_id)
{
	*ctx = NULL;
	return T9(api)->init(netapi_logger);
}

static ncclResult_t v9_get_props(const struct net_api *api, int dev, struct net_props *p)
{
	ncclNetProperties_v9_t raw;
	ncclResult_t r;

	memset(&raw, 0, sizeof(raw));
	r = T9(api)->getProperties(dev, &raw);
	if (r == ncclSuccess)
		props_from_v9(p, &raw);
	return r;
}

static ncclResult_t v9_listen(const struct net_api *api, void *ctx, int dev, void *handle,
			      void **lc)
{
	return T9(api)->listen(dev, handle, lc);
}

static ncclResult_t v9_connect(const struct net_api *api, void *ctx, int dev, void *handle,
			       void **sc)
{
	ncclNetDeviceHandle_t *dh = NULL;

	return T9(api)->connect(dev, handle, sc, &dh);
}

static ncclResult_t v9_isend(const struct net_api *api, void *sc, void *data, size_t size, int tag,
			     void *mh, void **req)
{
	return T9(api)->isend(sc, data, size, tag, mh, req);
}

static ncclResult_t v9_irecv(const struct net_api *api, void *rc, int n, void **data,
			     const size_t *sizes, const int *tags, void **mh, void **req)
{
	/* NCCL hands the plugin arrays it owns; copies keep ours const. */
	size_t s[NCCL_NET_MAX_REQUESTS];
	int t[NCCL_NET_MAX_REQUESTS];

	if (n < 0 || n > NCCL_NET_MAX_REQUESTS)
		return ncclInvalidArgument;
	memcpy(s, sizes, n * sizeof(*s));
	memcpy(t, tags, n * sizeof(*t));
	return T9(api)->irecv(rc, n, data, s, t, mh, req);
}

/* ---- v10 ---- */

#define T10(api) ((const ncclNet_v10_t *)(api)->table)

static ncclResult_t v10_init(const struct net_api *api, void **ctx, uint64_t comm_id)
{
	*ctx = NULL;
	return T10(api)->init(netapi_logger, api->prof);
}

static ncclResult_t v10_get_props(const struct net_api *api, int dev, struct net_props *p)
{
	ncclNetProperties_v10_t raw;
	ncclResult_t r;

	memset(&raw, 0, sizeof(raw));
	r = T10(api)->getProperties(dev, &raw);
	if (r == ncclSuccess)
		props_from_v9(p, &raw);
	return r;
}

static ncclResult_t v10_listen(const struct net_api *api, void *ctx, int dev, void *handle,
			       void **lc)
{
	return T10(api)->listen(dev, handle, lc);
}

static ncclResult_t v10_connect(const struct net_api *api, void *ctx, int dev, void *handle,
				void **sc)
{
	ncclNetCommConfig_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	ncclNetDeviceHandle_t *dh = NULL;

	return T10(api)->connect(dev, &config, handle, sc, &dh);
}

static ncclResult_t v10_isend(const struct net_api *api, void *sc, void *data, size_t size, int tag,
			      void *mh, void **req)
{
	return T10(api)->isend(sc, data, size, tag, mh, api->phandles ? api->phandles[0] : NULL,
			       req);
}

static ncclResult_t v10_irecv(const struct net_api *api, void *rc, int n, void **data,
			      const size_t *sizes, const int *tags, void **mh, void **req)
{
	size_t s[NCCL_NET_MAX_REQUESTS];
	int t[NCCL_NET_MAX_REQUESTS];
	void *ph[NCCL_NET_MAX_REQUESTS] = { 0 };

	if (n < 0 || n > NCCL_NET_MAX_REQUESTS)
		return ncclInvalidArgument;
	memcpy(s, sizes, n * sizeof(*s));
	memcpy(t, tags, n * sizeof(*t));
	if (api->phandles)
		memcpy(ph, api->phandles, n * sizeof(*ph));
	return T10(api)->irecv(rc, n, data, s, t, mh, ph, req);
}

/* ---- v11 ---- */

#define T11(api) ((const ncclNet_v11_t *)(api)->table)

static ncclResult_t v11_init(const struct net_api *api, void **ctx, uint64_t comm_id)
{
	ncclNetCommConfig_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

	*ctx = NULL;
	return T11(api)->init(ctx, comm_id, &config, netapi_logger, api->prof);
}

static ncclResult_t v11_finalize(const struct net_api *api, void *ctx)
{
	return T11(api)->finalize(ctx);
}

static ncclResult_t v11_get_props(const struct net_api *api, int dev, struct net_props *p)
{
	ncclNetProperties_v11_t raw;
	ncclResult_t r;

	memset(&raw, 0, sizeof(raw));
	r = T11(api)->getProperties(dev, &raw);
	if (r != ncclSuccess)
		return r;
	/* v11 is v9's layout plus one trailing int. */
	ncclNetProperties_v9_t head;
	memcpy(&head, &raw, offsetof(ncclNetProperties_v11_t, maxMultiRequestSize));
	props_from_v9(p, &head);
	p->max_multi_request_size = raw.maxMultiRequestSize;
	return ncclSuccess;
}

static ncclResult_t v11_listen(const struct net_api *api, void *ctx, int dev, void *handle,
			       void **lc)
{
	return T11(api)->listen(ctx, dev, handle, lc);
}

static ncclResult_t v11_connect(const struct net_api *api, void *ctx, int dev, void *handle,
				void **sc)
{
	ncclNetDeviceHandle_t *dh = NULL;

	return T11(api)->connect(ctx, dev, handle, sc, &dh);
}

static ncclResult_t v11_isend(const struct net_api *api, void *sc, void *data, size_t size, int tag,
			      void *mh, void **req)
{
	return T11(api)->isend(sc, data, size, tag, mh, api->phandles ? api->phandles[0] : NULL,
			       req);
}

static ncclResult_t v11_irecv(const struct net_api *api, void *rc, int n, void **data,
			      const size_t *sizes, const int *tags, void **mh, void **req)
{
	size_t s[NCCL_NET_MAX_REQUESTS];
	int t[NCCL_NET_MAX_REQUESTS];
	void *ph[NCCL_NET_MAX_REQUESTS] = { 0 };

	if (n < 0 || n > NCCL_NET_MAX_REQUESTS)
		return ncclInvalidArgument;
	memcpy(s, sizes, n * sizeof(*s));
	memcpy(t, tags, n * sizeof(*t));
	if (api->phandles)
		memcpy(ph, api->phandles, n * sizeof(*ph));
	return T11(api)->irecv(rc, n, data, s, t, mh, ph, req);
}

/* ---- v12: v11's calls; props with 8 vProps slots, railId and planeId ---- */

#define T12(api) ((const ncclNet_v12_t *)(api)->table)

static ncclResult_t v12_init(const struct net_api *api, void **ctx, uint64_t comm_id)
{
	ncclNetCommConfig_v12_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

	*ctx = NULL;
	return T12(api)->init(ctx, comm_id, &config, netapi_logger, api->prof);
}

static ncclResult_t v12_finalize(const struct net_api *api, void *ctx)
{
	return T12(api)->finalize(ctx);
}

static ncclResult_t v12_get_props(const struct net_api *api, int dev, struct net_props *p)
{
	ncclNetProperties_v12_t raw;
	ncclResult_t r;

	memset(&raw, 0, sizeof(raw));
	memset(p, 0, sizeof(*p));
	r = T12(api)->getProperties(dev, &raw);
	if (r != ncclSuccess)
		return r;
	snprintf(p->name, sizeof(p->name), "%s", raw.name ? raw.name : "");
	snprintf(p->pci_path, sizeof(p->pci_path), "%s", raw.pciPath ? raw.pciPath : "");
	p->guid = raw.guid;
	p->ptr_support = raw.ptrSupport;
	p->reg_is_global = raw.regIsGlobal;
	p->force_flush = raw.forceFlush;
	p->speed = raw.speed;
	p->port = raw.port;
	p->latency = raw.latency;
	p->max_comms = raw.maxComms;
	p->max_recvs = raw.maxRecvs;
	p->net_device_type = raw.netDeviceType;
	p->vdev_ndevs = raw.vProps.ndevs;
	for (int i = 0; i < raw.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
		p->vdev_devs[i] = raw.vProps.devs[i];
	p->max_p2p_bytes = raw.maxP2pBytes;
	p->max_coll_bytes = raw.maxCollBytes;
	p->max_multi_request_size = raw.maxMultiRequestSize;
	p->rail_id = raw.railId;
	p->plane_id = raw.planeId;
	return ncclSuccess;
}

static ncclResult_t v12_listen(const struct net_api *api, void *ctx, int dev, void *handle,
			       void **lc)
{
	return T12(api)->listen(ctx, dev, handle, lc);
}

static ncclResult_t v12_connect(const struct net_api *api, void *ctx, int dev, void *handle,
				void **sc)
{
	ncclNetDeviceHandle_t *dh = NULL;

	return T12(api)->connect(ctx, dev, handle, sc, &dh);
}

static ncclResult_t v12_isend(const struct net_api *api, void *sc, void *data, size_t size, int tag,
			      void *mh, void **req)
{
	return T12(api)->isend(sc, data, size, tag, mh, api->phandles ? api->phandles[0] : NULL,
			       req);
}

static ncclResult_t v12_irecv(const struct net_api *api, void *rc, int n, void **data,
			      const size_t *sizes, const int *tags, void **mh, void **req)
{
	size_t s[NCCL_NET_MAX_REQUESTS];
	int t[NCCL_NET_MAX_REQUESTS];
	void *ph[NCCL_NET_MAX_REQUESTS] = { 0 };

	if (n < 0 || n > NCCL_NET_MAX_REQUESTS)
		return ncclInvalidArgument;
	memcpy(s, sizes, n * sizeof(*s));
	memcpy(t, tags, n * sizeof(*t));
	if (api->phandles)
		memcpy(ph, api->phandles, n * sizeof(*ph));
	return T12(api)->irecv(rc, n, data, s, t, mh, ph, req);
}

/* v12's vProps hold 8 devices; ndevs is passed as given (tests ask for too many), the
 * slots past 8 are never read. */
static ncclResult_t v12_make_vdevice(const struct net_api *api, int *d, int ndevs, const int *devs)
{
	ncclNetVDeviceProps_v12_t props;

	memset(&props, 0, sizeof(props));
	props.ndevs = ndevs;
	for (int i = 0; i < ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
		props.devs[i] = devs[i];
	return T12(api)->makeVDevice(d, &props);
}

static ncclResult_t no_finalize(const struct net_api *api, void *ctx)
{
	return ncclSuccess;
}

/*
 * Members whose signatures are the same in every version still sit at different
 * offsets (v9+ insert nothing before isend, but v11 changes init/listen/connect), so
 * each version calls through its own table type.
 */
#define COMMON_OPS(V, T)                                                                          \
	static ncclResult_t V##_devices(const struct net_api *api, int *n)                        \
	{                                                                                         \
		return T(api)->devices(n);                                                        \
	}                                                                                         \
	static ncclResult_t V##_accept(const struct net_api *api, void *lc, void **rc)            \
	{                                                                                         \
		ncclNetDeviceHandle_t *dh = NULL;                                                 \
		return T(api)->accept(lc, rc, &dh);                                               \
	}                                                                                         \
	static ncclResult_t V##_reg_mr(const struct net_api *api, void *comm, void *data,         \
				       size_t size, void **mh)                                    \
	{                                                                                         \
		return T(api)->regMr(comm, data, size, NCCL_PTR_HOST, mh);                        \
	}                                                                                         \
	static ncclResult_t V##_reg_mr_type(const struct net_api *api, void *comm, void *data,    \
					    size_t size, int type, void **mh)                     \
	{                                                                                         \
		return T(api)->regMr(comm, data, size, type, mh);                                 \
	}                                                                                         \
	static ncclResult_t V##_reg_mr_dmabuf(const struct net_api *api, void *comm, void *data,  \
					      size_t size, int type, uint64_t offset, int fd,     \
					      void **mh)                                          \
	{                                                                                         \
		return T(api)->regMrDmaBuf(comm, data, size, type, offset, fd, mh);               \
	}                                                                                         \
	static ncclResult_t V##_dereg_mr(const struct net_api *api, void *comm, void *mh)         \
	{                                                                                         \
		return T(api)->deregMr(comm, mh);                                                 \
	}                                                                                         \
	static ncclResult_t V##_iflush(const struct net_api *api, void *rc, int n, void **data,   \
				       int *sizes, void **mh, void **req)                         \
	{                                                                                         \
		return T(api)->iflush(rc, n, data, sizes, mh, req);                               \
	}                                                                                         \
	static ncclResult_t V##_test(const struct net_api *api, void *req, int *done, int *sizes) \
	{                                                                                         \
		return T(api)->test(req, done, sizes);                                            \
	}                                                                                         \
	static ncclResult_t V##_close_send(const struct net_api *api, void *c)                    \
	{                                                                                         \
		return T(api)->closeSend(c);                                                      \
	}                                                                                         \
	static ncclResult_t V##_close_recv(const struct net_api *api, void *c)                    \
	{                                                                                         \
		return T(api)->closeRecv(c);                                                      \
	}                                                                                         \
	static ncclResult_t V##_close_listen(const struct net_api *api, void *c)                  \
	{                                                                                         \
		return T(api)->closeListen(c);                                                    \
	}

COMMON_OPS(v8, T8)
COMMON_OPS(v9, T9)
COMMON_OPS(v10, T10)
COMMON_OPS(v11, T11)
COMMON_OPS(v12, T12)

/* makeVDevice takes the same props type in v9..v11. */
#define MAKE_VDEVICE(V, T)                                                                 \
	static ncclResult_t V##_make_vdevice(const struct net_api *api, int *d, int ndevs, \
					     const int *devs)                              \
	{                                                                                  \
		ncclNetVDeviceProps_t props;                                               \
                                                                                           \
		memset(&props, 0, sizeof(props));                                          \
		props.ndevs = ndevs;                                                       \
		for (int i = 0; i < ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC; i++)           \
			props.devs[i] = devs[i];                                           \
		return T(api)->makeVDevice(d, &props);                                     \
	}

MAKE_VDEVICE(v9, T9)
MAKE_VDEVICE(v10, T10)
MAKE_VDEVICE(v11, T11)

#define FILL(V, FIN)                                    \
	do {                                            \
		api->init = V##_init;                   \
		api->finalize = FIN;                    \
		api->devices = V##_devices;             \
		api->get_props = V##_get_props;         \
		api->listen = V##_listen;               \
		api->connect = V##_connect;             \
		api->accept = V##_accept;               \
		api->reg_mr = V##_reg_mr;               \
		api->reg_mr_type = V##_reg_mr_type;     \
		api->reg_mr_dmabuf = V##_reg_mr_dmabuf; \
		api->dereg_mr = V##_dereg_mr;           \
		api->isend = V##_isend;                 \
		api->irecv = V##_irecv;                 \
		api->iflush = V##_iflush;               \
		api->test = V##_test;                   \
		api->close_send = V##_close_send;       \
		api->close_recv = V##_close_recv;       \
		api->close_listen = V##_close_listen;   \
	} while (0)

int netapi_bind(void *dl, int version, struct net_api *api)
{
	char sym[32];
	const void *table;

	memset(api, 0, sizeof(*api));
	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
	table = dlsym(dl, sym);
	if (!table)
		return -1;
	api->version = version;
	api->table = table;
	/* name is the first member of every version's table */
	api->name = *(const char *const *)table;
	switch (version) {
	case 8: FILL(v8, no_finalize); break;
	case 9:
		FILL(v9, no_finalize);
		api->make_vdevice = v9_make_vdevice;
		break;
	case 10:
		FILL(v10, no_finalize);
		api->make_vdevice = v10_make_vdevice;
		break;
	case 11:
		FILL(v11, v11_finalize);
		api->make_vdevice = v11_make_vdevice;
		break;
	case 12:
		FILL(v12, v12_finalize);
		api->make_vdevice = v12_make_vdevice;
		break;
	default: return -1;
	}
	return 0;
}
