// SPDX-License-Identifier: Apache-2.0
/*
 * The core against NCCL misuse: calls before init, bad devices, garbage objects, grouped
 * receives beyond maxRecvs, init/finalize reference counting, a provider that is not there.
 * Runs the real ofi backend over tcp;ofi_rxm on loopback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "plugin/core.h"
#include "plugin/counters.h"
#include "plugin/params.h"
#include "tests/unit/unit.h"

static int shm_exists(void)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm/braid-%d", (int)getpid());
	return stat(path, &st) == 0;
}

static void use_tcp(void)
{
	setenv("BRAID_BACKEND", "ofi", 1);
	setenv("BRAID_OFI_PROVIDER", "tcp;ofi_rxm", 1);
	setenv("BRAID_SOCKET_IFNAME", "lo", 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	braid_params_reset();
}

static void before_init(void **state)
{
	int n;

	(void)state;
	unit_log_reset();
	assert_int_equal(braid_finalize(), ncclInvalidUsage);
	assert_int_equal(braid_devices(&n), ncclInvalidUsage);
}

static void missing_provider_fails_loudly(void **state)
{
	(void)state;
	setenv("BRAID_BACKEND", "ofi", 1);
	setenv("BRAID_OFI_PROVIDER", "no-such-provider", 1);
	braid_params_reset();
	unit_log_reset();
	assert_int_equal(braid_init(unit_logger, 11), ncclSystemError);
	assert_non_null(strstr(unit_log, "no-such-provider"));
	assert_non_null(strstr(unit_log, "no usable network backend"));
	assert_false(shm_exists());
}

static void refcounted_init(void **state)
{
	int n = 0;

	(void)state;
	use_tcp();
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	assert_true(shm_exists());
	assert_int_equal(braid_devices(&n), ncclSuccess);
	assert_true(n >= 1);
	assert_int_equal(braid_finalize(), ncclSuccess);
	assert_true(shm_exists()); /* one reference left */
	assert_int_equal(braid_devices(&n), ncclSuccess);
	assert_int_equal(braid_finalize(), ncclSuccess);
	assert_false(shm_exists());
	assert_int_equal(braid_devices(&n), ncclInvalidUsage);
}

/* Connect a send and a receive comm in this process. */
static void loopback_pair(void **lc, void **sc, void **rc)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	time_t until = time(NULL) + 20;

	*sc = *rc = NULL;
	assert_int_equal(braid_listen(0, handle, lc), ncclSuccess);
	while ((!*sc || !*rc) && time(NULL) < until) {
		if (!*sc)
			assert_int_equal(braid_connect(0, NULL, handle, sc, NULL), ncclSuccess);
		if (!*rc)
			assert_int_equal(braid_accept(*lc, rc, NULL), ncclSuccess);
	}
	assert_non_null(*sc);
	assert_non_null(*rc);
}

/* makeVDevice: NCCL's limit per version (4 for v9..v11, 8 for v12), refused with a WARN
 * that names it; 5 to 8 under v12 get as far as the devices themselves (this host has
 * fewer: the WARN names the first one missing); nothing is made. Needs an init. */
static void make_vdevice_limits(void)
{
	static const int eight[NCCL_NET_MAX_DEVS_PER_NIC_V12] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	int d = -7, n0 = 0, n1 = 0;

	assert_int_equal(braid_devices(&n0), ncclSuccess);
	assert_true(n0 < 5);
	for (int n = 5; n <= 8; n++) {
		unit_log_reset();
		assert_int_equal(braid_make_vdevice(&d, n, eight, 12), ncclInvalidUsage);
		assert_non_null(strstr(unit_log, "is not one of braid's"));
	}
	unit_log_reset();
	assert_int_equal(braid_make_vdevice(&d, 9, eight, 12), ncclInvalidUsage);
	assert_non_null(strstr(unit_log, "9 devices; ncclNet v12 fuses 1 to 8"));
	unit_log_reset();
	assert_int_equal(braid_make_vdevice(&d, 5, eight, 11), ncclInvalidUsage);
	assert_non_null(strstr(unit_log, "5 devices; ncclNet v11 fuses 1 to 4"));
	unit_log_reset();
	assert_int_equal(braid_make_vdevice(&d, 0, eight, 12), ncclInvalidUsage);
	assert_non_null(strstr(unit_log, "0 devices; ncclNet v12 fuses 1 to 8"));
	assert_int_equal(braid_make_vdevice(&d, -1, eight, 12), ncclInvalidUsage);
	unit_log_reset();
	assert_int_equal(braid_make_vdevice(&d, 2, NULL, 12), ncclInvalidArgument);
	assert_non_null(strstr(unit_log, "NULL properties"));
	assert_int_equal(braid_make_vdevice(NULL, 2, eight, 12), ncclInvalidArgument);
	assert_int_equal(d, -7);
	assert_int_equal(braid_devices(&n1), ncclSuccess);
	assert_int_equal(n1, n0);
}

static void misuse_gets_errors(void **state)
{
	const struct braid_dev_props *p;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	uint64_t fake[16] = { 0 };
	void *lc, *sc, *rc, *mh, *req = NULL, *bad = fake;
	static char buf[3 * 4096] __attribute__((aligned(4096)));
	void *data[9];
	size_t sizes[9] = { 0 };
	int tags[9] = { 0 }, done, d;
	void *mhs[9];
	int out[8];
	ncclNetVDeviceProps_t vp = { .ndevs = 2, .devs = { 0, 0 } };

	(void)state;
	use_tcp();
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	assert_int_equal(braid_get_properties(-1, &p), ncclInvalidArgument);
	assert_int_equal(braid_get_properties(999, &p), ncclInvalidArgument);
	assert_int_equal(braid_get_properties(0, &p), ncclSuccess);
	assert_true(p->max_recvs == 8 && p->speed_mbps > 0 && (p->ptr_support & NCCL_PTR_HOST));

	/* A handle that is not braid's: refused at once, no comm. */
	memset(handle, 0x5a, sizeof(handle));
	sc = (void *)1;
	unit_log_reset();
	assert_int_equal(braid_connect(0, NULL, handle, &sc, NULL), ncclInvalidArgument);
	assert_null(sc);
	assert_non_null(strstr(unit_log, "not a braid connection handle"));

	/* Objects that are not braid's. */
	assert_int_equal(braid_isend(bad, buf, 1, 0, bad, &req), ncclInternalError);
	assert_int_equal(braid_test(bad, &done, out), ncclInternalError);
	assert_int_equal(braid_test(NULL, &done, out), ncclInternalError);
	assert_int_equal(braid_close_send(bad), ncclInternalError);
	assert_int_equal(braid_accept(bad, &rc, NULL), ncclInternalError);

	loopback_pair(&lc, &sc, &rc);
	assert_int_equal(braid_reg_mr(rc, buf, 64, NCCL_PTR_HOST, &mh), ncclSuccess);
	assert_int_equal(braid_reg_mr(rc, buf, 64, 77, &mh), ncclInvalidArgument);
	for (int i = 0; i < 9; i++) {
		data[i] = buf;
		mhs[i] = mh;
	}
	/* Grouped receives: 1..maxRecvs only. */
	assert_int_equal(braid_irecv(rc, 0, data, sizes, tags, mhs, &req), ncclInternalError);
	assert_int_equal(braid_irecv(rc, 9, data, sizes, tags, mhs, &req), ncclInternalError);
	/* A send on a receive comm. */
	assert_int_equal(braid_isend(rc, buf, 1, 0, mh, &req), ncclInternalError);
	/* A buffer outside its registration (which covers the first page). */
	data[0] = buf + 4096 * 2;
	sizes[0] = 1;
	assert_int_equal(braid_irecv(rc, 1, data, sizes, tags, mhs, &req), ncclInvalidArgument);
	/* Virtual devices: one NIC is itself; merging is refused clearly. */
	assert_int_equal(braid_make_vdevice(&d, vp.ndevs, vp.devs, 11), ncclInvalidUsage);
	vp.ndevs = 1;
	assert_int_equal(braid_make_vdevice(&d, vp.ndevs, vp.devs, 11), ncclSuccess);
	assert_int_equal(d, 0);
	make_vdevice_limits();

	assert_int_equal(braid_dereg_mr(rc, mh), ncclSuccess);
	assert_int_equal(braid_close_send(sc), ncclSuccess);
	assert_int_equal(braid_close_recv(rc), ncclSuccess);
	assert_int_equal(braid_close_listen(lc), ncclSuccess);
	assert_int_equal(braid_finalize(), ncclSuccess);
}

/* braid's tags need 60 bits; a provider that offers fewer is refused by name. */
static void ofi_tag_bits(void **state)
{
	char why[160];

	(void)state;
	assert_int_equal(ofi_tag_format_ok(0, why, sizeof(why)), 0);
	assert_int_equal(ofi_tag_format_ok(0xaaaaaaaaaaaaaaaaULL, why, sizeof(why)), 0);
	assert_int_equal(ofi_tag_format_ok(0x5555555555555555ULL, why, sizeof(why)), 0);
	assert_int_equal(ofi_tag_format_ok(1ULL << 60, why, sizeof(why)), 0);
	assert_int_equal(ofi_tag_format_ok(0x0fffffffffffffffULL, why, sizeof(why)), 0);
	assert_int_equal(ofi_tag_format_ok(0x07ffffffffffffffULL, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "59 bits"));
	assert_int_equal(ofi_tag_format_ok(0xffffffffULL, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "32 bits"));
}

static int occurrences(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/*
 * The fallback record keeps the backend's own reason (net_ofi: the provider and why it)
 * next to the core's choice, and says GPUDirect is off and why. No GPU in the topology:
 * no GPUDirect WARN.
 */
static void fallback_keeps_backend_reason(void **state)
{
	const struct braid_ctr_fallback *fb;

	(void)state;
	use_tcp();
	setenv("HWLOC_XMLFILE", "tests/topo/no-gpu.xml", 1);
	unit_log_reset();
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	fb = &braid_counters()->fallback;
	print_message("fallback why: %s\n", fb->why);
	assert_string_equal(fb->backend, "ofi");
	if (!strstr(fb->why, "ofi provider tcp;ofi_rxm: named by BRAID_OFI_PROVIDER"))
		fail_msg("fallback why \"%s\" lost net_ofi's reason", fb->why);
	if (!strstr(fb->why, "first choice"))
		fail_msg("fallback why \"%s\" lost the core's choice", fb->why);
	assert_int_equal(fb->gpudirect, 0);
	assert_string_equal(fb->gpudirect_mode, "none");
	assert_non_null(strstr(fb->gpudirect_why, "FI_HMEM"));
	assert_int_equal(occurrences(unit_log, "GPUDirect RDMA is off"), 0);
	assert_int_equal(braid_finalize(), ncclSuccess);

	/* auto, with the verbs backend tried first and not usable: both reasons kept. */
	setenv("BRAID_BACKEND", "auto", 1);
	setenv("BRAID_IB_HCA", "=no-such-hca", 1);
	braid_params_reset();
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	fb = &braid_counters()->fallback;
	print_message("fallback why: %s\n", fb->why);
	assert_string_equal(fb->backend, "ofi");
	if (!strstr(fb->why, "ofi provider tcp;ofi_rxm: named by BRAID_OFI_PROVIDER") ||
	    !strstr(fb->why, "; not used: ib: "))
		fail_msg("fallback why \"%s\": want net_ofi's reason and why not ib", fb->why);
	assert_int_equal(braid_finalize(), ncclSuccess);
	unsetenv("BRAID_IB_HCA");
	unsetenv("HWLOC_XMLFILE");
}

/* GPUs in the topology and the ofi backend (host memory only): one WARN saying so. */
static void ofi_with_gpus_warns_once(void **state)
{
	(void)state;
	use_tcp();
	setenv("HWLOC_XMLFILE", "tests/topo/hwloc-2socket-3gpu-mlx5.xml", 1);
	unit_log_reset();
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	if (occurrences(unit_log, "GPUDirect RDMA is off") != 1 || !strstr(unit_log, "FI_HMEM") ||
	    !strstr(unit_log, "3 GPU"))
		fail_msg("want one WARN naming 3 GPUs, \"GPUDirect RDMA is off\" and FI_HMEM; log:\n%s",
			 unit_log);
	assert_int_equal(braid_finalize(), ncclSuccess);
	unsetenv("HWLOC_XMLFILE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ofi_tag_bits),
		cmocka_unit_test(before_init),
		cmocka_unit_test(missing_provider_fails_loudly),
		cmocka_unit_test(refcounted_init),
		cmocka_unit_test(misuse_gets_errors),
		cmocka_unit_test(fallback_keeps_backend_reason),
		cmocka_unit_test(ofi_with_gpus_warns_once),
	};

	return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
