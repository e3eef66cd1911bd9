/* SPDX-License-Identifier: MIT */
/*
 * Layout of a softverbs stats file: one per process, at
 * $SOFTVERBS_FABRIC/stats/<pid>.<n>.stat, mmap()ed shared by the process
 * that owns it and read by softverbs-stat (and tests) while it runs.
 * Counters are updated with relaxed atomic adds; readers may see a slightly
 * stale but never torn 64-bit value. The file is removed when the process
 * closes its last device, and a QP's row is freed when the QP is destroyed,
 * unless SOFTVERBS_STATS_KEEP=1: then both stay with their final counts.
 */
#ifndef SV_STATS_H
#define SV_STATS_H

#include <stdint.h>

#define SV_STATS_MAGIC 0x53565354u /* "SVST" */
#define SV_STATS_VERSION 4
#define SV_STATS_MAX_UPLINKS 64
#define SV_STATS_MAX_QPS 1024
#define SV_STATS_MAX_DEVICES 8

struct sv_stats_uplink {
	uint64_t tx_bytes;
	uint64_t tx_msgs;
};

struct sv_stats_qp {
	uint32_t qpn; /* 0: free slot */
	uint32_t dest_qpn;
	uint32_t sport; /* RoCEv2 UDP source port (0: not RoCEv2) */
	int32_t uplink;
	uint32_t sip, dip; /* IPv4, network order (0: not RoCEv2) */
	uint64_t tx_bytes; /* payload sent by this QP (requests + READ responses) */
	uint64_t rx_bytes; /* payload received for this QP */
	uint64_t tx_msgs, rx_msgs;
	uint32_t tc;          /* traffic class of the QP's GRH (0: no GRH) */
	uint32_t ece;         /* ECE options ibv_set_ece gave the QP (0: none) */
	uint64_t inline_msgs; /* requests posted with IBV_SEND_INLINE */
	uint64_t imm_msgs;    /* requests posted with an immediate (SEND/WRITE_WITH_IMM) */
};

/* A device of SOFTVERBS_DEVICES, as this process sees it. */
struct sv_stats_device {
	char name[64];
	uint64_t rate;     /* SOFTVERBS_DEVICE_RATE_MBPS in bytes/s (0: no limit) */
	uint64_t tx_bytes; /* payload its QPs sent (requests + READ responses) */
	uint64_t tx_msgs;
};

struct sv_stats_file {
	uint32_t magic;
	uint32_t version;
	int32_t pid;
	uint32_t nuplinks;
	struct sv_stats_uplink uplink[SV_STATS_MAX_UPLINKS];
	struct sv_stats_qp qp[SV_STATS_MAX_QPS];
	uint32_t ndevices;
	uint32_t pad;
	struct sv_stats_device device[SV_STATS_MAX_DEVICES];
};

#endif
