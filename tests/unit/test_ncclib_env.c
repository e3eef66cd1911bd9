// SPDX-License-Identifier: Apache-2.0
/*
 * The NCCL_IB_* table (plugin/ncclib_env.c) against the code: every NCCL_IB_* alias of
 * plugin/params.h is listed as honoured by its knob, every "honoured" entry names a knob
 * that really reads it, and a set variable braid does not honour gets exactly one line at
 * init: a WARN where ignoring it changes behaviour, else an INFO.
 */
#include <stdlib.h>
#include <string.h>

#include "plugin/log.h"
#include "plugin/ncclib_env.h"
#include "plugin/params.h"
#include "tests/unit/unit.h"

static const struct braid_ncclib_var *find(const char *name)
{
	size_t n;
	const struct braid_ncclib_var *v = braid_ncclib_vars(&n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

static int setup(void **state)
{
	size_t n;
	const struct braid_ncclib_var *v = braid_ncclib_vars(&n);

	(void)state;
	for (size_t i = 0; i < n; i++)
		unsetenv(v[i].name);
	braid_log_set_logger(unit_logger);
	unit_log_reset();
	return 0;
}

/* NCCL 2.30.7's IB transport reads 43 of them; each once, each with a source line. */
static void table_is_complete_and_unique(void **state)
{
	size_t n;
	const struct braid_ncclib_var *v = braid_ncclib_vars(&n);

	(void)state;
	assert_int_equal(n, 43);
	for (size_t i = 0; i < n; i++) {
		assert_true(strncmp(v[i].name, "NCCL_IB_", 8) == 0 ||
			    strcmp(v[i].name, "NCCL_GDR_FLUSH_DISABLE") == 0);
		assert_non_null(strchr(v[i].source, ':'));
		assert_true(v[i].meaning[0] && v[i].braid[0] && v[i].nccl_default[0]);
		for (size_t j = i + 1; j < n; j++)
			assert_string_not_equal(v[i].name, v[j].name);
	}
}

static void aliases_are_honoured_entries(void **state)
{
	(void)state;
	for (int id = 0; id < BRAID_P_COUNT; id++) {
		const struct braid_param_desc *d = braid_param_desc((enum braid_param_id)id);
		const struct braid_ncclib_var *v;

		if (!d->alias || strncmp(d->alias, "NCCL_IB_", 8) != 0)
			continue;
		v = find(d->alias);
		if (!v)
			fail_msg("%s is an alias of %s but not in the NCCL_IB_* table", d->alias,
				 d->name);
		assert_int_equal(v->how, BRAID_NCCLIB_HONOURED);
		assert_true(strncmp(v->braid, d->name, strlen(d->name)) == 0);
	}
}

static void honoured_entries_are_read(void **state)
{
	size_t n;
	const struct braid_ncclib_var *v = braid_ncclib_vars(&n);

	(void)state;
	for (size_t i = 0; i < n; i++) {
		int found = 0;

		if (v[i].how != BRAID_NCCLIB_HONOURED || strncmp(v[i].braid, "BRAID_", 6) != 0)
			continue;
		for (int id = 0; id < BRAID_P_COUNT; id++) {
			const struct braid_param_desc *d = braid_param_desc(
				(enum braid_param_id)id);

			if (d->alias && strcmp(d->alias, v[i].name) == 0 &&
			    strncmp(v[i].braid, d->name, strlen(d->name)) == 0)
				found = 1;
		}
		if (!found)
			fail_msg("%s is listed as honoured by %s, which does not read it",
				 v[i].name, v[i].braid);
	}
}

static void report_names_what_is_ignored(void **state)
{
	(void)state;
	assert_int_equal(braid_ncclib_report(), 0);
	assert_int_equal(unit_warns, 0);

	setenv("NCCL_IB_TC", "106", 1);                    /* honoured: no line */
	setenv("NCCL_IB_ROUTABLE_FLID_GID_INDEX", "2", 1); /* ignoring it changes the GID: WARN */
	setenv("NCCL_IB_OOO_RQ", "1", 1);                  /* a tunable: INFO */
	assert_int_equal(braid_ncclib_report(), 2);
	assert_int_equal(unit_warns, 1);
	assert_non_null(
		strstr(unit_log,
		       "NCCL_IB_ROUTABLE_FLID_GID_INDEX=2 is set, and braid does not honour it"));
	assert_non_null(strstr(unit_log, "NCCL_IB_OOO_RQ=1 is set, and braid does not read"));
	assert_null(strstr(unit_log, "NCCL_IB_TC"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(table_is_complete_and_unique, setup),
		cmocka_unit_test_setup(aliases_are_honoured_entries, setup),
		cmocka_unit_test_setup(honoured_entries_are_read, setup),
		cmocka_unit_test_setup(report_names_what_is_ignored, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
