/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's network plugin ABI, versions 8 to 12, as braid implements it.
 *
 * Written from ../shared/NET-API.md and NCCL's public plugin documentation. The type
 * names follow NCCL's so that the code reads the same as NCCL's; the layouts must match
 * NCCL 2.28 byte for byte: test_abi checks every struct size, member offset and member size
 * against tests/unit/nccl-net-abi-v8-v12.txt, measured from NCCL's own headers.
 */
#ifndef BRAID_NCCL_NET_ABI_H
#define BRAID_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
} ncclResult_t;

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

/* Subsystem flags of the logger's second argument. */
#define NCCL_INIT 0x1UL
#define NCCL_NET 0x10UL
#define NCCL_ENV 0x80UL
#define NCCL_ALL (~0UL)

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
				  int line, const char *fmt, ...);
/* NCCL's profiler callback (v10+): braid's events, plugin/profiler.h. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
/* vProps.devs of v9..v11 (NCCL 2.30 calls it NCCL_NET_MAX_DEVS_PER_NIC_V11), and of v12. */
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
/* v12 railId / planeId: not known (NCCL then falls back to its own NIC matching). */
#define NCCL_NET_ID_UNDEF -1
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#define NCCL_NET_ATTR_UNDEF -1

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
} ncclNetDeviceType;

/* Device offload handle; braid offers no offload and never fills one. */
typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_t;

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_t;

typedef struct {
	int trafficClass;
} ncclNetCommConfig_t;

/* NCCL's versioned names of the two above: same layout in every version braid implements. */
typedef ncclNetVDeviceProps_t ncclNetVDeviceProps_v9_t;
typedef ncclNetVDeviceProps_t ncclNetVDeviceProps_v10_t;
typedef ncclNetVDeviceProps_t ncclNetVDeviceProps_v11_t;
typedef ncclNetCommConfig_t ncclNetCommConfig_v10_t;
typedef ncclNetCommConfig_t ncclNetCommConfig_v11_t;

typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
	ncclNetCommAttr_v11_t sendCommAttr;
	ncclNetCommAttr_v11_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_v11_t;

/* The fields every version shares, in every version's order. */
#define NCCL_NET_PROPS_COMMON_HEAD \
	char *name;                \
	char *pciPath;             \
	uint64_t guid;             \
	int ptrSupport;            \
	int regIsGlobal

#define NCCL_NET_PROPS_COMMON_TAIL       \
	int speed; /* Mbps */            \
	int port;                        \
	float latency; /* us */          \
	int maxComms;                    \
	int maxRecvs;                    \
	ncclNetDeviceType netDeviceType; \
	int netDeviceVersion

typedef struct {
	NCCL_NET_PROPS_COMMON_HEAD;
	NCCL_NET_PROPS_COMMON_TAIL;
} ncclNetProperties_v8_t;

typedef struct {
	NCCL_NET_PROPS_COMMON_HEAD;
	int forceFlush;
	NCCL_NET_PROPS_COMMON_TAIL;
	ncclNetVDeviceProps_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

typedef struct {
	NCCL_NET_PROPS_COMMON_HEAD;
	int forceFlush;
	NCCL_NET_PROPS_COMMON_TAIL;
	ncclNetVDeviceProps_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
} ncclNetProperties_v11_t;

/* Members identical in v8..v12 after connect/accept. */
#define NCCL_NET_REG_MEMBERS                                                                  \
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle); \
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,            \
				    uint64_t offset, int fd, void **mhandle);                 \
	ncclResult_t (*deregMr)(void *comm, void *mhandle)

#define NCCL_NET_TAIL_MEMBERS                                                                   \
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, \
			       void **request);                                                 \
	ncclResult_t (*test)(void *request, int *done, int *sizes);                             \
	ncclResult_t (*closeSend)(void *sendComm);                                              \
	ncclResult_t (*closeRecv)(void *recvComm);                                              \
	ncclResult_t (*closeListen)(void *listenComm);                                          \
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);            \
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request)

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	NCCL_NET_REG_MEMBERS;
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	NCCL_NET_TAIL_MEMBERS;
} ncclNet_v8_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	NCCL_NET_REG_MEMBERS;
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	NCCL_NET_TAIL_MEMBERS;
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
} ncclNet_v9_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_t *config, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	NCCL_NET_REG_MEMBERS;
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	NCCL_NET_TAIL_MEMBERS;
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
} ncclNet_v10_t;

typedef struct {
	const char *name;
	/* Called once per communicator: the plugin reference-counts its global state. */
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	NCCL_NET_REG_MEMBERS;
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	NCCL_NET_TAIL_MEMBERS;
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

/* ---- v12 (NCCL 2.30): 8 NICs per virtual device, railId and planeId ---- */

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef ncclNetCommConfig_t ncclNetCommConfig_v12_t;
typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

typedef struct {
	NCCL_NET_PROPS_COMMON_HEAD;
	int forceFlush;
	NCCL_NET_PROPS_COMMON_TAIL;
	ncclNetVDeviceProps_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;  /* NICs of one rail on every host share it; NCCL_NET_ID_UNDEF: unknown */
	int16_t planeId; /* NICs of different planes never talk; NCCL_NET_ID_UNDEF: unknown */
} ncclNetProperties_v12_t;

typedef struct {
	const char *name;
	/* As v11: once per communicator, with its context. */
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v12_t *config,
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	NCCL_NET_REG_MEMBERS;
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	NCCL_NET_TAIL_MEMBERS;
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v12_t *netAttr);
} ncclNet_v12_t;

#endif /* BRAID_NCCL_NET_ABI_H */
