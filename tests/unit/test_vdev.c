// SPDX-License-Identifier: Apache-2.0
/*
 * The device table NCCL sees: BRAID_MERGE, makeVDevice and a fused device's properties,
 * against what NCCL's IB transport does (init.cc: ncclIbMakeVDevice, ncclIbGetProperties).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/log.h"
#include "plugin/params.h"
#include "plugin/vdev.h"
#include "tests/unit/unit.h"

static struct braid_dev_props nic[5];

static int setup(void **state)
{
	static const char *const names[] = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4" };

	(void)state;
	memset(nic, 0, sizeof(nic));
	for (int i = 0; i < 5; i++) {
		snprintf(nic[i].name, sizeof(nic[i].name), "%s", names[i]);
		snprintf(nic[i].pci_path, sizeof(nic[i].pci_path), "/sys/devices/pci0000:%02x", i);
		nic[i].port = 1;
		nic[i].speed_mbps = 100000 * (i + 1);
		nic[i].ptr_support = NCCL_PTR_HOST;
		nic[i].reg_is_global = 1;
		nic[i].latency_us = (float)i;
		nic[i].max_comms = 1000 - i;
		nic[i].max_recvs = 8;
		nic[i].guid = 0x100 + (uint64_t)i;
		nic[i].vdev = (struct braid_vdev){ .n = 1, .nic = { i } };
		/* as the core would set them: rails 1, 0, 1, 2, -; planes 1, 1, 0, 1, - */
		nic[i].rail_id = (int[]){ 1, 0, 1, 2, NCCL_NET_ID_UNDEF }[i];
		nic[i].plane_id = (int[]){ 1, 1, 0, 1, NCCL_NET_ID_UNDEF }[i];
	}
	braid_log_set_logger(unit_logger);
	unit_log_reset();
	return 0;
}

static void load(const char *merge, int api_version, int max_nics, int want_rc)
{
	if (merge)
		setenv("BRAID_MERGE", merge, 1);
	else
		unsetenv("BRAID_MERGE");
	braid_params_reset();
	braid_params_load();
	assert_int_equal(braid_vdev_setup(nic, 5, NULL, api_version, max_nics), want_rc);
}

static int teardown(void **state)
{
	(void)state;
	braid_vdev_teardown();
	unsetenv("BRAID_MERGE");
	braid_params_reset();
	return 0;
}

/* Guards the default and none: one device per NIC, device i is NIC i (NCCL's vProps.devs
 * name devices by these indices, as ncclIbInitDevices makes one vdevice per NIC). */
static void one_device_per_nic(void **state)
{
	(void)state;
	load(NULL, 9, 4, 0);
	assert_int_equal(braid_vdev_count(), 5);
	for (int d = 0; d < 5; d++) {
		const struct braid_dev_props *p = braid_vdev_props(d);

		assert_string_equal(p->name, nic[d].name);
		assert_int_equal(p->vdev.n, 1);
		assert_int_equal(p->vdev.nic[0], d);
		assert_int_equal(braid_vdev_get(d)->n, 1);
	}
	assert_null(braid_vdev_get(5));
	assert_null(braid_vdev_props(-1));
}

/* Guards makeVDevice: a new device after the others, named and sized as NCCL's IB
 * transport names a merged device, everything else from its first NIC. */
static void make_fuses_and_reports(void **state)
{
	int d = -1;

	(void)state;
	load("none", 11, 4, 0);
	assert_int_equal(braid_vdev_make(&d, 2, (const int[]){ 2, 0 }), ncclSuccess);
	assert_int_equal(d, 5);
	assert_int_equal(braid_vdev_count(), 6);
	const struct braid_dev_props *p = braid_vdev_props(d);

	assert_string_equal(p->name, "mlx5_2+mlx5_0");
	assert_int_equal(p->speed_mbps, nic[2].speed_mbps + nic[0].speed_mbps);
	assert_string_equal(p->pci_path, nic[2].pci_path);
	assert_int_equal(p->guid, nic[2].guid);
	assert_int_equal(p->max_comms, nic[2].max_comms);
	assert_int_equal(p->vdev.n, 2); /* vProps: the devices NCCL fused */
	assert_int_equal(p->vdev.nic[0], 2);
	assert_int_equal(p->vdev.nic[1], 0);
	assert_int_equal(braid_vdev_get(d)->n, 2); /* and the NICs a comm stripes over */
	assert_int_equal(braid_vdev_get(d)->nic[0], 2);
	/* v12 ids: NICs 2 and 0 share rail 1, planes 0 and 1 (plugin/net_ids.c) */
	assert_int_equal(p->rail_id, 1);
	assert_int_equal(p->plane_id, (1 << 14) | 0x3);
	assert_int_equal(braid_vdev_make(&d, 2, (const int[]){ 1, 3 }), ncclSuccess);
	assert_int_equal(braid_vdev_props(d)->rail_id, NCCL_NET_ID_UNDEF);
	assert_int_equal(braid_vdev_props(d)->plane_id, 1);
	/* one device: itself, nothing made (NCCL never asks, but v9 may) */
	assert_int_equal(braid_vdev_make(&d, 1, (const int[]){ 3 }), ncclSuccess);
	assert_int_equal(d, 3);
	assert_int_equal(braid_vdev_count(), 7);
}

/* Guards the bad arguments: each a WARN and ncclInvalidUsage (as ncclIbMakeVDevice), and
 * the table unchanged. NCCL's IB transport accepts duplicates ({0,0}, double speed);
 * braid refuses them on purpose. */
static void make_refuses_bad_arguments(void **state)
{
	int d = 77;

	(void)state;
	load("none", 10, 4, 0);
	static const struct {
		int n;
		int devs[5];
	} bad[] = {
		{ 0, { 0 } },    { -1, { 0 } },    { 5, { 0, 1, 2, 3, 4 } }, { 2, { 0, 0 } },
		{ 2, { 0, 5 } }, { 2, { -1, 1 } }, { 2, { 1, 1000000 } },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int warns = unit_warns;

		assert_int_equal(braid_vdev_make(&d, bad[i].n, bad[i].devs), ncclInvalidUsage);
		assert_int_equal(unit_warns, warns + 1);
		assert_int_equal(d, 77);
		assert_int_equal(braid_vdev_count(), 5);
	}
	/* a device NCCL made cannot be fused again */
	assert_int_equal(braid_vdev_make(&d, 2, (const int[]){ 0, 1 }), ncclSuccess);
	assert_int_equal(braid_vdev_make(&d, 2, (const int[]){ d, 2 }), ncclInvalidUsage);
	/* a backend that stripes over one NIC only */
	teardown(NULL);
	load("none", 10, 1, 0);
	assert_int_equal(braid_vdev_make(&d, 2, (const int[]){ 0, 1 }), ncclInvalidUsage);
	assert_non_null(strstr(unit_log, "does not stripe"));
	assert_int_equal(braid_vdev_count(), 5);
}

/* Guards BRAID_MERGE=LIST: devices in the listed order; NICs not listed are not shown. */
static void merge_list(void **state)
{
	(void)state;
	load("mlx5_0+mlx5_1,mlx5_3:1,mlx5_2+mlx5_4", 11, 4, 0);
	assert_int_equal(braid_vdev_count(), 3);
	assert_string_equal(braid_vdev_props(0)->name, "mlx5_0+mlx5_1");
	assert_string_equal(braid_vdev_props(1)->name, "mlx5_3");
	assert_string_equal(braid_vdev_props(2)->name, "mlx5_2+mlx5_4");
	assert_int_equal(braid_vdev_get(2)->nic[1], 4);
	/* NCCL sees each as one NIC of its own: vProps {1, {d}} */
	assert_int_equal(braid_vdev_props(2)->vdev.n, 1);
	assert_int_equal(braid_vdev_props(2)->vdev.nic[0], 2);
}

/* Guards the parser's errors: each names what is wrong. */
static void merge_list_errors(void **state)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "mlx5_0+mlx5_9", "no NIC named \"mlx5_9\"" },
		{ "mlx5_0+mlx5_0", "named twice" },
		{ "mlx5_0,mlx5_0", "named twice" },
		{ "mlx5_0+mlx5_1+mlx5_2+mlx5_3+mlx5_4+mlx5_5+mlx5_6+mlx5_7+mlx5_8",
		  "more than 8 NICs" },
		{ "mlx5_0++mlx5_1", "empty name" },
		{ "mlx5_0,", "trailing comma" },
		{ "mlx5_0:2", "no NIC named" },
	};
	struct braid_dev_props nine[9]; /* mlx5_0 .. mlx5_8: one more than a device holds */
	struct braid_vdev g[8];
	char why[160];
	int n;

	(void)state;
	memset(nine, 0, sizeof(nine));
	for (int i = 0; i < 9; i++)
		snprintf(nine[i].name, sizeof(nine[i].name), "mlx5_%d", i);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(braid_vdev_parse_list(bad[i].text, nine, 9, g, 8, &n, why,
						       sizeof(why)),
				 -1);
		if (!strstr(why, bad[i].why))
			fail_msg("\"%s\": \"%s\" does not say \"%s\"", bad[i].text, why,
				 bad[i].why);
	}
	/* through setup: init fails with a WARN that shows how to write it */
	load("mlx5_0+nope", 11, 4, -1);
	assert_non_null(strstr(unit_log, "mlx5_0+mlx5_1,mlx5_2+mlx5_3"));
	teardown(NULL);
	/* more NICs in a device than the backend stripes over */
	load("mlx5_0+mlx5_1", 11, 1, 0); /* the backend cannot: a WARN, one per NIC */
	assert_int_equal(braid_vdev_count(), 5);
}

/* Guards the default under v8 (braid fuses rails itself: NCCL v8 cannot ask) when the
 * topology has no rails: one device per NIC, never a failure. */
static void auto_under_v8_without_topology(void **state)
{
	(void)state;
	load("auto", 8, 4, 0);
	assert_int_equal(braid_vdev_count(), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(one_device_per_nic, setup, teardown),
		cmocka_unit_test_setup_teardown(make_fuses_and_reports, setup, teardown),
		cmocka_unit_test_setup_teardown(make_refuses_bad_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(merge_list, setup, teardown),
		cmocka_unit_test_setup_teardown(merge_list_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(auto_under_v8_without_topology, setup, teardown),
	};

	return cmocka_run_group_tests_name("vdev", tests, NULL, NULL);
}
