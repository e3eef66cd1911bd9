// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi/ofi_cq.c's error completions under a fake CQ: an error fails its operation's lane
 * only, and a truncated receive (FI_ETRUNC: the peer sent more than the buffer it was
 * announced) is told to the peer over the comm's link by the comm's own thread, before its
 * goodbye, once. The peer that sent past an announced size is broken; without the word it
 * would see only a receiver that went away.
 */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/unit/ofi_fake.h"

/* The fake CQ: `err` for the one error entry it holds (0: none), on `op` */
static struct fake_cq {
	struct fid_cq cq;
	int err;
	struct ofi_op *op;
	int readerrs;
} fake;

static struct fi_ops_cq fake_ops;

static ssize_t fake_read(struct fid_cq *cq, void *buf, size_t count)
{
	(void)cq;
	(void)buf;
	(void)count;
	return fake.err ? -FI_EAVAIL : -FI_EAGAIN;
}

static ssize_t fake_readerr(struct fid_cq *cq, struct fi_cq_err_entry *e, uint64_t flags)
{
	(void)cq;
	(void)flags;
	if (!fake.err)
		return -FI_EAGAIN;
	*e = (struct fi_cq_err_entry){ .op_context = &fake.op->fictx, .err = fake.err };
	fake.err = 0;
	fake.readerrs++;
	return 1;
}

static const char *fake_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf,
				 size_t len)
{
	(void)cq;
	(void)prov_errno;
	(void)err_data;
	snprintf(buf, len, "fake provider error");
	return buf;
}

static struct fi_ops_cq fake_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = fake_read,
	.readerr = fake_readerr,
	.strerror = fake_strerror,
};

/* How many truncation reports came over the link's other end since the last look (the
 * text counted, so that two reports read at once count as two). */
static int peer_heard(int fd)
{
	const char *text = "a message larger than its receive buffer";
	char buf[4096];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	int heard = 0;

	for (const char *p = buf, *end = buf + (n > 0 ? n : 0);
	     (p = memmem(p, (size_t)(end - p), text, strlen(text))) != NULL; p++)
		heard++;
	if (n > 0)
		assert_true(heard > 0); /* nothing else is sent on it */
	return heard;
}

/* A fused receive comm whose lane `k` has one receive posted, completing with error err;
 * the comm says goodbye twice (the close path). Returns how many times the peer heard of
 * a truncation. */
static int receive_fails_with(int err, int k)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct braid_link lk = { 0 };
	struct braid_link_bye bye;
	struct ofi_op op = { 0 };
	struct ofi_req *r;
	int sv[2], heard = 0;

	set_env("2000", "100");
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	braid_oob_chan_init(&lk.chan, sv[0]);
	c->link = &lk;
	for (int i = 0; i < 2; i++) {
		c->lane[i].comm = c;
		devs[i].cq = &fake.cq;
	}
	assert_int_equal(braid_pool_init(&c->reqs, OFI_RECV_REQ_SIZE(2), 4, -1), 0);
	r = braid_pool_get(&c->reqs);
	assert_non_null(r);
	memset(r, 0, OFI_RECV_REQ_SIZE(2));
	r->magic = BRAID_MAGIC_REQ;
	r->lanes = 3;
	r->l[k].pending = 1;
	c->lane[k].outstanding = 1;
	devs[k].rx_posted = 1;
	op = (struct ofi_op){ .type = OFI_OP_RECV, .lane = (uint8_t)k, .req = r, .l = &c->lane[k] };
	fake = (struct fake_cq){ .cq = { .ops = &fake_ops }, .err = err, .op = &op };

	pthread_mutex_lock(&devs[k].ep_lock);
	assert_int_equal(ofi_dev_progress(&devs[k]), 0);
	pthread_mutex_unlock(&devs[k].ep_lock);
	assert_int_equal(fake.readerrs, 1);
	/* the lane failed, not its sibling; its receive is off the provider */
	assert_int_equal(c->lane[k].error, ncclRemoteError);
	assert_int_equal(c->lane[!k].error, ncclSuccess);
	assert_int_equal(r->l[k].pending, 0);
	assert_int_equal(c->lane[k].outstanding, 0);
	assert_int_equal(devs[k].rx_posted, 0);
	/* the CQ reader told nobody: it may be another comm's thread, which must not write
	 * this comm's link */
	assert_int_equal(peer_heard(sv[1]), 0);
	for (int i = 0; i < 2; i++) {
		ofi_comm_bye(c, &bye);
		heard += peer_heard(sv[1]);
	}
	braid_pool_fini(&c->reqs);
	close(sv[0]);
	close(sv[1]);
	free(c);
	return heard;
}

static void a_truncated_receive_is_told_to_the_peer_once(void **state)
{
	(void)state;
	assert_int_equal(receive_fails_with(FI_ETRUNC, 0), 1);
	assert_non_null(strstr(unit_log, "a receive failed"));
	assert_int_equal(receive_fails_with(FI_ETRUNC, 1), 1);
}

static void another_error_is_not_told_as_a_truncation(void **state)
{
	(void)state;
	assert_int_equal(receive_fails_with(FI_EIO, 0), 0);
	assert_non_null(strstr(unit_log, "fake provider error"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_truncated_receive_is_told_to_the_peer_once),
		cmocka_unit_test(another_error_is_not_told_as_a_truncation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
