# topo/: hwloc discovery of NICs and GPUs, rails per GPU (issue 5).
# The plugin and tools fragments link $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o) and $(HWLOC_LIBS).

TOPO_SRCS := topo/topo_load.c topo/topo_devices.c topo/topo_sysfs.c topo/topo_paths.c \
	topo/topo_rails.c topo/topo_warn.c topo/topo_query.c
TOPO_OBJS := $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o)
