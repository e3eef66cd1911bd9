/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Failover and recovery within a fused comm (docs/ib.md): ib_failover.c moves a failed
 * NIC's traffic to the comm's other NICs, ib_recover.c takes the NIC back; what the rest
 * of net_ib calls of them.
 */
#ifndef BRAID_NET_IB_IB_FO_H
#define BRAID_NET_IB_IB_FO_H

#include "net_ib/ib.h"

enum ib_fo_state { IB_FO_NONE = 0, IB_FO_LOST = 1, IB_FO_PROBING = 2, IB_FO_REPLAYING = 3 };
/* What a send needs to be replayed: its plan, its data and the receiver's buffer. */
struct ib_fo_send {
	uint32_t seq;
	uint8_t idx, total;
	uint8_t qp[IB_MAX_QPS];
	uint32_t clen[IB_MAX_QPS];
	const char *data;
	const struct ib_mr *m;
	uint64_t raddr;
	uint32_t rkey[BRAID_VDEV_MAX_NICS];
};
/* Set-up: each side's memory for it, once the rails are known (0 or -errno) */
int ib_fo_build(struct ib_comm *c);
void ib_fo_free(struct ib_comm *c);
struct ib_wire;
void ib_fo_fill_wire(const struct ib_comm *c, struct ib_wire *w);
/* the peer's wire: failover on when both offer it */
void ib_fo_take_wire(struct ib_comm *c, const struct ib_wire *w);
/* The bytes the comm's rails other than k carried (their lane counters): failover's and
 * recovery's WARNs (inline: each calls the other's file otherwise). */
static inline uint64_t ib_fo_other_bytes(const struct ib_comm *c, int k)
{
	uint64_t b = 0;

	for (int j = 0; j < c->nrails; j++)
		if (j != k && c->rails[j].ctr)
			b += __atomic_load_n(&c->rails[j].ctr->bytes, __ATOMIC_RELAXED);
	return b;
}
/* A completion error that failover handles (1), or not (0: the comm fails as before). */
int ib_fo_wc_error(struct ib_comm *c, const struct ibv_wc *wc, int qi);
/* A send whose chunks all completed, some in error: probe what landed, replay the rest. */
void ib_fo_send_settled(struct ib_comm *c, struct ib_req *r);
/* The probe of r completed. */
void ib_fo_probed(struct ib_comm *c, struct ib_req *r);
/* isend, failover on: what a replay of r (buffer idx of e, plan p) needs. */
void ib_fo_record(struct ib_comm *c, struct ib_req *r, int idx, const struct ib_plan *p,
		  const char *data, const struct ib_mr *m, const struct ib_fifo_elem *e);

/* ib_recover.c: a failed NIC comes back into the comm (docs/ib.md, recovery) */
/* Set-up done: take the peer's recovery messages when both sides offered it. */
void ib_rj_attach(struct ib_comm *c);
/* Sender, liveness tick, while a rail is dead or a recovery under way. */
void ib_rj_tick(struct ib_comm *c, uint64_t now);
/* A drain marker or a proof READ (a data QP's work request of the flush kind) came back;
 * ok: without error. */
void ib_rj_wr_back(struct ib_comm *c, int ok);
/* Receiver: a receive of a draining QP came back flushed. */
void ib_rj_recv_flushed(struct ib_comm *c);

#endif
