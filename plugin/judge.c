// SPDX-License-Identifier: Apache-2.0
#include "plugin/judge.h"

#include "plugin/clock.h"

#include "plugin/log.h"

void braid_judge_comm_fail(ncclResult_t *error, ncclResult_t why, struct braid_ctr_comm *ctr,
			   struct braid_ctr_dev *dev_ctr)
{
	if (*error != ncclSuccess)
		return;
	*error = why;
	if (ctr)
		braid_ctr_count(ctr, dev_ctr, BRAID_CTR(errors), 1);
}

int braid_judge_refuse_after_bye(const struct braid_link *lk, int is_send, braid_judge_who_fn who,
				 const void *comm)
{
	char name[128];

	if (lk->state != BRAID_LINK_BYE)
		return 0;
	who(comm, name, sizeof(name));
	BRAID_WARN("%s: peer %s closed its comm; no %s can complete any more", name, lk->peer,
		   is_send ? "send" : "receive");
	return 1;
}

int braid_judge_refuse_unannounced(const struct braid_link *lk, uint64_t next_buf,
				   braid_judge_who_fn who, const void *comm)
{
	char name[128];
	int posted = next_buf < lk->peer_bye.upto;

	if (lk->state != BRAID_LINK_BYE ||
	    (posted && braid_now_ns() - lk->bye_ns <= braid_link_grace_ns()))
		return 0;
	who(comm, name, sizeof(name));
	BRAID_WARN("%s: peer %s closed its comm %s buffer %llu; no send can complete any more",
		   name, lk->peer,
		   posted ? "and its announcement of" : "without posting a receive into",
		   (unsigned long long)next_buf);
	return 1;
}

void braid_judge_verdict(const struct braid_link *lk, ncclResult_t *status, const uint64_t *bufs,
			 int n, int is_send, braid_judge_who_fn who, const void *comm)
{
	char name[128];

	who(comm, name, sizeof(name));
	if (braid_link_judge(lk, bufs, n, is_send, name))
		braid_judge_req_fail(status, ncclRemoteError);
}

void braid_judge_bye_send(struct braid_link_bye *bye, uint64_t sent_upto, uint32_t n, uint32_t used)
{
	braid_bye_init(bye, sent_upto, sent_upto + n);
	for (uint32_t i = 0; i < n; i++)
		if (used & (1u << i))
			braid_bye_add(bye, sent_upto + i);
}

void braid_judge_bye_recv(struct braid_link_bye *bye, uint64_t nbufs,
			  const struct braid_judge_wait *w, int nw)
{
	uint64_t base = nbufs;

	for (int s = 0; s < nw; s++)
		for (int i = 0; i < w[s].n; i++)
			if (!(w[s].done & (1u << i)) && w[s].first + (uint64_t)i < base)
				base = w[s].first + (uint64_t)i;
	braid_bye_init(bye, base, nbufs);
	for (uint64_t b = base; b < nbufs; b++)
		braid_bye_add(bye, b);
	for (int s = 0; s < nw; s++)
		for (int i = 0; i < w[s].n; i++)
			if (!(w[s].done & (1u << i)))
				braid_bye_del(bye, w[s].first + (uint64_t)i);
}
