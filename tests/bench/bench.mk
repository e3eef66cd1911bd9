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
BENCHES += tests/bench/qp-lanes.sh
BENCHES += tests/bench/failover-timeline.sh
BENCHES += tests/bench/ofi-failover-timeline.sh

# Instructions per message under callgrind (issue 18): tests/bench/ipm.sh drives the
# client tests/bench/ipm.c; the table goes to $(BUILD)/bench/ipm.txt. Part of make bench.
IPM_BIN := $(BUILD)/tests/bench/ipm
$(IPM_BIN): $(BUILD)/obj/tests/bench/ipm.o $(BUILD)/obj/tools/netapi.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ -ldl -lpthread

ALL_TARGETS += $(IPM_BIN)
BENCHES += tests/bench/ipm.sh

.PHONY: bench-ipm
bench-ipm: deps
	@$(MAKE) --no-print-directory $(IPM_BIN) $(BUILD)/libnccl-net-braid.so $(SV_LIB)
	@BUILD=$(BUILD) tests/bench/ipm.sh
