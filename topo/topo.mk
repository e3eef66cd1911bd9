# topo/: hwloc discovery of NICs and GPUs, rails per GPU (issue 5).
# The plugin and tools fragments link $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o) and $(HWLOC_LIBS).

TOPO_SRCS := topo/topo_load.c topo/topo_devices.c topo/topo_sysfs.c topo/topo_paths.c \
	topo/topo_rails.c topo/topo_warn.c topo/topo_query.c
TOPO_OBJS := $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o)

# Tests: the library against tests/topo/*.xml, and `braid topo` through a stand-alone
# driver (tools/topo*.c without the dispatcher), so both run before tools/ links braid.
TOPO_TEST := $(BUILD)/tests/topo/test_topo
TOPO_CLI := $(BUILD)/tests/topo/braid-topo

$(BUILD)/obj/tests/topo/test_topo.o: DEP_CFLAGS += $(CMOCKA_CFLAGS)

$(TOPO_TEST): $(BUILD)/obj/tests/topo/test_topo.o $(TOPO_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(HWLOC_LIBS)

TOPO_CLI_SRCS := tools/topo.c tools/topo_plugin.c tools/topo_text.c tools/topo_json.c \
	tools/topo_netids.c

$(TOPO_CLI): $(BUILD)/obj/tests/topo/topo_cli_main.o $(TOPO_CLI_SRCS:%.c=$(BUILD)/obj/%.o) \
		$(TOPO_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(HWLOC_LIBS)

# test-cli.sh finds the driver through $BUILD; make check builds it via ALL_TARGETS.
ALL_TARGETS += $(TOPO_TEST) $(TOPO_CLI)
TESTS += $(TOPO_TEST) tests/topo/test-cli.sh

.PHONY: test-topo
test-topo: $(TOPO_TEST) $(TOPO_CLI)
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(TOPO_TEST) \
		tests/topo/test-cli.sh
