# Conformance: the built plugin driven through each exported ABI version, as NCCL does,
# in separate processes, over several transports (tests/conformance/README.md).

CONF_SRCS := $(wildcard tests/conformance/*.c)
CONF_OBJS := $(CONF_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tools/netapi.o \
	$(BUILD)/obj/tools/pattern.o
CONF_BIN := $(BUILD)/tests/conformance/conformance

$(CONF_BIN): $(CONF_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) $^ -o $@ -ldl -lpthread -lm

ALL_TARGETS += $(CONF_BIN)

CONF_TESTS := tests/conformance/tcp.sh tests/conformance/shm.sh \
	tests/conformance/netns.sh tests/conformance/netns-fused.sh tests/conformance/loader.sh tests/conformance/perf.sh \
	tests/conformance/valgrind.sh
TESTS += $(CONF_TESTS)

.PHONY: test-conformance
test-conformance: $(CONF_BIN) $(BUILD)/libnccl-net-braid.so
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(CONF_TESTS)
