// SPDX-License-Identifier: Apache-2.0
/*
 * ncclNet v12's railId and planeId (plugin/net_ids.c): railId numbered by the GPU a rail
 * serves, so that two hosts built alike agree whatever order their NICs were found and
 * named in; planeId (and an explicit rail) from NCCL_IB_HCA's hca:port:rail:plane, as
 * NCCL's IB transport reads it (src/transport/net_ib/init.cc, src/misc/utils.cc); a fused
 * device's ids as ncclIbMakeVDeviceInternal combines them.
 */
#include <stdio.h>
#include <string.h>

#include "plugin/log.h"
#include "plugin/net_ids.h"
#include "tests/unit/unit.h"
#include "topo/topo.h"

#define FIXTURES "tests/topo/"
#define NNICS 5

/* The NICs as the ib backend lists them: by name, mlx5_0 first. */
static void nics_by_name(struct braid_dev_props *p)
{
	memset(p, 0, NNICS * sizeof(*p));
	for (int i = 0; i < NNICS; i++) {
		snprintf(p[i].name, sizeof(p[i].name), "mlx5_%d", i);
		p[i].port = 1;
		p[i].rail_id = p[i].plane_id = 1234; /* must be overwritten */
	}
}

static struct braid_topo *load(const char *file)
{
	char err[256];
	struct braid_topo *t = braid_topo_load(file, err, sizeof(err));

	if (!t)
		fail_msg("%s: %s", file, err);
	return t;
}

/* railId of the NIC at PCI bus id `bus`, after assign() on NICs listed by name. */
static int rail_at(const struct braid_topo *t, const struct braid_dev_props *p, const char *bus)
{
	for (int i = 0; i < NNICS; i++) {
		struct braid_topo_nic_place place;

		assert_int_equal(braid_topo_nic_place(t, p[i].name, &place), 0);
		if (!strcmp(place.bus_id, bus))
			return p[i].rail_id;
	}
	fail_msg("no NIC at %s", bus);
	return -2;
}

/*
 * Two hosts of one cluster, the same machine: on the second the kernel named the NICs
 * in another order and hwloc lists the PCI trees in reverse. The NIC at each PCI slot
 * must get the same railId on both (rail k serves GPUs 2k and 2k+1 everywhere), though
 * mlx5_0 is in rail 0 on one host and in rail 3 on the other.
 */
static void rails_agree_across_hosts(void **state)
{
	static const struct {
		const char *bus_a, *bus_b; /* the GPU NICs sit at 15:00.0.. in the renamed one */
		int rail;
	} slots[] = {
		{ "0000:15:00.0", "0000:15:00.0", 0 },
		{ "0000:35:00.0", "0000:35:00.0", 1 },
		{ "0000:95:00.0", "0000:95:00.0", 2 },
		{ "0000:b7:00.0", "0000:b7:00.0", 3 },
		{ "0000:b8:00.0", "0000:b8:00.0", NCCL_NET_ID_UNDEF },
	};
	struct braid_topo *a = load(FIXTURES "8gpu-nic-per-pair.xml");
	struct braid_topo *b = load(FIXTURES "8gpu-nic-per-pair-renamed.xml");
	struct braid_dev_props pa[NNICS], pb[NNICS];

	(void)state;
	nics_by_name(pa);
	nics_by_name(pb);
	assert_int_equal(braid_net_ids_assign(pa, NNICS, a, NULL), 0);
	assert_int_equal(braid_net_ids_assign(pb, NNICS, b, NULL), 0);
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		int ra = rail_at(a, pa, slots[i].bus_a), rb = rail_at(b, pb, slots[i].bus_b);

		printf("slot %s: railId %d on host A, %d on host B\n", slots[i].bus_a, ra, rb);
		assert_int_equal(ra, slots[i].rail);
		assert_int_equal(rb, slots[i].rail);
	}
	/* the names differ: the same name is another rail on the other host */
	assert_int_equal(pa[0].rail_id, 0);
	assert_int_equal(pb[0].rail_id, 3);
	for (int i = 0; i < NNICS; i++)
		assert_int_equal(pa[i].plane_id, NCCL_NET_ID_UNDEF);
	braid_topo_free(a);
	braid_topo_free(b);
}

/* Without a GPU there is no rail to number by: every railId is undefined, and NCCL
 * falls back to its own matching (the NIC's asic and port). Likewise without topology. */
static void no_gpu_no_rail(void **state)
{
	struct braid_topo *t = load(FIXTURES "no-gpu.xml");
	struct braid_dev_props p[NNICS];

	(void)state;
	nics_by_name(p);
	braid_net_ids_assign(p, NNICS, t, NULL);
	for (int i = 0; i < NNICS; i++)
		assert_int_equal(p[i].rail_id, NCCL_NET_ID_UNDEF);
	nics_by_name(p);
	braid_net_ids_assign(p, NNICS, NULL, "");
	for (int i = 0; i < NNICS; i++) {
		assert_int_equal(p[i].rail_id, NCCL_NET_ID_UNDEF);
		assert_int_equal(p[i].plane_id, NCCL_NET_ID_UNDEF);
	}
	braid_topo_free(t);
}

/* NCCL_IB_HCA entries hca:port:rail:plane. A plane alone leaves the rails to the
 * topology; once an entry gives a rail the list is the only source (the other NICs'
 * rails are undefined, never a mix of two numberings). */
static void ids_from_hca_list(void **state)
{
	struct braid_topo *t = load(FIXTURES "8gpu-nic-per-pair.xml");
	struct braid_dev_props p[NNICS];

	(void)state;
	nics_by_name(p);
	assert_int_equal(braid_net_ids_assign(p, NNICS, t, "mlx5_0:1::3,mlx5_2:1::4"), 0);
	assert_int_equal(p[0].rail_id, 0);
	assert_int_equal(p[0].plane_id, 3);
	assert_int_equal(p[1].rail_id, 1);
	assert_int_equal(p[1].plane_id, NCCL_NET_ID_UNDEF);
	assert_int_equal(p[2].plane_id, 4);

	nics_by_name(p);
	unit_log_reset();
	assert_int_equal(braid_net_ids_assign(p, NNICS, t, "=mlx5_3:1:7:1,mlx5_1::9,mlx5_0:2:5:5"),
			 NNICS);
	assert_int_equal(p[3].rail_id, 7); /* the topology says 3: the list wins */
	assert_int_equal(p[3].plane_id, 1);
	assert_non_null(strstr(unit_log, "mlx5_3:1: railId 7 from BRAID_IB_HCA/NCCL_IB_HCA"));
	assert_int_equal(p[1].rail_id, 9);
	assert_int_equal(p[1].plane_id, NCCL_NET_ID_UNDEF);
	/* mlx5_0's entry is for port 2, and mlx5_2 has none */
	assert_int_equal(p[0].rail_id, NCCL_NET_ID_UNDEF);
	assert_int_equal(p[0].plane_id, NCCL_NET_ID_UNDEF);
	assert_int_equal(p[2].rail_id, NCCL_NET_ID_UNDEF);

	/* first matching entry, as NCCL's matchIfList */
	nics_by_name(p);
	braid_net_ids_assign(p, NNICS, t, "mlx5:1:1:1,mlx5_0:1:2:2");
	assert_int_equal(p[0].rail_id, 1);
	assert_int_equal(p[0].plane_id, 1);

	/* an exclude list describes what is left out: no ids from it */
	nics_by_name(p);
	braid_net_ids_assign(p, NNICS, t, "^mlx5_4:1:6:6");
	assert_int_equal(p[0].rail_id, 0);
	assert_int_equal(p[4].rail_id, NCCL_NET_ID_UNDEF);
	assert_int_equal(p[0].plane_id, NCCL_NET_ID_UNDEF);

	/* a list that does not parse gives nothing (the backend refuses it) */
	nics_by_name(p);
	braid_net_ids_assign(p, NNICS, t, "mlx5_0:1:3:0:0");
	assert_int_equal(p[0].rail_id, 0);
	assert_int_equal(p[0].plane_id, NCCL_NET_ID_UNDEF);
	braid_topo_free(t);
}

static void fused(const int *rails, const int *planes, int n, int *rail, int *plane)
{
	struct braid_dev_props p[4];
	const struct braid_dev_props *pp[4];

	for (int i = 0; i < n; i++) {
		p[i].rail_id = rails[i];
		p[i].plane_id = planes[i];
		pp[i] = &p[i];
	}
	braid_net_ids_merge(pp, n, rail, plane);
}

/* A fused device, as ncclIbMakeVDeviceInternal: one rail if all share it, else none;
 * one plane if all share it, several planes as NCCL's virtual bit plus one bit each. */
static void fused_ids(void **state)
{
	int rail, plane;

	(void)state;
	fused((int[]){ 2 }, (int[]){ 5 }, 1, &rail, &plane);
	assert_true(rail == 2 && plane == 5);
	fused((int[]){ 2, 2 }, (int[]){ 1, 1 }, 2, &rail, &plane);
	assert_true(rail == 2 && plane == 1);
	fused((int[]){ 2, 3 }, (int[]){ 0, 1 }, 2, &rail, &plane);
	assert_int_equal(rail, NCCL_NET_ID_UNDEF);
	assert_int_equal(plane, (1 << 14) | 0x3);
	fused((int[]){ 2, -1 }, (int[]){ 0, -1 }, 2, &rail, &plane);
	assert_true(rail == NCCL_NET_ID_UNDEF && plane == NCCL_NET_ID_UNDEF);
	fused((int[]){ 1, 1, 1 }, (int[]){ 0, 14, 0 }, 3, &rail, &plane);
	assert_true(rail == 1 && plane == NCCL_NET_ID_UNDEF);
	fused((int[]){ -1, -1 }, (int[]){ -1, -1 }, 2, &rail, &plane);
	assert_true(rail == NCCL_NET_ID_UNDEF && plane == NCCL_NET_ID_UNDEF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rails_agree_across_hosts),
		cmocka_unit_test(no_gpu_no_rail),
		cmocka_unit_test(ids_from_hca_list),
		cmocka_unit_test(fused_ids),
	};

	braid_log_set_logger(unit_logger);
	return cmocka_run_group_tests_name("net_ids", tests, NULL, NULL);
}
