# libFuzzer targets (tests/fuzz/README.md): what a peer, the environment or a counters file
# can hand braid. Built with clang (-fsanitize=fuzzer,address,undefined) into
# $(BUILD)/fuzz/, apart from the gcc build; only when clang and its libFuzzer runtime are
# there (clang-14, libclang-rt-14-dev) and not under SAN=1 or TSAN=1 (the plain pass runs
# them). Objects get their own directory because they are built by another compiler.
#
#   make fuzz                    each target for FUZZ_SECONDS (60), corpus tests/fuzz/corpus/
#   make fuzz FUZZ_TARGETS=env   one of them
#   make test: tests/fuzz/fuzz.sh, each target for 10 s (make test FUZZ_SECONDS=30: 30 s)

FUZZ_NAMES := fuzz_handle fuzz_ib_wire fuzz_ofi_blob fuzz_link fuzz_env fuzz_stat_region
FUZZ_SECONDS ?= 60
FUZZ_CC ?= $(shell command -v clang-14 || command -v clang)
FUZZ_OUT := $(BUILD)/fuzz
FUZZ_RT_DIR := $(if $(FUZZ_CC),$(shell $(FUZZ_CC) -print-runtime-dir 2>/dev/null))
FUZZ_OK := $(if $(wildcard $(FUZZ_RT_DIR)/libclang_rt.fuzzer-x86_64.a),1,)
ifneq ($(SAN),0)
FUZZ_OK :=
endif
ifneq ($(TSAN),0)
FUZZ_OK :=
endif

FUZZ_SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARNFLAGS) -O1 -g $(FUZZ_SANFLAGS) \
	-fsanitize=fuzzer-no-link -MMD -MP -I. -Iinclude $(DEP_CFLAGS) $(JANSSON_CFLAGS) \
	$(MHD_CFLAGS) -DBRAID_VERSION='"$(BRAID_VERSION)"'
# The plugin without its exported adapters (as the unit tests), and braid stat (its reader
# and every view fuzz_stat_region drives: listing, --json, Prometheus; tools/tools.mk).
FUZZ_LIB_SRCS = $(filter-out plugin/api_%,$(PLUGIN_SRCS)) $(TOPO_SRCS) $(STAT_SRCS)
FUZZ_LIB_OBJS = $(FUZZ_LIB_SRCS:%.c=$(FUZZ_OUT)/obj/%.o)
FUZZ_BINS := $(addprefix $(FUZZ_OUT)/,$(FUZZ_NAMES))

$(FUZZ_OUT)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_OUT)/fuzz_%: $(FUZZ_OUT)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(HWLOC_LIBS) $(JANSSON_LIBS) \
		$(MHD_LIBS) -ldl -lpthread -lm

# seeds: tests/fuzz/corpus/<target>/ is committed; make fuzz-seeds rewrites the generated
# ones (valid handles and handshake blobs) from this build's encoders
$(FUZZ_OUT)/fuzz_seeds: $(FUZZ_OUT)/obj/tests/fuzz/seeds.o $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) -fsanitize=fuzzer-no-link,address,undefined -o $@ $^ $(HWLOC_LIBS) \
		$(JANSSON_LIBS) $(MHD_LIBS) -ldl -lpthread -lm

ifeq ($(FUZZ_OK),1)
ALL_TARGETS += $(FUZZ_BINS)
endif
TESTS += tests/fuzz/fuzz.sh

.PHONY: fuzz fuzz-seeds fuzz-unavailable
FUZZ_TARGETS ?= $(FUZZ_NAMES:fuzz_%=%)
fuzz: $(if $(FUZZ_OK),$(FUZZ_BINS),fuzz-unavailable)
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/fuzz.sh $(FUZZ_TARGETS)

fuzz-unavailable:
	@echo "make fuzz: needs clang with its libFuzzer runtime (make deps: clang-14," \
		"libclang-rt-14-dev) and a plain build (not SAN=1 or TSAN=1)"; exit 1

fuzz-seeds: $(FUZZ_OUT)/fuzz_seeds
	$(FUZZ_OUT)/fuzz_seeds tests/fuzz/corpus

-include $(shell find $(FUZZ_OUT)/obj -name '*.d' 2>/dev/null)
