// SPDX-License-Identifier: Apache-2.0
/* Every knob: defaults valid, env parsed once, bad values WARN once and fall back. */
#include <stdlib.h>
#include <string.h>

#include "plugin/log.h"
#include "plugin/params.h"
#include "plugin/profiler.h"
#include "tests/unit/unit.h"

static int setup(void **state)
{
	(void)state;
	for (int id = 0; id < BRAID_P_COUNT; id++) {
		const struct braid_param_desc *d = braid_param_desc((enum braid_param_id)id);

		unsetenv(d->name);
		if (d->alias)
			unsetenv(d->alias);
	}
	braid_log_set_logger(unit_logger);
	braid_params_reset();
	unit_log_reset();
	return 0;
}

static void defaults_are_valid(void **state)
{
	(void)state;
	for (int id = 0; id < BRAID_P_COUNT; id++) {
		const struct braid_param_desc *d = braid_param_desc((enum braid_param_id)id);
		int64_t v;

		assert_non_null(d->name);
		assert_true(strncmp(d->name, "BRAID_", 6) == 0);
		assert_non_null(d->doc);
		assert_int_equal(braid_param_parse(d, d->def, &v), 0);
		assert_string_equal(braid_param_source((enum braid_param_id)id), "default");
	}
	assert_int_equal(unit_warns, 0);
}

static void values_from_env(void **state)
{
	(void)state;
	setenv("BRAID_BACKEND", "OFI", 1);
	setenv("BRAID_LIVENESS_MS", "250", 1);
	setenv("BRAID_MR_CACHE", "off", 1);
	setenv("BRAID_OFI_PROVIDER", "tcp;ofi_rxm", 1);
	assert_int_equal(braid_param_int(BRAID_P_BACKEND), 2);
	assert_int_equal(braid_param_int(BRAID_P_LIVENESS_MS), 250);
	assert_int_equal(braid_param_int(BRAID_P_MR_CACHE), 0);
	assert_string_equal(braid_param_str(BRAID_P_OFI_PROVIDER), "tcp;ofi_rxm");
	assert_string_equal(braid_param_source(BRAID_P_LIVENESS_MS), "BRAID_LIVENESS_MS");
	/* Read once: a later change of the environment is not seen. */
	setenv("BRAID_LIVENESS_MS", "7", 1);
	assert_int_equal(braid_param_int(BRAID_P_LIVENESS_MS), 250);
	assert_int_equal(unit_warns, 0);
}

static void bad_values_warn_and_default(void **state)
{
	(void)state;
	setenv("BRAID_LIVENESS_MS", "0", 1);         /* below the range */
	setenv("BRAID_CONN_TIMEOUT_MS", "12abc", 1); /* not a number */
	setenv("BRAID_BACKEND", "verbs", 1);         /* not a choice */
	setenv("BRAID_COUNTERS", "maybe", 1);        /* not a boolean */
	assert_int_equal(braid_param_int(BRAID_P_LIVENESS_MS), 100);
	assert_int_equal(braid_param_int(BRAID_P_CONN_TIMEOUT_MS), 120000);
	assert_int_equal(braid_param_int(BRAID_P_BACKEND), 0);
	assert_int_equal(braid_param_int(BRAID_P_COUNTERS), 1);
	assert_int_equal(unit_warns, 4);
	assert_non_null(strstr(unit_log, "BRAID_LIVENESS_MS=\"0\""));
	assert_non_null(strstr(unit_log, "using the default 100"));
	assert_non_null(strstr(unit_log, "BRAID_BACKEND=\"verbs\" is not one of auto|ib|ofi"));
	assert_string_equal(braid_param_source(BRAID_P_LIVENESS_MS), "default");
	/* One WARN per variable, not one per read. */
	braid_param_int(BRAID_P_LIVENESS_MS);
	assert_int_equal(unit_warns, 4);
}

static void nccl_alias_is_honoured(void **state)
{
	(void)state;
	setenv("NCCL_SOCKET_IFNAME", "eth", 1);
	assert_string_equal(braid_param_str(BRAID_P_SOCKET_IFNAME), "eth");
	assert_string_equal(braid_param_source(BRAID_P_SOCKET_IFNAME), "NCCL_SOCKET_IFNAME");
	braid_params_reset();
	setenv("BRAID_SOCKET_IFNAME", "lo", 1);
	assert_string_equal(braid_param_str(BRAID_P_SOCKET_IFNAME), "lo");
}

static void too_long_string(void **state)
{
	char big[400];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	setenv("BRAID_OFI_PROVIDER", big, 1);
	assert_string_equal(braid_param_str(BRAID_P_OFI_PROVIDER), "");
	assert_int_equal(unit_warns, 1);
}

static ncclResult_t prof_stub(void **eh, int type, void *parent, int64_t id, void *data)
{
	(void)eh, (void)type, (void)parent, (void)id, (void)data;
	return ncclSuccess;
}

/* NCCL passes its profiler callback whether or not a profiler plugin is loaded: by default
 * braid uses it only when NCCL_PROFILER_PLUGIN names one. */
static void profiler_events_follow_nccl_profiler_plugin(void **state)
{
	static const struct {
		const char *braid, *nccl;
		int on;
	} cases[] = {
		{ NULL, NULL, 0 },           { NULL, "none", 0 },
		{ NULL, "NONE", 0 },         { NULL, "", 0 },
		{ NULL, "libmyprof.so", 1 }, { "1", NULL, 1 },
		{ "0", "libmyprof.so", 0 },  { "-1", "x", 1 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].braid)
			setenv("BRAID_PROFILER", cases[i].braid, 1);
		else
			unsetenv("BRAID_PROFILER");
		if (cases[i].nccl)
			setenv("NCCL_PROFILER_PLUGIN", cases[i].nccl, 1);
		else
			unsetenv("NCCL_PROFILER_PLUGIN");
		braid_params_reset();
		assert_true(braid_prof_use(NULL) == NULL);
		assert_true((braid_prof_use(prof_stub) == prof_stub) == cases[i].on);
	}
	unsetenv("BRAID_PROFILER");
	unsetenv("NCCL_PROFILER_PLUGIN");
	braid_params_reset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(defaults_are_valid, setup),
		cmocka_unit_test_setup(values_from_env, setup),
		cmocka_unit_test_setup(bad_values_warn_and_default, setup),
		cmocka_unit_test_setup(nccl_alias_is_honoured, setup),
		cmocka_unit_test_setup(too_long_string, setup),
		cmocka_unit_test_setup(profiler_events_follow_nccl_profiler_plugin, setup),
	};

	return cmocka_run_group_tests_name("params", tests, NULL, NULL);
}
