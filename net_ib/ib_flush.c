// SPDX-License-Identifier: Apache-2.0
/*
 * iflush: after a receive into GPU memory through GPUDirect, a 1-byte RDMA READ of the
 * buffer over a QP connected to itself makes the NIC's PCIe writes visible to the GPU
 * (NCCL's design). As in NCCL's IB transport (gpuFlush, one per receive comm), every
 * receive comm has its own loopback QP, on the comm's own CQ, deep enough for a flush
 * per request the comm can hold: no other comm's load can ever fill it. The QP exists
 * only where flushes are due (GPUDirect on the HCA, or BRAID_IB_FLUSH=always); with
 * nothing to flush iflush returns a NULL request, as NCCL's contract allows. A comm over
 * several NICs has one per NIC and flushes on each (as NCCL: "we don't know which
 * devIndex the recv was on, so we flush on all devices").
 */
#include <errno.h>
#include <string.h>

#include "net_ib/ib.h"
#include "plugin/log.h"
#include "plugin/params.h"

static void flush_close_rail(struct ib_rail *rl)
{
	if (rl->flush_qp)
		ibv.destroy_qp(rl->flush_qp);
	if (rl->flush_mr)
		ibv.dereg_mr(rl->flush_mr);
	rl->flush_qp = NULL;
	rl->flush_mr = NULL;
}

void ib_flush_close(struct ib_comm *c)
{
	for (int i = 0; i < c->nrails; i++)
		flush_close_rail(&c->rails[i]);
}

/* INIT -> RTR (to itself) -> RTS; 0 or the failing step's errno. */
static int flush_qp_up(struct ib_rail *rl)
{
	struct ib_dev *d = rl->dev;
	struct ibv_qp_attr a;
	int rc;

	rc = ib_qp_modify_init(rl->flush_qp, d, IBV_ACCESS_REMOTE_READ);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = rl->flush_qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = (uint8_t)d->port;
	if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = d->gid;
		a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
		a.ah_attr.grh.hop_limit = 255;
	} else {
		a.ah_attr.dlid = d->lid;
	}
	rc = ibv.modify_qp(rl->flush_qp, &a,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)braid_param_int(BRAID_P_IB_TIMEOUT);
	a.retry_cnt = (uint8_t)braid_param_int(BRAID_P_IB_RETRY_CNT);
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv.modify_qp(rl->flush_qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int ib_flush_restart(struct ib_comm *c, struct ib_rail *rl)
{
	struct ibv_qp_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	rc = ibv.modify_qp(rl->flush_qp, &a, IBV_QP_STATE);
	if (!rc)
		rc = flush_qp_up(rl);
	if (rc)
		BRAID_WARN("ib: receive comm %s:%d (peer %s): restarting its flush QP %#x failed: %s",
			   rl->dev->name, rl->dev->port, c->peer, rl->flush_qp->qp_num,
			   strerror(rc));
	return -rc;
}

int ib_flush_open(struct ib_comm *c, struct ib_rail *rl)
{
	struct ibv_qp_init_attr ia;
	int rc;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = rl->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = IB_FLUSH_DEPTH;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	rl->flush_mr = ibv.reg_mr(rl->hca->pd, &rl->flush_byte, 1, IBV_ACCESS_LOCAL_WRITE);
	rl->flush_qp = rl->flush_mr ? ibv.create_qp(rl->hca->pd, &ia) : NULL;
	rc = rl->flush_qp ? flush_qp_up(rl) : (errno ? errno : EIO);
	if (rc) {
		BRAID_WARN("ib: receive comm %s:%d (peer %s): creating its flush QP failed: %s",
			   rl->dev->name, rl->dev->port, c->peer, strerror(rc));
		flush_close_rail(rl);
		return -rc;
	}
	BRAID_TRACE("ib: receive comm %s:%d (peer %s): flush QP %#x ready", rl->dev->name,
		    rl->dev->port, c->peer, rl->flush_qp->qp_num);
	return 0;
}

/* One flush READ of data on a rail; 0 or the verbs errno (WARNed). */
static int post_flush(struct ib_comm *c, struct ib_rail *rl, struct ib_req *r, void *data,
		      const struct ib_mr *m)
{
	int rc = ib_qp_post_rdma(rl->flush_qp, ib_wr_id(r, IB_WR_FLUSH), IBV_WR_RDMA_READ,
				 IBV_SEND_SIGNALED, &rl->flush_byte, 1, rl->flush_mr->lkey,
				 (uint64_t)(uintptr_t)data,
				 ib_mr_on(m, (int)(rl - c->rails))->rkey);

	if (rc)
		BRAID_WARN("ib: receive comm %s:%d (peer %s): posting the flush READ on QP %#x "
			   "failed: %s",
			   rl->dev->name, rl->dev->port, c->peer, rl->flush_qp->qp_num,
			   strerror(rc));
	return rc;
}

/* Whether rail k takes a flush: not once its flush QP failed or while recovery drains it
 * (ib_recover.c). A failed NIC (failover) still does while its port is up and one of its
 * QPs is sound: a path cut for one QP leaves the others carrying the sender's writes
 * (ib_cq.c repost_recvs), which a GPUDirect receive must see flushed through that NIC.
 * With its port down, no write comes, and a READ there would wait out the retry budget. */
static int rail_flushes(const struct ib_comm *c, int k)
{
	const struct ib_rail *rl = &c->rails[k];

	if (!rl->flush_qp || ((c->flush_err | c->rj_flush_draining) >> k & 1))
		return 0;
	if (!(c->rail_dead >> k & 1))
		return 1;
	if (__atomic_load_n(&rl->dev->down_ns, __ATOMIC_ACQUIRE))
		return 0;
	for (int i = 0; i < c->nqps; i++)
		if (c->qps[i].rail == k && !(c->qp_err >> i & 1))
			return 1;
	return 0;
}

ncclResult_t ib_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
		       void **request)
{
	struct ib_comm *c = to_ib_comm(recv_comm);
	int always = braid_param_int(BRAID_P_IB_FLUSH) == 1;
	struct ib_req *r;
	int last = -1;

	*request = NULL;
	if (c->error)
		return c->error;
	if (!c->rails[0].flush_qp)
		return ncclSuccess; /* no GPUDirect on this HCA: nothing to flush */
	/* As NCCL: one READ, of the last buffer that received bytes. */
	for (int i = 0; i < n; i++) {
		const struct ib_mr *m = mhandles[i];

		if (sizes[i] > 0 && (always || m->range.type == NCCL_PTR_CUDA))
			last = i;
	}
	if (last < 0)
		return ncclSuccess; /* nothing in flight towards a GPU */
	r = braid_pool_get(&c->reqs);
	if (!r) {
		/* A NULL request would tell NCCL there is nothing to flush: never that. */
		BRAID_WARN("ib: receive comm %s:%d (peer %s): more than %d receives and flushes in "
			   "flight",
			   c->dev->name, c->dev->port, c->peer, c->reqs.nelem);
		return ncclInternalError;
	}
	ib_req_start(r, c, IB_REQ_FLUSH, 0);
	for (int k = 0; k < c->nrails; k++) {
		if (!rail_flushes(c, k))
			continue;
		if (post_flush(c, &c->rails[k], r, data[last], mhandles[last])) {
			if (!r->pending) {
				braid_pool_put(&c->reqs, r);
				return ncclSystemError;
			}
			/* the READs posted complete before the comm closes */
			r->status = ncclSystemError;
			break;
		}
		r->pending++;
	}
	r->magic = BRAID_MAGIC_REQ;
	*request = r;
	return ncclSuccess;
}
