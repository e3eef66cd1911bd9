// SPDX-License-Identifier: Apache-2.0
/* The shared-memory counter region: layout header, records, removal. */
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "plugin/clock.h"
#include "plugin/counters.h"
#include "plugin/params.h"
#include "tests/unit/unit.h"

static int exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static void region_lifecycle(void **state)
{
	char path[64];
	struct braid_ctr_region *r;

	(void)state;
	unsetenv("BRAID_COUNTERS");
	braid_params_reset();
	snprintf(path, sizeof(path), BRAID_CTR_PATH_FMT, (int)getpid());
	assert_int_equal(braid_counters_open(), 0);
	assert_string_equal(braid_counters_path(), path);
	assert_true(exists(path));
	r = braid_counters();
	assert_true(r->magic == BRAID_CTR_MAGIC);
	assert_int_equal(r->version, BRAID_CTR_VERSION);
	assert_int_equal(r->pid, getpid());
	assert_int_equal(r->dev_rec_size, sizeof(struct braid_ctr_dev));
	assert_int_equal(r->comm_rec_size, sizeof(struct braid_ctr_comm));

	/* A reader mapping the file sees what the plugin counts. */
	struct braid_ctr_comm *c = braid_counters_comm_get(2, BRAID_CTR_COMM_SEND, "192.0.2.1:5");
	struct braid_ctr_dev *d = braid_counters_dev(2);
	braid_ctr_count(c, d, BRAID_CTR(tx_bytes), 4096);
	braid_ctr_count(c, d, BRAID_CTR(tx_msgs), 1);
	FILE *f = fopen(path, "rb");
	struct braid_ctr_region *copy = malloc(sizeof(*copy));
	assert_non_null(f);
	assert_int_equal(fread(copy, sizeof(*copy), 1, f), 1);
	fclose(f);
	assert_int_equal(copy->devs[2].t.tx_bytes, 4096);
	assert_int_equal(copy->comms[c - r->comms].t.tx_msgs, 1);
	assert_string_equal(copy->comms[c - r->comms].peer, "192.0.2.1:5");
	free(copy);
	/* A comm that lost a NIC and got it back: the slot's next comm starts from 0. */
	c->failovers = 2;
	c->recoveries = 1;
	c->lanes[1].failovers = 2;
	c->lanes[1].recoveries = 1;
	braid_counters_comm_put(c);
	assert_int_equal(c->kind, BRAID_CTR_COMM_FREE);
	assert_ptr_equal(braid_counters_comm_get(2, BRAID_CTR_COMM_RECV, "192.0.2.1:6"), c);
	assert_int_equal(c->failovers, 0);
	assert_int_equal(c->recoveries, 0);
	assert_int_equal(c->lanes[1].failovers, 0);
	assert_int_equal(c->lanes[1].recoveries, 0);
	braid_counters_comm_put(c);

	braid_counters_close();
	assert_false(exists(path));
	braid_counters_close(); /* idempotent */
}

static void slots_run_out_gracefully(void **state)
{
	static struct braid_ctr_comm *got[BRAID_CTR_MAX_COMMS + 2];

	(void)state;
	assert_int_equal(braid_counters_open(), 0);
	for (int i = 0; i < BRAID_CTR_MAX_COMMS + 2; i++) {
		got[i] = braid_counters_comm_get(0, BRAID_CTR_COMM_RECV, "p");
		assert_non_null(got[i]);
	}
	/* The last ones share the overflow record; counting into it is still safe. */
	assert_ptr_equal(got[BRAID_CTR_MAX_COMMS], got[BRAID_CTR_MAX_COMMS + 1]);
	braid_ctr_add(&got[BRAID_CTR_MAX_COMMS]->t.errors, 1);
	for (int i = 0; i < BRAID_CTR_MAX_COMMS + 2; i++)
		braid_counters_comm_put(got[i]);
	braid_counters_close();
}

static void disabled_means_private(void **state)
{
	char path[64];

	(void)state;
	setenv("BRAID_COUNTERS", "0", 1);
	braid_params_reset();
	snprintf(path, sizeof(path), BRAID_CTR_PATH_FMT, (int)getpid());
	assert_int_equal(braid_counters_open(), 0);
	assert_false(exists(path));
	assert_string_equal(braid_counters_path(), "");
	braid_ctr_add(&braid_counters_dev(0)->t.rx_bytes, 5);
	assert_int_equal(braid_counters()->devs[0].t.rx_bytes, 5);
	braid_counters_close();
	unsetenv("BRAID_COUNTERS");
	braid_params_reset();
}

static int make_file(const char *path, int age_s)
{
	struct timeval tv[2];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= age_s;
	tv[1] = tv[0];
	assert_int_equal(futimes(fd, tv), 0);
	return fd;
}

/* Files of dead processes go; a live (locked) one and a just-created one stay. */
static void orphans_are_swept(void **state)
{
	const char *dead = "/dev/shm/braid-4000000001", *live = "/dev/shm/braid-4000000002";
	const char *fresh = "/dev/shm/braid-4000000003", *other = "/dev/shm/braid-x4000000004";
	int live_fd;

	(void)state;
	unsetenv("BRAID_COUNTERS");
	braid_params_reset();
	close(make_file(dead, 60));
	live_fd = make_file(live, 60);
	assert_int_equal(flock(live_fd, LOCK_SH), 0); /* as a running braid process holds it */
	close(make_file(fresh, 0));
	close(make_file(other, 60));
	assert_int_equal(braid_counters_open(), 0);
	assert_false(exists(dead));
	assert_true(exists(live));
	assert_true(exists(fresh));
	assert_true(exists(other)); /* not braid's naming: never touched */
	braid_counters_close();
	close(live_fd);
	unlink(live);
	unlink(fresh);
	unlink(other);
}

/* The stall clock starts at the first test() that finds a request waiting (isend and irecv
 * read no clock); a request counts once, when it has waited longer than BRAID_STALL_MS. */
static void stall_counted_once_from_first_wait(void **state)
{
	const uint64_t ms = 1000000ULL, t0 = 5000 * ms;
	uint64_t since = 0;
	uint8_t stalled = 0;

	(void)state;
	setenv("BRAID_STALL_MS", "300", 1);
	braid_params_reset();
	assert_int_equal(braid_ctr_stall_due(&since, t0, &stalled), 0);
	assert_int_equal(since, t0);
	assert_int_equal(braid_ctr_stall_due(&since, t0 + 300 * ms, &stalled), 0);
	assert_int_equal(braid_ctr_stall_due(&since, t0 + 301 * ms, &stalled), 1);
	assert_int_equal(stalled, 1);
	assert_int_equal(braid_ctr_stall_due(&since, t0 + 900 * ms, &stalled), 0);
	unsetenv("BRAID_STALL_MS");
	braid_params_reset();
}

/* Calls that wait read the clock on the first call and then once in BRAID_TICK_CALLS:
 * never two reads closer than that, never more than that many calls without one. */
static void waiting_calls_read_the_clock_on_a_tick(void **state)
{
	uint8_t left = 0;
	int reads = 0, last = -1;

	(void)state;
	assert_true(braid_tick_due(&left)); /* the first waiting call */
	for (int call = 1; call <= 10 * (int)BRAID_TICK_CALLS; call++) {
		if (!braid_tick_due(&left))
			continue;
		assert_int_equal(call - (last < 0 ? 0 : last), BRAID_TICK_CALLS);
		last = call;
		reads++;
	}
	assert_int_equal(reads, 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(region_lifecycle),
		cmocka_unit_test(slots_run_out_gracefully),
		cmocka_unit_test(disabled_means_private),
		cmocka_unit_test(orphans_are_swept),
		cmocka_unit_test(stall_counted_once_from_first_wait),
		cmocka_unit_test(waiting_calls_read_the_clock_on_a_tick),
	};

	return cmocka_run_group_tests_name("counters", tests, NULL, NULL);
}
