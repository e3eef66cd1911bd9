// SPDX-License-Identifier: Apache-2.0
/*
 * The comm limit (issue 13): with BRAID_MAX_COMMS=8, getProperties reports maxComms 8;
 * eight comms open; the ninth connect fails (not hangs) with a WARN naming the limit and
 * the knob; with a place free on the connecting side only, the accepting side refuses
 * with the same WARN and the connector gets an error; once comms close, a new one opens.
 */
#include "tests/conformance/conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIM_COMMS 8

/* The last WARN names the limit and the knob. */
static int check_warn(struct side *s, const char *call)
{
	char warn[1024], want[32];

	netapi_last_warn(warn, sizeof(warn));
	snprintf(want, sizeof(want), "is %d", LIM_COMMS);
	if (!strstr(warn, "BRAID_MAX_COMMS") || !strstr(warn, want) || !strstr(warn, "maxComms"))
		return conf_fail(s,
				 "%s failed, but its WARN does not name the limit (%d, maxComms) "
				 "and BRAID_MAX_COMMS: \"%s\"",
				 call, LIM_COMMS, warn);
	conf_log(s, "%s refused as it should: %s", call, warn);
	return 0;
}

int sc_comm_limit(struct side *s)
{
	bool receiver = s->role == 'a';
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *comm[LIM_COMMS + 2] = { 0 }, *lc = NULL, *extra = NULL;
	struct net_props props;
	ncclResult_t r;
	int ret = -1, n = 0;

	setenv("BRAID_MAX_COMMS", "8", 1);
	conf_step(s, "init");
	r = s->api->init(s->api, &s->ctx, s->seed);
	if (r != ncclSuccess)
		return conf_fail(s, "init returned %s (%d)", netapi_result_str(r), r);
	r = s->api->devices(s->api, &n);
	if (r != ncclSuccess || n <= s->dev) {
		conf_fail(s, "devices returned %s, %d devices", netapi_result_str(r), n);
		goto out;
	}
	r = s->api->get_props(s->api, s->dev, &props);
	if (r != ncclSuccess || props.max_comms != LIM_COMMS) {
		conf_fail(s, "getProperties: %s, maxComms %d with BRAID_MAX_COMMS=%d",
			  netapi_result_str(r), props.max_comms, LIM_COMMS);
		goto out;
	}
	if (link_share_listener(s, receiver, "lim", handle, &lc))
		goto out;

	conf_step(s, "opening %d comms, the limit", LIM_COMMS);
	for (n = 0; n < LIM_COMMS; n++) {
		int rc = receiver ? link_poll_accept(s, lc, &comm[n], &r, 20.0)
				  : link_poll_connect(s, handle, &comm[n], &r, 20.0);

		if (rc) {
			conf_fail(s, "comm %d of %d: %s", n + 1, LIM_COMMS,
				  rc < 0 ? "not ready within the bound" : netapi_result_str(r));
			goto out;
		}
	}
	if (rdv_sync(s, "lim-open"))
		goto out;

	/* 1: one more connect: refused by the connector itself */
	if (!receiver) {
		conf_step(s, "connect #%d, past the limit", LIM_COMMS + 1);
		n = link_poll_connect(s, handle, &extra, &r, 20.0);
		if (n != 1) {
			conf_fail(s, "connect #%d past maxComms %d: %s", LIM_COMMS + 1, LIM_COMMS,
				  n ? "neither failed nor finished within 20 s" : "succeeded");
			goto out;
		}
		if (check_warn(s, "connect"))
			goto out;
	}
	if (rdv_sync(s, "lim-connect"))
		goto out;

	/* 2: the connector has a place again, the acceptor none: accept refuses */
	if (!receiver) {
		conf_step(s, "close one send comm, connect again");
		r = s->api->close_send(s->api, comm[0]);
		comm[0] = NULL;
		if (r != ncclSuccess) {
			conf_fail(s, "closeSend returned %s (%d)", netapi_result_str(r), r);
			goto out;
		}
		if (rdv_put(s, "lim-again", "", 0))
			goto out;
		n = link_poll_connect(s, handle, &extra, &r, 20.0);
		if (n != 1) {
			conf_fail(s, "connect to a peer at its limit: %s",
				  n ? "neither failed nor finished within 20 s" : "succeeded");
			goto out;
		}
		conf_log(s, "connect to a peer at its limit failed: %s", netapi_result_str(r));
	} else {
		if (rdv_get(s, "lim-again", NULL, 0, CONF_RDV_TIMEOUT_S))
			goto out;
		conf_step(s, "accept #%d, past the limit", LIM_COMMS + 1);
		n = link_poll_accept(s, lc, &extra, &r, 20.0);
		if (n != 1) {
			conf_fail(s, "accept #%d past maxComms %d: %s", LIM_COMMS + 1, LIM_COMMS,
				  n ? "neither failed nor finished within 20 s" : "succeeded");
			goto out;
		}
		if (check_warn(s, "accept"))
			goto out;
	}
	if (rdv_sync(s, "lim-accept"))
		goto out;

	/* 3: every comm closed: places come back */
	conf_step(s, "closing every comm");
	for (int i = 0; i < LIM_COMMS; i++) {
		r = receiver ? s->api->close_recv(s->api, comm[i])
			     : s->api->close_send(s->api, comm[i]);
		comm[i] = NULL;
		if (r != ncclSuccess) {
			conf_fail(s, "close #%d returned %s (%d)", i, netapi_result_str(r), r);
			goto out;
		}
	}
	if (rdv_sync(s, "lim-closed"))
		goto out;
	conf_step(s, "a comm after closing");
	n = receiver ? link_poll_accept(s, lc, &extra, &r, 20.0)
		     : link_poll_connect(s, handle, &extra, &r, 20.0);
	if (n) {
		conf_fail(s, "with every comm closed, a new one: %s",
			  n < 0 ? "not ready within the bound" : netapi_result_str(r));
		goto out;
	}
	ret = 0;
out:
	for (int i = 0; i < LIM_COMMS; i++)
		if (comm[i])
			close_comms(s, receiver ? NULL : comm[i], receiver ? comm[i] : NULL, NULL);
	if (close_comms(s, receiver ? NULL : extra, receiver ? extra : NULL, lc))
		ret = -1;
	s->api->finalize(s->api, s->ctx);
	return ret;
}
