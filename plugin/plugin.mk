# The plugin: plugin/ (core, adapters, shared services), the backends, topo/.

PLUGIN_SRCS := $(wildcard plugin/*.c) $(wildcard net_ofi/*.c) $(wildcard net_ib/*.c)
PLUGIN_OBJS := $(PLUGIN_SRCS:%.c=$(BUILD)/obj/%.o) $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o)
PLUGIN_SO := $(BUILD)/libnccl-net-braid.so

# libfabric and libibverbs are dlopen()ed: -z defs proves nothing else is needed at load.
$(PLUGIN_SO): $(PLUGIN_OBJS) plugin/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(BRAID_LDFLAGS) -Wl,-z,defs -Wl,--version-script=plugin/exports.map \
		-Wl,-soname,libnccl-net-braid.so -o $@ $(PLUGIN_OBJS) $(HWLOC_LIBS) -ldl -lpthread

# NCCL without NCCL_NET_PLUGIN looks for libnccl-net.so.
$(BUILD)/libnccl-net.so: $(PLUGIN_SO)
	ln -sf libnccl-net-braid.so $@

ALL_TARGETS += $(PLUGIN_SO) $(BUILD)/libnccl-net.so
