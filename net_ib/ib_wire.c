// SPDX-License-Identifier: Apache-2.0
/*
 * The check of a peer's verbs wire description (net_ib/ib_wire.h), apart from the comm
 * (net_ib/ib_conn.c) so that tests/fuzz can feed it any bytes.
 */
#include <stddef.h>
#include <stdio.h>
#include <errno.h>

#include "net_ib/ib_wire.h"

/* IBA 10.9.3: one partition (the low 15 bits), at least one side a full member. */
static int pkeys_match(uint16_t a, uint16_t b)
{
	return (a & 0x7fff) && (a & 0x7fff) == (b & 0x7fff) && ((a | b) & 0x8000);
}

int ib_wire_check(const void *payload, uint32_t len, int want_nqps, const struct ib_dev *local,
		  char *why, size_t whylen)
{
	const struct ib_wire *w = payload;

	if (len < offsetof(struct ib_wire, nqps) || w->magic != IB_WIRE_MAGIC) {
		snprintf(why, whylen,
			 "the peer's %s is not braid's verbs handshake (%u bytes%s); is it running "
			 "braid with BRAID_BACKEND=ib?",
			 want_nqps ? "reply" : "hello", len, len >= 4 ? ", wrong magic" : "");
		return -EPROTO;
	}
	if (w->version != IB_WIRE_VERSION || w->len != sizeof(*w) || len != sizeof(*w)) {
		snprintf(why, whylen,
			 "the peer speaks braid verbs wire version %u (%u bytes); this braid speaks "
			 "%u (%zu bytes): use the same braid on every rank",
			 (unsigned)w->version, (unsigned)w->len, (unsigned)IB_WIRE_VERSION,
			 sizeof(*w));
		return -EPROTO;
	}
	if (w->nrails < 1 || w->nrails > BRAID_VDEV_MAX_NICS) {
		snprintf(why, whylen, "bad NIC count %u", w->nrails);
		return -EPROTO;
	}
	/* every NIC of both ends on one link layer, as NCCL requires of a merged device */
	for (int k = 0; k < w->nrails; k++) {
		const struct ib_wire_rail *r = &w->rails[k];

		if (r->link_layer == local->link_layer)
			continue;
		snprintf(why, whylen, "the peer's port %.40s:%u is %s, ours %s:%d is %s", r->dev,
			 r->port, r->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
			 local->name, local->port,
			 local->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
		return -EPROTO;
	}
	if (w->nqps < 1 || w->nqps > IB_MAX_QPS || (want_nqps && w->nqps != want_nqps)) {
		snprintf(why, whylen, "bad QP count %u", w->nqps);
		return -EPROTO;
	}
	for (int i = 0; i < w->nqps; i++) {
		if (w->qp_rail[i] < w->nrails &&
		    (want_nqps || w->qp_peer_rail[i] < BRAID_VDEV_MAX_NICS))
			continue;
		snprintf(why, whylen, "QP %d on NIC %u of %u, to our NIC %u", i, w->qp_rail[i],
			 w->nrails, w->qp_peer_rail[i]);
		return -EPROTO;
	}
	/* A fabric drops packets across partitions: say so now, not as a retry timeout on
	 * the first message. Both keys are known only where ibv_query_pkey exists. */
	if (w->pkey && local->pkey && !pkeys_match(w->pkey, local->pkey)) {
		snprintf(why, whylen,
			 "the peer's P_Key 0x%04x and ours 0x%04x (index %d on %s:%d) are not in "
			 "one partition (both full or limited members of it): check NCCL_IB_PKEY "
			 "or BRAID_IB_PKEY on both ranks",
			 w->pkey, local->pkey, local->pkey_index, local->name, local->port);
		return -EPROTO;
	}
	return 0;
}
