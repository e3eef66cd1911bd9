# Packaging: man pages, the libnccl-net.so opt-in, .deb, .rpm, and their tests
# (docs/install.md). The version is VERSION's (BRAID_VERSION, Makefile).

# Man pages from each command's --help (help2man, packaging/man.sh): braid.1 and
# braid-COMMAND.1 for every command `braid --help` lists. Built with everything else when
# help2man is installed (packaging/debian-packages.txt); `make install` needs them.
MAN_STAMP := $(BUILD)/man/braid.1
$(MAN_STAMP): $(BUILD)/braid packaging/man.sh
	@rm -rf $(BUILD)/man
	packaging/man.sh $(BUILD)/braid $(BUILD)/man || { rm -rf $(BUILD)/man; exit 1; }

.PHONY: man install-default-plugin
man: $(MAN_STAMP)
ifneq ($(shell command -v help2man 2>/dev/null),)
ALL_TARGETS += $(MAN_STAMP)
endif

# The opt-in: make NCCL load braid with NCCL_NET_PLUGIN unset. Another plugin may own
# this name, so never by default (`make install NCCL_NET_DEFAULT=1`, or the .deb's
# braid-default-plugin package).
install-default-plugin:
	install -d $(DESTDIR)$(LIBDIR)
	ln -sf libnccl-net-braid.so $(DESTDIR)$(LIBDIR)/libnccl-net.so

PACKAGING_TESTS := packaging/tests/man.sh
TESTS += $(PACKAGING_TESTS)

.PHONY: test-packaging
test-packaging: build-all
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(PACKAGING_TESTS)
