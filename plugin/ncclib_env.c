// SPDX-License-Identifier: Apache-2.0
#include "plugin/ncclib_env.h"

#include <stdlib.h>

#include "plugin/log.h"

#define H BRAID_NCCLIB_HONOURED
#define C BRAID_NCCLIB_COVERED
#define I BRAID_NCCLIB_IGNORED
#define W BRAID_NCCLIB_WARN

/* Read from NVIDIA/nccl v2.30.7, src/transport/net_ib/: NCCL_PARAM(...) and ncclGetEnv(). */
static const struct braid_ncclib_var vars[] = {
	/* devices and addressing */
	{ "NCCL_IB_HCA", "(all)",
	  "which HCAs and ports to use: prefixes, `^` exclude, `=` exact, `:port`", H,
	  "BRAID_IB_HCA", "init.cc:317" },
	{ "NCCL_IB_GID_INDEX", "-1", "RoCE GID index; -1 picks one by family, range and version", H,
	  "BRAID_IB_GID_INDEX", "connect.cc:12" },
	{ "NCCL_IB_ADDR_FAMILY", "AF_INET", "address family of the RoCE GID to pick", H,
	  "BRAID_IB_ADDR_FAMILY", "connect.cc:103" },
	{ "NCCL_IB_ADDR_RANGE", "(any)", "address range (CIDR) the RoCE GID must be in", H,
	  "BRAID_IB_ADDR_RANGE", "connect.cc:125" },
	{ "NCCL_IB_ROCE_VERSION_NUM", "2", "RoCE version of the GID to pick", H,
	  "BRAID_IB_ROCE_VERSION_NUM (plugin/gid.c, shared with braid doctor)", "connect.cc:14" },
	{ "NCCL_IB_ROUTABLE_FLID_GID_INDEX", "1",
	  "GID index of the routable FLID on routed InfiniBand", W,
	  "braid addresses InfiniBand by LID, with a GRH only when the subnet prefixes differ",
	  "connect.cc:13" },
	{ "NCCL_IB_PKEY", "0", "index of the partition key (P_Key) of the QPs", H, "BRAID_IB_PKEY",
	  "connect.cc:17" },
	{ "NCCL_IB_DEVICE_PCI_ORDER", "1",
	  "number the devices in PCI order, the same on every node", H, "BRAID_IB_DEVICE_PCI_ORDER",
	  "init.cc:30" },
	{ "NCCL_IB_DISABLE", "0", "do not use NCCL's IB transport", W,
	  "braid's ib backend is chosen by BRAID_BACKEND (set it to ofi)", "init.cc:27" },
	{ "NCCL_IB_MERGE_NICS", "1", "fuse the ports of one dual-port NIC into one device", C,
	  "BRAID_MERGE and NCCL's makeVDevice decide fusion", "init.cc:29" },
	{ "NCCL_IB_MERGE_VFS", "1", "treat the virtual functions of one NIC as one device", I,
	  "braid treats each VF as a NIC of its own", "init.cc:28" },
	{ "NCCL_IB_DATA_DIRECT", "1", "mlx5 data-direct DMA where the NIC offers it (Grace)", H,
	  "BRAID_IB_DATA_DIRECT, through libmlx5 opened at run time (net_ib/ib_mlx5.c)",
	  "init.cc:13" },
	/* connection and QPs */
	{ "NCCL_IB_TIMEOUT", "20", "QP local ACK timeout exponent", H, "BRAID_IB_TIMEOUT",
	  "connect.cc:15" },
	{ "NCCL_IB_RETRY_CNT", "7", "QP retry count", H, "BRAID_IB_RETRY_CNT", "connect.cc:16" },
	{ "NCCL_IB_SL", "-1 (0)", "InfiniBand service level", H, "BRAID_IB_SL", "connect.cc:19" },
	{ "NCCL_IB_TC", "-1 (0)", "traffic class of the QPs", H, "BRAID_IB_TC", "connect.cc:20" },
	{ "NCCL_IB_FIFO_TC", "-1 (NCCL_IB_TC)", "traffic class of the control (FIFO) writes", H,
	  "BRAID_IB_FIFO_TC (RoCE: the receive side's QPs)", "connect.cc:21" },
	{ "NCCL_IB_QPS_PER_CONNECTION", "1", "QPs per connection", H,
	  "BRAID_IB_QPS_PER_CONN (braid's default: 4 on RoCE, 1 on InfiniBand)", "connect.cc:60" },
	{ "NCCL_IB_ECE_ENABLE", "1", "negotiate Enhanced Connection Establishment (ibv_set_ece)", H,
	  "BRAID_IB_ECE_ENABLE", "connect.cc:22" },
	{ "NCCL_IB_SUBNET_AWARE_ROUTING", "0", "pair each NIC with a peer NIC on its subnet", H,
	  "BRAID_IB_SUBNET_AWARE_ROUTING: per NIC of a fused device (NCCL picks a whole merged "
	  "device whose NICs all reach the peer)",
	  "connect.cc:61" },
	{ "NCCL_IB_SUBNET_PREFIX_LEN", "24", "prefix length for subnet-aware routing", H,
	  "BRAID_IB_SUBNET_PREFIX_LEN", "connect.cc:62" },
	{ "NCCL_IB_WARN_RAIL_LOCAL", "0", "WARN when a virtual device gets fewer NICs than asked",
	  I, "braid WARNs on every makeVDevice it refuses", "connect.cc:1099" },
	{ "NCCL_GDR_FLUSH_DISABLE", "0", "no flush READ after a GPUDirect receive", H,
	  "plugin/gpudirect.c", "connect.cc:1354" },
	/* posting */
	{ "NCCL_IB_USE_INLINE", "0", "post the control (FIFO) writes inline", H,
	  "BRAID_IB_USE_INLINE", "connect.cc:18" },
	{ "NCCL_IB_SPLIT_DATA_ON_QPS", "0", "split each message over all QPs (0: one QP a message)",
	  H, "BRAID_IB_SPLIT_DATA_ON_QPS, onto BRAID_IB_SPLIT_BYTES (which wins when set)",
	  "common.cc:22" },
	{ "NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS", "-2", "post receive work requests ahead", I,
	  "braid posts receive work requests at connect", "common.cc:23" },
	{ "NCCL_IB_RETURN_ASYNC_EVENTS", "1", "fail operations after a fatal async event", C,
	  "braid always fails the comms of a port on its fatal async events", "common.cc:24" },
	{ "NCCL_IB_OOO_RQ", "0", "out-of-order receive queue (mlx5)", I,
	  "braid's receives complete in order", "init.cc:16" },
	{ "NCCL_IB_PCI_RELAXED_ORDERING", "2",
	  "register with relaxed ordering (2: where supported)", H, "BRAID_IB_PCI_RELAXED_ORDERING",
	  "init.cc:11" },
	{ "NCCL_IB_ADAPTIVE_ROUTING", "-2 (on for InfiniBand)", "post for adaptive routing", H,
	  "BRAID_IB_ADAPTIVE_ROUTING: the data as RDMA WRITEs, then per QP a WRITE_WITH_IMM of "
	  "its size into the receiver's record (NCCL's is 0 bytes: its immediate holds the size)",
	  "init.cc:12" },
	{ "NCCL_IB_AR_THRESHOLD", "-2 (8192)", "smallest message posted the adaptive-routing way",
	  H, "BRAID_IB_AR_THRESHOLD", "p2p.cc:13" },
	{ "NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME", "-2", "how a receiver matches out-of-order data",
	  I, "braid matches by request slot", "p2p.cc:17" },
	/* resiliency (NCCL 2.29.7 failover, 2.30.3 recovery) */
	{ "NCCL_IB_RESILIENCY_PORT_FAILOVER", "0",
	  "move a merged device's traffic off a failed port", H,
	  "BRAID_FAILOVER, which is on unless one of them says off", "p2p_resiliency.cc:13" },
	{ "NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS", "1", "failover attempts", I,
	  "braid fails over until one NIC is left", "p2p_resiliency.cc:14" },
	{ "NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY", "10", "ms before probing a failed port",
	  I, "braid probes once the lost chunks have all completed in error",
	  "p2p_resiliency.cc:15" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY", "0", "take a port back when it returns", H,
	  "BRAID_RECOVERY, which is on unless one of them says off",
	  "p2p_resiliency_recovery.cc:10" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", "200", "ms before recovery starts", I,
	  "braid tries once the port is ACTIVE again, then 0.2 s later, doubling up to 5 s",
	  "p2p_resiliency_recovery.cc:11" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL", "500",
	  "ms between batches of alive messages", I,
	  "braid agrees over the comm's TCP link and proves each QP with one RDMA READ",
	  "p2p_resiliency_recovery.cc:13" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE", "5", "alive messages a batch", I,
	  "braid proves each QP with one RDMA READ", "p2p_resiliency_recovery.cc:14" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE", "5",
	  "alive messages in a sequence", I, "braid proves each QP with one RDMA READ",
	  "p2p_resiliency_recovery.cc:15" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT", "4000",
	  "ms to wait for alive messages", I,
	  "a READ that does not come back fails within the QP's retry budget",
	  "p2p_resiliency_recovery.cc:17" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT", "5000", "ms to wait for a recovery ACK",
	  I, "braid waits 5 s for the peer's answer over the link",
	  "p2p_resiliency_recovery.cc:18" },
	{ "NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX", "5", "recovery attempts", I,
	  "braid tries while the comm lives, at most every 5 s after a few tries",
	  "p2p_resiliency_recovery.cc:19" },
};

#undef H
#undef C
#undef I
#undef W

const struct braid_ncclib_var *braid_ncclib_vars(size_t *n)
{
	*n = sizeof(vars) / sizeof(vars[0]);
	return vars;
}

const char *braid_ncclib_how_name(enum braid_ncclib_how how)
{
	switch (how) {
	case BRAID_NCCLIB_HONOURED: return "honoured";
	case BRAID_NCCLIB_COVERED: return "covered another way";
	case BRAID_NCCLIB_IGNORED: return "ignored";
	case BRAID_NCCLIB_WARN: return "ignored (WARN)";
	}
	return "?";
}

int braid_ncclib_report(void)
{
	int n = 0;

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const struct braid_ncclib_var *v = &vars[i];
		const char *val = getenv(v->name);

		if (!val || v->how == BRAID_NCCLIB_HONOURED)
			continue;
		n++;
		if (v->how == BRAID_NCCLIB_WARN)
			BRAID_WARN("%s=%s is set, and braid does not honour it: %s (docs/ib.md)",
				   v->name, val, v->braid);
		else
			BRAID_INFO(NCCL_INIT, "%s=%s is set, and braid does not read it: %s",
				   v->name, val, v->braid);
	}
	return n;
}
