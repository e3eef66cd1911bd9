// SPDX-License-Identifier: Apache-2.0
/*
 * plugin/judge.c, as NCCL needs it of any backend: a comm's first error sticks (and is
 * counted once); after the peer's goodbye new requests are refused with one WARN; the
 * goodbye a closing comm sends names exactly the buffers its peer may still count on.
 */
#include <stdio.h>
#include <string.h>

#include "plugin/judge.h"
#include "plugin/log.h"
#include "tests/unit/unit.h"

static void who(const void *comm, char *buf, size_t len)
{
	snprintf(buf, len, "ib: %s comm dev0:1", (const char *)comm);
}

static void first_error_sticks(void **state)
{
	static struct braid_ctr_comm cc;
	static struct braid_ctr_dev dc;
	ncclResult_t err = ncclSuccess, st = ncclSuccess;

	(void)state;
	braid_judge_comm_fail(&err, ncclRemoteError, &cc, &dc);
	braid_judge_comm_fail(&err, ncclSystemError, &cc, &dc);
	assert_int_equal(err, ncclRemoteError);
	assert_int_equal(cc.t.errors, 1);
	assert_int_equal(dc.t.errors, 1);
	err = ncclSuccess;
	braid_judge_comm_fail(&err, ncclSystemError, NULL, NULL); /* in set-up: no counters */
	assert_int_equal(err, ncclSystemError);
	braid_judge_req_fail(&st, ncclSystemError);
	braid_judge_req_fail(&st, ncclRemoteError);
	assert_int_equal(st, ncclSystemError);
}

static void refused_after_goodbye(void **state)
{
	static struct braid_link lk;

	(void)state;
	braid_log_set_logger(unit_logger);
	snprintf(lk.peer, sizeof(lk.peer), "10.0.0.2:4000");
	unit_log_reset();
	lk.state = BRAID_LINK_UP;
	assert_int_equal(braid_judge_refuse_after_bye(&lk, 1, who, "send"), 0);
	assert_false(braid_judge_due(&lk, ncclSuccess));
	assert_int_equal(unit_warns, 0);
	lk.state = BRAID_LINK_BYE;
	assert_int_equal(braid_judge_refuse_after_bye(&lk, 0, who, "receive"), 1);
	assert_int_equal(unit_warns, 1);
	assert_non_null(strstr(unit_log, "ib: receive comm dev0:1: peer 10.0.0.2:4000 closed its "
					 "comm; no receive can complete any more"));
	assert_true(braid_judge_due(&lk, ncclSuccess));
	assert_false(braid_judge_due(&lk, ncclRemoteError)); /* already judged */
}

/* The receiver filled every buffer but those of its requests still waiting. */
static void receiver_goodbye(void **state)
{
	const struct braid_judge_wait w[2] = {
		{ .first = 4, .n = 3, .done = 0x2 }, /* 4 and 6 still waiting, 5 filled */
		{ .first = 8, .n = 2, .done = 0 },
	};
	struct braid_link_bye bye;
	const int want[12] = { 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0 };

	(void)state;
	braid_judge_bye_recv(&bye, 10, w, 2);
	for (int b = 0; b < 12; b++)
		assert_int_equal(braid_bye_has(&bye, (uint64_t)b), want[b]);
	braid_judge_bye_recv(&bye, 10, NULL, 0); /* nothing waits: all 10 */
	for (int b = 0; b < 12; b++)
		assert_int_equal(braid_bye_has(&bye, (uint64_t)b), b < 10);
}

/* The sender sent to every buffer below sent_upto and to the used ones of its group. */
static void sender_goodbye(void **state)
{
	struct braid_link_bye bye;

	(void)state;
	braid_judge_bye_send(&bye, 20, 4, 0x5);
	assert_true(braid_bye_has(&bye, 19));
	assert_true(braid_bye_has(&bye, 20));
	assert_false(braid_bye_has(&bye, 21));
	assert_true(braid_bye_has(&bye, 22));
	assert_false(braid_bye_has(&bye, 23));
	assert_false(braid_bye_has(&bye, 24));
	braid_judge_bye_send(&bye, 20, 0, 0);
	assert_true(braid_bye_has(&bye, 19));
	assert_false(braid_bye_has(&bye, 20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_error_sticks),
		cmocka_unit_test(refused_after_goodbye),
		cmocka_unit_test(receiver_goodbye),
		cmocka_unit_test(sender_goodbye),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
