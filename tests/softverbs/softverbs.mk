# softverbs: a userspace RDMA device as a drop-in libibverbs.so.1 (issue 3).
# See docs/softverbs.md. Included by the top-level Makefile.

SV_DIR := tests/softverbs
SV_OUT := $(BUILD)/softverbs
SV_LIB := $(SV_OUT)/libibverbs.so.1
SV_STAT := $(SV_OUT)/softverbs-stat

SV_LIB_SRCS := $(addprefix $(SV_DIR)/,sv_util.c sv_config.c sv_device.c sv_mr.c sv_cq.c \
	sv_qp.c sv_engine.c sv_conn.c sv_responder.c sv_rx.c sv_tx.c sv_fabric.c sv_stats.c \
	sv_misc.c sv_pkey.c sv_ece.c sv_subnet.c)
SV_LIB_OBJS := $(SV_LIB_SRCS:%.c=$(BUILD)/obj/%.o)

SV_TEST_NAMES := test_sv_verbs test_sv_wire test_sv_fabric test_sv_spec test_sv_nccl_ib \
	test_sv_pkey
SV_TEST_BINS := $(addprefix $(SV_OUT)/,$(SV_TEST_NAMES))
SV_TEST_SCRIPTS := $(SV_DIR)/test_sv_utils.sh $(SV_DIR)/test_sv_valgrind.sh

ALL_TARGETS += $(SV_LIB) $(SV_STAT) $(SV_TEST_BINS)
TESTS += $(SV_TEST_BINS) $(SV_TEST_SCRIPTS)

$(SV_LIB): $(SV_LIB_OBJS) $(SV_DIR)/libibverbs.map
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(SV_LIB_OBJS) -Wl,-soname,libibverbs.so.1 \
		-Wl,--version-script=$(SV_DIR)/libibverbs.map -Wl,-z,defs \
		$(BRAID_LDFLAGS) -lpthread

# The symlink lets tests link with -libverbs against softverbs.
$(SV_OUT)/libibverbs.so: $(SV_LIB)
	ln -sf libibverbs.so.1 $@

$(SV_STAT): $(BUILD)/obj/$(SV_DIR)/softverbs_stat.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(BRAID_LDFLAGS)

$(SV_OUT)/test_%: $(BUILD)/obj/$(SV_DIR)/test_%.o $(BUILD)/obj/$(SV_DIR)/sv_test_util.o \
		$(SV_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter %.o,$^) -L$(SV_OUT) -l:libibverbs.so.1 \
		-Wl,-rpath,'$$ORIGIN' $(CMOCKA_LIBS) $(BRAID_LDFLAGS) -lpthread

.PHONY: softverbs test-softverbs
softverbs: $(SV_LIB) $(SV_STAT) $(SV_TEST_BINS)

test-softverbs: softverbs
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh \
		$(SV_TEST_BINS) $(SV_TEST_SCRIPTS)
