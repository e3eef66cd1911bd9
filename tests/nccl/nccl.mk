# NCCL end to end (needs a GPU): `make nccl-test`. Only a compile check is in TESTS, so
# that machines without CUDA build and test everything else.

CUDA_HOME ?= /usr/local/cuda
NCCL_AR_BIN := $(BUILD)/tests/nccl/nccl_allreduce

$(NCCL_AR_BIN): tests/nccl/nccl_allreduce.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARNFLAGS) $(CFLAGS) -isystem $(CUDA_HOME)/include $< \
		-o $@ -L$(CUDA_HOME)/lib64 -lnccl -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64

.PHONY: nccl-test
nccl-test: build-all $(NCCL_AR_BIN)
	@BUILD=$(BUILD) tests/nccl/run.sh; rc=$$?; [ $$rc -eq 77 ] && rc=0; exit $$rc

TESTS += tests/nccl/compile-check.sh
