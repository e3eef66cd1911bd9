# cmocka unit tests of the plugin's pieces; test_core drives the core and ofi backend.

UNIT_DIR := tests/unit
UNIT_OUT := $(BUILD)/tests/unit
UNIT_COMMON := $(BUILD)/obj/$(UNIT_DIR)/unit_log.o
UNIT_NAMES := test_params test_handle test_pool test_filter test_abi test_counters test_core \
	test_mr_cache test_numa test_fsroot test_gpudirect
UNIT_BINS := $(addprefix $(UNIT_OUT)/,$(UNIT_NAMES))
# Plugin objects without the exported adapters: tests call the core directly.
UNIT_PLUGIN_OBJS = $(filter-out $(BUILD)/obj/plugin/api_%,$(PLUGIN_OBJS))

$(BUILD)/obj/$(UNIT_DIR)/%.o: DEP_CFLAGS += $(CMOCKA_CFLAGS)

$(UNIT_OUT)/test_%: $(BUILD)/obj/$(UNIT_DIR)/test_%.o $(UNIT_COMMON) $(UNIT_PLUGIN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $< $(UNIT_COMMON) $(UNIT_PLUGIN_OBJS) $(CMOCKA_LIBS) \
		$(HWLOC_LIBS) -ldl -lpthread

$(UNIT_OUT)/gen-config-doc: $(BUILD)/obj/$(UNIT_DIR)/gen_config_doc.o $(UNIT_PLUGIN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(HWLOC_LIBS) -ldl -lpthread

$(UNIT_OUT)/load_plugin: $(BUILD)/obj/$(UNIT_DIR)/load_plugin.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ -ldl

ALL_TARGETS += $(UNIT_BINS) $(UNIT_OUT)/gen-config-doc $(UNIT_OUT)/load_plugin
TESTS += $(UNIT_BINS) $(UNIT_DIR)/test-config-doc.sh $(UNIT_DIR)/test-load-anywhere.sh

.PHONY: docs test-unit
docs: $(UNIT_OUT)/gen-config-doc
	$(UNIT_OUT)/gen-config-doc > docs/configuration.md

test-unit: $(UNIT_BINS) $(UNIT_OUT)/gen-config-doc
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(UNIT_BINS) \
		$(UNIT_DIR)/test-config-doc.sh
