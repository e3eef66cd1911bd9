/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request judgement, written once for both backends: a comm's sticky failure, the refusal
 * of new requests after the peer's goodbye, the verdict on a request still waiting once
 * the peer said goodbye, and the goodbye a closing comm sends. What only the backend
 * knows (its health checks, which buffers a request still waits for, how its WARNs name
 * a comm) it passes in; nothing here allocates or takes a lock.
 */
#ifndef BRAID_JUDGE_H
#define BRAID_JUDGE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_abi.h"
#include "plugin/counters.h"
#include "plugin/link.h"

/* Writes how WARNs name the comm ("ib: send comm mlx5_0:1"); called only to WARN. */
typedef void (*braid_judge_who_fn)(const void *comm, char *buf, size_t len);

/* The comm's first failure is sticky: every later call reports it. It is counted once
 * (ctr NULL: a comm still in set-up has no counters yet). */
void braid_judge_comm_fail(ncclResult_t *error, ncclResult_t why, struct braid_ctr_comm *ctr,
			   struct braid_ctr_dev *dev_ctr);

/* A request's first failure is its status. */
static inline void braid_judge_req_fail(ncclResult_t *status, ncclResult_t why)
{
	if (*status == ncclSuccess)
		*status = why;
}

/*
 * After the peer's goodbye no new request of a comm can ever complete: 1, after a WARN
 * "<who>: peer P closed its comm; no send|receive can complete any more", when the link
 * says the peer left (the caller then fails the comm with ncclRemoteError); else 0.
 */
int braid_judge_refuse_after_bye(const struct braid_link *lk, int is_send, braid_judge_who_fn who,
				 const void *comm);

/*
 * A sender found no announcement for its next buffer, next_buf: after the peer's goodbye,
 * 1 (after a WARN; the caller fails the comm with ncclRemoteError) when the peer never
 * posted that buffer, or posted it but its announcement has not come within
 * braid_link_grace_ns() of the goodbye; else 0 (NULL request: call again). A receive the
 * peer posted before closing is still a match for isend, as in NCCL's IB transport, whose
 * isend sees only its FIFO: the announcement travels on the fabric, the goodbye on the
 * link, and either may come first.
 */
int braid_judge_refuse_unannounced(const struct braid_link *lk, uint64_t next_buf,
				   braid_judge_who_fn who, const void *comm);

/* A request still waiting with this status, on a comm that has not failed: does the
 * peer's goodbye have to judge it (collect its buffers, then braid_judge_verdict)? */
static inline int braid_judge_due(const struct braid_link *lk, ncclResult_t status)
{
	return status == ncclSuccess && lk->state == BRAID_LINK_BYE;
}

/* The goodbye's verdict on a request still waiting on bufs[0..n): it fails (status
 * ncclRemoteError, one WARN) when it can never complete. is_send: we write the buffers. */
void braid_judge_verdict(const struct braid_link *lk, ncclResult_t *status, const uint64_t *bufs,
			 int n, int is_send, braid_judge_who_fn who, const void *comm);

/* A sender's goodbye: every buffer below sent_upto was sent to, and those of the current
 * group of n (numbered from sent_upto) whose bit is set in used. */
void braid_judge_bye_send(struct braid_link_bye *bye, uint64_t sent_upto, uint32_t n,
			  uint32_t used);

/* A receive request still waiting at close: buffers first .. first + n - 1, the bits of
 * done those already filled. */
struct braid_judge_wait {
	uint64_t first;
	int n;
	uint32_t done;
};

/* A receiver's goodbye: every one of its nbufs buffers is filled but those of the
 * requests still waiting, w[0..nw). */
void braid_judge_bye_recv(struct braid_link_bye *bye, uint64_t nbufs,
			  const struct braid_judge_wait *w, int nw);

#endif
