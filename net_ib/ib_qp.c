// SPDX-License-Identifier: Apache-2.0
/*
 * RC QPs: create, INIT -> RTR -> RTS, and the flow label that gives each QP of a
 * connection its own RoCEv2 UDP source port (ECMP entropy). NCCL leaves the label 0, so
 * the kernel derives the port from the two QP numbers; braid picks a deterministic,
 * non-zero label per QP, distinct in source port from its siblings'.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net_ib/ib.h"
#include "plugin/clock.h"
#include "plugin/log.h"
#include "plugin/params.h"

const char *ib_mtu_str(enum ibv_mtu mtu)
{
	switch (mtu) {
	case IBV_MTU_256: return "256";
	case IBV_MTU_512: return "512";
	case IBV_MTU_1024: return "1024";
	case IBV_MTU_2048: return "2048";
	case IBV_MTU_4096: return "4096";
	default: return "?";
	}
}

/* Linux: rdma_calc_flow_label() when the label is 0, then rdma_flow_label_to_udp_sport(). */
uint16_t ib_rocev2_sport(uint32_t lqpn, uint32_t rqpn, uint32_t fl)
{
	fl &= 0xfffff;
	if (!fl) {
		uint64_t v = (uint64_t)lqpn * rqpn;

		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)(v & 0xfffff);
	}
	return (uint16_t)(((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) | 0xc000);
}

/*
 * The label of QP i of a connection: a hash of the connection's first QP pair (the same
 * for every QP of the connection, different between connections) plus i in the 14 bits
 * that become the UDP source port, so the n QPs of a connection get n consecutive-free,
 * distinct source ports. Never 0 (0 means "let the kernel pick").
 */
uint32_t ib_flow_label(uint32_t lqpn0, uint32_t rqpn0, int i)
{
	uint64_t h = braid_mix64(((uint64_t)lqpn0 << 32) | rqpn0);
	uint32_t base = (uint32_t)(h & 0x3fff);
	/* spread the siblings evenly over the 14-bit port space */
	uint32_t low = (base + (uint32_t)i * (0x4000 / IB_MAX_QPS + 1)) & 0x3fff;
	uint32_t fl = low; /* high 6 bits 0: sport low bits == label low bits */

	return fl ? fl : 1u << 14;
}

int ib_qp_create(struct ib_comm *c, struct ib_qp *q, int rail, int is_send)
{
	struct ib_rail *rl = &c->rails[rail];
	struct ib_hca *h = rl->hca;
	struct ibv_qp_init_attr ia;
	int rc;

	memset(&ia, 0, sizeof(ia));
	q->rail = (uint8_t)rail;
	ia.send_cq = rl->cq;
	ia.recv_cq = rl->cq;
	ia.qp_type = IBV_QPT_RC;
	/* sender: data writes; receiver: FIFO writes and the receives the data consumes */
	ia.cap.max_send_wr = is_send ? ib_sq_depth(c) : IB_RECV_SQ_DEPTH;
	ia.cap.max_recv_wr = is_send ? 1 : IB_RQ_DEPTH;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	/* NCCL_IB_USE_INLINE: room for one FIFO element, as NCCL asks; the provider may give
	 * more (it writes back what it gave), and a group's write goes inline if it fits. */
	if (!is_send && braid_param_int(BRAID_P_IB_USE_INLINE))
		ia.cap.max_inline_data = sizeof(struct ib_fifo_elem);
	q->qp = ibv.create_qp(h->pd, &ia);
	if (!q->qp) {
		rc = errno ? errno : EIO;
		BRAID_WARN("ib: ibv_create_qp on %s:%d failed: %s", rl->dev->name, rl->dev->port,
			   strerror(rc));
		return -rc;
	}
	q->max_inline = ia.cap.max_inline_data;
	/* The ECE this QP offers (NCCL_IB_ECE_ENABLE); a NIC or library without ECE has none. */
	q->ece_ok = braid_param_int(BRAID_P_IB_ECE_ENABLE) && ibv.query_ece && ibv.set_ece &&
		    !ibv.query_ece(q->qp, &q->ece);
	return ib_qp_to_init(c, q);
}

int ib_qp_modify_init(struct ibv_qp *qp, const struct ib_dev *d, unsigned int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = (uint16_t)d->pkey_index;
	a.port_num = (uint8_t)d->port;
	a.qp_access_flags = access;
	return ibv.modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int ib_qp_to_init(struct ib_comm *c, struct ib_qp *q)
{
	const struct ib_dev *d = c->rails[q->rail].dev;
	int rc;

	rc = ib_qp_modify_init(q->qp, d, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (rc) {
		BRAID_WARN("ib: QP %#x on %s:%d to INIT failed: %s", q->qp->qp_num, d->name,
			   d->port, strerror(rc));
		return -rc;
	}
	return 0;
}

/*
 * Enhanced Connection Establishment, as NCCL's IB transport negotiates it: the connecting
 * side sends the options its QP offers (queried at create), the accepting side sets them
 * on its QP, which keeps those its NIC supports, and sends back what its QP accepted; the
 * connecting side sets that. Both before RTR. peer: the other side's ECE for this QP,
 * NULL when it has none (then neither side uses it). 0, or -errno when the NIC refuses.
 */
int ib_qp_take_ece(struct ib_comm *c, struct ib_qp *q, const struct ibv_ece *peer)
{
	const struct ib_dev *d = c->rails[q->rail].dev;
	struct ibv_ece e;
	int rc;

	if (!q->ece_ok || !peer) {
		q->ece_ok = 0;
		return 0;
	}
	e = *peer;
	rc = ibv.set_ece(q->qp, &e);
	if (!rc && !c->is_send)
		rc = ibv.query_ece(q->qp, &q->ece);
	else if (!rc)
		q->ece = *peer;
	if (rc == EOPNOTSUPP || rc == ENOTSUP) {
		q->ece_ok = 0;
		return 0;
	}
	if (rc) {
		BRAID_WARN("ib: QP %#x on %s:%d: setting the peer's ECE (vendor %#x options %#x) "
			   "failed: %s; NCCL_IB_ECE_ENABLE=0 turns ECE off",
			   q->qp->qp_num, d->name, d->port, peer->vendor_id, peer->options,
			   strerror(rc));
		return -rc;
	}
	return 0;
}

int ib_qp_post_rdma(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, unsigned int flags,
		    const void *addr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

int ib_qp_post_recvs(struct ib_comm *c, struct ib_qp *q, uint32_t count)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge none = { 0 };
	uint64_t idx = (uint64_t)(q - c->qps);

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (idx << 2) | IB_WR_RECV;
	wr.sg_list = &none; /* not read (num_sge 0), but never NULL for providers that look */
	wr.num_sge = 0;     /* RDMA_WRITE_WITH_IMM consumes a receive but writes nothing to it */
	for (uint32_t i = 0; i < count; i++) {
		int rc = ibv_post_recv(q->qp, &wr, &bad);

		if (rc)
			return -rc;
	}
	return 0;
}

int ib_qp_connect(struct ib_comm *c, struct ib_qp *q, int i, uint32_t rqpn, uint32_t rpsn,
		  uint32_t lpsn, const union ibv_gid *rgid, uint16_t rlid, enum ibv_mtu mtu)
{
	struct ib_dev *d = c->rails[q->rail].dev;
	struct ibv_qp_attr a;
	int roce = d->link_layer == IBV_LINK_LAYER_ETHERNET;
	int fifo_tc = (int)braid_param_int(BRAID_P_IB_FIFO_TC);
	int rc;

	q->remote_qpn = rqpn;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = rqpn;
	a.rq_psn = rpsn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = (uint8_t)d->port;
	a.ah_attr.sl = (uint8_t)c->sl;
	/* IB: LID routing, with a GRH only when the peer is in another subnet. */
	if (!roce && memcmp(rgid->raw, d->gid.raw, 8) == 0) {
		a.ah_attr.is_global = 0;
		a.ah_attr.dlid = rlid;
	} else {
		a.ah_attr.is_global = 1;
		a.ah_attr.dlid = roce ? 0 : rlid;
		a.ah_attr.grh.dgid = *rgid;
		a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
		a.ah_attr.grh.hop_limit = 255;
		/* NCCL_IB_FIFO_TC: on RoCE the receive side's QPs, whose packets are the FIFO
		 * writes and the data's ACKs, take the control class (NCCL's receiver QPs). */
		a.ah_attr.grh.traffic_class = (uint8_t)(roce && !c->is_send && fifo_tc >= 0
								? fifo_tc
								: c->traffic_class);
		q->flow_label = 0;
		if (roce && d->gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    braid_param_int(BRAID_P_IB_FLOW_LABEL))
			q->flow_label = ib_flow_label(c->qps[0].qp->qp_num, c->qps[0].remote_qpn,
						      i);
		a.ah_attr.grh.flow_label = q->flow_label;
		if (roce && d->gid_type == IBV_GID_TYPE_ROCE_V2)
			q->sport = ib_rocev2_sport(q->qp->qp_num, rqpn, q->flow_label);
	}
	rc = ibv.modify_qp(q->qp, &a,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER);
	if (rc) {
		BRAID_WARN("ib: QP %#x on %s:%d to RTR (remote QP %#x) failed: %s", q->qp->qp_num,
			   d->name, d->port, rqpn, strerror(rc));
		return -rc;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = lpsn;
	a.timeout = (uint8_t)braid_param_int(BRAID_P_IB_TIMEOUT);
	a.retry_cnt = (uint8_t)braid_param_int(BRAID_P_IB_RETRY_CNT);
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	rc = ibv.modify_qp(q->qp, &a,
			   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc) {
		BRAID_WARN("ib: QP %#x on %s:%d to RTS failed: %s", q->qp->qp_num, d->name, d->port,
			   strerror(rc));
		return -rc;
	}
	return 0;
}
