// SPDX-License-Identifier: Apache-2.0
/*
 * The comm object: one lane per NIC of its NCCL device (ofi.h), its request pool and the
 * receiver's cut of each buffer. Made and freed here; set up and closed in ofi_conn.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "net_ofi/ofi.h"
#include "plugin/clock.h"

struct ofi_comm *ofi_comm_alloc(const struct braid_vdev *vd, int is_send, struct braid_link *lk)
{
	struct ofi_comm *c = calloc(1, sizeof(*c) + (size_t)vd->n * sizeof(c->lane[0]));
	struct braid_stripe_cfg cfg;
	size_t elem;

	if (!c)
		return NULL;
	c->is_send = is_send;
	c->nlanes = vd->n;
	c->link = lk;
	c->lanes_in = c->gmask = (1u << vd->n) - 1; /* every lane (ofi_live.c) */
	/* a lane with nothing of a group's last buffer may be a group behind (cut_recv) */
	c->recv_max = OFI_MAX_INFLIGHT - (vd->n > 1);
	snprintf(c->peer, sizeof(c->peer), "%s", lk->peer);
	for (int k = 0; k < vd->n; k++) {
		struct ofi_lane *l = &c->lane[k];

		l->comm = c;
		l->k = (uint8_t)k;
		l->devidx = vd->nic[k];
		l->dev = &ofi.devs[vd->nic[k]];
		l->token = (uint32_t)braid_random_u64();
	}
	/* A sender may have maxRecvs x 32 sends in flight. */
	elem = is_send ? OFI_SEND_REQ_SIZE((size_t)vd->n) : OFI_RECV_REQ_SIZE((size_t)vd->n);
	if (braid_pool_init(&c->reqs, elem,
			    is_send ? BRAID_MAX_RECVS * OFI_MAX_INFLIGHT : OFI_MAX_INFLIGHT,
			    c->lane[0].dev->numa_node)) {
		free(c);
		return NULL;
	}
	/* The sender measures its lanes and decides the weights (BRAID_STRIPE); the
	 * receiver cuts each buffer by the weights the sender last sent (ofi_wire.h). */
	braid_stripe_cfg_load(&cfg);
	if (!is_send)
		cfg.mode = BRAID_STRIPE_FOLLOW;
	cfg.batched = 1;
	braid_stripe_init(&c->stripe, c->nlanes, NULL, &cfg);
	for (int k = 0; k < c->nlanes; k++)
		braid_stripe_nic_bytes(&c->stripe, k, &c->lane[k].dev->ctr->t.tx_bytes);
	c->weights_sent = braid_stripe_weights_wire(&c->stripe);
	/* the receiver follows equal weights until the sender's first: a lane taken back
	 * into the cut gets its weight from the newest (ofi_live_recv_lanes) */
	c->weights_in = c->weights_cut = c->weights_sent;
	return c;
}

void ofi_comm_release(struct ofi_comm *c)
{
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];

		if (!l->pool_mr)
			continue;
		pthread_mutex_lock(&l->dev->ep_lock);
		fi_close(&l->pool_mr->fid);
		pthread_mutex_unlock(&l->dev->ep_lock);
	}
	braid_pool_fini(&c->reqs);
	braid_link_close(c->link, NULL);
	c->magic = BRAID_MAGIC_DEAD;
	free(c);
}
