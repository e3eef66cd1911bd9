// SPDX-License-Identifier: Apache-2.0
/*
 * iflush: after a receive into GPU memory through GPUDirect, a 1-byte RDMA READ of the
 * buffer over a QP connected to itself makes the NIC's PCIe writes visible to the GPU
 * (NCCL's design). One loopback QP per HCA, created on first need, shared by its comms
 * under the HCA lock (flushes are rare next to data). When nothing needs flushing (host
 * memory, no GPUDirect) iflush returns a NULL request, as NCCL's contract allows.
 */
#include <errno.h>
#include <string.h>

#include "net_ib/ib.h"
#include "plugin/log.h"
#include "plugin/params.h"

void ib_flush_teardown(struct ib_hca *h)
{
	if (h->flush_qp)
		ibv.destroy_qp(h->flush_qp);
	if (h->flush_cq)
		ibv.destroy_cq(h->flush_cq);
	if (h->flush_mr)
		ibv.dereg_mr(h->flush_mr);
	h->flush_qp = NULL;
	h->flush_cq = NULL;
	h->flush_mr = NULL;
}

/* Caller holds h->lock. */
static int flush_setup_locked(struct ib_hca *h, struct ib_dev *d)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int rc = 0;

	if (h->flush_qp)
		return 0;
	if (h->flush_failed)
		return -EIO;
	h->flush_cq = ibv.create_cq(h->ctx, IB_RING * 4, NULL, NULL, 0);
	h->flush_mr = ibv.reg_mr(h->pd, &h->flush_byte, 1, IBV_ACCESS_LOCAL_WRITE);
	if (!h->flush_cq || !h->flush_mr)
		goto fail;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = h->flush_cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = IB_RING * 4;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	h->flush_qp = ibv.create_qp(h->pd, &ia);
	if (!h->flush_qp)
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = (uint8_t)d->port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	if ((rc = ibv.modify_qp(h->flush_qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = h->flush_qp->qp_num;
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
	if ((rc = ibv.modify_qp(h->flush_qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER)))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)braid_param_int(BRAID_P_IB_TIMEOUT);
	a.retry_cnt = (uint8_t)braid_param_int(BRAID_P_IB_RETRY_CNT);
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if ((rc = ibv.modify_qp(h->flush_qp, &a,
				IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)))
		goto fail;
	BRAID_INFO(NCCL_NET, "ib: flush QP %#x on %s:%d ready", h->flush_qp->qp_num, d->name,
		   d->port);
	return 0;
fail:
	BRAID_WARN("ib: creating the flush QP on %s:%d failed: %s", d->name, d->port,
		   strerror(rc ? rc : errno ? errno : EIO));
	ib_flush_teardown(h);
	h->flush_failed = 1;
	return -EIO;
}

int ib_flush_setup(struct ib_hca *h, struct ib_dev *d)
{
	int rc;

	pthread_mutex_lock(&h->lock);
	rc = flush_setup_locked(h, d);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

ncclResult_t ib_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
		       void **request)
{
	struct ib_comm *c = recv_comm;
	struct ib_hca *h = c->hca;
	int mode = (int)braid_param_int(BRAID_P_IB_FLUSH); /* auto, always, never */
	int last = -1;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ib_req *r;
	int rc;

	*request = NULL;
	if (c->error)
		return c->error;
	if (mode == 2)
		return ncclSuccess;
	for (int i = 0; i < n; i++) {
		const struct ib_mr *m = mhandles[i];

		if (sizes[i] <= 0)
			continue;
		if (mode == 1 || (m->range.type == NCCL_PTR_CUDA && (h->gdr_peermem || h->gdr_dmabuf)))
			last = i;
	}
	if (last < 0)
		return ncclSuccess; /* nothing in flight towards a GPU: nothing to flush */
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSystemError; /* cannot happen: the pool has room for a flush per recv */
	r->comm = c;
	r->kind = IB_REQ_FLUSH;
	r->pending = 1;
	pthread_mutex_lock(&h->lock);
	rc = flush_setup_locked(h, c->dev);
	if (!rc) {
		sge.addr = (uintptr_t)&h->flush_byte;
		sge.length = 1;
		sge.lkey = h->flush_mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uintptr_t)r | IB_WR_FLUSH;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)data[last];
		wr.wr.rdma.rkey = ((const struct ib_mr *)mhandles[last])->mr->rkey;
		rc = ibv_post_send(h->flush_qp, &wr, &bad);
		if (rc)
			BRAID_WARN("ib: posting the flush READ on %s QP %#x failed: %s", h->name,
				   h->flush_qp->qp_num, strerror(rc));
	}
	pthread_mutex_unlock(&h->lock);
	if (rc) {
		braid_pool_put(&c->reqs, r);
		return ncclSystemError;
	}
	r->magic = BRAID_MAGIC_REQ;
	*request = r;
	return ncclSuccess;
}

int ib_flush_poll(struct ib_req *r)
{
	struct ib_hca *h = r->comm->hca;
	struct ibv_wc wc[8];
	int n;

	if (!__atomic_load_n(&r->pending, __ATOMIC_ACQUIRE))
		return 1;
	pthread_mutex_lock(&h->lock);
	while ((n = ibv_poll_cq(h->flush_cq, 8, wc)) > 0)
		for (int i = 0; i < n; i++) {
			struct ib_req *fr = (struct ib_req *)(uintptr_t)(wc[i].wr_id & ~3ULL);

			if (wc[i].status != IBV_WC_SUCCESS) {
				BRAID_WARN("ib: flush READ on %s QP %#x failed: %s", h->name,
					   wc[i].qp_num, ibv.wc_status_str(wc[i].status));
				fr->status = ncclSystemError;
			}
			__atomic_store_n(&fr->pending, 0, __ATOMIC_RELEASE);
		}
	pthread_mutex_unlock(&h->lock);
	return !__atomic_load_n(&r->pending, __ATOMIC_ACQUIRE);
}
