# tools/: the `braid` command (tools/braid.c dispatches to one file per subcommand).
# `braid topo` (tools/topo*.c, the topo engineer's) is linked in when it and topo/ exist.

# braid stat's files (tools/stat.h); tests/fuzz/fuzz.mk links them into fuzz_stat_region
STAT_SRCS := tools/stat.c tools/stat_read.c tools/stat_text.c tools/stat_json.c \
	tools/stat_watch.c tools/stat_prom.c tools/stat_prom_export.c
TOOLS_SRCS := tools/braid.c tools/self.c tools/version.c tools/perf.c tools/perf_opts.c \
	tools/perf_phases.c tools/perf_session.c tools/perf_peer.c tools/netapi.c tools/pattern.c \
	tools/ctr_self.c \
	tools/bootstrap.c $(STAT_SRCS) tools/doctor.c tools/doctor_base.c tools/doctor_lib.c \
	tools/doctor_rdma.c tools/doctor_gpu.c
# braid stat writes JSON with jansson (libjansson-dev, packaging/debian-packages.txt)
JANSSON_CFLAGS = $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS = $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
$(BUILD)/obj/tools/stat.o $(BUILD)/obj/tools/stat_json.o $(BUILD)/obj/tools/stat_watch.o: \
	DEP_CFLAGS += $(JANSSON_CFLAGS)
$(BUILD)/obj/tools/doctor.o: DEP_CFLAGS += $(JANSSON_CFLAGS)
# and serves Prometheus' /metrics with libmicrohttpd (libmicrohttpd-dev)
MHD_CFLAGS = $(shell $(PKG_CONFIG) --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS = $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
$(BUILD)/obj/tools/stat_prom_export.o: DEP_CFLAGS += $(MHD_CFLAGS)
TOOLS_LINK_TOPO :=
ifneq ($(wildcard tools/topo.c),)
ifneq ($(strip $(TOPO_SRCS)),)
TOOLS_SRCS += $(TOPO_CLI_SRCS)
TOOLS_LINK_TOPO := $(TOPO_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/obj/tools/braid.o: DEP_CFLAGS += -DBRAID_HAVE_TOPO
endif
endif

# the version, from VERSION (Makefile): rebuilt when it changes
$(TOOLS_SRCS:%.c=$(BUILD)/obj/%.o): DEP_CFLAGS += -DBRAID_VERSION='"$(BRAID_VERSION)"'
$(TOOLS_SRCS:%.c=$(BUILD)/obj/%.o): VERSION

# The host facts braid doctor shares with the plugin (GID choice, peer memory), the
# parameter table they read (BRAID_* with NCCL_* aliases) and the NCCL_IB_* table.
TOOLS_LINK_PLUGIN := $(addprefix $(BUILD)/obj/plugin/,gid.o peermem.o params.o log.o ncclib_env.o)

$(BUILD)/braid: $(TOOLS_SRCS:%.c=$(BUILD)/obj/%.o) $(TOOLS_LINK_TOPO) $(TOOLS_LINK_PLUGIN)
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
# topologies of tests/topo/, the plugin of this build (gid-agree.sh: over softverbs)
DOCTOR_TESTS := tests/doctor/hosts.sh tests/doctor/env.sh tests/doctor/plugin.sh \
	tests/doctor/gid-agree.sh
TESTS += $(DOCTOR_TESTS)

.PHONY: test-doctor
test-doctor: $(BUILD)/braid $(BUILD)/libnccl-net-braid.so $(BUILD)/softverbs/libibverbs.so.1
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(DOCTOR_TESTS)
