# braid: NCCL net plugin.
#
#   make              build/libnccl-net-braid.so, build/libnccl-net.so, build/braid, softverbs
#   make test         install missing Debian packages, build, run every test
#   make test SAN=1   the same under ASan+UBSan, in build-san/
#   make test TSAN=1  the threaded conformance scenarios under ThreadSanitizer, in build-tsan/
#   make fuzz         each libFuzzer target for FUZZ_SECONDS (tests/fuzz/README.md)
#   make demo         install, build, run `braid perf` between two local processes
#   make bench        benchmarks (numbers, not tests)
#   make soak         long reliability runs: 10^5 random transfers per backend, 100 kills
#                     per transport (docs/reliability.md; tests/conformance/conformance.mk)
#   make nccl-test    NCCL end to end on one GPU (in make test too; SKIP, with why, without)
#   make lint         cppcheck over the sources (in make test too; tests/lint/cppcheck.supp)
#   make format       clang-format -i (.clang-format) on every tracked .c/.h, or on FILES=
#   make format-check show what make format would change; fails if anything would
#   make install PREFIX=/usr/local DESTDIR=   plugin, braid, man pages, docs; add
#                     NCCL_NET_DEFAULT=1 for the libnccl-net.so link (docs/install.md)
#   make deb | rpm    packages in $(BUILD)/pkg/ (packaging/packaging.mk, docs/install.md)
#
# Each folder adds its own rules in a fragment (*.mk) included below. A fragment:
#   - compiles through the pattern rule $(BUILD)/obj/%.o: %.c (flags: BRAID_CFLAGS),
#   - appends what `make` builds to ALL_TARGETS,
#   - appends test executables or scripts to TESTS (run by tests/run-tests.sh, each with
#     a time limit; a script exits 0 pass, 77 skip, anything else fail; a skip is listed
#     as SKIP with its reason and never counted as a pass).

SAN ?= 0
# TSAN=1: ThreadSanitizer in build-tsan/ (tests/tsan/tsan.mk: the threaded scenarios)
TSAN ?= 0
ifeq ($(TSAN),1)
BUILD ?= build-tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
else ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
BUILD ?= build
SANFLAGS :=
endif

CC ?= cc
CFLAGS ?= -O2 -g
PKG_CONFIG ?= pkg-config
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/braid
# The one version source: `braid version`, the .deb and the .rpm (packaging/packaging.mk).
BRAID_VERSION := $(shell cat VERSION)

WARNFLAGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wno-unused-parameter
BRAID_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARNFLAGS) $(CFLAGS) $(SANFLAGS) -fPIC \
	-fvisibility=hidden -MMD -MP -I. -Iinclude $(DEP_CFLAGS) $(FI_FEATURES)
BRAID_LDFLAGS = $(SANFLAGS) $(LDFLAGS)

# Headers only: libfabric and libibverbs are dlopen()ed at run time, never linked.
DEP_CFLAGS = $(shell $(PKG_CONFIG) --cflags libfabric libibverbs hwloc 2>/dev/null)
HWLOC_LIBS = $(shell $(PKG_CONFIG) --libs hwloc)
# libfabric options that are enum members, which #ifdef cannot see: probed once per make
FI_FEATURES := $(shell printf '\043include <rdma/fi_endpoint.h>\nint x = FI_OPT_SHARED_MEMORY_PERMITTED;\n' | \
	$(CC) -I. -Iinclude $(DEP_CFLAGS) $(CFLAGS) -x c -fsyntax-only - 2>/dev/null && \
	echo -DBRAID_HAVE_FI_OPT_SHM_PERMITTED)
CMOCKA_CFLAGS = $(shell $(PKG_CONFIG) --cflags cmocka)
CMOCKA_LIBS = $(shell $(PKG_CONFIG) --libs cmocka)

ALL_TARGETS :=
TESTS :=
BENCHES :=

.PHONY: all
# Keep intermediate objects (pattern-built test objects would be deleted and rebuilt).
.SECONDARY:
all: build-all

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_CFLAGS) -c $< -o $@

# topo first: plugin and tools link its objects.
-include topo/topo.mk
-include plugin/plugin.mk
-include tools/tools.mk
-include tests/unit/unit.mk
-include tests/conformance/conformance.mk
-include tests/softverbs/softverbs.mk
-include net_ib/net_ib.mk
# NIC failover on a fused device (tests/ib/failover.sh): an ib test, listed here beside
# net_ib.mk's IB_TESTS (TESTS took that list when net_ib.mk was read).
IB_TESTS += tests/ib/failover.sh
TESTS += tests/ib/failover.sh
# Port recovery after a failover (tests/ib/recovery.sh), listed the same way.
IB_TESTS += tests/ib/recovery.sh
TESTS += tests/ib/recovery.sh
-include tests/nccl/nccl.mk
-include tests/lint/lint.mk
-include tests/cuda/cuda.mk
-include packaging/packaging.mk
-include tests/fuzz/fuzz.mk
-include tests/tsan/tsan.mk

.PHONY: build-all deps test check demo bench install clean
build-all: $(ALL_TARGETS)

deps:
	@packaging/install-deps.sh

# `make test` is what CI runs on a clean clone: set-up first, then a fresh make so that
# pkg-config sees the packages just installed.
test: deps
	@$(MAKE) --no-print-directory check

check: build-all
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(TESTS)

# The demo builds only what it runs (not the tests, softverbs, the fuzz targets or the
# man pages): braid and the plugin it loads.
DEMO_TARGETS = $(BUILD)/braid $(PLUGIN_SO)

demo: deps
	@$(MAKE) --no-print-directory $(DEMO_TARGETS)
	@BUILD=$(BUILD) tools/demo.sh

bench: deps
	@$(MAKE) --no-print-directory build-all
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

# libnccl-net.so (what NCCL loads with NCCL_NET_PLUGIN unset) belongs to whichever plugin
# the admin picks: only with NCCL_NET_DEFAULT=1 (packaging/packaging.mk).
install: $(BUILD)/libnccl-net-braid.so $(BUILD)/braid man \
		$(if $(filter 1,$(NCCL_NET_DEFAULT)),install-default-plugin)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(DOCDIR)
	install -m 0755 $(BUILD)/libnccl-net-braid.so $(DESTDIR)$(LIBDIR)/libnccl-net-braid.so
	install -m 0755 $(BUILD)/braid $(DESTDIR)$(BINDIR)/braid
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/

clean:
	rm -rf build build-san build-tsan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
