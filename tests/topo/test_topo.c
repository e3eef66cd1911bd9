// SPDX-License-Identifier: Apache-2.0
/*
 * topo/ against the hwloc XML machines in tests/topo/ (written by gen-fixtures.py, plus
 * one real machine from hwloc's test suite): exact GPUs, NICs, path types, rails and
 * warnings for each, lookups, and error handling for broken or missing input.
 * Run from the repository root (tests/run-tests.sh does).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "topo/topo.h"
#include "topo/topo_int.h"

#define DIR "tests/topo/"

enum {
	PIX = BRAID_TOPO_PATH_PIX,
	PXB = BRAID_TOPO_PATH_PXB,
	PHB = BRAID_TOPO_PATH_PHB,
	NODE = BRAID_TOPO_PATH_NODE,
	SYS = BRAID_TOPO_PATH_SYS
};
enum { VERBS = BRAID_TOPO_NIC_VERBS, EFA = BRAID_TOPO_NIC_EFA, NETDEV = BRAID_TOPO_NIC_NETDEV };
enum {
	W_GPU_SYS = BRAID_TOPO_WARN_GPU_SYS,
	W_NIC_FAR = BRAID_TOPO_WARN_NIC_FAR,
	W_MIXED = BRAID_TOPO_WARN_MIXED_SPEED,
	W_NO_RDMA = BRAID_TOPO_WARN_NO_RDMA
};

struct want_gpu {
	const char *bus;
	int cuda, numa, rail;
};
struct want_nic {
	const char *name, *netdev;
	int kind;
	const char *bus;
	int numa, rail;
};
struct want_path {
	int gpu;
	const char *nic;
	int path, distance;
};
struct want_warn {
	int code, gpu, nic, rail;
};

static struct braid_topo *load_ok(const char *file)
{
	char err[256] = "";
	struct braid_topo *t = braid_topo_load(file, err, sizeof(err));

	if (!t)
		fail_msg("loading %s: %s", file, err);
	assert_string_equal(braid_topo_source(t), file);
	return t;
}

static int nic_index(const struct braid_topo *t, const char *name)
{
	for (int i = 0; i < braid_topo_nic_count(t); i++) {
		struct braid_topo_nic_info n;

		assert_int_equal(braid_topo_nic_info(t, i, &n), 0);
		if (!strcmp(n.name, name))
			return i;
	}
	fail_msg("no NIC %s", name);
	return -1;
}

static void check_gpus(const struct braid_topo *t, const struct want_gpu *w, int n)
{
	assert_int_equal(braid_topo_gpu_count(t), n);
	for (int i = 0; i < n; i++) {
		struct braid_topo_gpu_info g;

		assert_int_equal(braid_topo_gpu_info(t, i, &g), 0);
		assert_string_equal(g.bus_id, w[i].bus);
		assert_int_equal(g.cuda_index, w[i].cuda);
		assert_int_equal(g.numa_node, w[i].numa);
		assert_int_equal(g.rail, w[i].rail);
		assert_int_equal(braid_topo_gpu_rail(t, w[i].bus), w[i].rail);
		if (w[i].cuda >= 0)
			assert_int_equal(braid_topo_cuda_rail(t, w[i].cuda), w[i].rail);
	}
	assert_int_equal(braid_topo_gpu_info(t, n, &(struct braid_topo_gpu_info){ 0 }), -ENOENT);
}

static void check_nics(const struct braid_topo *t, const struct want_nic *w, int n)
{
	assert_int_equal(braid_topo_nic_count(t), n);
	for (int i = 0; i < n; i++) {
		struct braid_topo_nic_info c;
		struct braid_topo_nic_place p;

		assert_int_equal(braid_topo_nic_info(t, i, &c), 0);
		assert_string_equal(c.name, w[i].name);
		assert_string_equal(c.netdev, w[i].netdev);
		assert_int_equal(c.kind, w[i].kind);
		assert_int_equal(c.rdma, w[i].kind != NETDEV);
		assert_string_equal(c.bus_id, w[i].bus);
		assert_int_equal(c.numa_node, w[i].numa);
		assert_int_equal(c.rail, w[i].rail);
		/* Every name and the bus id find the same placement. */
		assert_int_equal(braid_topo_nic_place(t, w[i].name, &p), 0);
		assert_string_equal(p.bus_id, w[i].bus);
		assert_string_equal(p.pci_path, c.pci_path);
		assert_int_equal(p.numa_node, w[i].numa);
		assert_int_equal(p.rail, w[i].rail);
		assert_int_equal(braid_topo_nic_rail(t, w[i].name), w[i].rail);
		if (w[i].netdev[0]) {
			assert_int_equal(braid_topo_nic_place(t, w[i].netdev, &p), 0);
			assert_string_equal(p.bus_id, w[i].bus);
		}
		if (w[i].bus[0]) {
			size_t len = strlen(c.pci_path), blen = strlen(w[i].bus);

			assert_int_equal(braid_topo_nic_place(t, w[i].bus, &p), 0);
			assert_int_equal(p.rail, w[i].rail);
			assert_true(len > blen);
			assert_string_equal(c.pci_path + len - blen, w[i].bus);
			assert_memory_equal(c.pci_path, "/sys/devices/pci", 16);
		}
	}
}

static void check_paths(const struct braid_topo *t, const struct want_path *w, int n)
{
	for (int i = 0; i < n; i++) {
		enum braid_topo_path p;
		int d;

		assert_int_equal(braid_topo_path(t, w[i].gpu, nic_index(t, w[i].nic), &p, &d), 0);
		if ((int)p != w[i].path || d != w[i].distance)
			fail_msg("GPU %d to %s: got %s/%d, want %s/%d", w[i].gpu, w[i].nic,
				 braid_topo_path_name(p), d, braid_topo_path_name(w[i].path),
				 w[i].distance);
	}
}

static void check_warnings(const struct braid_topo *t, const struct want_warn *w, int n)
{
	int got = braid_topo_warning_count(t);

	for (int i = 0; i < got; i++) {
		struct braid_topo_warning x;

		assert_int_equal(braid_topo_warning(t, i, &x), 0);
		assert_non_null(x.text);
		assert_null(strchr(x.text, '\n'));
		if (i >= n || (int)x.code != w[i].code || x.gpu != w[i].gpu || x.nic != w[i].nic ||
		    x.rail != w[i].rail)
			fail_msg("warning %d unexpected: code %d gpu %d nic %d rail %d: %s", i,
				 x.code, x.gpu, x.nic, x.rail, x.text);
	}
	assert_int_equal(got, n);
}

static void check_rail(const struct braid_topo *t, int rail, const char *const *want, int n)
{
	const char *names[64];
	int got = braid_topo_rail_nics(t, rail, names, 64);

	assert_int_equal(got, n);
	for (int i = 0; i < n; i++)
		assert_string_equal(names[i], want[i]);
}

static int has_note(const struct braid_topo *t, const char *part)
{
	for (int i = 0; i < braid_topo_note_count(t); i++)
		if (strstr(braid_topo_note(t, i), part))
			return 1;
	return 0;
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* 8 GPUs, one ConnectX per GPU pair under each PCIe switch; mlx5_4 one switch up. */
static void test_nic_per_pair(void **state)
{
	static const struct want_gpu gpus[] = {
		{ "0000:13:00.0", 0, 0, 0 }, { "0000:14:00.0", 1, 0, 0 },
		{ "0000:33:00.0", 2, 0, 1 }, { "0000:34:00.0", 3, 0, 1 },
		{ "0000:93:00.0", 4, 1, 2 }, { "0000:94:00.0", 5, 1, 2 },
		{ "0000:b5:00.0", 6, 1, 3 }, { "0000:b6:00.0", 7, 1, 3 },
	};
	static const struct want_nic nics[] = {
		{ "eno1", "", NETDEV, "0000:01:00.0", 0, -1 },
		{ "mlx5_0", "ib0", VERBS, "0000:15:00.0", 0, 0 },
		{ "mlx5_1", "ib1", VERBS, "0000:35:00.0", 0, 1 },
		{ "mlx5_2", "ib2", VERBS, "0000:95:00.0", 1, 2 },
		{ "mlx5_3", "ib3", VERBS, "0000:b7:00.0", 1, 3 },
		{ "mlx5_4", "ens8f0", VERBS, "0000:b8:00.0", 1, -1 },
	};
	static const struct want_path paths[] = {
		{ 0, "mlx5_0", PIX, 4 },  { 1, "mlx5_0", PIX, 4 },   { 0, "mlx5_1", NODE, 10 },
		{ 0, "mlx5_2", SYS, 12 }, { 0, "eno1", NODE, 8 },    { 6, "mlx5_3", PIX, 4 },
		{ 6, "mlx5_4", PXB, 6 },  { 4, "mlx5_3", NODE, 12 }, { 7, "mlx5_0", SYS, 14 },
	};
	static const char *const r0[] = { "mlx5_0" }, *const r3[] = { "mlx5_3" };
	struct braid_topo *t = load_ok(DIR "8gpu-nic-per-pair.xml");
	struct braid_topo_nic_place p;

	(void)state;
	check_gpus(t, gpus, N(gpus));
	check_nics(t, nics, N(nics));
	check_paths(t, paths, N(paths));
	assert_int_equal(braid_topo_rail_count(t), 4);
	check_rail(t, 0, r0, 1);
	check_rail(t, 3, r3, 1);
	check_warnings(t, NULL, 0);
	assert_int_equal(braid_topo_note_count(t), 0);
	assert_int_equal(braid_topo_nic_place(t, "mlx5_3", &p), 0);
	assert_string_equal(p.pci_path, "/sys/devices/pci0000:b0/0000:b0:01.0/0000:b1:00.0/"
					"0000:b2:00.0/0000:b3:00.0/0000:b4:02.0/0000:b7:00.0");
	braid_topo_free(t);
}

/* 8 H100s, each with four EFA devices on its PCIe switch. */
static void test_four_efa(void **state)
{
	static const struct want_path paths[] = {
		{ 0, "rdmap20s0", PIX, 4 },   { 0, "rdmap23s0", PIX, 4 },
		{ 0, "rdmap36s0", NODE, 10 }, { 0, "rdmap148s0", SYS, 12 },
		{ 7, "rdmap199s0", PIX, 4 },
	};
	static const char *const r0[] = { "rdmap20s0", "rdmap21s0", "rdmap22s0", "rdmap23s0" };
	static const char *const r7[] = { "rdmap196s0", "rdmap197s0", "rdmap198s0", "rdmap199s0" };
	struct braid_topo *t = load_ok(DIR "8gpu-4efa-per-gpu.xml");
	struct braid_topo_nic_place p;
	const char *few[2];

	(void)state;
	assert_int_equal(braid_topo_gpu_count(t), 8);
	assert_int_equal(braid_topo_nic_count(t), 32);
	for (int g = 0; g < 8; g++) {
		struct braid_topo_gpu_info gi;

		assert_int_equal(braid_topo_gpu_info(t, g, &gi), 0);
		assert_int_equal(gi.cuda_index, g);
		assert_int_equal(gi.rail, g);
		assert_int_equal(gi.numa_node, g / 4);
		assert_int_equal(braid_topo_rail_nics(t, g, NULL, 0), 4);
	}
	for (int n = 0; n < 32; n++) {
		struct braid_topo_nic_info ni;

		assert_int_equal(braid_topo_nic_info(t, n, &ni), 0);
		assert_int_equal(ni.kind, EFA);
		assert_int_equal(ni.rail, n / 4);
		assert_int_equal(ni.numa_node, n / 16);
	}
	check_paths(t, paths, N(paths));
	assert_int_equal(braid_topo_rail_count(t), 8);
	check_rail(t, 0, r0, 4);
	check_rail(t, 7, r7, 4);
	/* max smaller than the rail: the count is still the rail's size. */
	assert_int_equal(braid_topo_rail_nics(t, 7, few, 2), 4);
	assert_string_equal(few[1], "rdmap197s0");
	assert_int_equal(braid_topo_rail_nics(t, 8, few, 2), -ENOENT);
	assert_int_equal(braid_topo_rail_nics(t, -1, few, 2), -ENOENT);
	/* libfabric domain names find their device. */
	assert_int_equal(braid_topo_nic_place(t, "rdmap164s0-rdm", &p), 0);
	assert_string_equal(p.bus_id, "0000:a4:00.0");
	assert_int_equal(p.rail, 5);
	assert_int_equal(braid_topo_nic_place(t, "rdmap164s0-dgrm", &p), 0);
	assert_int_equal(braid_topo_nic_place(t, "rdmap999s0-rdm", &p), -ENOENT);
	check_warnings(t, NULL, 0);
	braid_topo_free(t);
}

/* All NICs on socket 1, all GPUs on socket 0, and the two NICs of different speeds. */
static void test_remote_nics(void **state)
{
	static const struct want_gpu gpus[] = {
		{ "0000:13:00.0", 0, 0, 0 },
		{ "0000:14:00.0", 1, 0, 0 },
		{ "0000:33:00.0", 2, 0, 0 },
		{ "0000:34:00.0", 3, 0, 0 },
	};
	static const struct want_nic nics[] = {
		{ "mlx5_0", "ib0", VERBS, "0000:81:00.0", 1, 0 },
		{ "mlx5_1", "ib1", VERBS, "0000:82:00.0", 1, 0 },
	};
	static const struct want_path paths[] = {
		{ 0, "mlx5_0", SYS, 10 },
		{ 0, "mlx5_1", SYS, 10 },
		{ 3, "mlx5_1", SYS, 10 },
	};
	static const struct want_warn warns[] = {
		{ W_GPU_SYS, 0, 0, 0 }, { W_GPU_SYS, 1, 0, 0 },  { W_GPU_SYS, 2, 0, 0 },
		{ W_GPU_SYS, 3, 0, 0 }, { W_NIC_FAR, -1, 0, 0 }, { W_NIC_FAR, -1, 1, 0 },
		{ W_MIXED, -1, -1, 0 },
	};
	static const char *const r0[] = { "mlx5_0", "mlx5_1" };
	struct braid_topo *t = load_ok(DIR "2socket-remote-nics.xml");
	struct braid_topo_warning w;

	(void)state;
	check_gpus(t, gpus, N(gpus));
	check_nics(t, nics, N(nics));
	check_paths(t, paths, N(paths));
	assert_int_equal(braid_topo_rail_count(t), 1);
	check_rail(t, 0, r0, 2);
	check_warnings(t, warns, N(warns));
	assert_int_equal(braid_topo_warning(t, 0, &w), 0);
	assert_string_equal(
		w.text,
		"GPU 0000:13:00.0 (cuda0) on NUMA node 0: nearest NICs mlx5_0, mlx5_1 are "
		"SYS-distant (NUMA node 1), so its traffic crosses the CPU interconnect at up to "
		"half line rate; put a NIC on the GPU's socket or move the GPU next to one");
	assert_int_equal(braid_topo_warning(t, 6, &w), 0);
	assert_non_null(strstr(w.text, "mlx5_0 31.5 GB/s, mlx5_1 15.8 GB/s"));
	braid_topo_free(t);
}

static void test_no_nic(void **state)
{
	static const struct want_gpu gpus[] = {
		{ "0000:01:00.0", 0, 0, -1 },
		{ "0000:02:00.0", 1, 0, -1 },
	};
	static const struct want_warn warns[] = { { W_NO_RDMA, -1, -1, -1 } };
	struct braid_topo *t = load_ok(DIR "no-nic.xml");
	struct braid_topo_nic_place p;
	struct braid_topo_warning w;

	(void)state;
	check_gpus(t, gpus, N(gpus));
	check_nics(t, NULL, 0);
	assert_int_equal(braid_topo_rail_count(t), 0);
	assert_int_equal(braid_topo_path(t, 0, 0, NULL, NULL), -ENOENT);
	assert_int_equal(braid_topo_nic_place(t, "mlx5_0", &p), -ENOENT);
	check_warnings(t, warns, N(warns));
	assert_int_equal(braid_topo_warning(t, 0, &w), 0);
	assert_non_null(strstr(w.text, "no NIC found at all"));
	braid_topo_free(t);
}

static void test_no_gpu(void **state)
{
	static const struct want_nic nics[] = {
		{ "eno1", "", NETDEV, "0000:01:00.0", 0, -1 },
		{ "mlx5_0", "ib0", VERBS, "0000:17:00.0", 0, -1 },
		{ "mlx5_1", "ib1", VERBS, "0000:98:00.0", 1, -1 },
	};
	struct braid_topo *t = load_ok(DIR "no-gpu.xml");

	(void)state;
	check_gpus(t, NULL, 0);
	check_nics(t, nics, N(nics));
	assert_int_equal(braid_topo_rail_count(t), 0);
	assert_int_equal(braid_topo_gpu_rail(t, "0000:17:00.0"), -ENOENT);
	assert_int_equal(braid_topo_cuda_rail(t, 0), -ENOENT);
	check_warnings(t, NULL, 0);
	assert_true(has_note(t, "no GPU found"));
	braid_topo_free(t);
}

/* A real two-socket host from hwloc's test suite: GPUs 03:00.0 (socket 0), 83:00.0 and
 * 84:00.0 (socket 1, only 84:00.0 has cuda0), mlx5_0 behind 84:00.0's root port, two
 * gigabit ports. Gigabit ports are no rail members while an RDMA NIC exists. */
static void test_hwloc_real(void **state)
{
	static const struct want_gpu gpus[] = {
		{ "0000:03:00.0", -1, 0, 0 },
		{ "0000:83:00.0", -1, 1, 0 },
		{ "0000:84:00.0", 0, 1, 0 },
	};
	static const struct want_nic nics[] = {
		{ "mlx5_0", "ib0", VERBS, "0000:04:00.0", 1, 0 },
		{ "eth0", "", NETDEV, "0000:81:00.0", 1, -1 },
		{ "eth1", "", NETDEV, "0000:81:00.1", 1, -1 },
	};
	static const struct want_path paths[] = {
		{ 0, "mlx5_0", SYS, 8 },
		{ 1, "mlx5_0", PHB, 4 },
		{ 2, "mlx5_0", PIX, 2 },
		{ 1, "eth0", PHB, 4 },
	};
	static const struct want_warn warns[] = { { W_GPU_SYS, 0, 0, 0 } };
	struct braid_topo *t = load_ok(DIR "hwloc-2socket-3gpu-mlx5.xml");

	(void)state;
	check_gpus(t, gpus, N(gpus));
	check_nics(t, nics, N(nics));
	check_paths(t, paths, N(paths));
	assert_int_equal(braid_topo_rail_count(t), 1);
	check_warnings(t, warns, N(warns));
	assert_true(has_note(t, "2 GPUs without a CUDA or NVML device"));
	assert_true(has_note(t, "no PCIe link speeds"));
	/* Lookups: short bus id, any case, by CUDA index; unknowns. */
	assert_int_equal(braid_topo_gpu_rail(t, "84:00.0"), 0);
	assert_int_equal(braid_topo_gpu_rail(t, "0000:84:00.0"), 0);
	assert_int_equal(braid_topo_gpu_rail(t, "0000:99:00.0"), -ENOENT);
	assert_int_equal(braid_topo_gpu_rail(t, "garbage"), -ENOENT);
	assert_int_equal(braid_topo_gpu_rail(t, NULL), -ENOENT);
	assert_int_equal(braid_topo_cuda_rail(t, 0), 0);
	assert_int_equal(braid_topo_cuda_rail(t, 1), -ENOENT);
	assert_int_equal(braid_topo_nic_rail(t, "nope"), -ENOENT);
	assert_int_equal(braid_topo_nic_rail(t, "eth1"), -1);
	braid_topo_free(t);
}

/* Nothing on PCI (a bare VM): loads, and says what it could not see. */
static void test_no_pci(void **state)
{
	static const struct want_warn warns[] = { { W_NO_RDMA, -1, -1, -1 } };
	struct braid_topo *t = load_ok(DIR "no-pci.xml");

	(void)state;
	check_gpus(t, NULL, 0);
	check_nics(t, NULL, 0);
	check_warnings(t, warns, N(warns));
	assert_true(has_note(t, "hwloc saw no PCI devices"));
	assert_true(has_note(t, "no GPU found"));
	braid_topo_free(t);
}

static void test_bus_id_parse(void **state)
{
	char out[16];

	(void)state;
	assert_int_equal(braid_topo_parse_bus_id("0000:17:00.0", out), 0);
	assert_string_equal(out, "0000:17:00.0");
	assert_int_equal(braid_topo_parse_bus_id("B8:00.1", out), 0);
	assert_string_equal(out, "0000:b8:00.1");
	assert_int_equal(braid_topo_parse_bus_id("0001:b8:1f.7", out), 0);
	assert_string_equal(out, "0001:b8:1f.7");
	assert_int_equal(braid_topo_parse_bus_id("0000:17:00.8", out), -EINVAL);
	assert_int_equal(braid_topo_parse_bus_id("0000:17:20.0", out), -EINVAL);
	assert_int_equal(braid_topo_parse_bus_id("0000:17:00.0x", out), -EINVAL);
	assert_int_equal(braid_topo_parse_bus_id(" 17:00.0", out), -EINVAL);
	assert_int_equal(braid_topo_parse_bus_id("mlx5_0", out), -EINVAL);
	assert_int_equal(braid_topo_parse_bus_id("", out), -EINVAL);
}

static void expect_load_error(const char *file, const char *part)
{
	char err[256] = "";

	assert_null(braid_topo_load(file, err, sizeof(err)));
	if (!strstr(err, part))
		fail_msg("loading %s: error '%s' lacks '%s'", file ? file : "(env)", err, part);
	assert_null(strchr(err, '\n'));
}

static void test_errors(void **state)
{
	char tmpdir[] = "/tmp/braid-topo-XXXXXX", path[128];
	FILE *f;

	(void)state;
	expect_load_error(DIR "does-not-exist.xml", "No such file");
	expect_load_error(DIR "malformed.xml", "not a valid hwloc XML topology");
	expect_load_error(DIR "not-a-topology.xml", "not a valid hwloc XML topology");
	expect_load_error("tests/topo", "is a directory");
	expect_load_error("", "empty topology XML file name");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/empty.xml", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	expect_load_error(path, "is empty");
	unlink(path);
	rmdir(tmpdir);
	/* A NULL or zero-size error buffer is allowed. */
	assert_null(braid_topo_load(DIR "malformed.xml", NULL, 0));
	/* NULL topologies and arguments are errors, never crashes. */
	braid_topo_free(NULL);
	assert_int_equal(braid_topo_nic_place(NULL, "x", &(struct braid_topo_nic_place){ 0 }),
			 -EINVAL);
	assert_int_equal(braid_topo_gpu_count(NULL), 0);
	assert_int_equal(braid_topo_warning_count(NULL), 0);
	assert_null(braid_topo_note(NULL, 0));
}

/* $HWLOC_XMLFILE is used when no file is given, and named in its errors. */
static void test_env(void **state)
{
	struct braid_topo *t;
	char err[256];

	(void)state;
	setenv("HWLOC_XMLFILE", DIR "no-gpu.xml", 1);
	t = braid_topo_load(NULL, err, sizeof(err));
	assert_non_null(t);
	assert_string_equal(braid_topo_source(t), DIR "no-gpu.xml");
	assert_int_equal(braid_topo_nic_count(t), 3);
	braid_topo_free(t);
	/* An explicit file wins over the variable. */
	t = load_ok(DIR "no-nic.xml");
	assert_int_equal(braid_topo_nic_count(t), 0);
	braid_topo_free(t);
	setenv("HWLOC_XMLFILE", DIR "missing.xml", 1);
	expect_load_error(NULL, "$HWLOC_XMLFILE");
	unsetenv("HWLOC_XMLFILE");
}

/* Every prefix of a fixture loads or fails cleanly (run under ASan/valgrind). */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
static void lsan_disable(void)
{
	__lsan_disable();
}

static void lsan_enable(void)
{
	__lsan_enable();
}
#else
static void lsan_disable(void)
{
}

static void lsan_enable(void)
{
}
#endif

static void test_truncated(void **state)
{
	char tmpdir[] = "/tmp/braid-topo-XXXXXX", path[128], *buf;
	struct stat st;
	FILE *f;

	(void)state;
	assert_int_equal(stat(DIR "2socket-remote-nics.xml", &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	f = fopen(DIR "2socket-remote-nics.xml", "r");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	assert_non_null(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/cut.xml", tmpdir);
	/* hwloc 2.9's XML importer leaks the objects it made when a truncated file fails to
	 * load (braid destroys the topology; what hwloc dropped is out of reach): that
	 * window only is hidden from LeakSanitizer. */
	lsan_disable();
	for (long cut = 1; cut < st.st_size; cut += st.st_size / 23 + 1) {
		struct braid_topo *t;
		char err[256];

		f = fopen(path, "w");
		assert_non_null(f);
		assert_int_equal(fwrite(buf, 1, (size_t)cut, f), (size_t)cut);
		fclose(f);
		t = braid_topo_load(path, err, sizeof(err));
		if (!t)
			assert_true(err[0] != '\0');
		braid_topo_free(t);
	}
	lsan_enable();
	unlink(path);
	rmdir(tmpdir);
	free(buf);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void mkdirs(const char *root, const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
}

/* NICs hwloc does not list come from sysfs: a soft-RoCE device with its interface, a
 * virtual interface, a PCI verbs device; lo is no NIC. */
static void test_sysfs_virtual(void **state)
{
	char root[] = "/tmp/braid-sysfs-XXXXXX", p[512], cmd[600];
	struct braid_topo *t = calloc(1, sizeof(*t));
	struct braid_topo_nic_place pl;

	(void)state;
	assert_non_null(t);
	assert_non_null(mkdtemp(root));
	mkdirs(root, "class/infiniband/rxe0");
	mkdirs(root, "class/infiniband/mlx5_9");
	mkdirs(root, "class/net/eth7");
	mkdirs(root, "class/net/lo");
	mkdirs(root, "class/net/ifb0");
	mkdirs(root, "devices/pci0000:00/0000:00:05.0");
	snprintf(p, sizeof(p), "%s/class/infiniband/rxe0/parent", root);
	write_file(p, "eth7\n");
	snprintf(p, sizeof(p), "%s/devices/pci0000:00/0000:00:05.0/numa_node", root);
	write_file(p, "1\n");
	snprintf(p, sizeof(p), "%s/class/infiniband/mlx5_9/device", root);
	assert_int_equal(symlink("../../../devices/pci0000:00/0000:00:05.0", p), 0);
	/* mlx5_9's Ethernet interface: same PCI device, so its netdev. */
	mkdirs(root, "class/net/enp0s5");
	snprintf(p, sizeof(p), "%s/class/net/enp0s5/device", root);
	assert_int_equal(symlink("../../../devices/pci0000:00/0000:00:05.0", p), 0);

	assert_int_equal(braid_topo_scan_sysfs(t, root), 0);
	braid_topo_sort(t);
	assert_int_equal(braid_topo_build_rails(t), 0);
	assert_int_equal(braid_topo_nic_count(t), 3);
	assert_int_equal(braid_topo_nic_place(t, "mlx5_9", &pl), 0);
	assert_string_equal(pl.bus_id, "0000:00:05.0");
	assert_int_equal(pl.numa_node, 1);
	assert_non_null(strstr(pl.pci_path, "/devices/pci0000:00/0000:00:05.0"));
	assert_int_equal(braid_topo_nic_place(t, "enp0s5", &pl), 0);
	assert_string_equal(pl.bus_id, "0000:00:05.0");
	assert_int_equal(braid_topo_nic_place(t, "rxe0", &pl), 0);
	assert_string_equal(pl.bus_id, "");
	assert_string_equal(pl.pci_path, "");
	assert_int_equal(pl.numa_node, -1);
	assert_int_equal(pl.rail, -1);
	assert_int_equal(braid_topo_nic_place(t, "eth7", &pl), 0); /* rxe0's interface */
	assert_int_equal(braid_topo_nic_place(t, "ifb0", &pl), 0);
	assert_int_equal(braid_topo_nic_place(t, "lo", &pl), -ENOENT);
	braid_topo_free(t);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

/* This machine, whatever it has: loads, and its facts are consistent. */
static void test_this_machine(void **state)
{
	struct braid_topo *t;
	char err[256];

	(void)state;
	unsetenv("HWLOC_XMLFILE");
	t = braid_topo_load(NULL, err, sizeof(err));
	if (!t)
		fail_msg("this machine: %s", err);
	assert_string_equal(braid_topo_source(t), "this machine");
	for (int i = 0; i < braid_topo_nic_count(t); i++) {
		struct braid_topo_nic_info n;
		struct braid_topo_nic_place p;

		assert_int_equal(braid_topo_nic_info(t, i, &n), 0);
		assert_int_equal(braid_topo_nic_place(t, n.name, &p), 0);
		assert_string_equal(p.bus_id, n.bus_id);
	}
	if (!braid_topo_gpu_count(t))
		assert_true(has_note(t, "no GPU found"));
	braid_topo_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nic_per_pair), cmocka_unit_test(test_four_efa),
		cmocka_unit_test(test_remote_nics),  cmocka_unit_test(test_no_nic),
		cmocka_unit_test(test_no_gpu),       cmocka_unit_test(test_hwloc_real),
		cmocka_unit_test(test_no_pci),       cmocka_unit_test(test_bus_id_parse),
		cmocka_unit_test(test_errors),       cmocka_unit_test(test_env),
		cmocka_unit_test(test_truncated),    cmocka_unit_test(test_sysfs_virtual),
		cmocka_unit_test(test_this_machine),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
