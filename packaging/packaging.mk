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
# Not under SAN=1: the packaging tests skip there, and the pages come from the plain build.
ifneq ($(SAN),1)
ifneq ($(shell command -v help2man 2>/dev/null),)
ALL_TARGETS += $(MAN_STAMP)
endif
endif

# The opt-in: make NCCL load braid with NCCL_NET_PLUGIN unset. Another plugin may own
# this name, so never by default (`make install NCCL_NET_DEFAULT=1`, or the .deb's
# braid-default-plugin package).
install-default-plugin:
	install -d $(DESTDIR)$(LIBDIR)
	ln -sf libnccl-net-braid.so $(DESTDIR)$(LIBDIR)/libnccl-net.so

PACKAGING_TESTS := packaging/tests/man.sh packaging/tests/deb.sh packaging/tests/rpm.sh \
	packaging/tests/install.sh packaging/tests/container.sh
TESTS += $(PACKAGING_TESTS)

.PHONY: test-packaging
test-packaging: build-all
	@BRAID_TEST_LOGDIR=$(BUILD)/test-logs BUILD=$(BUILD) tests/run-tests.sh $(PACKAGING_TESTS)

# Packages are built from a copy of the tree (the tracked files and new untracked ones,
# not build outputs) under $(BUILD)/pkg/, so the source tree stays clean; they land in
# $(BUILD)/pkg/. The Debian files live in packaging/debian/, copied in as debian/: a
# debian/ at the top would be taken by Debian's own maintainers' packaging, and this way
# the tree reads as upstream.
PKG_OUT := $(BUILD)/pkg
PKG_SRC_NAME := braid-$(BRAID_VERSION)
define pkg_copy_tree # destination folder
	rm -rf $(1) && mkdir -p $(1)
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
		tar --null -T - --ignore-failed-read -cf - | tar -C $(1) -xf -; \
	else \
		tar --exclude=./build --exclude=./build-san --exclude=./.git -cf - . | tar -C $(1) -xf -; \
	fi
endef

# Debian's changelog is made from VERSION (the only version source); its date is that of
# VERSION's last commit (reproducible), else now.
.PHONY: deb
deb:
	@command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null || \
		{ echo "make deb: needs dpkg-dev and debhelper (packaging/debian-packages.txt)"; exit 1; }
	rm -rf $(PKG_OUT)/deb $(PKG_OUT)/*.deb
	$(call pkg_copy_tree,$(PKG_OUT)/deb/$(PKG_SRC_NAME))
	cp -r packaging/debian $(PKG_OUT)/deb/$(PKG_SRC_NAME)/debian
	d=$$(git log -1 --format=%cD -- VERSION 2>/dev/null); d=$${d:-$$(date -R)}; \
	printf 'braid (%s) unstable; urgency=medium\n\n  * braid %s (VERSION).\n\n -- %s  %s\n' \
		'$(BRAID_VERSION)' '$(BRAID_VERSION)' \
		"$$(sed -n 's/^Maintainer: //p' packaging/debian/control)" "$$d" \
		>$(PKG_OUT)/deb/$(PKG_SRC_NAME)/debian/changelog
	cd $(PKG_OUT)/deb/$(PKG_SRC_NAME) && dpkg-buildpackage -b -us -uc >../build.log 2>&1 || \
		{ tail -n 40 ../build.log; echo "make deb: dpkg-buildpackage failed ($(PKG_OUT)/deb/build.log)"; exit 1; }
	cp $(PKG_OUT)/deb/*.deb $(PKG_OUT)/
	@ls -l $(PKG_OUT)/*.deb

# rpmbuild (Debian's rpm package) with packaging/rpm/braid.spec, from a tarball of a copy
# of the tree, version from VERSION. --nodeps: the spec's BuildRequires name RHEL
# packages, which a Debian host has under other names (packaging/debian-packages.txt).
.PHONY: rpm
rpm:
	@command -v rpmbuild >/dev/null || \
		{ echo "make rpm: needs rpmbuild (Debian package rpm, packaging/debian-packages.txt)"; exit 1; }
	rm -rf $(PKG_OUT)/rpm $(PKG_OUT)/*.rpm
	mkdir -p $(PKG_OUT)/rpm/SOURCES
	$(call pkg_copy_tree,$(PKG_OUT)/rpm/src/$(PKG_SRC_NAME))
	tar -C $(PKG_OUT)/rpm/src -czf $(PKG_OUT)/rpm/SOURCES/$(PKG_SRC_NAME).tar.gz $(PKG_SRC_NAME)
	rpmbuild -bb --nodeps --define "_topdir $(abspath $(PKG_OUT)/rpm)" \
		--define "braid_version $(BRAID_VERSION)" packaging/rpm/braid.spec \
		>$(PKG_OUT)/rpm/build.log 2>&1 || \
		{ tail -n 40 $(PKG_OUT)/rpm/build.log; echo "make rpm: rpmbuild failed ($(PKG_OUT)/rpm/build.log)"; exit 1; }
	cp $(PKG_OUT)/rpm/RPMS/*/*.rpm $(PKG_OUT)/
	@ls -l $(PKG_OUT)/*.rpm

# NVIDIA's nccl-tests (all_reduce_perf ...) compile with MPI against $(CUDA_HOME): the
# benchmark docs/install.md runs through braid on a cluster (SKIP without CUDA/NCCL/MPI or
# the tarball NCCL_TESTS_TARBALL, default tests/nccl/vendor/, vendored).
TESTS += tests/nccl/nccl-tests-build.sh
