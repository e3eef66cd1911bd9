# ThreadSanitizer (TSAN=1, build-tsan/): NCCL calls isend/irecv/test from its proxy thread
# while other threads connect, register and close. `make check TSAN=1` (and make test
# TSAN=1, make tsan-test) builds only the plugin, the conformance driver and softverbs
# with -fsanitize=thread and runs the conformance scenarios that use threads (tests/tsan/
# lib.sh) over tcp;ofi_rxm, shm, ib on softverbs, ib on two fused softverbs NICs, and
# tcp;ofi_rxm fused over two veth pairs between network namespaces (root). Any report
# fails the run, except those tests/tsan/tsan.supp lists, each with its reason.

ifeq ($(TSAN),1)
ALL_TARGETS := $(PLUGIN_SO) $(BUILD)/libnccl-net.so $(CONF_BIN) $(SV_LIB) $(IB_ASYNC_RACE)
TESTS := tests/tsan/tcp.sh tests/tsan/shm.sh tests/tsan/ib.sh tests/tsan/ib-fused.sh \
	tests/tsan/ib-async.sh tests/tsan/ofi-fused.sh
endif

.PHONY: tsan-test
tsan-test:
	@$(MAKE) --no-print-directory TSAN=1 check
