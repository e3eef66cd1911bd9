/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_ofi: the lanes of a fused comm while NICs come and go. Which NICs a comm uses and
 * which it leaves out (ofi_live.c), parts moved off a NIC down before anything was sent
 * on it (ofi_move.c), and the stripe's weights across lanes (ofi_stripe.c). Apart from
 * ofi.h, whose types they use, for the files that drive them.
 */
#ifndef BRAID_OFI_LANES_H
#define BRAID_OFI_LANES_H

#include "net_ofi/ofi.h"

/* ofi_live.c: the NICs a new comm uses, those up on both sides (set-up), and a NIC going
 * down under live comms */
struct braid_handle;
/* d's interface is down, has no carrier or is gone (0 for a domain that is no interface) */
int ofi_dev_link_down(const struct ofi_dev *d);
/* listen: the device's NICs, the down ones marked */
void ofi_live_fill_handle(const struct braid_vdev *vd, struct braid_handle *h);
/* connect: the NICs up on both sides into use (all when none is), each other one WARNed;
 * returns them as a mask of vd's NICs */
uint32_t ofi_live_pick(const struct braid_vdev *vd, const struct braid_link *lk,
		       struct braid_vdev *use);
/* accept: the NICs the connector kept (used), each other one WARNed; -EPROTO when used
 * names no NIC or one vd lacks */
int ofi_live_take(const struct braid_vdev *vd, uint32_t used, const char *peer,
		  struct braid_vdev *use);

/* While the comm waits, at most once per BRAID_LIVENESS_MS: a NIC of a lane in `wait` (a
 * mask: the lanes what it waits for is on) whose interface has stayed down for
 * BRAID_OFI_DOWN_TIMEOUT_MS is WARNed and -1 returned (the comm fails); else 0. No lock
 * held. */
int ofi_live_watch(struct ofi_comm *c, uint64_t now, uint32_t wait);
/* Fused receiver, before it cuts a group, at most once per BRAID_LIVENESS_MS: leave out
 * of new groups each lane whose NIC, or the sender's on that lane, is down (unless all
 * are), and take back each that is up again on both sides (the stripe follows). */
void ofi_live_recv_lanes(struct ofi_comm *c);
void ofi_live_recv_lanes_at(struct ofi_comm *c, uint64_t now); /* the same at a given time */
/* Fused sender, at most once per BRAID_LIVENESS_MS: tell the receiver over the link when
 * the set of its NICs that are down changes. */
void ofi_live_send_lanes(struct ofi_comm *c, uint64_t now);
/* Fused receiver: the sender's word on its NICs down, if msg (a link message) is: 1. */
int ofi_live_take_word(struct ofi_comm *c, const void *msg, uint32_t len);
/* Sender, before the last buffer of a group that leaves lanes out goes: those lanes move on
 * to the next group (the receiver needs nothing from them to complete this one). Takes
 * their ep_lock. */
void ofi_live_send_left_out(struct ofi_comm *c);
/* Sender: the current group's announcement from its first lane in, or NULL; *want its
 * lanes, *in those whose announcement is in. */
const struct ofi_group *ofi_send_group(const struct ofi_comm *c, uint32_t *want, uint32_t *in);
/* A fused receive still waiting: when some lanes' parts (done, a mask) have been in for
 * BRAID_OFI_DOWN_TIMEOUT_MS and another lane's are not, that lane is WARNed and -1
 * returned (the comm fails); else 0. */
int ofi_live_parts(struct ofi_comm *c, struct ofi_req *r, uint32_t done, uint64_t now);
/* A fused sender with no buffer to send to: the same for the receiver's announcement of
 * the group it waits for, in on some lanes and not on another. */
int ofi_live_announce(struct ofi_comm *c, uint64_t now);
/* A send r still waiting BRAID_OFI_DOWN_TIMEOUT_MS after test() first found it waiting
 * (r->waiting_ns): a WARN naming the NIC(s) of its parts not done (done: a mask of
 * lanes), once per comm; the comm goes on waiting. */
void ofi_live_send_waits(struct ofi_comm *c, const struct ofi_req *r, uint32_t done, uint64_t now);

/* ofi_move.c (comm's thread, no ep_lock held): parts moved off a NIC down, none sent yet */
void ofi_move_attach(struct ofi_comm *c);
/* Sender, NULL isend's tick: ask to move the group's parts on lanes down here, not sent */
void ofi_move_ask(struct ofi_comm *c, uint64_t now);
uint32_t ofi_move_lost(const struct ofi_comm *c, uint32_t want, uint32_t in);
/* Sender: the current group's lanes asked to move, unanswered within the bound (now 0: any) */
uint32_t ofi_move_awaited(const struct ofi_comm *c, uint64_t now);
/* Receiver, own_moves set: the unannounced parts of its groups on those lanes move */
void ofi_move_own(struct ofi_comm *c);
/* Sender, cutting r (ofi_cut_send; group c->seq, ring slot): moved parts go where they went */
void ofi_move_cut_send(struct ofi_comm *c, struct ofi_req *r, uint32_t slot);
void ofi_cut_send(struct ofi_comm *c, struct ofi_req *r, int idx, size_t size);
/* Sender, once the rest of r is posted: its moved parts; 0, or the error (WARNed). */
int ofi_move_post_send(struct ofi_comm *c, struct ofi_req *r);

/* ofi_stripe.c: a fused comm's weights (the comm's thread) */
/* Receiver, before it cuts a group: its lanes (ofi_live_recv_lanes), the sender's weights */
void ofi_stripe_follow(struct ofi_comm *c);
/* Sender: r's lanes whose part is done (each on its own time), for the weights and the
 * counters; the weights to the receiver when they moved; a slow NIC named once. */
void ofi_stripe_sent(struct ofi_comm *c, struct ofi_req *r, uint8_t lanes);
void ofi_stripe_received(struct ofi_comm *c, struct ofi_req *r); /* each lane's bytes in */
/* Receiver cutting a grouped receive: buffer i's parts count as outstanding (d 1) while
 * the next are cut, and no longer (d -1) once all are. */
void ofi_stripe_hold(struct ofi_comm *c, const struct ofi_req *r, int i, int d);

#endif
