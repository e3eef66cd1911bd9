# tests/bench: raw libfabric baseline next to `braid perf` (included from tools/tools.mk).
# Links -lfabric directly: a benchmark, not the plugin.

FI_BENCH := $(BUILD)/tests/bench/fi_rdm_bench
FABRIC_LIBS = $(shell $(PKG_CONFIG) --libs libfabric 2>/dev/null || echo -lfabric)

$(FI_BENCH): $(BUILD)/obj/tests/bench/fi_rdm_bench.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(FABRIC_LIBS)

ALL_TARGETS += $(FI_BENCH)
BENCHES += tests/bench/compare.sh
BENCHES += tests/bench/multirail.sh
BENCHES += tests/bench/multirail-ofi.sh
