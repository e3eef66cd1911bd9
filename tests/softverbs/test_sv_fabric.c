// SPDX-License-Identifier: MIT
/*
 * softverbs cmocka tests of the fabric model and fault injection: RoCEv2
 * UDP source ports as Linux computes them, uplink choice by 5-tuple hash,
 * per-uplink, per-device and per-QP counters (stats file and softverbs-stat),
 * uplink rate limit and delay, device line rates (SOFTVERBS_DEVICE_RATE_MBPS:
 * parsing, and that devices are paced independently), and each
 * SOFTVERBS_FAULT_* knob.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "tests/softverbs/sv_stats.h"
#include "tests/softverbs/sv_test_util.h"

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define NPAIRS 8
/* The devices of this test: svt_fabric_init's, plus a second RoCE device. */
#define DEVICES "svroce0:roce:1,svib0:ib:2,svroce1:roce:1"

static int clear_env(void **state)
{
	static const char *const vars[] = {
		"SOFTVERBS_UPLINKS",
		"SOFTVERBS_UPLINK_RATE_MBPS",
		"SOFTVERBS_UPLINK_DELAY_US",
		"SOFTVERBS_FAULT_CUT_AFTER_BYTES",
		"SOFTVERBS_FAULT_CUT_QP",
		"SOFTVERBS_FAULT_FAIL_REG",
		"SOFTVERBS_FAULT_REMOTE_ACCESS",
		"SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS",
		"SOFTVERBS_FAULT_PORT_UP_AFTER_MS",
		"SOFTVERBS_POST_SEND_DELAY_US",
		"SOFTVERBS_DEVICE_RATE_MBPS",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	svt_flow_label = 0;
	return 0;
}

/* The documented models, written out independently of the library. */
static uint16_t linux_sport(uint32_t lqpn, uint32_t rqpn, uint32_t fl)
{
	if (!fl) {
		uint64_t v = (uint64_t)lqpn * rqpn;

		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)(v & 0xfffff);
	}
	return (uint16_t)(((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) | 0xc000);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static int uplink_of(uint32_t sip, uint32_t dip, uint16_t sport, int n)
{
	uint64_t h = mix(((uint64_t)ntohl(sip) << 32) | ntohl(dip)) ^
		     mix((17ull << 32) | ((uint64_t)sport << 16) | 4791u);

	return (int)(h % (uint64_t)n);
}

/* This process's stats file, mapped read-only. */
static const struct sv_stats_file *my_stats(void)
{
	char dir[256], path[512], prefix[32];
	const struct sv_stats_file *f = NULL;
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/stats", svt_fabric());
	snprintf(prefix, sizeof(prefix), "%d.", (int)getpid());
	d = opendir(dir);
	assert_non_null(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
	closedir(d);
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(f != MAP_FAILED);
	assert_int_equal(f->magic, SV_STATS_MAGIC);
	return f;
}

static const struct sv_stats_device *stats_dev(const struct sv_stats_file *f, const char *name)
{
	for (uint32_t i = 0; i < f->ndevices && i < SV_STATS_MAX_DEVICES; i++)
		if (!strncmp(f->device[i].name, name, sizeof(f->device[i].name)))
			return &f->device[i];
	fail_msg("device %s not in the stats file", name);
	return NULL;
}

static const struct sv_stats_qp *stats_qp(const struct sv_stats_file *f, uint32_t qpn)
{
	for (int i = 0; i < SV_STATS_MAX_QPS; i++)
		if (f->qp[i].qpn == qpn)
			return &f->qp[i];
	fail_msg("QP 0x%06x not in the stats file", qpn);
	return NULL;
}

static void test_sport_uplinks_stats(void **state)
{
	struct svt_end a[NPAIRS], b[NPAIRS];
	static char buf[1 << 20];
	struct ibv_mr *amr[NPAIRS], *bmr[NPAIRS];
	const struct sv_stats_file *f;
	uint64_t want[4] = { 0 };
	struct ibv_wc wc;
	char cmd[600], line[512], exe[256];
	int seen_qp = 0, seen_ul = 0, used = 0;
	FILE *p;
	ssize_t n;

	setenv("SOFTVERBS_UPLINKS", "4", 1);
	for (int i = 0; i < NPAIRS; i++) {
		/* The last pair carries a GRH flow label: it picks the sport. */
		svt_flow_label = i == NPAIRS - 1 ? 0x12345 : 0;
		assert_int_equal(svt_pair(&a[i], &b[i], "svroce0"), 0);
		amr[i] = ibv_reg_mr(a[i].pd, buf, sizeof(buf), ACC_ALL);
		bmr[i] = ibv_reg_mr(b[i].pd, buf, sizeof(buf), ACC_ALL);
		assert_non_null(amr[i]);
		assert_non_null(bmr[i]);
	}
	f = my_stats();
	assert_int_equal(f->nuplinks, 4);
	for (int i = 0; i < NPAIRS; i++) {
		const struct sv_stats_qp *s = stats_qp(f, a[i].qp->qp_num);
		uint32_t lq = a[i].qp->qp_num, rq = b[i].qp->qp_num;
		uint16_t sport = linux_sport(lq, rq, i == NPAIRS - 1 ? 0x12345 : 0);
		union ibv_gid gid;
		uint32_t ip;

		ibv_query_gid(a[i].ctx, 1, 3, &gid);
		memcpy(&ip, &gid.raw[12], 4);
		assert_int_equal(s->dest_qpn, rq);
		assert_int_equal(s->sport, sport);
		assert_int_equal(s->sip, ip);
		assert_int_equal(s->dip, ip);
		assert_int_equal(s->uplink, uplink_of(ip, ip, sport, 4));
		/* Both ends of an RC pair get the same sport from the QPN pair. */
		if (i != NPAIRS - 1)
			assert_int_equal(stats_qp(f, rq)->sport, sport);
		want[s->uplink] += sizeof(buf) * (uint64_t)(i + 1);
		used |= 1 << s->uplink;
	}
	/* QP i sends (i + 1) MiB. */
	for (int i = 0; i < NPAIRS; i++) {
		for (int k = 0; k <= i; k++)
			assert_int_equal(svt_post_rdma(a[i].qp, IBV_WR_RDMA_WRITE, (uint64_t)k, buf,
						       sizeof(buf), amr[i]->lkey, (uintptr_t)buf,
						       bmr[i]->rkey, 0, IBV_SEND_SIGNALED),
					 0);
		for (int k = 0; k <= i; k++) {
			assert_int_equal(svt_wait_wc(a[i].cq, &wc, 5000), 0);
			assert_int_equal(wc.status, IBV_WC_SUCCESS);
		}
	}
	for (int i = 0; i < NPAIRS; i++) {
		assert_int_equal(stats_qp(f, a[i].qp->qp_num)->tx_bytes, sizeof(buf) * (i + 1));
		assert_int_equal(stats_qp(f, b[i].qp->qp_num)->rx_bytes, sizeof(buf) * (i + 1));
	}
	for (int u = 0; u < 4; u++)
		assert_int_equal(f->uplink[u].tx_bytes, want[u]);
	printf("softverbs: %d pairs spread over uplinks mask 0x%x\n", NPAIRS, used);

	/* softverbs-stat, next to this test binary, reads the same counters. */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(cmd, sizeof(cmd), "%s/softverbs-stat -f %s", exe, svt_fabric());
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char key[64];
		unsigned int u;
		unsigned long long bytes;

		snprintf(key, sizeof(key), "qp pid=%d qpn=0x%06x ", (int)getpid(), a[0].qp->qp_num);
		if (!strncmp(line, key, strlen(key)) && strstr(line, " tx_bytes=1048576 "))
			seen_qp++;
		if (sscanf(line, "uplink id=%u tx_bytes=%llu", &u, &bytes) == 2) {
			assert_true(u < 4);
			assert_int_equal(bytes, want[u]);
			seen_ul++;
		}
	}
	assert_int_equal(pclose(p), 0);
	assert_int_equal(seen_qp, 1);
	assert_int_equal(seen_ul, 4);

	munmap((void *)f, sizeof(*f));
	for (int i = 0; i < NPAIRS; i++) {
		ibv_dereg_mr(amr[i]);
		ibv_dereg_mr(bmr[i]);
		svt_end_fini(&a[i]);
		svt_end_fini(&b[i]);
	}
}

/* Path of softverbs-stat, next to this test binary. */
static void stat_tool(char *path, size_t len)
{
	char exe[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(path, len, "%s/softverbs-stat", exe);
}

/* Open svroce0 with SOFTVERBS_DEVICE_RATE_MBPS=rates (the engine reads it at
 * its start); what softverbs wrote to stderr meanwhile goes to log. */
static struct ibv_context *open_with_rates(const char *rates, char *log, size_t len)
{
	struct ibv_context *ctx;
	FILE *tmp = tmpfile();
	int saved = dup(2);
	size_t n;

	assert_non_null(tmp);
	assert_true(saved >= 0);
	setenv("SOFTVERBS_DEVICE_RATE_MBPS", rates, 1);
	fflush(stderr);
	assert_true(dup2(fileno(tmp), 2) == 2);
	ctx = svt_open("svroce0");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(log, 1, len - 1, tmp);
	log[n] = 0;
	fclose(tmp);
	assert_non_null(ctx);
	return ctx;
}

static void test_device_rate_config(void **state)
{
	static const char *const bad[] = {
		"nosuch:10",  "svroce0",          ":5",
		"svroce0:",   "svroce0:abc",      "svroce0:10x",
		"svroce0:-1", "svroce0:10000001", "svroce0:99999999999999999999999",
	};
	struct ibv_context *ctx;
	const struct sv_stats_file *f;
	char log[2048], cmd[600], line[512], key[128];
	int seen = 0;
	FILE *p;

	/* Left to right: '*' first, then per device; 0 is no limit. */
	ctx = open_with_rates("*:100,svroce1:400,svib0:0", log, sizeof(log));
	assert_string_equal(log, "");
	f = my_stats();
	assert_int_equal(f->ndevices, 3);
	assert_int_equal(stats_dev(f, "svroce0")->rate, 100000000);
	assert_int_equal(stats_dev(f, "svib0")->rate, 0);
	assert_int_equal(stats_dev(f, "svroce1")->rate, 400000000);
	/* softverbs-stat shows them. */
	stat_tool(cmd, sizeof(cmd));
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " -f %s", svt_fabric());
	p = popen(cmd, "r");
	assert_non_null(p);
	snprintf(key, sizeof(key), "device pid=%d name=svroce1 rate_mbps=400 tx_bytes=0 ",
		 (int)getpid());
	while (fgets(line, sizeof(line), p))
		if (!strncmp(line, key, strlen(key)))
			seen++;
	assert_int_equal(pclose(p), 0);
	assert_int_equal(seen, 1);
	munmap((void *)f, sizeof(*f));
	ibv_close_device(ctx);

	/* A bad entry is named, and the whole variable is ignored (the good
	 * entry before it too). */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char rates[128];

		snprintf(rates, sizeof(rates), "svroce1:300,%s", bad[i]);
		ctx = open_with_rates(rates, log, sizeof(log));
		printf("softverbs: %s=%s: %s", "SOFTVERBS_DEVICE_RATE_MBPS", rates, log);
		assert_non_null(strstr(log, "SOFTVERBS_DEVICE_RATE_MBPS"));
		assert_non_null(strstr(log, bad[i]));
		assert_non_null(strstr(log, "ignored"));
		f = my_stats();
		for (uint32_t d = 0; d < f->ndevices; d++)
			assert_int_equal(f->device[d].rate, 0);
		munmap((void *)f, sizeof(*f));
		ibv_close_device(ctx);
	}
}

/* Time for one signaled WRITE of len bytes on a fresh pair. */
static uint64_t timed_write(size_t len, int count)
{
	struct svt_end a, b;
	char *buf = calloc(1, len);
	struct ibv_mr *amr, *bmr;
	struct ibv_wc wc;
	uint64_t t0, dt;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	amr = ibv_reg_mr(a.pd, buf, len, ACC_ALL);
	bmr = ibv_reg_mr(b.pd, buf, len, ACC_ALL);
	t0 = svt_now_ms();
	for (int i = 0; i < count; i++)
		assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, buf, (uint32_t)len,
					       amr->lkey, (uintptr_t)buf, bmr->rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	for (int i = 0; i < count; i++) {
		assert_int_equal(svt_wait_wc(a.cq, &wc, 20000), 0);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
	}
	dt = svt_now_ms() - t0;
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
	free(buf);
	return dt;
}

static void test_uplink_rate_and_delay(void **state)
{
	uint64_t dt;

	/* 200 MB/s on every uplink: 40 MB takes at least 0.2 s. */
	setenv("SOFTVERBS_UPLINK_RATE_MBPS", "*:200", 1);
	dt = timed_write(4 << 20, 10);
	printf("softverbs: 40 MiB at 200 MB/s took %llu ms\n", (unsigned long long)dt);
	assert_true(dt >= 190);
	unsetenv("SOFTVERBS_UPLINK_RATE_MBPS");

	/* 30 ms extra per message on uplink 0 (the only one). */
	setenv("SOFTVERBS_UPLINK_DELAY_US", "0:30000", 1);
	dt = timed_write(64, 3);
	assert_true(dt >= 85);
}

/* A caller descheduled right after ibv_post_send: the call returns only after the delay,
 * the WR having gone out meanwhile. */
static void test_post_send_delay(void **state)
{
	struct svt_end a, b;
	char buf[64] = { 0 };
	struct ibv_mr *amr, *bmr;
	struct ibv_wc wc;
	uint64_t t0, dt;

	setenv("SOFTVERBS_POST_SEND_DELAY_US", "40000", 1);
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	amr = ibv_reg_mr(a.pd, buf, sizeof(buf), ACC_ALL);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);
	t0 = svt_now_ms();
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, buf, sizeof(buf), amr->lkey,
				       (uintptr_t)buf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	dt = svt_now_ms() - t0;
	assert_true(dt >= 39);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 20000), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_fault_fail_reg(void **state)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *m1, *m2, *m3;
	char buf[64];

	setenv("SOFTVERBS_FAULT_FAIL_REG", "2", 1);
	ctx = svt_open("svib0");
	pd = ibv_alloc_pd(ctx);
	m1 = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	m2 = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(errno, ENOMEM);
	m3 = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(m1);
	assert_null(m2);
	assert_non_null(m3);
	ibv_dereg_mr(m1);
	ibv_dereg_mr(m3);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

static void test_fault_remote_access(void **state)
{
	struct svt_end a, b;
	char buf[256] = { 0 };
	struct ibv_mr *amr, *bmr;
	struct ibv_wc wc;

	/* The 2nd remote RDMA operation this process serves fails. */
	setenv("SOFTVERBS_FAULT_REMOTE_ACCESS", "2", 1);
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	amr = ibv_reg_mr(a.pd, buf, sizeof(buf), ACC_ALL);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);
	for (int i = 0; i < 2; i++)
		assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, buf, 64,
					       amr->lkey, (uintptr_t)buf, bmr->rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.status, IBV_WC_REM_ACCESS_ERR);
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_fault_cut_link(void **state)
{
	struct svt_end a, b;
	static char buf[1 << 20];
	struct ibv_mr *amr, *bmr;
	struct ibv_wc wc;

	/* The 1st QP of the process (a) loses its link after 1.5 MiB. */
	setenv("SOFTVERBS_FAULT_CUT_AFTER_BYTES", "1572864", 1);
	setenv("SOFTVERBS_FAULT_CUT_QP", "1", 1);
	assert_int_equal(svt_pair(&a, &b, "svib0"), 0);
	amr = ibv_reg_mr(a.pd, buf, sizeof(buf), ACC_ALL);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);
	/* b -> a is unaffected. */
	assert_int_equal(svt_post_rdma(b.qp, IBV_WR_RDMA_WRITE, 9, buf, sizeof(buf), bmr->lkey,
				       (uintptr_t)buf, amr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_wait_wc(b.cq, &wc, 5000), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	/* 1 MiB fits under the cut... */
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 0, buf, sizeof(buf), amr->lkey,
				       (uintptr_t)buf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.wr_id, 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	/* ... the next MiB crosses it: retries run out, the rest is flushed. */
	for (int i = 1; i < 3; i++)
		assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, buf,
					       sizeof(buf), amr->lkey, (uintptr_t)buf, bmr->rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wc.status, IBV_WC_RETRY_EXC_ERR);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void expect_port_event(struct ibv_context *ctx, enum ibv_event_type type)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_int_equal(ibv_get_async_event(ctx, &ev), 0);
	assert_int_equal(ev.event_type, type);
	assert_int_equal(ev.element.port_num, 1);
	ibv_ack_async_event(&ev);
}

static void test_fault_port_down(void **state)
{
	struct svt_end a, b;
	char buf[64] = { 0 };
	struct ibv_mr *amr, *bmr;
	struct ibv_port_attr pa;
	struct ibv_wc wc;

	setenv("SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS", "150", 1);
	setenv("SOFTVERBS_FAULT_PORT_UP_AFTER_MS", "400", 1);
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	amr = ibv_reg_mr(a.pd, buf, sizeof(buf), ACC_ALL);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, buf, 8, amr->lkey,
				       (uintptr_t)buf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);

	expect_port_event(a.ctx, IBV_EVENT_PORT_ERR);
	assert_int_equal(ibv_query_port(a.ctx, 1, &pa), 0);
	assert_int_equal(pa.state, IBV_PORT_DOWN);
	/* Traffic over a down port: retries run out. */
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, buf, 8, amr->lkey,
				       (uintptr_t)buf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.status, IBV_WC_RETRY_EXC_ERR);

	expect_port_event(a.ctx, IBV_EVENT_PORT_ACTIVE);
	assert_int_equal(ibv_query_port(a.ctx, 1, &pa), 0);
	assert_int_equal(pa.state, IBV_PORT_ACTIVE);
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/* Process CPU time, ms: a thread spinning instead of waiting shows here. */
static uint64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_fault_port_down_for_good(void **state)
{
	struct svt_end a, b;
	char buf[64] = { 0 };
	struct ibv_mr *amr, *bmr;
	struct ibv_wc wc;
	uint64_t t0, c0;

	/* The port never comes back. Queued WRs wait without spinning, the
	 * oldest fails once the retry budget is spent, the rest are flushed,
	 * and destroy_qp returns at once even with WRs queued. */
	setenv("SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS", "50", 1);
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	amr = ibv_reg_mr(a.pd, buf, sizeof(buf), ACC_ALL);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);
	expect_port_event(a.ctx, IBV_EVENT_PORT_ERR);
	t0 = svt_now_ms();
	c0 = cpu_ms();
	for (int i = 0; i < 3; i++)
		assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, buf, 8,
					       amr->lkey, (uintptr_t)buf, bmr->rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
	assert_int_equal(wc.wr_id, 0);
	assert_int_equal(wc.status, IBV_WC_RETRY_EXC_ERR);
	for (int i = 1; i < 3; i++) {
		assert_int_equal(svt_wait_wc(a.cq, &wc, 5000), 0);
		assert_int_equal(wc.wr_id, (uint64_t)i);
		assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	}
	/* svt_wait_wc polls, so one core is busy here; the engine is not. */
	printf("softverbs: port down: RETRY_EXC after %llu ms, %llu ms CPU\n",
	       (unsigned long long)(svt_now_ms() - t0), (unsigned long long)(cpu_ms() - c0));
	assert_true(cpu_ms() - c0 <= (svt_now_ms() - t0) * 3 / 2 + 20);

	/* WRs queued on a down port at destroy time. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(svt_post_rdma(b.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, buf, 8,
					       bmr->lkey, (uintptr_t)buf, amr->rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	t0 = svt_now_ms();
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
	assert_true(svt_now_ms() - t0 < 1000);
}

static int group_setup(void **state)
{
	svt_fabric_init();
	setenv("SOFTVERBS_DEVICES", DEVICES, 1);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_sport_uplinks_stats, clear_env),
		cmocka_unit_test_teardown(test_uplink_rate_and_delay, clear_env),
		cmocka_unit_test_teardown(test_device_rate_config, clear_env),
		cmocka_unit_test_teardown(test_post_send_delay, clear_env),
		cmocka_unit_test_teardown(test_fault_fail_reg, clear_env),
		cmocka_unit_test_teardown(test_fault_remote_access, clear_env),
		cmocka_unit_test_teardown(test_fault_cut_link, clear_env),
		cmocka_unit_test_teardown(test_fault_port_down, clear_env),
		cmocka_unit_test_teardown(test_fault_port_down_for_good, clear_env),
	};

	return cmocka_run_group_tests(tests, group_setup, svt_fabric_group_teardown);
}
