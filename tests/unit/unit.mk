# cmocka unit tests of the plugin's pieces; test_core drives the core and ofi backend.
# test_abi checks include/nccl_net_abi.h against NCCL's layouts (nccl-net-abi-v8-v12.txt);
# test-abi-mutation.sh shows that it catches every moved, resized or missing member.
# test-require.sh: strict mode (BRAID_REQUIRE) through the built plugin over tcp and softverbs.

UNIT_DIR := tests/unit
UNIT_OUT := $(BUILD)/tests/unit
UNIT_COMMON := $(BUILD)/obj/$(UNIT_DIR)/unit_log.o
UNIT_NAMES := test_params test_handle test_pool test_filter test_abi test_counters test_core \
	test_mr_cache test_numa test_link test_fsroot test_gpudirect test_stripe test_stripe_qps \
	test_vdev \
	test_require test_ncclib_env test_gid test_net_ids test_judge test_ofi_live test_ofi_move \
	test_ofi_cq test_ofi_flush
UNIT_BINS := $(addprefix $(UNIT_OUT)/,$(UNIT_NAMES))
# Plugin objects without the exported adapters: tests call the core directly.
UNIT_PLUGIN_OBJS = $(filter-out $(BUILD)/obj/plugin/api_%,$(PLUGIN_OBJS))

$(BUILD)/obj/$(UNIT_DIR)/%.o: DEP_CFLAGS += $(CMOCKA_CFLAGS)

$(UNIT_OUT)/test_%: $(BUILD)/obj/$(UNIT_DIR)/test_%.o $(UNIT_COMMON) $(UNIT_PLUGIN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $< $(UNIT_COMMON) $(UNIT_PLUGIN_OBJS) $(CMOCKA_LIBS) \
		$(HWLOC_LIBS) -ldl -lpthread

# test_abi: the checks are generated from NCCL's layouts (the fact file is the only source).
ABI_FACTS := $(UNIT_DIR)/nccl-net-abi-v8-v12.txt
$(UNIT_OUT)/abi_facts.c: $(ABI_FACTS) $(UNIT_DIR)/gen-abi-facts.awk
	@mkdir -p $(dir $@)
	awk -v out_name=$@ -f $(UNIT_DIR)/gen-abi-facts.awk $(ABI_FACTS) > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/$(UNIT_DIR)/abi_facts.o: $(UNIT_OUT)/abi_facts.c
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_CFLAGS) -c $< -o $@

$(UNIT_OUT)/test_abi: $(BUILD)/obj/$(UNIT_DIR)/test_abi.o $(BUILD)/obj/$(UNIT_DIR)/abi_facts.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(UNIT_OUT)/gen-config-doc: $(BUILD)/obj/$(UNIT_DIR)/gen_config_doc.o $(UNIT_PLUGIN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(HWLOC_LIBS) -ldl -lpthread

$(UNIT_OUT)/load_plugin: $(BUILD)/obj/$(UNIT_DIR)/load_plugin.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ -ldl

ALL_TARGETS += $(UNIT_BINS) $(UNIT_OUT)/gen-config-doc $(UNIT_OUT)/load_plugin
TESTS += $(UNIT_BINS) $(UNIT_DIR)/test-abi-mutation.sh $(UNIT_DIR)/test-config-doc.sh \
	$(UNIT_DIR)/test-load-anywhere.sh $(UNIT_DIR)/test-require.sh

.PHONY: docs test-unit
docs: $(UNIT_OUT)/gen-config-doc
	$(UNIT_OUT)/gen-config-doc > docs/configuration.md
	$(UNIT_DIR)/ib-doc-table.sh $(UNIT_OUT)/gen-config-doc

test-unit: $(UNIT_BINS) $(UNIT_OUT)/gen-config-doc
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(UNIT_BINS) \
		$(UNIT_DIR)/test-abi-mutation.sh $(UNIT_DIR)/test-config-doc.sh
