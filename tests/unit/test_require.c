// SPDX-License-Identifier: Apache-2.0
/*
 * Strict mode (plugin/require.c): the BRAID_REQUIRE parser, the decision against made-up
 * hosts (fallback records, NIC lists, the hwloc fixtures in tests/topo for rails), and
 * init itself over libfabric tcp on loopback: a requirement the host misses fails init
 * with one WARN and leaves nothing behind; one it meets changes nothing but the record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/core.h"
#include "plugin/counters.h"
#include "plugin/params.h"
#include "plugin/require.h"
#include "tests/unit/unit.h"
#include "topo/topo.h"

#define CONSEQUENCE "with NCCL_NET=braid the job stops at start"

static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static void must_contain(const char *msg, const char *want)
{
	if (!strstr(msg, want))
		fail_msg("\"%s\" is not in the message:\n%s", want, msg);
}

static void parse_ok(const char *text, int n)
{
	struct braid_req_set set;
	char why[256] = "";

	if (braid_require_parse(text, &set, why, sizeof(why)))
		fail_msg("BRAID_REQUIRE=\"%s\" refused: %s", text, why);
	assert_int_equal(set.n, n);
}

static void parse_bad(const char *text, const char *want)
{
	struct braid_req_set set;
	char why[256] = "";

	if (!braid_require_parse(text, &set, why, sizeof(why)))
		fail_msg("BRAID_REQUIRE=\"%s\" accepted; want an error naming \"%s\"", text, want);
	print_message("%-32s -> %s\n", text, why);
	must_contain(why, want);
}

static void parser_accepts(void **state)
{
	struct braid_req_set set;
	char why[256];

	(void)state;
	parse_ok("", 0);
	parse_ok("   ", 0);
	parse_ok("none", 0);
	parse_ok("NONE", 0);
	parse_ok(NULL, 0);
	parse_ok("rdma", 1);
	parse_ok(" RDMA , Gdr ", 2);
	parse_ok("rdma,gdr,rails=2,nics=4,nic_speed=200,backend=ib,provider=efa", 7);
	parse_ok("rails = 8", 1);
	parse_ok("provider=tcp;ofi_rxm", 1);

	assert_int_equal(braid_require_parse("rails=2,nics=16,nic_speed=400,backend=OFI,"
					     "provider=efa,rdma,gdr",
					     &set, why, sizeof(why)),
			 0);
	assert_int_equal(set.r[0].kind, BRAID_REQ_RAILS);
	assert_int_equal(set.r[0].num, 2);
	assert_int_equal(set.r[1].kind, BRAID_REQ_NICS);
	assert_int_equal(set.r[1].num, 16);
	assert_int_equal(set.r[2].kind, BRAID_REQ_NIC_SPEED);
	assert_int_equal(set.r[2].num, 400);
	assert_int_equal(set.r[3].kind, BRAID_REQ_BACKEND);
	assert_string_equal(set.r[3].word, "ofi"); /* compared as a backend name */
	assert_string_equal(set.r[3].text, "backend=OFI");
	assert_int_equal(set.r[4].kind, BRAID_REQ_PROVIDER);
	assert_string_equal(set.r[4].word, "efa");
	assert_int_equal(set.r[5].kind, BRAID_REQ_RDMA);
	assert_int_equal(set.r[6].kind, BRAID_REQ_GDR);
}

static void parser_refuses(void **state)
{
	char many[256] = "rdma";

	(void)state;
	parse_bad("rdmaa", "unknown requirement \"rdmaa\"");
	parse_bad("rdma,fast", "unknown requirement \"fast\"");
	parse_bad("rdma,,gdr", "empty entry");
	parse_bad("rdma,", "empty entry");
	parse_bad(",rdma", "empty entry");
	parse_bad("rails", "\"rails\" needs a value: rails=N");
	parse_bad("rails=", "needs a value");
	parse_bad("rails=0", "\"rails=0\" is not rails=N");
	parse_bad("rails=65", "is not rails=N");
	parse_bad("rails=two", "is not rails=N");
	parse_bad("rails=-1", "is not rails=N");
	parse_bad("rails=2x", "is not rails=N");
	parse_bad("nics=99999999999999999999999", "is not nics=N");
	parse_bad("nic_speed=0", "is not nic_speed=GBPS");
	parse_bad("rdma=1", "rdma takes no value");
	parse_bad("gdr=yes", "gdr takes no value");
	parse_bad("backend=verbs", "is not backend=ib or backend=ofi");
	parse_bad("backend=", "needs a value");
	parse_bad("provider=a b", "is not provider=NAME");
	parse_bad("provider=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "longer than");
	for (int i = 1; i <= BRAID_REQ_MAX; i++)
		strcat(many, ",gdr");
	parse_bad(many, "more than 16 entries");
}

/* A host as init would describe it: ofi over tcp;ofi_rxm on lo, no GPUs. */
static struct braid_dev_props tcp_nics[1];

static struct braid_req_facts tcp_host(void)
{
	memset(tcp_nics, 0, sizeof(tcp_nics));
	snprintf(tcp_nics[0].name, sizeof(tcp_nics[0].name), "lo");
	tcp_nics[0].speed_mbps = 10000;
	tcp_nics[0].ptr_support = NCCL_PTR_HOST;
	return (struct braid_req_facts){
		.backend = BRAID_BACKEND_OFI,
		.backend_name = "ofi",
		.provider = "tcp;ofi_rxm",
		.why = "ofi provider tcp;ofi_rxm: named by BRAID_OFI_PROVIDER (available: "
		       "tcp;ofi_rxm); first choice",
		.slow_path = 1,
		.provider_named = 1,
		.backend_named = 1,
		.gdr_off = 1,
		.gdr_dev = "lo",
		.gdr_why = "the ofi backend registers host memory only in this version",
		.gdr_fix = "on verbs NICs use the ib backend (BRAID_BACKEND=ib)",
		.nics = tcp_nics,
		.nnics = 1,
	};
}

/* RoCE NICs on verbs (port 1 of each), GPUDirect by peer memory. */
static struct braid_dev_props ib_nics[4];

static char ib_ports[128];

static struct braid_req_facts ib_host(int nnics, const char *const *names)
{
	memset(ib_nics, 0, sizeof(ib_nics));
	ib_ports[0] = '\0';
	for (int i = 0; i < nnics; i++) {
		size_t used = strlen(ib_ports);

		snprintf(ib_ports + used, sizeof(ib_ports) - used, "%s%s:1", i ? " " : "",
			 names[i]);
		snprintf(ib_nics[i].name, sizeof(ib_nics[i].name), "%s", names[i]);
		ib_nics[i].port = 1;
		ib_nics[i].speed_mbps = 200000;
		ib_nics[i].ptr_support = NCCL_PTR_HOST | NCCL_PTR_CUDA;
	}
	return (struct braid_req_facts){
		.backend = BRAID_BACKEND_IB,
		.backend_name = "ib",
		.provider = ib_ports,
		.why = "verbs: active port(s) as in provider; first choice",
		.nics = ib_nics,
		.nnics = nnics,
	};
}

/* Evaluate text on a host: the number of unmet requirements, their messages in msgs. */
static int eval(const char *text, const struct braid_req_facts *f, char *msgs, size_t len)
{
	static struct braid_req_set set;
	struct braid_req_failure fails[BRAID_REQ_MAX];
	char why[256];
	int n;

	if (braid_require_parse(text, &set, why, sizeof(why)))
		fail_msg("\"%s\": %s", text, why);
	n = braid_require_eval(&set, f, fails, BRAID_REQ_MAX);
	msgs[0] = '\0';
	for (int i = 0; i < n; i++) {
		size_t used = strlen(msgs);

		print_message("  %s\n", fails[i].msg);
		/* every message: what, then the fix, then what NCCL does; fits NCCL's logger */
		must_contain(fails[i].msg, "BRAID_REQUIRE ");
		must_contain(fails[i].msg, ": not met: ");
		must_contain(fails[i].msg, "Fix: ");
		must_contain(fails[i].msg, CONSEQUENCE);
		assert_true(strlen(fails[i].msg) < sizeof(fails[i].msg));
		snprintf(msgs + used, len - used, "%s\n", fails[i].msg);
	}
	return n;
}

static void rdma_and_backend(void **state)
{
	struct braid_req_facts f = tcp_host();
	static char m[16384];

	(void)state;
	assert_int_equal(eval("rdma", &f, m, sizeof(m)), 1);
	must_contain(m, "BRAID_REQUIRE rdma: not met: braid runs over libfabric tcp;ofi_rxm");
	must_contain(m, "not NIC RDMA");
	must_contain(m, "named by BRAID_OFI_PROVIDER"); /* the record's why, quoted */
	must_contain(m, "unset BRAID_OFI_PROVIDER (it names tcp;ofi_rxm)");
	must_contain(m, "unset BRAID_BACKEND");
	must_contain(m, "/dev/infiniband");
	/* Nothing named: the fix does not tell the user to unset what is not set. */
	f.provider_named = 0;
	f.backend_named = 0;
	assert_int_equal(eval("rdma", &f, m, sizeof(m)), 1);
	assert_null(strstr(m, "unset BRAID_OFI_PROVIDER"));
	assert_null(strstr(m, "unset BRAID_BACKEND"));

	assert_int_equal(eval("backend=ofi,provider=tcp,provider=tcp;ofi_rxm", &f, m, sizeof(m)),
			 0);
	assert_int_equal(eval("backend=ib", &f, m, sizeof(m)), 1);
	must_contain(m, "braid runs the ofi backend");
	must_contain(m, "ibv_devinfo");
	assert_int_equal(eval("provider=efa", &f, m, sizeof(m)), 1);
	must_contain(m, "BRAID_OFI_PROVIDER=efa");
	/* "rxm" is a utility provider of the stack, not the provider it runs on */
	assert_int_equal(eval("provider=ofi_rxm", &f, m, sizeof(m)), 1);

	{
		static const char *const names[] = { "mlx5_0", "mlx5_1" };
		struct braid_req_facts ib = ib_host(2, names);

		assert_int_equal(eval("rdma,backend=ib,nics=2", &ib, m, sizeof(m)), 0);
		assert_int_equal(eval("backend=ofi", &ib, m, sizeof(m)), 1);
		must_contain(m, "set BRAID_BACKEND=ofi");
		assert_int_equal(eval("provider=efa", &ib, m, sizeof(m)), 1);
		must_contain(m, "not libfabric");
		must_contain(m, "BRAID_BACKEND=ofi BRAID_OFI_PROVIDER=efa");
	}
}

static void gdr_nics_speed(void **state)
{
	static const char *const names[] = { "mlx5_0", "mlx5_1", "mlx5_2" };
	struct braid_req_facts f = tcp_host(), ib = ib_host(3, names);
	static char m[16384];

	(void)state;
	assert_int_equal(eval("gdr", &f, m, sizeof(m)), 1);
	must_contain(m, "GPUDirect RDMA is off for 1 of 1 ofi NIC(s) (first: lo)");
	must_contain(m, "host memory only");
	must_contain(m, "Fix: on verbs NICs use the ib backend");
	assert_int_equal(eval("gdr", &ib, m, sizeof(m)), 0);

	assert_int_equal(eval("nics=1", &f, m, sizeof(m)), 0);
	assert_int_equal(eval("nics=2", &f, m, sizeof(m)), 1);
	must_contain(m, "braid has 1 NIC(s) (lo) on the ofi backend (tcp;ofi_rxm), fewer than 2");
	must_contain(m, "fi_info -p tcp");
	assert_int_equal(eval("nics=3", &ib, m, sizeof(m)), 0);
	assert_int_equal(eval("nics=4", &ib, m, sizeof(m)), 1);
	must_contain(m, "mlx5_0, mlx5_1, mlx5_2");
	must_contain(m, "BRAID_IB_HCA");

	assert_int_equal(eval("nic_speed=10", &f, m, sizeof(m)), 0);
	assert_int_equal(eval("nic_speed=11", &f, m, sizeof(m)), 1);
	must_contain(m, "lo at 10.0 Gbit/s (1 of 1)");
	ib_nics[1].speed_mbps = 100000; /* one link trained down */
	assert_int_equal(eval("nic_speed=200", &ib, m, sizeof(m)), 1);
	must_contain(m, "NIC(s) below 200 Gbit/s: mlx5_1 at 100.0 Gbit/s (1 of 3)");
	assert_null(strstr(m, "mlx5_0 at"));

	/* Each unmet requirement once, in the order written; met ones say nothing. */
	assert_int_equal(eval("nics=1,gdr,rdma,nic_speed=1,backend=ib", &f, m, sizeof(m)), 3);
	assert_true(strstr(m, "BRAID_REQUIRE gdr") < strstr(m, "BRAID_REQUIRE rdma"));
	assert_true(strstr(m, "BRAID_REQUIRE rdma") < strstr(m, "BRAID_REQUIRE backend=ib"));
	assert_int_equal(count_of(m, CONSEQUENCE), 3);
}

/* A record's why as long as the field: the message is cut, the consequence kept. */
static void long_why_is_cut(void **state)
{
	struct braid_req_facts f = tcp_host();
	static char why[512], m[16384];

	(void)state;
	memset(why, 'x', sizeof(why) - 1);
	f.why = why;
	f.gdr_why = why;
	f.gdr_fix = why;
	assert_int_equal(eval("rdma,gdr,backend=ib,provider=efa", &f, m, sizeof(m)), 4);
	must_contain(m, "... braid's init fails"); /* gdr: why and fix cut */
}

static struct braid_topo *fixture(const char *name)
{
	char path[128], err[256];
	struct braid_topo *t;

	snprintf(path, sizeof(path), "tests/topo/%s", name);
	t = braid_topo_load(path, err, sizeof(err));
	if (!t)
		fail_msg("%s: %s", path, err);
	return t;
}

static void rails(void **state)
{
	static const char *const all4[] = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3" };
	static const char *const two[] = { "mlx5_0", "mlx5_1" };
	static const char *const ports[] = { "mlx5_0", "mlx5_0" };
	struct braid_topo *pairs = fixture("8gpu-nic-per-pair.xml");
	struct braid_topo *remote = fixture("2socket-remote-nics.xml");
	struct braid_topo *nogpu = fixture("no-gpu.xml");
	struct braid_req_facts f;
	static char m[16384];

	(void)state;
	/* 8 GPUs, one NIC per pair of GPUs: rails=1 met when braid uses all four NICs. */
	f = ib_host(4, all4);
	f.topo = pairs;
	assert_int_equal(eval("rails=1", &f, m, sizeof(m)), 0);
	assert_int_equal(eval("rails=2", &f, m, sizeof(m)), 1);
	must_contain(m, "8 of 8 GPU(s) have fewer than 2 of braid's NICs in their rail");
	must_contain(m, "0000:13:00.0 (cuda0): rail 0 has 1 NIC(s) in the topology (mlx5_0), "
			"braid uses 1");
	must_contain(m, "; 5 more");
	must_contain(m, "this host has fewer NICs per GPU than asked");
	assert_null(strstr(m, "braid does not use every NIC"));

	/* braid uses two of the four: the GPUs of the other rails have none. */
	f = ib_host(2, two);
	f.topo = pairs;
	assert_int_equal(eval("rails=1", &f, m, sizeof(m)), 1);
	must_contain(m, "4 of 8 GPU(s)");
	must_contain(m, "0000:93:00.0 (cuda4): rail 2 has 1 NIC(s) in the topology (mlx5_2), "
			"braid uses 0");
	must_contain(m, "braid does not use every NIC of the rail");
	assert_null(strstr(m, "this host has fewer"));

	/* 4 GPUs sharing one rail of two NICs. */
	f = ib_host(2, two);
	f.topo = remote;
	assert_int_equal(eval("rails=2", &f, m, sizeof(m)), 0);
	assert_int_equal(eval("rails=3", &f, m, sizeof(m)), 1);
	must_contain(m, "(mlx5_0, mlx5_1), braid uses 2");
	/* two ports of one NIC are one NIC of the rail */
	f = ib_host(2, ports);
	f.topo = remote;
	assert_int_equal(eval("rails=2", &f, m, sizeof(m)), 1);
	must_contain(m, "braid uses 1");
	/* braid left one NIC of the rail out */
	f = ib_host(1, two);
	f.topo = remote;
	assert_int_equal(eval("rails=2", &f, m, sizeof(m)), 1);
	must_contain(m, "braid does not use every NIC");

	/* Cannot be checked: no GPU, no topology. Both fail. */
	f.topo = nogpu;
	assert_int_equal(eval("rails=1", &f, m, sizeof(m)), 1);
	must_contain(m, "cannot be checked: the topology (tests/topo/no-gpu.xml) shows no GPU");
	f.topo = NULL;
	assert_int_equal(eval("rails=1", &f, m, sizeof(m)), 1);
	must_contain(m, "cannot be checked: braid has no topology");

	braid_topo_free(pairs);
	braid_topo_free(remote);
	braid_topo_free(nogpu);
}

/* ---- init itself (the core's one call), over libfabric tcp on loopback ---- */

static int shm_exists(void)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), BRAID_CTR_PATH_FMT, (int)getpid());
	return stat(path, &st) == 0;
}

static void use_tcp(const char *require)
{
	setenv("BRAID_BACKEND", "ofi", 1);
	setenv("BRAID_OFI_PROVIDER", "tcp;ofi_rxm", 1);
	setenv("BRAID_SOCKET_IFNAME", "lo", 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("HWLOC_XMLFILE", "tests/topo/no-gpu.xml", 1);
	if (require)
		setenv("BRAID_REQUIRE", require, 1);
	else
		unsetenv("BRAID_REQUIRE");
	braid_params_reset();
	unit_log_reset();
}

static void init_fails_when_unmet(void **state)
{
	int n, warns_before;

	(void)state;
	/* The baseline: what init warns about on this host without strict mode. */
	use_tcp(NULL);
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	warns_before = unit_warns;
	assert_int_equal(braid_finalize(), ncclSuccess);

	use_tcp("rdma,nics=1");
	assert_int_equal(braid_init(unit_logger, 11), ncclSystemError);
	print_message("%s", unit_log);
	/* one WARN more than without it, for the one requirement missed */
	assert_int_equal(unit_warns, warns_before + 1);
	assert_int_equal(count_of(unit_log, "BRAID_REQUIRE"), 1);
	must_contain(unit_log,
		     "BRAID_REQUIRE rdma: not met: braid runs over libfabric tcp;ofi_rxm");
	must_contain(unit_log, CONSEQUENCE);
	/* nothing left: no counters file, not initialised, the backend closed */
	assert_false(shm_exists());
	assert_int_equal(braid_devices(&n), ncclInvalidUsage);
	assert_int_equal(braid_finalize(), ncclInvalidUsage);

	/* malformed: refused as a usage error, naming the entry */
	use_tcp("rdma,rails=many");
	assert_int_equal(braid_init(unit_logger, 11), ncclInvalidUsage);
	must_contain(unit_log, "BRAID_REQUIRE=\"rdma,rails=many\": \"rails=many\" is not rails=N");
	assert_false(shm_exists());

	/* too long for the parameter table: refused, not silently dropped */
	{
		char big[400];

		memset(big, 0, sizeof(big));
		for (size_t i = 0; i + 5 < sizeof(big); i += 5)
			memcpy(big + i, "rdma,", 5);
		strcat(big, "gdr");
		use_tcp(big);
		assert_int_equal(braid_init(unit_logger, 11), ncclInvalidUsage);
		must_contain(unit_log, "BRAID_REQUIRE is too long");
		assert_false(shm_exists());
	}
}

static void init_goes_on_when_met(void **state)
{
	const struct braid_ctr_fallback *fb;
	int n = 0;

	(void)state;
	/* after a failed init, a later one starts clean */
	use_tcp("gdr");
	assert_int_equal(braid_init(unit_logger, 11), ncclSystemError);
	use_tcp("nics=1, backend=ofi ,provider=tcp");
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	assert_int_equal(count_of(unit_log, "not met"), 0);
	must_contain(unit_log, "every requirement met");
	assert_int_equal(braid_devices(&n), ncclSuccess);
	assert_int_equal(n, 1);
	fb = &braid_counters()->fallback;
	print_message("fallback why: %s\n", fb->why);
	must_contain(fb->why, "first choice; BRAID_REQUIRE=nics=1, backend=ofi ,provider=tcp: met");
	/* a second reference does not check again */
	unit_log_reset();
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	assert_null(strstr(unit_log, "BRAID_REQUIRE"));
	assert_int_equal(braid_finalize(), ncclSuccess);
	assert_int_equal(braid_finalize(), ncclSuccess);
	assert_false(shm_exists());

	/* "none" and unset: nothing checked, nothing noted */
	use_tcp("none");
	assert_int_equal(braid_init(unit_logger, 11), ncclSuccess);
	assert_null(strstr(braid_counters()->fallback.why, "BRAID_REQUIRE"));
	assert_int_equal(braid_finalize(), ncclSuccess);
	unsetenv("BRAID_REQUIRE");
	unsetenv("HWLOC_XMLFILE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parser_accepts),        cmocka_unit_test(parser_refuses),
		cmocka_unit_test(rdma_and_backend),      cmocka_unit_test(gdr_nics_speed),
		cmocka_unit_test(long_why_is_cut),       cmocka_unit_test(rails),
		cmocka_unit_test(init_fails_when_unmet), cmocka_unit_test(init_goes_on_when_met),
	};

	return cmocka_run_group_tests_name("require", tests, NULL, NULL);
}
