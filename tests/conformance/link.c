// SPDX-License-Identifier: Apache-2.0
/* Establishing and closing comms as NCCL does: non-blocking calls polled with a bound. */
#include "tests/conformance/conf.h"

#include <string.h>

int link_accept(struct side *s, void *ctx, const char *name, void **listen_comm, void **recv_comm)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	double start, deadline;
	ncclResult_t r;
	int polls = 0;

	*listen_comm = *recv_comm = NULL;
	memset(handle, 0, sizeof(handle));
	conf_step(s, "listen(dev %d) for '%s'", s->dev, name);
	r = s->api->listen(s->api, ctx, s->dev, handle, listen_comm);
	if (r != ncclSuccess || !*listen_comm)
		return conf_fail(s, "listen returned %s (%d), listenComm %p", netapi_result_str(r),
				 r, *listen_comm);
	if (rdv_put(s, name, handle, sizeof(handle)))
		return -1;
	conf_step(s, "accept polling for '%s'", name);
	start = now_s();
	deadline = start + CONF_CONNECT_TIMEOUT_S;
	for (;;) {
		r = s->api->accept(s->api, *listen_comm, recv_comm);
		polls++;
		if (r != ncclSuccess)
			return conf_fail(s, "accept returned %s (%d) after %d polls",
					 netapi_result_str(r), r, polls);
		if (*recv_comm)
			return 0;
		if (now_s() > deadline)
			return conf_fail(s, "accept not ready after %.0f s (%d polls)",
					 CONF_CONNECT_TIMEOUT_S, polls);
		if ((polls & 1023) == 0 && rdv_peer_aborted(s))
			return conf_fail(s, "peer gave up while we were accepting");
		idle_wait();
	}
}

int link_connect(struct side *s, void *ctx, const char *name, void **send_comm)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	double deadline;
	ncclResult_t r;
	int polls = 0;

	*send_comm = NULL;
	conf_step(s, "waiting for the handle '%s'", name);
	if (rdv_get(s, name, handle, sizeof(handle), CONF_RDV_TIMEOUT_S))
		return -1;
	conf_step(s, "connect(dev %d) polling for '%s'", s->dev, name);
	deadline = now_s() + CONF_CONNECT_TIMEOUT_S;
	for (;;) {
		r = s->api->connect(s->api, ctx, s->dev, handle, send_comm);
		polls++;
		if (r != ncclSuccess)
			return conf_fail(s, "connect returned %s (%d) after %d polls",
					 netapi_result_str(r), r, polls);
		if (*send_comm)
			return 0;
		if (now_s() > deadline)
			return conf_fail(s, "connect not ready after %.0f s (%d polls)",
					 CONF_CONNECT_TIMEOUT_S, polls);
		if ((polls & 1023) == 0 && rdv_peer_aborted(s))
			return conf_fail(s, "peer gave up while we were connecting");
		idle_wait();
	}
}

int close_comms(struct side *s, void *send_comm, void *recv_comm, void *listen_comm)
{
	double start = now_s();
	ncclResult_t r;
	int rc = 0;

	/* A close that hangs is caught by the scenario's alarm, which names this step. */
	if (send_comm) {
		conf_step(s, "closeSend");
		r = s->api->close_send(s->api, send_comm);
		if (r != ncclSuccess)
			rc = conf_fail(s, "closeSend returned %s (%d)", netapi_result_str(r), r);
	}
	if (recv_comm) {
		conf_step(s, "closeRecv");
		r = s->api->close_recv(s->api, recv_comm);
		if (r != ncclSuccess)
			rc = conf_fail(s, "closeRecv returned %s (%d)", netapi_result_str(r), r);
	}
	if (listen_comm) {
		conf_step(s, "closeListen");
		r = s->api->close_listen(s->api, listen_comm);
		if (r != ncclSuccess)
			rc = conf_fail(s, "closeListen returned %s (%d)", netapi_result_str(r), r);
	}
	if (now_s() - start > CONF_CLOSE_TIMEOUT_S)
		rc = conf_fail(s, "closing took %.1f s (bound %.0f s)", now_s() - start,
			       CONF_CLOSE_TIMEOUT_S);
	return rc;
}

int link_poll_connect(struct side *s, const char *handle, void **comm, ncclResult_t *res,
		      double bound_s)
{
	char h[NCCL_NET_HANDLE_MAXSIZE];
	double t0 = now_s();

	memcpy(h, handle, sizeof(h)); /* connect may write its state into the handle */
	*comm = NULL;
	while (now_s() - t0 < bound_s) {
		*res = s->api->connect(s->api, s->ctx, s->dev, h, comm);
		if (*res != ncclSuccess)
			return 1;
		if (*comm)
			return 0;
		idle_wait();
	}
	return -1;
}

int link_poll_accept(struct side *s, void *lc, void **comm, ncclResult_t *res, double bound_s)
{
	double t0 = now_s();

	*comm = NULL;
	while (now_s() - t0 < bound_s) {
		*res = s->api->accept(s->api, lc, comm);
		if (*res != ncclSuccess)
			return 1;
		if (*comm)
			return 0;
		idle_wait();
	}
	return -1;
}

int link_share_listener(struct side *s, bool listener, const char *name, char *handle,
			void **listen_comm)
{
	const size_t len = NCCL_NET_HANDLE_MAXSIZE;
	ncclResult_t r;

	if (!listener)
		return rdv_get(s, name, handle, len, CONF_RDV_TIMEOUT_S) ? -1 : 0;
	memset(handle, 0, len);
	r = s->api->listen(s->api, s->ctx, s->dev, handle, listen_comm);
	if (r != ncclSuccess || !*listen_comm)
		return conf_fail(s, "listen returned %s (%d)", netapi_result_str(r), r);
	return rdv_put(s, name, handle, len) ? -1 : 0;
}
