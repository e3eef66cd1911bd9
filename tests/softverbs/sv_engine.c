// SPDX-License-Identifier: MIT
/*
 * softverbs: the engine, one per process, started by the first open device
 * and stopped by the last close. It owns:
 *
 *  - a listening Unix stream socket in $SOFTVERBS_FABRIC/ep/ (its endpoint);
 *  - per RC QP, one outbound stream connection to the endpoint of the
 *    process owning the destination QP. It carries this QP's requests one
 *    way and the peer's responses (ACK, NAK, READ response) the other way,
 *    so each QP's traffic is reliable and in order, as RC promises;
 *  - an rx thread that poll()s every connection and applies each incoming
 *    message: payloads are read straight into the target MR or receive
 *    buffers, completions are generated, responses queued;
 *  - a tx thread that sends posted WRs and queued responses, writing
 *    payloads straight from registered memory, and paces each device and
 *    each uplink on its own (sv_pace_reserve in sv_fabric.c).
 *
 * Deadlock freedom: the rx thread never writes to a socket (it only queues
 * responses), so it always drains; a blocked tx thread is therefore always
 * waiting on a peer's rx thread, which makes progress. All socket I/O has a
 * 10 s timeout, which reads as a dead path.
 *
 * Retransmission is go-back-N: after an RNR NAK, or on path trouble (see
 * sv_path_trouble in sv_conn.c), the requester rewinds its send pointer to
 * its oldest unacknowledged WR; the responder drops requests ahead of the
 * PSN it expects and re-ACKs duplicates.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "tests/softverbs/sv_internal.h"

struct sv_engine sv_eng = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.tx_cond = PTHREAD_COND_INITIALIZER,
	.idle_cond = PTHREAD_COND_INITIALIZER,
	.listen_fd = -1,
	.wake = { -1, -1 },
};

/*
 * fork(): the child has none of the engine's threads, so it must not believe
 * an engine runs. Like real verbs, inherited objects are unusable in the
 * child; it may open devices afresh. Its copies of the parent's sockets are
 * only closed (not shut down, which would cut the parent's connections) and
 * the parent's files are left alone.
 */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&sv_eng.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&sv_eng.lock);
}

static void atfork_child(void)
{
	for (struct sv_conn *c = sv_eng.conns; c; c = c->next)
		close(c->fd);
	if (sv_eng.listen_fd >= 0)
		close(sv_eng.listen_fd);
	for (int i = 0; i < 2; i++)
		if (sv_eng.wake[i] >= 0)
			close(sv_eng.wake[i]);
	if (sv_eng.stats)
		munmap(sv_eng.stats, sv_eng.stats_len);
	/* The parent's objects stay allocated but unreachable in the child. */
	sv_eng.conns = NULL;
	sv_eng.qps = NULL;
	sv_eng.resp_head = sv_eng.resp_tail = NULL;
	memset(sv_eng.mr_hash, 0, sizeof(sv_eng.mr_hash));
	sv_eng.stats = NULL;
	sv_eng.listen_fd = -1;
	sv_eng.wake[0] = sv_eng.wake[1] = -1;
	sv_eng.users = 0;
	sv_eng.nctx = 0;
	sv_eng.stop = false;
	pthread_mutex_init(&sv_eng.lock, NULL);
	pthread_cond_init(&sv_eng.tx_cond, NULL);
	pthread_cond_init(&sv_eng.idle_cond, NULL);
}

static void register_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static int engine_start(void)
{
	static int seq;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int n;

	pthread_once(&once, register_atfork);
	sv_config_load(&sv_eng.cfg);
	if (sv_fabric_init())
		return -1;
	n = snprintf(sv_eng.ep_path, sizeof(sv_eng.ep_path), "%s/ep/e%d.%d", sv_eng.cfg.fabric,
		     (int)getpid(), ++seq);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		sv_log("SOFTVERBS_FABRIC path too long for a Unix socket: %s", sv_eng.cfg.fabric);
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, sv_eng.ep_path, (size_t)n + 1);
	unlink(sv_eng.ep_path);
	sv_eng.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv_eng.listen_fd < 0 || bind(sv_eng.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(sv_eng.listen_fd, 512)) {
		sv_log("cannot listen on %s: %s", sv_eng.ep_path, strerror(errno));
		goto fail;
	}
	chmod(sv_eng.ep_path, 0777);
	if (pipe2(sv_eng.wake, O_CLOEXEC | O_NONBLOCK))
		goto fail;
	sv_stats_open(); /* stats are optional: go on without */
	sv_eng.next_key = (uint32_t)(sv_hash64(sv_now_ns() ^ (uint64_t)getpid()) & 0xffff) << 8;
	sv_eng.start_ns = sv_now_ns();
	sv_eng.nqp_created = 0;
	sv_eng.nreg = sv_eng.nremote_ops = 0;
	memset(sv_eng.dev_next_ns, 0, sizeof(sv_eng.dev_next_ns));
	memset(sv_eng.ul_next_ns, 0, sizeof(sv_eng.ul_next_ns));
	sv_eng.stop = false;
	if (pthread_create(&sv_eng.rx_thread, NULL, sv_rx_main, NULL))
		goto fail;
	if (pthread_create(&sv_eng.tx_thread, NULL, sv_tx_main, NULL)) {
		sv_eng.stop = true;
		pthread_mutex_unlock(&sv_eng.lock);
		pthread_join(sv_eng.rx_thread, NULL);
		pthread_mutex_lock(&sv_eng.lock);
		goto fail;
	}
	sv_debug("endpoint %s", sv_eng.ep_path);
	return 0;
fail:
	if (sv_eng.listen_fd >= 0) {
		close(sv_eng.listen_fd);
		unlink(sv_eng.ep_path);
	}
	sv_eng.listen_fd = -1;
	for (int i = 0; i < 2; i++) {
		if (sv_eng.wake[i] >= 0)
			close(sv_eng.wake[i]);
		sv_eng.wake[i] = -1;
	}
	sv_stats_close();
	return -1;
}

static void engine_stop(void)
{
	sv_eng.stop = true;
	pthread_cond_broadcast(&sv_eng.tx_cond);
	sv_wake_rx();
	pthread_mutex_unlock(&sv_eng.lock);
	pthread_join(sv_eng.rx_thread, NULL);
	pthread_join(sv_eng.tx_thread, NULL);
	pthread_mutex_lock(&sv_eng.lock);
	while (sv_eng.resp_head) {
		struct sv_resp *r = sv_eng.resp_head;

		sv_eng.resp_head = r->next;
		if (r->mr)
			sv_mr_unpin_one(r->mr);
		sv_conn_put(r->conn);
		free(r);
	}
	sv_eng.resp_tail = NULL;
	/* QPs the application left behind must not point at freed conns. */
	for (struct sv_qp *qp = sv_eng.qps; qp; qp = qp->next)
		qp->out = NULL;
	while (sv_eng.conns) {
		struct sv_conn *c = sv_eng.conns;

		sv_eng.conns = c->next;
		close(c->fd);
		free(c); /* no other holder is left: threads are gone */
	}
	close(sv_eng.listen_fd);
	unlink(sv_eng.ep_path);
	sv_eng.listen_fd = -1;
	close(sv_eng.wake[0]);
	close(sv_eng.wake[1]);
	sv_eng.wake[0] = sv_eng.wake[1] = -1;
	sv_stats_close();
	/* A fault's down port ends with the engine: the next one starts with every port up,
	 * as a process that reopens the device would find it. No context is left to hear. */
	for (int d = 0; d < SV_MAX_DEVICES; d++)
		if (sv_eng.port_downs[d] > sv_eng.port_ups[d])
			sv_set_port_state(d, IBV_PORT_ACTIVE);
	memset(sv_eng.port_downs, 0, sizeof(sv_eng.port_downs));
	memset(sv_eng.port_ups, 0, sizeof(sv_eng.port_ups));
}

int sv_engine_get(struct sv_context *ctx)
{
	int rc = 0;

	pthread_mutex_lock(&sv_eng.lock);
	if (sv_eng.nctx >= (int)(sizeof(sv_eng.ctxs) / sizeof(sv_eng.ctxs[0]))) {
		errno = EMFILE;
		rc = -1;
	} else if (sv_eng.users == 0 && engine_start()) {
		rc = -1;
	} else {
		sv_eng.users++;
		sv_eng.ctxs[sv_eng.nctx++] = ctx;
	}
	pthread_mutex_unlock(&sv_eng.lock);
	return rc;
}

void sv_engine_put(struct sv_context *ctx)
{
	pthread_mutex_lock(&sv_eng.lock);
	for (int i = 0; i < sv_eng.nctx; i++) {
		if (sv_eng.ctxs[i] == ctx) {
			sv_eng.ctxs[i] = sv_eng.ctxs[--sv_eng.nctx];
			break;
		}
	}
	if (--sv_eng.users == 0)
		engine_stop();
	pthread_mutex_unlock(&sv_eng.lock);
}
