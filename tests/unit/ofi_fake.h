// SPDX-License-Identifier: Apache-2.0
/* Fake fused comms for net_ofi's unit tests (test_ofi_live.c, test_ofi_move.c,
 * test_ofi_cq.c, test_ofi_flush.c): each test binary includes this once; the comm's lanes
 * sit on the fake devices devs[]. */
#ifndef BRAID_TESTS_UNIT_OFI_FAKE_H
#define BRAID_TESTS_UNIT_OFI_FAKE_H

#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "tests/unit/unit.h"

#define MS 1000000ULL

static struct ofi_dev devs[3];

static struct ofi_comm *fake_comm(int nlanes, const char *name0, const char *name1)
{
	struct ofi_comm *c = calloc(1, sizeof(*c) + 3 * sizeof(c->lane[0]));
	const char *names[3] = { name0, name1 ? name1 : "", "fake2" };

	assert_non_null(c);
	assert_true(nlanes <= 3);
	c->nlanes = nlanes;
	snprintf(c->peer, sizeof(c->peer), "198.18.1.1:4000");
	c->inflight = 3;
	for (int k = 0; k < nlanes; k++) {
		memset(&devs[k], 0, sizeof(devs[k]));
		snprintf(devs[k].name, sizeof(devs[k].name), "%s", names[k]);
		devs[k].is_iface = if_nametoindex(names[k]) != 0; /* as ofi_dev.c at init */
		pthread_mutex_init(&devs[k].lock, NULL);
		pthread_mutex_init(&devs[k].ep_lock, NULL);
		c->lane[k].dev = &devs[k];
		c->lane[k].k = (uint8_t)k;
	}
	return c;
}

static void set_env(const char *timeout_ms, const char *liveness_ms)
{
	setenv("BRAID_OFI_DOWN_TIMEOUT_MS", timeout_ms, 1);
	setenv("BRAID_LIVENESS_MS", liveness_ms, 1);
	braid_params_reset();
	braid_log_set_logger(unit_logger);
	unit_log_reset();
}

#endif
