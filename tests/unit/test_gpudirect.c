// SPDX-License-Identifier: Apache-2.0
/*
 * plugin/gpudirect.h: NCCL's GPUDirect rule on a device's ptrSupport, for every
 * combination of peer memory (CUDA bit), dma-buf (DMABUF bit), NCCL's own dma-buf use
 * and GPUs in the topology, for both backends; and NCCL_DMABUF_ENABLE read as NCCL does.
 */
#include <stdlib.h>
#include <string.h>

#include "plugin/gpudirect.h"
#include "tests/unit/unit.h"

static void every_combination(void **state)
{
	static const int gpus[] = { -1, 0, 3 };

	(void)state;
	for (int be = BRAID_BACKEND_OFI; be <= BRAID_BACKEND_IB; be++)
		for (int cuda = 0; cuda <= 1; cuda++)
			for (int dmabuf = 0; dmabuf <= 1; dmabuf++)
				/* 1 NCCL uses dma-buf, 0 NCCL_DMABUF_ENABLE=0, -1 the CUDA driver
				 * has none (NCCL's dmaBufSupported) */
				for (int nccl = -1; nccl <= 1; nccl++)
					for (int g = 0; g < 3; g++) {
						struct braid_gdr_in in = {
							.backend = (enum braid_backend_kind)be,
							.ptr_support = NCCL_PTR_HOST |
								       (cuda ? NCCL_PTR_CUDA : 0) |
								       (dmabuf ? NCCL_PTR_DMABUF
									       : 0),
							.nccl_dmabuf = nccl,
							.ngpus = gpus[g],
						};
						struct braid_gdr_out out;
						/* NCCL: (ptrSupport & CUDA) || (dmaBufSupport && (ptrSupport & DMABUF)) */
						int on = cuda || (nccl > 0 && dmabuf);
						/* ofi's CUDA bit is FI_HMEM, not peer memory */
						const char *cuda_mode = be == BRAID_BACKEND_OFI
										? "fi_hmem"
										: "peermem";
						const char *mode = nccl > 0 && dmabuf ? "dma-buf"
								   : cuda             ? cuda_mode
										      : "none";

						braid_gdr_decide(&in, &out);
						print_message(
							"backend %d cuda %d dmabuf %d nccl %d gpus %d: on %d %s warn %d: %s%s%s\n",
							be, cuda, dmabuf, nccl, gpus[g], out.on,
							out.mode, out.warn, out.why,
							out.fix[0] ? " / fix: " : "", out.fix);
						assert_int_equal(out.on, on);
						assert_string_equal(out.mode, mode);
						assert_int_equal(out.warn, !on && gpus[g] > 0);
						assert_true(out.why[0] != '\0');
						assert_int_equal(out.fix[0] != '\0', !on);
						if (on && cuda && be == BRAID_BACKEND_OFI &&
						    !(nccl > 0 && dmabuf))
							assert_non_null(
								strstr(out.why, "FI_HMEM_CUDA"));
						if (on)
							continue;
						if (be == BRAID_BACKEND_OFI) {
							assert_non_null(strstr(out.why, "FI_HMEM"));
						} else if (dmabuf && nccl < 0) {
							assert_non_null(
								strstr(out.why, "CUDA driver"));
							assert_non_null(
								strstr(out.fix, "nvidia_peermem"));
						} else if (dmabuf) {
							assert_non_null(
								strstr(out.why,
								       "NCCL_DMABUF_ENABLE=0"));
							assert_non_null(
								strstr(out.fix,
								       "NCCL_DMABUF_ENABLE"));
						} else {
							assert_non_null(
								strstr(out.why, "nvidia_peermem"));
							assert_non_null(strstr(out.why, "dma-buf"));
							assert_non_null(
								strstr(out.fix, "nvidia_peermem"));
						}
					}
}

static void nccl_dmabuf_enable_as_nccl_reads_it(void **state)
{
	static const struct {
		const char *value;
		int on;
	} cases[] = {
		{ NULL, 1 },
		{ "", 1 },
		{ "1", 1 },
		{ "0", 0 },
		{ "2", 1 },
		{ "-1", 1 },
		{ "0x0", 0 },
		{ "off", 0 } /* strtoll: 0, as NCCL */,
		{ "99999999999999999999", 1 } /* out of range: NCCL keeps the default */,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].value)
			setenv("NCCL_DMABUF_ENABLE", cases[i].value, 1);
		else
			unsetenv("NCCL_DMABUF_ENABLE");
		if (braid_gdr_nccl_dmabuf() != cases[i].on)
			fail_msg("NCCL_DMABUF_ENABLE=\"%s\": want %d",
				 cases[i].value ? cases[i].value : "(unset)", cases[i].on);
	}
	unsetenv("NCCL_DMABUF_ENABLE");
}

/* NCCL_GDR_FLUSH_DISABLE: an NCCL int64 param, default 0, strtoll(value, 0). */
static void nccl_gdr_flush_disable_as_nccl_reads_it(void **state)
{
	static const struct {
		const char *value;
		int disabled;
	} cases[] = {
		{ NULL, 0 },
		{ "", 0 },
		{ "0", 0 },
		{ "1", 1 },
		{ "2", 1 },
		{ "0x0", 0 },
		{ "yes", 0 } /* strtoll: 0 */,
		{ "99999999999999999999", 0 } /* out of range: the default */,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].value)
			setenv("NCCL_GDR_FLUSH_DISABLE", cases[i].value, 1);
		else
			unsetenv("NCCL_GDR_FLUSH_DISABLE");
		if (braid_gdr_nccl_flush_disabled() != cases[i].disabled)
			fail_msg("NCCL_GDR_FLUSH_DISABLE=\"%s\": want %d",
				 cases[i].value ? cases[i].value : "(unset)", cases[i].disabled);
	}
	unsetenv("NCCL_GDR_FLUSH_DISABLE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_combination),
		cmocka_unit_test(nccl_dmabuf_enable_as_nccl_reads_it),
		cmocka_unit_test(nccl_gdr_flush_disable_as_nccl_reads_it),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
