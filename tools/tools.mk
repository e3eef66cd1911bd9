# tools/: the `braid` command (tools/braid.c dispatches to one file per subcommand).
# `braid topo` (tools/topo.c, the topo engineer's) is linked in when it and topo/ exist.

TOOLS_SRCS := tools/braid.c tools/version.c tools/perf.c tools/netapi.c tools/pattern.c \
	tools/bootstrap.c tools/stat.c tools/stat_prom.c tools/doctor.c tools/doctor_host.c
# braid stat writes JSON with jansson (libjansson-dev, packaging/debian-packages.txt)
JANSSON_CFLAGS = $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS = $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
$(BUILD)/obj/tools/stat.o: DEP_CFLAGS += $(JANSSON_CFLAGS)
$(BUILD)/obj/tools/doctor.o: DEP_CFLAGS += $(JANSSON_CFLAGS)
# and serves Prometheus' /metrics with libmicrohttpd (libmicrohttpd-dev)
MHD_CFLAGS = $(shell $(PKG_CONFIG) --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS = $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
$(BUILD)/obj/tools/stat_prom.o: DEP_CFLAGS += $(MHD_CFLAGS)
TOOLS_LINK_TOPO :=
ifneq ($(wildcard tools/topo.c),)
ifneq ($(strip $(TOPO_SRCS)),)
TOOLS_SRCS += tools/topo.c tools/topo_netids.c
TOOLS_LINK_TOPO := $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/obj/tools/braid.o: DEP_CFLAGS += -DBRAID_HAVE_TOPO
endif
endif

# the version, from VERSION (Makefile): rebuilt when it changes
$(TOOLS_SRCS:%.c=$(BUILD)/obj/%.o): DEP_CFLAGS += -DBRAID_VERSION='"$(BRAID_VERSION)"'
$(TOOLS_SRCS:%.c=$(BUILD)/obj/%.o): VERSION

$(BUILD)/braid: $(TOOLS_SRCS:%.c=$(BUILD)/obj/%.o) $(TOOLS_LINK_TOPO)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^ $(HWLOC_LIBS) $(JANSSON_LIBS) $(MHD_LIBS) -ldl -lpthread -lm

ALL_TARGETS += $(BUILD)/braid

# braid stat's tests: counters files written by tests/stat/mkregion (the plugin's layout)
$(BUILD)/tests/stat/mkregion: $(BUILD)/obj/tests/stat/mkregion.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $^

ALL_TARGETS += $(BUILD)/tests/stat/mkregion
STAT_TESTS := tests/stat/listing.sh tests/stat/json.sh tests/stat/watch.sh \
	tests/stat/namespaces.sh tests/stat/real.sh tests/stat/metrics.sh \
	tests/stat/prometheus.sh tests/stat/shm-full.sh
TESTS += $(STAT_TESTS)

.PHONY: test-stat
test-stat: $(BUILD)/braid $(BUILD)/tests/stat/mkregion
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(STAT_TESTS)

-include tests/bench/bench.mk

# braid doctor's tests: fixture hosts (tests/doctor/hosts/, read through --root), the
# topologies of tests/topo/, the plugin of this build
DOCTOR_TESTS := tests/doctor/hosts.sh tests/doctor/env.sh tests/doctor/plugin.sh
TESTS += $(DOCTOR_TESTS)

.PHONY: test-doctor
test-doctor: $(BUILD)/braid $(BUILD)/libnccl-net-braid.so
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(DOCTOR_TESTS)
