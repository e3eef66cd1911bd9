# Conformance: the built plugin driven through each exported ABI version, as NCCL does,
# in separate processes, over several transports (tests/conformance/README.md).

CONF_SRCS := $(wildcard tests/conformance/*.c)
CONF_OBJS := $(CONF_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tools/netapi.o \
	$(BUILD)/obj/tools/ctr_self.o \
	$(BUILD)/obj/tools/pattern.o
CONF_BIN := $(BUILD)/tests/conformance/conformance

$(CONF_BIN): $(CONF_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) $^ -o $@ -ldl -lpthread -lm

ALL_TARGETS += $(CONF_BIN)

# The counting allocator mem.sh preloads (no sanitizer: it replaces malloc itself).
MEMCOUNT_SO := $(BUILD)/tests/conformance/libmemcount.so
$(MEMCOUNT_SO): tests/conformance/memcount/memcount.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARNFLAGS) $(CFLAGS) -fPIC -shared $< -o $@ -lpthread
ALL_TARGETS += $(MEMCOUNT_SO)

CONF_TESTS := tests/conformance/tcp.sh tests/conformance/shm.sh \
	tests/conformance/netns.sh tests/conformance/netns-fused.sh tests/conformance/netns-failover.sh \
	tests/conformance/netns-adaptive.sh \
	tests/conformance/loader.sh tests/conformance/perf.sh \
	tests/conformance/valgrind.sh tests/conformance/kills.sh tests/conformance/mem.sh
TESTS += $(CONF_TESTS)

.PHONY: test-conformance
test-conformance: $(CONF_BIN) $(BUILD)/libnccl-net-braid.so
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(CONF_TESTS)

# The long forms of issue 13's soak and kills (make test runs the short ones):
# 10^5 random transfers per backend, then 100 kill-any runs per transport; and issue 19's
# soaks through random NIC faults on a fused net_ib device (make soak-failover).
.PHONY: soak
soak: build-all
	@BUILD=$(BUILD) tests/conformance/soak.sh
	@BUILD=$(BUILD) tests/ib/failover-soak.sh
	@BUILD=$(BUILD) KILLS_RUNS=$${KILLS_RUNS:-100} KILLS_NETNS_RUNS=$${KILLS_NETNS_RUNS:-100} \
		tests/conformance/kills.sh
