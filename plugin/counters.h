/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-process counters in shared memory (/dev/shm/braid-<pid>), so that a reader
 * (`braid stat`, a monitoring agent) sees them while the job runs, without touching the
 * plugin. The layout is versioned: readers check magic, version and record sizes.
 * Backends only bump counters (relaxed atomic adds); nothing here is on a lock.
 */
#ifndef BRAID_COUNTERS_H
#define BRAID_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#define BRAID_CTR_MAGIC 0x5254434449415242ULL /* "BRAIDCTR" little-endian */
/* 7: GPUDirect used (the fallback record's receive registrations); readers take only their
 * own version (tools/stat_read.c) */
#define BRAID_CTR_VERSION 7
#define BRAID_CTR_MAX_DEVS 32
#define BRAID_CTR_MAX_COMMS 1024
#define BRAID_CTR_MAX_QPS 1024
#define BRAID_CTR_MAX_LANES 8 /* NICs of a fused device (version 5; 4 before) */
#define BRAID_CTR_PATH_FMT "/dev/shm/braid-%d"

struct braid_ctr_traffic {
	uint64_t tx_bytes;
	uint64_t tx_msgs;
	uint64_t rx_bytes;
	uint64_t rx_msgs;
	uint64_t completions;
	uint64_t errors;
};

struct braid_ctr_dev {
	char name[64];
	char provider[64];
	uint32_t in_use;
	/* 1 while the NIC's port is down (net_ib: IBV_EVENT_PORT_ERR until PORT_ACTIVE; a
	 * pad before, so 0 in older files). net_ofi does not watch its interfaces. */
	uint32_t port_down;
	struct braid_ctr_traffic t;
	/* version 3 */
	uint64_t av_entries; /* libfabric address vector entries in use (ofi; 0 for verbs) */
	uint64_t strangers;  /* connections to a listen port dropped: not a braid peer of it */
	/* version 4 */
	uint64_t slow_lanes; /* times this NIC ran under half the rate of the other NICs of a
			      * comm on a fused device (one WARN each) */
	uint64_t stalls;     /* requests found still waiting BRAID_STALL_MS after they were
			      * posted (each counted once) */
};

enum braid_ctr_comm_kind {
	BRAID_CTR_COMM_FREE = 0,
	BRAID_CTR_COMM_SEND = 1,
	BRAID_CTR_COMM_RECV = 2
};

/* version 4: one NIC of a comm on a fused device (what striping gave it) */
struct braid_ctr_lane {
	int32_t dev;         /* the NIC's device index */
	uint32_t weight_ppm; /* its current share of a large message, in millionths */
	uint64_t bytes;      /* sent over it */
	uint64_t chunks;
	uint64_t rate_bps;  /* measured goodput, bytes/s (0: not measured yet) */
	uint32_t slow;      /* 1 once it was found under half the others' rate */
	uint32_t failovers; /* times the NIC failed under the comm (net_ib failover, net_ofi
			     * its NIC down on either side; a pad before, so 0 in older files) */
	/* version 6 */
	uint32_t recoveries; /* times the NIC came back and rejoined the comm's stripe;
			      * the lane is up again once they reach failovers */
	uint32_t pad;        /* keeps the record a multiple of 8 bytes; 0 */
};

struct braid_ctr_comm {
	uint32_t kind; /* enum braid_ctr_comm_kind; 0 = slot free */
	int32_t dev;
	char peer[64];
	struct braid_ctr_traffic t;
	/* version 4 */
	uint32_t nlanes;    /* NICs the comm stripes over (1 on a device of one NIC) */
	uint32_t failovers; /* NICs of it that failed and whose traffic moved (a pad before) */
	/* version 6 */
	uint32_t recoveries; /* NICs of it that came back and rejoined its stripe */
	uint32_t pad;        /* keeps lanes[] 8-byte aligned; 0 */
	struct braid_ctr_lane lanes[BRAID_CTR_MAX_LANES];
};

/* Records of an array in shared memory: a multiple of 8 bytes, so that no compiler or
 * reader pads them differently (a member added here needs its pad). */
_Static_assert(sizeof(struct braid_ctr_lane) % 8 == 0, "braid_ctr_lane: 8-byte multiple");
_Static_assert(sizeof(struct braid_ctr_comm) % 8 == 0, "braid_ctr_comm: 8-byte multiple");

/* Why the job runs the way it does: the record a fabric engineer reads first. */
struct braid_ctr_fallback {
	char backend[16];  /* "ofi", "ib", "" when init failed */
	char provider[64]; /* libfabric provider, or verbs device list */
	char why[512];     /* the backend's reason for its choice, then the core's: "first
	                         choice" or "not used: <the other backends and why>" */
	int32_t slow_path; /* 1 when braid runs on a provider it considers slow (tcp, ...) */
	int32_t gpudirect; /* 1 when NCCL will use GPUDirect RDMA with every device, from
	                         their ptrSupport (plugin/gpudirect.h), 0 not */
	char gpudirect_why[256];
	/* version 2: the verbs backend's addressing ("" / -1 with other backends) */
	char link_layer[16];     /* "RoCE", "InfiniBand" */
	int32_t gid_index;       /* chosen GID index of device 0, -1 none */
	char gid_type[16];       /* "RoCEv2", "RoCEv1", "IB" */
	int32_t mtu;             /* active MTU in bytes */
	char gpudirect_mode[16]; /* "peermem", "dma-buf", "fi_hmem", "none"; every backend */
	/* version 7: GPUDirect offered is not GPUDirect used. NCCL decides per GPU and NIC
	 * (NCCL_NET_GDR_LEVEL), and where it does not use it, it registers its receive
	 * buffers in host memory and copies every message through them: the buffers of
	 * receive comms registered so far, in GPU memory and in host memory */
	uint32_t recv_regs_gpu;
	uint32_t recv_regs_host;
};

/* version 2: one record per verbs QP (net_ib), claimed with a compare-and-swap on in_use. */
struct braid_ctr_qp {
	uint32_t in_use;
	int32_t dev;
	int32_t comm; /* index in comms[], -1 unknown */
	uint32_t qpn;
	uint32_t remote_qpn;
	uint32_t flow_label;
	uint32_t sport; /* RoCEv2 UDP source port, 0 when not RoCEv2 */
	uint32_t pad;
	uint64_t tx_bytes;
	uint64_t tx_msgs;
	uint64_t rx_bytes;
	uint64_t rx_msgs;
	uint64_t errors;
};

struct braid_ctr_region {
	uint64_t magic;
	uint32_t version;
	uint32_t header_size; /* offsetof(struct braid_ctr_region, devs) */
	uint32_t dev_rec_size;
	uint32_t comm_rec_size;
	uint32_t max_devs;
	uint32_t max_comms;
	int32_t pid;
	uint32_t ndevs;
	uint64_t start_time_ns; /* CLOCK_REALTIME */
	struct braid_ctr_fallback fallback;
	struct braid_ctr_dev devs[BRAID_CTR_MAX_DEVS];
	struct braid_ctr_comm comms[BRAID_CTR_MAX_COMMS];
	/* version 2 */
	uint32_t qp_rec_size; /* sizeof(struct braid_ctr_qp), set by the backend that uses it */
	uint32_t max_qps;
	struct braid_ctr_qp qps[BRAID_CTR_MAX_QPS];
};

/* Map the region (or a private one when BRAID_COUNTERS=0 or /dev/shm fails). Idempotent. */
int braid_counters_open(void);
/* Unmap and remove the file. Idempotent; also run at exit. */
void braid_counters_close(void);
/* The region; never NULL after open (a private fallback when shared memory failed). */
struct braid_ctr_region *braid_counters(void);
/* The path of the shared file, "" when none. */
const char *braid_counters_path(void);

struct braid_ctr_dev *braid_counters_dev(int dev);
/* A comm record, or a shared overflow record when all slots are taken. */
struct braid_ctr_comm *braid_counters_comm_get(int dev, enum braid_ctr_comm_kind kind,
					       const char *peer);
void braid_counters_comm_put(struct braid_ctr_comm *rec);

/* Printed with BRAID_DEBUG=INFO at finalize: one screen. */
void braid_counters_print_summary(void);

static inline void braid_ctr_add(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

/*
 * A request that test() found waiting at *since_ns and finds still waiting BRAID_STALL_MS
 * later (now) counts once in its device's stalls; *stalled remembers that it did. The
 * clock starts at the first test() that finds it waiting (*since_ns 0: set it to now), not
 * at post: isend and irecv read no clock for it, and NCCL tests a request as soon as it is
 * posted. Both backends' test().
 */
void braid_ctr_note_stall(struct braid_ctr_dev *dev, uint64_t *since_ns, uint64_t now,
			  uint8_t *stalled);
/* The same test without the count: 1 once, when the request becomes a stall (for a caller
 * that counts it on several devices). */
int braid_ctr_stall_due(uint64_t *since_ns, uint64_t now, uint8_t *stalled);

/* Bump both the comm's and its device's traffic record. */
static inline void braid_ctr_count(struct braid_ctr_comm *comm, struct braid_ctr_dev *dev,
				   size_t offset_in_traffic, uint64_t n)
{
	braid_ctr_add((uint64_t *)((char *)&comm->t + offset_in_traffic), n);
	braid_ctr_add((uint64_t *)((char *)&dev->t + offset_in_traffic), n);
}

#define BRAID_CTR(field) __builtin_offsetof(struct braid_ctr_traffic, field)

#endif
