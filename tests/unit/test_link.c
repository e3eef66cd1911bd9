// SPDX-License-Identifier: Apache-2.0
/*
 * plugin/link.c, the set-up and goodbye both backends share, over real loopback sockets
 * with a toy backend: strangers (a port scan, an HTTP probe, a braid connector holding
 * another listener's nonce as a rank of an earlier job would, an idle connection) are
 * dropped and counted, without a WARN, while the real peer gets through; a goodbye says
 * which buffers the peer wrote, and a hang-up without one is a death.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "plugin/counters.h"
#include "plugin/handle.h"
#include "plugin/link.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "tests/unit/unit.h"

/* The toy backend: a comm is its link and the blob the peer sent. */
struct toy {
	struct braid_link *lk;
	char peer_blob[32];
	int discarded;
};

static int toy_hello(void *comm, void *blob, uint32_t *len)
{
	(void)comm;
	memcpy(blob, "connector", 10);
	*len = 10;
	return 0;
}

static int toy_finish(void *comm, const void *blob, uint32_t len)
{
	struct toy *t = comm;

	if (len > sizeof(t->peer_blob))
		return -EPROTO;
	memcpy(t->peer_blob, blob, len);
	return 0;
}

static int toy_answer(void *listen_comm, struct braid_link *lk, const void *blob, uint32_t len,
		      void *reply, uint32_t *rlen, void **comm)
{
	struct toy *t = calloc(1, sizeof(*t));

	(void)listen_comm;
	if (!t || len > sizeof(t->peer_blob))
		return -ENOMEM;
	t->lk = lk;
	memcpy(t->peer_blob, blob, len);
	memcpy(reply, "listener", 9);
	*rlen = 9;
	*comm = t;
	return 0;
}

static void toy_discard(void *comm)
{
	struct toy *t = comm;

	braid_link_close(t->lk, NULL);
	free(t);
}

static const struct braid_link_ops toy_ops = {
	.who = "toy",
	.kind = BRAID_BACKEND_OFI,
	.hello = toy_hello,
	.finish = toy_finish,
	.answer = toy_answer,
	.discard = toy_discard,
};

static struct braid_ctr_dev ctr;

static void setup_env(void)
{
	setenv("BRAID_SOCKET_IFNAME", "lo", 1);
	setenv("BRAID_LIVENESS_MS", "1", 1);
	setenv("BRAID_CONN_TIMEOUT_MS", "3000", 1);
	braid_params_reset();
	braid_params_load();
	braid_log_set_logger(unit_logger);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* Connect the toy backend through the listener; both ends, or fail the test. */
static void connect_pair(struct braid_listener *l, const unsigned char *handle, struct toy **client,
			 struct toy **server)
{
	struct braid_link *lk = NULL;
	void *comm = NULL;
	int rc = -EAGAIN;

	*client = calloc(1, sizeof(**client));
	assert_non_null(*client);
	assert_int_equal(braid_link_dial(&toy_ops, 0, handle, &lk), ncclSuccess);
	(*client)->lk = lk;
	for (int i = 0; i < 4000 && (rc == -EAGAIN || !comm); i++) {
		if (rc == -EAGAIN)
			rc = braid_link_connect_step(lk, &toy_ops, *client);
		assert_int_equal(braid_listener_accept(l, &toy_ops, NULL, &comm), ncclSuccess);
		sleep_ms(1);
	}
	assert_int_equal(rc, 0);
	assert_non_null(comm);
	*server = comm;
	assert_string_equal((*client)->peer_blob, "listener");
	assert_string_equal((*server)->peer_blob, "connector");
}

static int raw_connect(const struct braid_listener *l)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char host[64];
	unsigned port;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(sscanf(l->addr, "%63[^:]:%u", host, &port), 2);
	sin.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, host, &sin.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* accept() over and over for a while: it must never fail nor return a comm. */
static void accept_nothing(struct braid_listener *l, int ms)
{
	void *comm = NULL;

	for (int i = 0; i < ms; i++) {
		assert_int_equal(braid_listener_accept(l, &toy_ops, NULL, &comm), ncclSuccess);
		assert_null(comm);
		sleep_ms(1);
	}
}

static void strangers_are_dropped(void **state)
{
	unsigned char handle[NCCL_NET_HANDLE_MAXSIZE], other[NCCL_NET_HANDLE_MAXSIZE];
	struct braid_listener l;
	struct braid_handle h;
	struct braid_link *lk = NULL;
	struct toy *client, *server, *stale;
	char why[128];
	int scan, junk, idle, rc = -EAGAIN;

	(void)state;
	setup_env();
	memset(&ctr, 0, sizeof(ctr));
	unit_log_reset();
	assert_int_equal(braid_listener_open(&l, &toy_ops, 0, handle, &ctr), ncclSuccess);

	/* a port scan, garbage, an idle connection */
	scan = raw_connect(&l);
	close(scan);
	junk = raw_connect(&l);
	assert_int_equal(write(junk, "GET / HTTP/1.0\r\n\r\n", 18), 18);
	idle = raw_connect(&l);
	accept_nothing(&l, 50);
	assert_int_equal(ctr.strangers, 2);

	/* A rank of an earlier job: a braid connector with another listener's nonce. */
	assert_int_equal(braid_handle_decode(handle, &h, why, sizeof(why)), 0);
	h.nonce ^= 0x5a5a;
	braid_handle_encode(&h, other);
	stale = calloc(1, sizeof(*stale));
	assert_non_null(stale);
	assert_int_equal(braid_link_dial(&toy_ops, 0, other, &lk), ncclSuccess);
	stale->lk = lk;
	for (int i = 0; i < 2000 && rc == -EAGAIN; i++) {
		void *comm = NULL;

		rc = braid_link_connect_step(lk, &toy_ops, stale);
		assert_int_equal(braid_listener_accept(&l, &toy_ops, NULL, &comm), ncclSuccess);
		assert_null(comm);
		sleep_ms(1);
	}
	assert_true(rc < 0 && rc != -EAGAIN); /* the connector learns it was refused */
	assert_int_equal(ctr.strangers, 3);
	assert_non_null(strstr(unit_log, "another listener"));
	braid_link_close(lk, NULL);
	free(stale);

	/* The real peer gets through while the idle stranger still waits. */
	unit_warns = 0;
	connect_pair(&l, handle, &client, &server);
	assert_int_equal(unit_warns, 0); /* strangers are news for INFO only */

	/* The idle one is dropped at the set-up deadline, and accept still never fails. */
	accept_nothing(&l, 3300);
	assert_int_equal(ctr.strangers, 4);
	assert_non_null(strstr(unit_log, "silent"));
	close(junk);
	close(idle);
	braid_link_close(client->lk, NULL);
	toy_discard(server);
	free(client);
	braid_listener_close(&l, &toy_ops);
}

static void goodbye_says_what_was_done(void **state)
{
	unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct braid_listener l;
	struct toy *client, *server;
	struct braid_link_bye bye;
	uint64_t bufs[3];

	(void)state;
	setup_env();
	assert_int_equal(braid_listener_open(&l, &toy_ops, 0, handle, NULL), ncclSuccess);
	connect_pair(&l, handle, &client, &server);
	assert_int_equal(braid_link_check(server->lk, 1), BRAID_LINK_UP);

	/* the connector wrote buffers 0..9 and 12 of 10..13 */
	braid_bye_init(&bye, 10, 14);
	braid_bye_add(&bye, 12);
	braid_link_close(client->lk, &bye);
	free(client);
	for (int i = 0; i < 1000 && braid_link_check(server->lk, 1) == BRAID_LINK_UP; i++)
		sleep_ms(1);
	assert_int_equal(server->lk->state, BRAID_LINK_BYE);
	bufs[0] = 3, bufs[1] = 9, bufs[2] = 12;
	assert_int_equal(braid_link_bye_covers(server->lk, bufs, 3), 0);
	bufs[0] = 11;
	assert_int_equal(braid_link_bye_covers(server->lk, bufs, 1), -1);
	bufs[0] = 14;
	assert_int_equal(braid_link_bye_covers(server->lk, bufs, 1), -1);
	/* its process exits later: still a clean close */
	sleep_ms(5);
	assert_int_equal(braid_link_check(server->lk, 1), BRAID_LINK_BYE);
	toy_discard(server);
	braid_listener_close(&l, &toy_ops);
}

static void hangup_without_goodbye_is_death(void **state)
{
	unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct braid_listener l;
	struct toy *client, *server;

	(void)state;
	setup_env();
	assert_int_equal(braid_listener_open(&l, &toy_ops, 0, handle, NULL), ncclSuccess);
	connect_pair(&l, handle, &client, &server);
	braid_link_report_error(server->lk, ncclInvalidUsage, "a reason");
	for (int i = 0; i < 1000 && braid_link_check(client->lk, 1) == BRAID_LINK_UP; i++)
		sleep_ms(1);
	assert_int_equal(client->lk->state, BRAID_LINK_FAILED);
	assert_int_equal(client->lk->peer_code, ncclInvalidUsage);
	assert_string_equal(client->lk->peer_why, "a reason");
	braid_link_close(client->lk, NULL); /* no goodbye: as a killed process */
	free(client);
	for (int i = 0; i < 1000 && braid_link_check(server->lk, 1) == BRAID_LINK_UP; i++)
		sleep_ms(1);
	assert_int_equal(server->lk->state, BRAID_LINK_DEAD);
	toy_discard(server);
	braid_listener_close(&l, &toy_ops);
}

/* The data path's check looks at the link once in BRAID_TICK_CALLS calls (after the
 * liveness interval, 1 ms here): a goodbye that came is seen by the 8th call at the
 * latest, and the calls between two looks return the state they know. */
/* A pair whose client hung up after the server's last look (its tick restarted), the
 * hang-up in and the liveness interval long past. */
static struct toy *hung_up_pair(struct braid_listener *l)
{
	unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct toy *client, *server;

	setup_env();
	assert_int_equal(braid_listener_open(l, &toy_ops, 0, handle, NULL), ncclSuccess);
	connect_pair(l, handle, &client, &server);
	assert_int_equal(braid_link_check(server->lk, 0), BRAID_LINK_UP); /* a look: tick 0 */
	braid_link_close(client->lk, NULL);
	free(client);
	sleep_ms(20);
	return server;
}

static void data_path_checks_on_a_tick(void **state)
{
	struct braid_listener l;
	struct toy *server = hung_up_pair(&l);
	int calls = 0;

	(void)state;
	while (braid_link_check(server->lk, 0) == BRAID_LINK_UP)
		assert_true(++calls < (int)BRAID_TICK_CALLS);
	assert_int_equal(calls, BRAID_TICK_CALLS - 1);
	assert_int_equal(server->lk->state, BRAID_LINK_DEAD);
	toy_discard(server);
	braid_listener_close(&l, &toy_ops);
}

/* irecv's look (braid_link_check_post): on an idle comm at once, whatever the tick, so its
 * first receive after the peer's goodbye is refused; on a busy one on the tick. */
static void irecv_looks_at_once_when_idle(void **state)
{
	struct braid_listener l;
	struct toy *server = hung_up_pair(&l);
	int calls = 0;

	(void)state;
	/* busy: the calls before the tick's look return the state they know */
	while (braid_link_check_post(server->lk, 0) == BRAID_LINK_UP && ++calls < 3)
		;
	assert_int_equal(calls, 3);
	assert_int_equal(server->lk->state, BRAID_LINK_UP);
	/* idle: the next call looks, though the tick has calls left */
	assert_int_equal(braid_link_check_post(server->lk, 1), BRAID_LINK_DEAD);
	toy_discard(server);
	braid_listener_close(&l, &toy_ops);
}

struct got_msgs {
	int n;
	char last[32];
};

static void take_msg(void *arg, const void *msg, uint32_t len)
{
	struct got_msgs *g = arg;

	g->n++;
	snprintf(g->last, sizeof(g->last), "%.*s", (int)len, (const char *)msg);
}

/* A backend's own messages after set-up reach the peer's on_msg in order, and leave the
 * link up; a peer without on_msg takes one as a protocol error. */
static void backend_messages(void **state)
{
	unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct braid_listener l;
	struct toy *client, *server;
	struct got_msgs got = { 0 };
	char big[BRAID_LINK_BLOB + 1] = { 0 };

	(void)state;
	setup_env();
	assert_int_equal(braid_listener_open(&l, &toy_ops, 0, handle, NULL), ncclSuccess);
	connect_pair(&l, handle, &client, &server);
	server->lk->on_msg = take_msg;
	server->lk->msg_arg = &got;
	assert_int_equal(braid_link_send(client->lk, "ask", 3), 0);
	assert_int_equal(braid_link_send(client->lk, "done", 4), 0);
	assert_int_equal(braid_link_send(client->lk, big, sizeof(big)), -EMSGSIZE);
	for (int i = 0; i < 1000 && got.n < 2; i++) {
		assert_int_equal(braid_link_check(server->lk, 1), BRAID_LINK_UP);
		sleep_ms(1);
	}
	assert_int_equal(got.n, 2);
	assert_string_equal(got.last, "done");
	/* the other way: the client takes none */
	assert_int_equal(braid_link_send(server->lk, "ok", 2), 0);
	for (int i = 0; i < 1000 && braid_link_check(client->lk, 1) == BRAID_LINK_UP; i++)
		sleep_ms(1);
	assert_int_equal(client->lk->state, BRAID_LINK_FAILED);
	assert_non_null(strstr(client->lk->peer_why, "protocol error: message type 6"));
	braid_link_close(client->lk, NULL);
	free(client);
	toy_discard(server);
	braid_listener_close(&l, &toy_ops);
}

struct numbered {
	int n, dup, gap;
};

static void take_numbered(void *arg, const void *msg, uint32_t len)
{
	struct numbered *g = arg;
	int i = -1;

	assert_true(len >= sizeof(i));
	memcpy(&i, msg, sizeof(i));
	g->dup += i < g->n;
	g->gap += i > g->n;
	if (i >= g->n)
		g->n = i + 1;
}

/*
 * A peer that does not read for a while: a message the socket would not take within
 * braid_link_send's 100 ms is still the link's (0), and goes out once, in order, at the next
 * send or check; only a send that could not even stage its message (-EAGAIN, the one
 * before still out) is the caller's to repeat. Before, a timed-out flush of a staged
 * message said -EAGAIN, and the caller's repeat put it on the wire twice (net_ofi: a
 * duplicate ask to move, which the receiver's answer turned into a protocol error).
 */
static void a_slow_reader_gets_each_message_once(void **state)
{
	unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct braid_listener l;
	struct toy *client, *server;
	struct numbered got = { 0 };
	char msg[BRAID_LINK_BLOB] = { 0 };
	int small = 4096, sent = 0, refused = 0, want = 0;

	(void)state;
	setup_env();
	assert_int_equal(braid_listener_open(&l, &toy_ops, 0, handle, NULL), ncclSuccess);
	connect_pair(&l, handle, &client, &server);
	server->lk->on_msg = take_numbered;
	server->lk->msg_arg = &got;
	setsockopt(client->lk->chan.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(server->lk->chan.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	/* the server reads nothing until the socket has refused the client twice */
	while (refused < 2 && sent < 1000) {
		int rc;

		memcpy(msg, &sent, sizeof(sent));
		rc = braid_link_send(client->lk, msg, sizeof(msg));
		if (rc == 0)
			sent++;
		else
			refused += rc == -EAGAIN;
		assert_true(rc == 0 || rc == -EAGAIN);
	}
	assert_int_equal(refused, 2);
	/* what was taken arrives once the server reads, without another send */
	for (int i = 0; i < 2000 && got.n < sent; i++) {
		assert_int_equal(braid_link_check(server->lk, 1), BRAID_LINK_UP);
		braid_link_check(client->lk, 1); /* pushes what is staged */
		sleep_ms(1);
	}
	assert_int_equal(got.n, sent);
	/* the refused message again, as a backend repeats it, and one more */
	for (want = sent + 2; sent < want;) {
		int rc;

		memcpy(msg, &sent, sizeof(sent));
		rc = braid_link_send(client->lk, msg, sizeof(msg));
		assert_true(rc == 0 || (rc == -EAGAIN && refused++ < 20));
		sent += rc == 0;
		braid_link_check(server->lk, 1);
	}
	for (int i = 0; i < 2000 && got.n < want; i++) {
		assert_int_equal(braid_link_check(server->lk, 1), BRAID_LINK_UP);
		braid_link_check(client->lk, 1);
		sleep_ms(1);
	}
	assert_int_equal(got.dup, 0);
	assert_int_equal(got.gap, 0);
	assert_int_equal(got.n, want);
	braid_link_close(client->lk, NULL);
	free(client);
	toy_discard(server);
	braid_listener_close(&l, &toy_ops);
}

static void bye_window(void **state)
{
	struct braid_link_bye b;

	(void)state;
	braid_bye_init(&b, 100, 100 + BRAID_BYE_WINDOW + 10);
	for (uint64_t i = 100; i < 100 + BRAID_BYE_WINDOW + 10; i++)
		braid_bye_add(&b, i);
	braid_bye_del(&b, 150);
	assert_true(braid_bye_has(&b, 0));
	assert_true(braid_bye_has(&b, 99));
	assert_true(braid_bye_has(&b, 100));
	assert_false(braid_bye_has(&b, 150));
	assert_true(braid_bye_has(&b, 100 + BRAID_BYE_WINDOW - 1));
	/* past the window nothing is claimed */
	assert_false(braid_bye_has(&b, 100 + BRAID_BYE_WINDOW));
	assert_false(braid_bye_has(&b, 100 + BRAID_BYE_WINDOW + 10));
	braid_bye_init(&b, 5, 0); /* upto below base: nothing past base */
	assert_true(braid_bye_has(&b, 4));
	assert_false(braid_bye_has(&b, 5));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bye_window),
		cmocka_unit_test(strangers_are_dropped),
		cmocka_unit_test(goodbye_says_what_was_done),
		cmocka_unit_test(hangup_without_goodbye_is_death),
		cmocka_unit_test(data_path_checks_on_a_tick),
		cmocka_unit_test(irecv_looks_at_once_when_idle),
		cmocka_unit_test(backend_messages),
		cmocka_unit_test(a_slow_reader_gets_each_message_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
