# tests/cuda: a CUDA driver stand-in (libcuda.so.1, never shipped or installed) whose
# "device memory" is host memory from memfds, and the GPUDirect tests that use it with
# softverbs (docs/ib.md, "GPUDirect without a GPU"). Included by the top-level Makefile.

CUDA_SI_DIR := tests/cuda
CUDA_SI_OUT := $(BUILD)/tests/cuda
CUDA_SI_LIB := $(CUDA_SI_OUT)/libcuda.so.1

$(CUDA_SI_LIB): $(BUILD)/obj/$(CUDA_SI_DIR)/cuda_standin.o
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ -Wl,-soname,libcuda.so.1 -Wl,-z,defs $(BRAID_LDFLAGS) -lpthread

ALL_TARGETS += $(CUDA_SI_LIB)

# Where the CUDA toolkit is installed (not on CI), the stand-in's constants are checked
# against its cuda.h at build time.
CUDA_H ?= $(wildcard /usr/local/cuda/include/cuda.h)
ifneq ($(CUDA_H),)
$(CUDA_SI_OUT)/check-cuda-h: $(CUDA_SI_DIR)/check_cuda_h.c $(CUDA_SI_DIR)/cuda_standin.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARNFLAGS) -I. -I$(dir $(CUDA_H)) -o $@ $<
ALL_TARGETS += $(CUDA_SI_OUT)/check-cuda-h
endif

# The stand-in itself, against what cuda.h documents.
$(BUILD)/obj/$(CUDA_SI_DIR)/test_%.o: DEP_CFLAGS += $(CMOCKA_CFLAGS)
$(CUDA_SI_OUT)/test_cuda_standin: $(BUILD)/obj/$(CUDA_SI_DIR)/test_cuda_standin.o $(CUDA_SI_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) -o $@ $< -L$(CUDA_SI_OUT) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN' \
		$(CMOCKA_LIBS)

ALL_TARGETS += $(CUDA_SI_OUT)/test_cuda_standin
TESTS += $(CUDA_SI_OUT)/test_cuda_standin

# gdr-xfer: regMr(CUDA), regMrDmaBuf and iflush moving real bytes between two processes
# over softverbs (tests/cuda/gdr-data.sh).
GDR_XFER := $(CUDA_SI_OUT)/gdr-xfer
$(GDR_XFER): $(BUILD)/obj/$(CUDA_SI_DIR)/gdr_xfer.o $(BUILD)/obj/tools/netapi.o
	@mkdir -p $(dir $@)
	$(CC) $(BRAID_LDFLAGS) $^ -o $@ -ldl -lpthread

ALL_TARGETS += $(GDR_XFER)
TESTS += $(CUDA_SI_DIR)/gdr-data.sh

# net_ofi's FI_HMEM decisions (net_ofi/ofi_hmem.c), unit-tested: no provider here registers
# CUDA memory (Debian's libfabric 1.17 is built without CUDA support).
ALL_TARGETS += $(BUILD)/tests/unit/test_ofi_hmem
TESTS += $(BUILD)/tests/unit/test_ofi_hmem
TESTS += $(CUDA_SI_DIR)/ofi-hmem.sh
