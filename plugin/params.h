/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every braid knob, in one table. Each is an environment variable read once, typed and
 * range-checked; a bad value gets one WARN naming the variable, the value and the default
 * used instead. docs/configuration.md lists them (tests/unit checks it stays complete).
 */
#ifndef BRAID_PARAMS_H
#define BRAID_PARAMS_H

#include <stdint.h>

enum braid_param_type {
	BRAID_PARAM_INT,
	BRAID_PARAM_BOOL,
	BRAID_PARAM_STR,
	BRAID_PARAM_ENUM, /* value is the index into a '|'-separated list of words */
};

/* Defaults that code also uses as numbers: one definition each. */
#define BRAID_STRIPE_BYTES_DEFAULT 131072 /* 128 KiB */

#define BRAID_STR_(x) #x
#define BRAID_STR(x) BRAID_STR_(x)

/*
 * X(id, name, type, default, min, max, choices, alias, doc)
 * alias: an NCCL_* variable honoured when the BRAID_* one is unset (NULL: none).
 */
#define BRAID_PARAM_LIST(X)                                                                        \
	X(DEBUG, "BRAID_DEBUG", BRAID_PARAM_ENUM, "WARN", 0, 0, "NONE|WARN|INFO|TRACE", NULL,      \
	  "What braid prints to stderr when NCCL gave it no logger (tools, tests). Under NCCL, "   \
	  "NCCL_DEBUG decides.")                                                                   \
	X(BACKEND, "BRAID_BACKEND", BRAID_PARAM_ENUM, "auto", 0, 0, "auto|ib|ofi", NULL,           \
	  "Which backend to use. auto: verbs (ib) where a verbs device has an active port, else "  \
	  "libfabric (ofi).")                                                                      \
	X(OFI_PROVIDER, "BRAID_OFI_PROVIDER", BRAID_PARAM_STR, "", 0, 0, NULL, NULL,               \
	  "libfabric provider to use (e.g. efa, \"tcp;ofi_rxm\", shm). Unset: efa first, then "    \
	  "other RDMA-capable providers; tcp, shm, sockets and udp are used only when named.")     \
	X(OFI_DOWN_TIMEOUT_MS, "BRAID_OFI_DOWN_TIMEOUT_MS", BRAID_PARAM_INT, "30000", 100,         \
	  3600000, NULL, NULL,                                                                     \
	  "net_ofi: how long a NIC may carry nothing under a waiting comm before it counts as "    \
	  "failed and the comm fails with a WARN naming it: its interface down (not up, no "       \
	  "carrier, or gone), or on a fused comm its part of a message, or the receiver's "        \
	  "announcement, still out while the comm's other NICs delivered theirs (keep it above "   \
	  "the time the slowest NIC needs to drain what it has in flight). A shorter outage is "   \
	  "ridden out (TCP retransmits); without the bound a comm on tcp stalls silently for "     \
	  "about 15 min (tcp_retries2). A send still waiting this long after the receiver "        \
	  "announced its buffer (a black hole on a one-NIC comm, or a stopped peer) is WARNed, "   \
	  "naming its NIC, and fails nothing.")                                                    \
	X(OFI_FLUSH, "BRAID_OFI_FLUSH", BRAID_PARAM_ENUM, "auto", 0, 0, "auto|always|never", NULL, \
	  "net_ofi: iflush after a receive into GPU memory: auto (a 1-byte fi_read of the "        \
	  "buffer through the device's own endpoint, where the provider registers CUDA memory "    \
	  "and offers FI_RMA reads, unless NCCL_GDR_FLUSH_DISABLE is set, as NCCL's IB "           \
	  "transport does), always (also for host memory: a test hook), never.")                   \
	X(SOCKET_IFNAME, "BRAID_SOCKET_IFNAME", BRAID_PARAM_STR, "", 0, 0, NULL,                   \
	  "NCCL_SOCKET_IFNAME",                                                                    \
	  "Interface(s) for the out-of-band TCP handshake: comma list of name prefixes, ^ to "     \
	  "exclude, = for exact names. Unset: the first up non-loopback interface, else lo.")      \
	X(CONN_TIMEOUT_MS, "BRAID_CONN_TIMEOUT_MS", BRAID_PARAM_INT, "120000", 100, 3600000, NULL, \
	  NULL,                                                                                    \
	  "How long connect/accept may stay unfinished after the peer was reached before they "    \
	  "fail with an error naming the peer.")                                                   \
	X(LIVENESS_MS, "BRAID_LIVENESS_MS", BRAID_PARAM_INT, "100", 1, 60000, NULL, NULL,          \
	  "While a request waits, how often test() checks that the peer process is still "         \
	  "there (one poll() on the handshake socket), on the request's 8th waiting test() "       \
	  "and every 8th after (a clock read on each would be a third of an idle call).")          \
	X(MERGE, "BRAID_MERGE", BRAID_PARAM_STR, "auto", 0, 0, NULL, NULL,                         \
	  "Which NICs braid fuses into one NCCL device (docs/multirail.md). none: one device "     \
	  "per NIC; rail: the NICs of each GPU's rail (topology); a list such as "                 \
	  "mlx5_0+mlx5_1,mlx5_2+mlx5_3. auto: rail under ncclNet v8, none from v9 (NCCL fuses "    \
	  "with makeVDevice, NCCL_NET_MERGE_LEVEL).")                                              \
	X(STRIPE, "BRAID_STRIPE", BRAID_PARAM_ENUM, "adaptive", 0, 0, "adaptive|equal", NULL,      \
	  "How a fused device splits large messages over its NICs: adaptive (by each NIC's "       \
	  "measured goodput) or equal.")                                                           \
	X(FAILOVER, "BRAID_FAILOVER", BRAID_PARAM_BOOL, "1", 0, 1, NULL,                           \
	  "NCCL_IB_RESILIENCY_PORT_FAILOVER",                                                      \
	  "On a fused device (net_ib), a comm whose NIC fails moves that NIC's chunks in flight "  \
	  "and all later traffic to its other NICs, and fails only when every NIC has (on, the "   \
	  "default; NCCL's is off); off: the first failed NIC fails the comm (docs/ib.md). On "    \
	  "net_ofi (fused), what a receiver announced over a NIC that is down on the sender's "    \
	  "side moves to another NIC before anything of it is sent (docs/multirail.md).")          \
	X(RECOVERY, "BRAID_RECOVERY", BRAID_PARAM_BOOL, "1", 0, 1, NULL,                           \
	  "NCCL_IB_RESILIENCY_PORT_RECOVERY",                                                      \
	  "With BRAID_FAILOVER on (net_ib): a NIC that failed over and whose port is ACTIVE "      \
	  "again is reconnected within the comm (its QPs reset and connected anew through the "    \
	  "comm's TCP link) and rejoins the stripe (on, the default; NCCL's is off); off: it "     \
	  "stays out for the comm's life (docs/ib.md).")                                           \
	X(STRIPE_BYTES, "BRAID_STRIPE_BYTES", BRAID_PARAM_INT,                                     \
	  BRAID_STR(BRAID_STRIPE_BYTES_DEFAULT), 0, 1073741824, NULL, NULL,                        \
	  "On a fused device, messages of at least this size are split over its NICs; smaller "    \
	  "ones go whole to the NIC that would be done with them first.")                          \
	X(REQUIRE, "BRAID_REQUIRE", BRAID_PARAM_STR, "", 0, 0, NULL, NULL,                         \
	  "Strict mode (docs/strict.md): what this host must give braid, a comma list of "         \
	  "rdma, gdr, rails=N, nics=N, nic_speed=GBPS, backend=ib or ofi, provider=NAME. "         \
	  "Checked once at init; when one is not met, init fails with one WARN per "               \
	  "requirement saying what is missing and how to fix it (with NCCL_NET=braid the "         \
	  "job stops at start). Unset: none.")                                                     \
	X(STALL_MS, "BRAID_STALL_MS", BRAID_PARAM_INT, "1000", 1, 3600000, NULL, NULL,             \
	  "A request still waiting this long after the first test() that found it waiting "        \
	  "(NCCL tests a request as soon as it posts it) counts once as a stall (the "             \
	  "device's `stalls` counter, `braid stat`, braid_stalls_total).")                         \
	X(MAX_COMMS, "BRAID_MAX_COMMS", BRAID_PARAM_INT, "0", 0, 1048576, NULL, NULL,              \
	  "Most comms (send and receive) open at once per NIC. 0: the NIC's own limit (ib: "       \
	  "the HCA's max_qp / (QPs per connection + 1), as NCCL's IB transport reports max_qp; "   \
	  "ofi: the 65,535 comm ids of a device's endpoint). maxComms reports the lower of the "   \
	  "two; past it connect and accept fail with a WARN naming the limit.")                    \
	X(MR_CACHE, "BRAID_MR_CACHE", BRAID_PARAM_BOOL, "1", 0, 1, NULL, NULL,                     \
	  "Registration cache: a regMr of a range already registered is a lookup. With it off, "   \
	  "regIsGlobal is reported as 0.")                                                         \
	X(COUNTERS, "BRAID_COUNTERS", BRAID_PARAM_BOOL, "1", 0, 1, NULL, NULL,                     \
	  "Publish counters in /dev/shm/braid-<pid> (layout: plugin/counters.h) for tools and "    \
	  "monitoring agents; removed when the process ends.")                                     \
	X(PROFILER, "BRAID_PROFILER", BRAID_PARAM_INT, "-1", -1, 1, NULL, NULL,                    \
	  "Profiler events (docs/profiler.md): under ncclNet v10 to v12, each wire operation of "  \
	  "a request is an event parented to the phandle of its isend or irecv. NCCL passes its "  \
	  "callback whether or not a profiler plugin is loaded, and the events cost about 800 "    \
	  "plugin instructions per message: -1 (default) emits them when NCCL_PROFILER_PLUGIN "    \
	  "names a profiler plugin (set, not none); 1 whenever NCCL passes a callback (a "         \
	  "profiler found under its default name, libnccl-profiler.so, needs it); 0 never.")       \
	X(FSROOT, "BRAID_FSROOT", BRAID_PARAM_STR, "", 0, 0, NULL, NULL,                           \
	  "Directory braid reads host files under instead of / (as hwloc's HWLOC_FSROOT): "        \
	  "today the GPUDirect peer-memory checks (/sys/kernel/mm/memory_peers/nv_mem*, "          \
	  "/sys/module/nvidia_peermem). Tests describe hosts with it. Unset: the real root.")      \
	X(IB_HCA, "BRAID_IB_HCA", BRAID_PARAM_STR, "", 0, 0, NULL, "NCCL_IB_HCA",                  \
	  "Verbs devices and ports the ib backend uses: comma list of device name prefixes, "      \
	  "each with an optional :port; ^ excludes, = asks for exact names. Unset: every "         \
	  "active port. As in NCCL 2.30 an entry may go on with :rail:plane, the railId and "      \
	  "planeId NCCL v12 sees (docs/topology.md); a rail given anywhere overrides the "         \
	  "topology's rails.")                                                                     \
	X(IB_GID_INDEX, "BRAID_IB_GID_INDEX", BRAID_PARAM_INT, "-1", -1, 255, NULL,                \
	  "NCCL_IB_GID_INDEX",                                                                     \
	  "RoCE GID index. -1: choose (the first RoCEv2 GID of BRAID_IB_ADDR_FAMILY within "       \
	  "BRAID_IB_ADDR_RANGE, link-local skipped; RoCEv1 only when no RoCEv2 GID fits).")        \
	X(IB_ADDR_FAMILY, "BRAID_IB_ADDR_FAMILY", BRAID_PARAM_ENUM, "AF_INET", 0, 0,               \
	  "AF_INET|AF_INET6", "NCCL_IB_ADDR_FAMILY",                                               \
	  "Address family of the RoCE GID chosen automatically.")                                  \
	X(IB_ADDR_RANGE, "BRAID_IB_ADDR_RANGE", BRAID_PARAM_STR, "", 0, 0, NULL,                   \
	  "NCCL_IB_ADDR_RANGE",                                                                    \
	  "Only RoCE GIDs within this prefix (e.g. 10.0.0.0/8, fd00::/8) are chosen "              \
	  "automatically. Unset: any.")                                                            \
	X(IB_ROCE_VERSION_NUM, "BRAID_IB_ROCE_VERSION_NUM", BRAID_PARAM_INT, "2", 1, 2, NULL,      \
	  "NCCL_IB_ROCE_VERSION_NUM",                                                              \
	  "The RoCE version of the GID to pick; GIDs of the other version only when none of "      \
	  "this one fits.")                                                                        \
	X(IB_TC, "BRAID_IB_TC", BRAID_PARAM_INT, "0", 0, 255, NULL, "NCCL_IB_TC",                  \
	  "Traffic class of the GRH (RoCE: DSCP << 2 | ECN). A communicator's trafficClass "       \
	  "(NCCL v10+) overrides it.")                                                             \
	X(IB_FIFO_TC, "BRAID_IB_FIFO_TC", BRAID_PARAM_INT, "-1", -1, 255, NULL, "NCCL_IB_FIFO_TC", \
	  "RoCE: traffic class of the receive side's QPs, which carry the control (FIFO) writes "  \
	  "and the ACKs of the data, as NCCL's IB transport. -1: the data's (BRAID_IB_TC).")       \
	X(IB_ECE_ENABLE, "BRAID_IB_ECE_ENABLE", BRAID_PARAM_BOOL, "1", 0, 1, NULL,                 \
	  "NCCL_IB_ECE_ENABLE",                                                                    \
	  "Negotiate Enhanced Connection Establishment (ibv_query_ece/ibv_set_ece) on NICs "       \
	  "that offer it, as NCCL's IB transport does.")                                           \
	X(IB_SL, "BRAID_IB_SL", BRAID_PARAM_INT, "0", 0, 15, NULL, "NCCL_IB_SL",                   \
	  "InfiniBand service level of every QP.")                                                 \
	X(IB_PKEY, "BRAID_IB_PKEY", BRAID_PARAM_INT, "0", 0, 65535, NULL, "NCCL_IB_PKEY",          \
	  "Index in the port's P_Key table of the partition key braid's QPs use (InfiniBand "      \
	  "partitions). A port whose table has no key at this index is not used, with a WARN.")    \
	X(IB_PCI_RELAXED_ORDERING, "BRAID_IB_PCI_RELAXED_ORDERING", BRAID_PARAM_INT, "2", 0, 2,    \
	  NULL, "NCCL_IB_PCI_RELAXED_ORDERING",                                                    \
	  "Register memory with IBV_ACCESS_RELAXED_ORDERING: 0 never, 1 or 2 where libibverbs "    \
	  "has ibv_reg_mr_iova2 (the API that carries the flag), as NCCL decides.")                \
	X(IB_DEVICE_PCI_ORDER, "BRAID_IB_DEVICE_PCI_ORDER", BRAID_PARAM_BOOL, "1", 0, 1, NULL,     \
	  "NCCL_IB_DEVICE_PCI_ORDER",                                                              \
	  "Number the verbs devices in PCI order (the same on every node), as NCCL's IB "          \
	  "transport does; 0: in the order libibverbs lists them.")                                \
	X(IB_TIMEOUT, "BRAID_IB_TIMEOUT", BRAID_PARAM_INT, "20", 1, 31, NULL, "NCCL_IB_TIMEOUT",   \
	  "QP local ACK timeout exponent: 4.096 us * 2^value before a retry.")                     \
	X(IB_RETRY_CNT, "BRAID_IB_RETRY_CNT", BRAID_PARAM_INT, "7", 0, 7, NULL,                    \
	  "NCCL_IB_RETRY_CNT", "QP transport retries before a work request fails.")                \
	X(IB_QPS_PER_CONN, "BRAID_IB_QPS_PER_CONN", BRAID_PARAM_INT, "0", 0, 8, NULL,              \
	  "NCCL_IB_QPS_PER_CONNECTION",                                                            \
	  "RC QPs per connection, 1 to 8. 0: 4 on RoCE (ECMP entropy, docs/ib.md), 1 on "          \
	  "InfiniBand.")                                                                           \
	X(IB_SPLIT_BYTES, "BRAID_IB_SPLIT_BYTES", BRAID_PARAM_INT, "65536", 0, 1073741824, NULL,   \
	  NULL,                                                                                    \
	  "Messages larger than this are cut across the connection's QPs (by their measured "      \
	  "goodput; BRAID_STRIPE=equal: evenly) while the comm has fewer sends in flight than "    \
	  "QPs; from as many on, a one-NIC comm sends each whole on the QP that would finish it "  \
	  "first. Smaller ones take the QPs in turn. 0: every message is cut across the QPs.")     \
	X(IB_SPLIT_DATA_ON_QPS, "BRAID_IB_SPLIT_DATA_ON_QPS", BRAID_PARAM_INT, "-1", -1, 1, NULL,  \
	  "NCCL_IB_SPLIT_DATA_ON_QPS",                                                             \
	  "NCCL's switch, onto BRAID_IB_SPLIT_BYTES: 1 splits every message over the QPs, 0 "      \
	  "none (messages take the QPs in turn). -1: BRAID_IB_SPLIT_BYTES decides, as it does "    \
	  "whenever it is set itself.")                                                            \
	X(IB_USE_INLINE, "BRAID_IB_USE_INLINE", BRAID_PARAM_BOOL, "0", 0, 1, NULL,                 \
	  "NCCL_IB_USE_INLINE",                                                                    \
	  "Post the control (FIFO) writes inline (IBV_SEND_INLINE) where the QP's inline size "    \
	  "holds them, as NCCL's IB transport does with this set.")                                \
	X(IB_ADAPTIVE_ROUTING, "BRAID_IB_ADAPTIVE_ROUTING", BRAID_PARAM_INT, "-2", -2, 1, NULL,    \
	  "NCCL_IB_ADAPTIVE_ROUTING",                                                              \
	  "Post for adaptive routing, as NCCL's IB transport: a message above "                    \
	  "BRAID_IB_AR_THRESHOLD goes as plain RDMA WRITEs, each QP's followed by a small "        \
	  "WRITE_WITH_IMM that carries its size. -2: on for InfiniBand ports, off for RoCE; any "  \
	  "other value: 0 off, else on (NCCL's reading). A fused device posts this way only "      \
	  "when all its NICs do.")                                                                 \
	X(IB_SUBNET_AWARE_ROUTING, "BRAID_IB_SUBNET_AWARE_ROUTING", BRAID_PARAM_BOOL, "0", 0, 1,   \
	  NULL, "NCCL_IB_SUBNET_AWARE_ROUTING",                                                    \
	  "RoCE: pair each NIC of a fused device with a peer NIC on its own IPv4 subnet (or "      \
	  "IPv6 /64), which the listener's handle lists; a NIC with none is left out with a "      \
	  "WARN, and no NIC with one fails the connect. 0 (NCCL's default): QP i reaches the "     \
	  "peer's NIC i mod its count, as on one flat or routed fabric.")                          \
	X(IB_SUBNET_PREFIX_LEN, "BRAID_IB_SUBNET_PREFIX_LEN", BRAID_PARAM_INT, "24", 1, 32, NULL,  \
	  "NCCL_IB_SUBNET_PREFIX_LEN",                                                             \
	  "With BRAID_IB_SUBNET_AWARE_ROUTING: the IPv4 prefix length two RoCE GIDs must share "   \
	  "to be on one subnet.")                                                                  \
	X(IB_AR_THRESHOLD, "BRAID_IB_AR_THRESHOLD", BRAID_PARAM_INT, "8192", -2, 1073741824, NULL, \
	  "NCCL_IB_AR_THRESHOLD",                                                                  \
	  "With adaptive routing on, messages larger than this many bytes are posted that way "    \
	  "(-2, NCCL's default: 8192; -1: every message).")                                        \
	X(IB_DATA_DIRECT, "BRAID_IB_DATA_DIRECT", BRAID_PARAM_INT, "1", 0, 2, NULL,                \
	  "NCCL_IB_DATA_DIRECT",                                                                   \
	  "mlx5 data-direct DMA (Grace systems), as NCCL's IB transport: where libmlx5 names a "   \
	  "port's data-direct PCI path, 1 offers the port as <device>_dma (that path, dma-buf "    \
	  "registered for data direct, forceFlush set) in place of the port, 2 offers both, 0 "    \
	  "the port alone.")                                                                       \
	X(IB_FLOW_LABEL, "BRAID_IB_FLOW_LABEL", BRAID_PARAM_BOOL, "1", 0, 1, NULL, NULL,           \
	  "Give every RoCEv2 QP a distinct, deterministic, non-zero flow label (hence UDP "        \
	  "source port). 0 leaves it 0, as NCCL does: the port then comes from the QP numbers.")   \
	X(IB_FLUSH, "BRAID_IB_FLUSH", BRAID_PARAM_ENUM, "auto", 0, 0, "auto|always|never", NULL,   \
	  "iflush after a receive into GPU memory: auto (an RDMA READ when GPUDirect is in "       \
	  "use, unless NCCL_GDR_FLUSH_DISABLE is set, as in NCCL's IB transport), always (also "   \
	  "for host memory: a test hook), never.")

enum braid_param_id {
#define BRAID_PARAM_ENUM_ID(id, ...) BRAID_P_##id,
	BRAID_PARAM_LIST(BRAID_PARAM_ENUM_ID)
#undef BRAID_PARAM_ENUM_ID
		BRAID_P_COUNT
};

struct braid_param_desc {
	const char *name;
	enum braid_param_type type;
	const char *def;
	int64_t min, max;
	const char *choices;
	const char *alias;
	const char *doc;
};

/* Read every knob (once per process; later calls do nothing). Thread-safe. */
void braid_params_load(void);
/* Forget what was read, so a test can change the environment and load again. */
void braid_params_reset(void);

int64_t braid_param_int(enum braid_param_id id);     /* INT, BOOL and ENUM (the index) */
const char *braid_param_str(enum braid_param_id id); /* STR; "" when unset */
/* Where the value came from: "default", the variable's name, or its alias. */
const char *braid_param_source(enum braid_param_id id);
const struct braid_param_desc *braid_param_desc(enum braid_param_id id);

/* Parse one value as the table says; 0 and *out on success, -1 when invalid. */
int braid_param_parse(const struct braid_param_desc *d, const char *text, int64_t *out);

#endif
