// SPDX-License-Identifier: Apache-2.0
/*
 * The environment braid reads: every BRAID_* knob and its NCCL_* alias (plugin/params.c),
 * the interface and HCA lists (plugin/filter.c), a BRAID_MERGE list (plugin/vdev.c) and
 * BRAID_REQUIRE (plugin/require.c, parsed and then judged against a made-up host).
 *
 * Input: byte 0 picks the parser, byte 1 the knob (for params), the rest is the value.
 */
#include <stdlib.h>
#include <string.h>

#include "plugin/filter.h"
#include "plugin/params.h"
#include "plugin/require.h"
#include "plugin/vdev.h"
#include "tests/fuzz/fuzz_common.h"

/* a host of four NICs: two ports of one HCA, another HCA, an Ethernet NIC */
static struct braid_dev_props nics[4];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const names[] = { "mlx5_0", "mlx5_0", "mlx5_1", "eth0" };
	static const int ports[] = { 1, 2, 1, 1 };

	(void)argc, (void)argv;
	fuzz_quiet_log();
	for (int i = 0; i < 4; i++) {
		snprintf(nics[i].name, sizeof(nics[i].name), "%s", names[i]);
		nics[i].port = ports[i];
		nics[i].numa_node = -1;
		nics[i].speed_mbps = 100000 * (i + 1);
		nics[i].vdev = (struct braid_vdev){ .n = 1, .nic = { i } };
	}
	/* whatever the environment of the fuzzer's shell says of braid is not ours */
	for (int id = 0; id < BRAID_P_COUNT; id++) {
		const struct braid_param_desc *d = braid_param_desc((enum braid_param_id)id);

		unsetenv(d->name);
		if (d->alias)
			unsetenv(d->alias);
	}
	return 0;
}

static void fuzz_param(uint8_t sel, const char *text)
{
	enum braid_param_id id = (enum braid_param_id)(sel % BRAID_P_COUNT);
	const struct braid_param_desc *d = braid_param_desc(id);
	const char *var = (sel & 0x80) && d->alias ? d->alias : d->name;
	int64_t v = 0;
	int ok = braid_param_parse(d, text, &v) == 0;

	if (ok && d->type == BRAID_PARAM_INT && (v < d->min || v > d->max))
		__builtin_trap();
	/* through the environment, as a process starts: a bad value gives the default */
	setenv(var, text, 1);
	braid_params_reset();
	braid_params_load();
	if (d->type == BRAID_PARAM_STR) {
		const char *s = braid_param_str(id);

		if (ok && strcmp(s, text))
			__builtin_trap();
		if (!ok && strcmp(s, d->def))
			__builtin_trap();
	} else if (ok && braid_param_int(id) != v) {
		__builtin_trap();
	}
	braid_param_source(id);
	unsetenv(var);
}

static void fuzz_filter(const char *text)
{
	struct braid_filter f;

	if (braid_filter_parse(text, &f))
		return;
	if (f.n < 0 || f.n > BRAID_FILTER_MAX)
		__builtin_trap();
	for (int i = 0; i < 4; i++) {
		braid_filter_match(&f, nics[i].name, nics[i].port);
		braid_filter_match(&f, nics[i].name, -1);
	}
}

static void fuzz_merge(const char *text)
{
	struct braid_vdev groups[4];
	char why[256] = "";
	int n = -1;

	if (braid_vdev_parse_list(text, nics, 4, groups, 4, &n, why, sizeof(why))) {
		fuzz_check_why(why, sizeof(why));
		return;
	}
	if (n < 0 || n > 4)
		__builtin_trap();
	for (int g = 0; g < n; g++) {
		if (groups[g].n < 1 || groups[g].n > BRAID_VDEV_MAX_NICS)
			__builtin_trap();
		for (int k = 0; k < groups[g].n; k++)
			if (groups[g].nic[k] < 0 || groups[g].nic[k] >= 4)
				__builtin_trap();
	}
}

static void fuzz_require(const char *text)
{
	static struct braid_req_failure fails[BRAID_REQ_MAX];
	struct braid_req_set set;
	struct braid_req_facts facts = {
		.backend = BRAID_BACKEND_OFI,
		.backend_name = "ofi",
		.provider = "tcp;ofi_rxm",
		.why = "the only provider found",
		.slow_path = 1,
		.gdr_off = 4,
		.gdr_dev = "mlx5_0",
		.gdr_why = "no GPU",
		.gdr_fix = "none",
		.nics = nics,
		.nnics = 4,
	};
	char why[256] = "";
	int nfail;

	if (braid_require_parse(text, &set, why, sizeof(why))) {
		fuzz_check_why(why, sizeof(why));
		return;
	}
	if (set.n < 0 || set.n > BRAID_REQ_MAX)
		__builtin_trap();
	nfail = braid_require_eval(&set, &facts, fails, BRAID_REQ_MAX);
	if (nfail < 0 || nfail > set.n)
		__builtin_trap();
	for (int i = 0; i < nfail; i++)
		fuzz_check_why(fails[i].msg, sizeof(fails[i].msg));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size < 2 || size > 4096)
		return 0;
	text = malloc(size - 1); /* the value and its terminator, nothing more */
	if (!text)
		return 0;
	memcpy(text, data + 2, size - 2);
	text[size - 2] = '\0';
	switch (data[0] % 4) {
	case 0: fuzz_param(data[1], text); break;
	case 1: fuzz_filter(text); break;
	case 2: fuzz_merge(text); break;
	case 3: fuzz_require(text); break;
	}
	free(text);
	return 0;
}
