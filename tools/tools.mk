# tools/: the `braid` command (tools/braid.c dispatches to one file per subcommand).
# `braid topo` (tools/topo.c, the topo engineer's) is linked in when it and topo/ exist.

TOOLS_SRCS := tools/braid.c tools/version.c tools/perf.c tools/netapi.c tools/pattern.c \
	tools/bootstrap.c
TOOLS_LINK_TOPO :=
ifneq ($(wildcard tools/topo.c),)
ifneq ($(strip $(TOPO_SRCS)),)
TOOLS_SRCS += tools/topo.c
TOOLS_LINK_TOPO := $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/obj/tools/braid.o: DEP_CFLAGS += -DBRAID_HAVE_TOPO
endif
endif

$(BUILD)/braid: $(TOOLS_SRCS:%.c=$(BUILD)/obj/%.o) $(TOOLS_LINK_TOPO)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(HWLOC_LIBS) -ldl -lpthread -lm

ALL_TARGETS += $(BUILD)/braid

-include tests/bench/bench.mk
