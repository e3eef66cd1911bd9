# NCCL end to end (needs a GPU): tests/nccl/run.sh, in TESTS and run by `make nccl-test`.
# Without a GPU, CUDA or NCCL it exits 77 and tests/run-tests.sh lists it as SKIP with the
# reason. nccl_allreduce is built with everything else whenever $(CUDA_HOME) has CUDA and
# NCCL, so that it stays buildable on machines without a GPU.

CUDA_HOME ?= /usr/local/cuda
NCCL_AR_BIN := $(BUILD)/tests/nccl/nccl_allreduce
NCCL_FOUND := $(and $(wildcard $(CUDA_HOME)/include/nccl.h), \
	$(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h), \
	$(wildcard $(CUDA_HOME)/lib64/libnccl.so), $(wildcard $(CUDA_HOME)/lib64/libcudart.so))

$(NCCL_AR_BIN): tests/nccl/nccl_allreduce.c tests/nccl/nccl_common.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARNFLAGS) $(CFLAGS) -I. -isystem $(CUDA_HOME)/include $< \
		-o $@ -L$(CUDA_HOME)/lib64 -lnccl -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64

NCCL_ABORT_BIN := $(BUILD)/tests/nccl/nccl_abort

$(NCCL_ABORT_BIN): tests/nccl/nccl_abort.c tests/nccl/nccl_common.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARNFLAGS) $(CFLAGS) -I. -isystem $(CUDA_HOME)/include $< \
		-o $@ -L$(CUDA_HOME)/lib64 -lnccl -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64

ifneq ($(NCCL_FOUND),)
ALL_TARGETS += $(NCCL_AR_BIN) $(NCCL_ABORT_BIN)
endif
TESTS += tests/nccl/run.sh

# A skip is not a pass: run-tests.sh prints SKIP and the reason (no GPU, no NCCL, ...).
.PHONY: nccl-test
nccl-test: build-all
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BRAID_TEST_SHOW_LOG=1 BUILD=$(BUILD) \
		CUDA_HOME=$(CUDA_HOME) tests/run-tests.sh tests/nccl/run.sh
