# net_ib: the verbs RC backend (docs/ib.md). Its sources are compiled into the plugin by
# plugin/plugin.mk ($(wildcard net_ib/*.c)); this fragment adds its tests, which run the
# plugin over softverbs (tests/softverbs), the userspace RDMA device.

IB_TESTS := tests/ib/conformance-roce.sh tests/ib/conformance-ib.sh \
	tests/ib/conformance-netns.sh tests/ib/faults.sh tests/ib/flowlabel.sh \
	tests/ib/slow-poster.sh tests/ib/gpudirect.sh tests/ib/conformance-fused.sh \
	tests/ib/ncclib-env.sh tests/ib/ncclib-posting.sh tests/ib/adaptive-routing.sh tests/ib/ece.sh \
	tests/ib/pci-order.sh \
	tests/ib/pkey.sh tests/ib/data-direct.sh tests/ib/eight-nics.sh \
	tests/ib/relaxed-ordering.sh tests/ib/roce-version.sh tests/ib/async-race.sh \
	tests/ib/subnet-pairing.sh tests/ib/nic-down.sh tests/ib/qp-lanes.sh
TESTS += $(IB_TESTS)

.PHONY: test-ib
test-ib: $(PLUGIN_SO) $(SV_LIB) $(SV_STAT) $(CONF_BIN)
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(IB_TESTS)

# gdr-probe: what NCCL sees of GPUDirect (ptrSupport, the fallback record, regMr of CUDA
# memory), for tests/ib/gpudirect.sh.
GDR_PROBE := $(BUILD)/tests/ib/gdr-probe
$(GDR_PROBE): $(BUILD)/obj/tests/ib/gdr_probe.o $(BUILD)/obj/tools/netapi.o \
	$(BUILD)/obj/tools/ctr_self.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) $^ -o $@ -ldl -lpthread

ALL_TARGETS += $(GDR_PROBE)

# async-race: net_ib's async event dispatch against fused comms on two softverbs HCAs,
# linked with the plugin's objects (tests/ib/async_race.c); tests/tsan/ib-async.sh runs it
# under ThreadSanitizer.
IB_ASYNC_RACE := $(BUILD)/tests/ib/async-race
$(IB_ASYNC_RACE): $(BUILD)/obj/tests/ib/async_race.o \
		$(filter-out $(BUILD)/obj/plugin/api_%,$(PLUGIN_OBJS))
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(HWLOC_LIBS) -ldl -lpthread

ALL_TARGETS += $(IB_ASYNC_RACE)

# A libmlx5 stand-in with rdma-core's symbol versions, for net_ib's data-direct path
# (tests/ib/mlx5_standin.c, tests/ib/data-direct.sh); never shipped or installed.
IB_MLX5_SI := $(BUILD)/tests/ib/mlx5/libmlx5.so.1
$(IB_MLX5_SI): $(BUILD)/obj/tests/ib/mlx5_standin.o tests/ib/mlx5_standin.map
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $< -Wl,-soname,libmlx5.so.1 \
		-Wl,--version-script,tests/ib/mlx5_standin.map -Wl,-z,defs $(BRAID_LDFLAGS) -ldl

ALL_TARGETS += $(IB_MLX5_SI)

# The long form of tests/ib/failover.sh: ROUNDS soaks with a random fault each (not in make
# test).
.PHONY: soak-failover
soak-failover: build-all
	@BUILD=$(BUILD) tests/ib/failover-soak.sh
