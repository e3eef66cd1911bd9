// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi's iflush (net_ofi/ofi_flush.c) where the provider offers no FI_RMA read. NCCL
 * asks for a flush only after a receive the NIC wrote into GPU memory (ncclTopoNeedFlush:
 * GPUs under compute capability 9.0, or a DataDirect NIC). Without a read to flush with,
 * net_ofi must say so, once, naming the peer and the way out (NCCL_NET_GDR_LEVEL=LOC),
 * and answer with no request; host memory, a handle that is not a registration, an empty
 * flush and a flush turned off on purpose say nothing. The reads themselves run against real providers: the flush
 * scenario (tests/conformance, BRAID_OFI_FLUSH=always) on tcp and shm.
 */
#include <string.h>

#include "tests/unit/ofi_fake.h"

static int flush(struct ofi_comm *c, struct ofi_mr *m, int size)
{
	void *data = (void *)0x1000, *mh = m, *req = (void *)1;
	int sizes[1] = { size };

	assert_int_equal(ofi_iflush(c, 1, &data, sizes, &mh, &req), ncclSuccess);
	assert_null(req);
	return strstr(unit_log, "cannot read it back through the NIC") != NULL;
}

/* A registration on each of the comm's lanes, as regMr makes it (no fid: the provider
 * needed none, and none was asked for a read). */
static struct ofi_dev_mr lane_mr[3];

static void m_clear(int k)
{
	lane_mr[k] = (struct ofi_dev_mr){ 0 };
}

static void on_lanes(struct ofi_mr *m, int nlanes)
{
	m->nlanes = nlanes;
	for (int k = 0; k < nlanes; k++)
		m->lane[k] = &lane_mr[k];
}

static void a_flush_into_gpu_memory_is_told_once(void **state)
{
	struct ofi_comm *c = fake_comm(1, "fake0", NULL);
	struct ofi_mr host = { .magic = BRAID_MAGIC_MR, .range = { .type = NCCL_PTR_HOST } };
	struct ofi_mr gpu = { .magic = BRAID_MAGIC_MR, .range = { .type = NCCL_PTR_CUDA } };
	struct ofi_mr stale = { .magic = 0, .range = { .type = NCCL_PTR_CUDA } };
	void *req = (void *)1;

	(void)state;
	set_env("2000", "100");
	on_lanes(&host, 1);
	on_lanes(&gpu, 1);
	assert_false(flush(c, &gpu, 4096)); /* turned off on purpose (never, or NCCL's knob) */
	c->lane[0].dev->flush_unable = 1;   /* due, but no FI_RMA read (ofi_dev.c) */
	assert_false(flush(c, &host, 4096));
	assert_int_equal(ofi_iflush(c, 0, NULL, NULL, NULL, &req), ncclSuccess); /* none */
	assert_null(req);
	assert_false(flush(c, &stale, 4096)); /* not a registration of ours */
	assert_false(flush(c, &gpu, 0));      /* nothing arrived: nothing to flush */
	assert_true(flush(c, &gpu, 4096));
	assert_non_null(strstr(unit_log, "198.18.1.1:4000"));
	assert_non_null(strstr(unit_log, "NCCL_NET_GDR_LEVEL=LOC"));
	unit_log_reset();
	assert_false(flush(c, &gpu, 4096)); /* once a process */
	free(c);
}

/*
 * The reads themselves, on fake endpoints: each device's fi_read answers from a script
 * (0, or an error such as -FI_EAGAIN, the last answer repeating), its CQ completes every
 * read posted once `complete` is set, and fi_cancel takes nothing back (a read cannot be).
 */
struct fake_dev {
	struct fid_ep ep;
	struct fid_cq cq;
	int answer[4], nanswer, calls;
	void *posted[8];
	int nposted, complete;
	uint64_t addr, key;
	fi_addr_t src;
};

static struct fake_dev fdev[3];

static ssize_t fake_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			 uint64_t addr, uint64_t key, void *context)
{
	struct fake_dev *f = braid_container_of(ep, struct fake_dev, ep);
	int i = f->calls < f->nanswer ? f->calls : f->nanswer - 1;

	(void)desc;
	f->calls++;
	assert_non_null(buf);
	assert_int_equal(len, 1);
	if (f->answer[i])
		return f->answer[i];
	assert_true(f->nposted < 8);
	f->posted[f->nposted++] = context;
	f->addr = addr;
	f->key = key;
	f->src = src;
	return 0;
}

static ssize_t fake_cancel(fid_t fid, void *context)
{
	(void)fid;
	(void)context;
	return -FI_ENOENT;
}

static ssize_t fake_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	struct fake_dev *f = braid_container_of(cq, struct fake_dev, cq);
	struct fi_cq_tagged_entry *e = buf;

	if (!f->complete || !f->nposted || !count)
		return -FI_EAGAIN;
	*e = (struct fi_cq_tagged_entry){ .op_context = f->posted[--f->nposted],
					  .flags = FI_RMA | FI_READ,
					  .len = 1 };
	return 1;
}

static struct fi_ops_rma fake_rma = { .size = sizeof(struct fi_ops_rma), .read = fake_read };
static struct fi_ops_ep fake_ep_ops = { .size = sizeof(struct fi_ops_ep), .cancel = fake_cancel };
static struct fi_ops_cq fake_cq_ops = { .size = sizeof(struct fi_ops_cq), .read = fake_cq_read };

static struct ofi_av_entry self_av[3];
static struct fid_mr fake_fid_mr[3];
static char rbuf[4096];

/* A receive comm on 3 fake devices that flush (BRAID_OFI_FLUSH=always), and the buffer's
 * registration on each; lane k's reads answer answers[k][0..n). */
static struct ofi_comm *flush_comm(struct ofi_mr *m, const int answers[3][2])
{
	struct ofi_comm *c = fake_comm(3, "fake0", "fake1");

	setenv("BRAID_OFI_FLUSH", "always", 1);
	set_env("2000", "100");
	c->magic = BRAID_MAGIC_RECV;
	assert_int_equal(braid_pool_init(&c->reqs, OFI_RECV_REQ_SIZE(3), 4, -1), 0);
	*m = (struct ofi_mr){ .magic = BRAID_MAGIC_MR, .range = { .type = NCCL_PTR_HOST } };
	on_lanes(m, 3);
	for (int k = 0; k < 3; k++) {
		fdev[k] = (struct fake_dev){ .ep = { .ops = &fake_ep_ops, .rma = &fake_rma },
					     .cq = { .ops = &fake_cq_ops },
					     .nanswer = 2 };
		fdev[k].answer[0] = answers[k][0];
		fdev[k].answer[1] = answers[k][1];
		devs[k].ep = &fdev[k].ep;
		devs[k].cq = &fdev[k].cq;
		devs[k].flush = 1;
		devs[k].mr_virt_addr = 1;
		c->lane[k].comm = c;
		self_av[k].addr = (fi_addr_t)(100 + k);
		c->lane[k].self_av = &self_av[k];
		fake_fid_mr[k].key = 0x1000 + (uint64_t)k;
		m->lane[k]->mr = &fake_fid_mr[k];
	}
	return c;
}

static void flush_comm_free(struct ofi_comm *c)
{
	for (int k = 0; k < 3; k++)
		m_clear(k);
	braid_pool_fini(&c->reqs);
	free(c);
	unsetenv("BRAID_OFI_FLUSH");
	braid_params_reset();
}

/* test() until done, at most 20 calls; the status */
static ncclResult_t test_until_done(void *req, int *calls)
{
	ncclResult_t rc = ncclSuccess;
	int done = 0;

	for (*calls = 0; !done && *calls < 20; ++*calls)
		rc = ofi_flush_test(req, &done, NULL);
	assert_true(done);
	return rc;
}

/* iflush of 64 bytes at data, registered as m: its request (one must come) */
static void *flush_request(struct ofi_comm *c, struct ofi_mr *m, void *data)
{
	void *mh = m, *req = NULL;
	int size = 64;

	assert_int_equal(ofi_iflush(c, 1, &data, &size, &mh, &req), ncclSuccess);
	assert_non_null(req);
	return req;
}

static void a_read_the_provider_refuses_for_now_goes_from_the_backlog(void **state)
{
	const int answers[3][2] = { { 0, 0 }, { -FI_EAGAIN, 0 }, { 0, 0 } };
	struct ofi_mr m;
	struct ofi_comm *c = flush_comm(&m, answers);
	void *data = rbuf + 100, *req;
	int calls;

	(void)state;
	req = flush_request(c, &m, data);
	assert_true(ofi_lane_backlogged(&c->lane[1])); /* refused for now: it waits there */
	for (int k = 0; k < 3; k++)
		fdev[k].complete = 1;
	assert_int_equal(test_until_done(req, &calls), ncclSuccess);
	for (int k = 0; k < 3; k++) { /* one byte of the buffer, with its key, from ourselves */
		assert_int_equal(fdev[k].addr, (uint64_t)(uintptr_t)data);
		assert_int_equal(fdev[k].key, 0x1000 + (uint64_t)k);
		assert_int_equal(fdev[k].src, 100 + k);
		assert_int_equal(fdev[k].nposted, 0);
		assert_int_equal(c->lane[k].outstanding, 0);
	}
	assert_int_equal(fdev[1].calls, 2);
	assert_false(ofi_lane_backlogged(&c->lane[1]));
	assert_int_equal(c->reqs.nfree, 4); /* back in the pool */
	assert_int_equal(m.users, 0);
	flush_comm_free(c);
}

static void a_read_that_fails_to_post_fails_its_flush_without_a_hang(void **state)
{
	/* lane 0 posts, lane 1 waits in its backlog, lane 2 fails: nothing of lane 1 may be
	 * left waiting for ever, and test() ends with the error once lane 0's read is in */
	const int answers[3][2] = { { 0, 0 }, { -FI_EAGAIN, 0 }, { -FI_EIO, -FI_EIO } };
	struct ofi_mr m;
	struct ofi_comm *c = flush_comm(&m, answers);
	void *req;
	int calls;

	(void)state;
	req = flush_request(c, &m, rbuf); /* lane 0's read is out: it stays until it is in */
	assert_non_null(strstr(unit_log, "the flush read on fake2"));
	assert_false(ofi_lane_backlogged(&c->lane[1]));
	fdev[0].complete = 1;
	assert_int_equal(test_until_done(req, &calls), ncclSystemError);
	assert_int_equal(fdev[1].calls, 1); /* never posted after all */
	assert_int_equal(c->reqs.nfree, 4);
	flush_comm_free(c);
}

static void a_flush_dropped_by_deregmr_ends_at_its_next_test(void **state)
{
	/* lane 1's read waits in its backlog when deregMr takes the memory back (as
	 * ncclCommAbort does): test() must end it, not wait for a read that never goes */
	const int answers[3][2] = { { 0, 0 }, { -FI_EAGAIN, -FI_EAGAIN }, { 0, 0 } };
	struct ofi_mr m;
	struct ofi_comm *c = flush_comm(&m, answers);
	void *req;
	int calls;

	(void)state;
	req = flush_request(c, &m, rbuf);
	assert_int_equal(m.users, 1);
	for (int k = 0; k < 3; k++)
		fdev[k].complete = 1;
	for (int k = 0; k < 3; k++) {
		pthread_mutex_lock(&devs[k].ep_lock);
		assert_int_equal(ofi_lane_drop_mr(&c->lane[k], &m), 0); /* nothing left out */
		pthread_mutex_unlock(&devs[k].ep_lock);
	}
	assert_false(ofi_lane_backlogged(&c->lane[1]));
	assert_int_equal(test_until_done(req, &calls), ncclSystemError);
	assert_true(calls <= 2);
	assert_int_equal(c->reqs.nfree, 4);
	flush_comm_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_flush_into_gpu_memory_is_told_once),
		cmocka_unit_test(a_read_the_provider_refuses_for_now_goes_from_the_backlog),
		cmocka_unit_test(a_read_that_fails_to_post_fails_its_flush_without_a_hang),
		cmocka_unit_test(a_flush_dropped_by_deregmr_ends_at_its_next_test),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
