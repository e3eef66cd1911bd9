#!/usr/bin/env bash
# make rpm: rpmbuild (Debian's rpm) with packaging/rpm/braid.spec makes braid and
# braid-default-plugin at VERSION's version, and `rpm -qlp` lists the same files as the
# .debs' `dpkg -c`, with the distributions' conventions mapped: the library folder
# (/usr/lib/<multiarch> on Debian, %_libdir on RHEL), compression of man pages and docs
# (each distribution's own tools decide), and what only Debian has (copyright,
# changelog.gz, lintian overrides).
# libnccl-net.so is only in braid-default-plugin; libibverbs and libfabric are Recommends.
# Uses the .debs of this pass (packaging/tests/deb.sh), building them when absent.
set -u
. "$(dirname "$0")/lib.sh"
skip_sanitizer_build
for t in rpmbuild rpm dpkg-deb dpkg-architecture; do
	command -v $t >/dev/null || die "$t is missing (packaging/debian-packages.txt)"
done
version=$(cat VERSION)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
if [ ! -s "$BUILD/pkg/braid_${version}_$arch.deb" ]; then
	make --no-print-directory BUILD="$BUILD" deb >"$BUILD/pkg-deb.log" 2>&1 || die "make deb failed"
fi
make --no-print-directory BUILD="$BUILD" rpm >"$BUILD/pkg-rpm.log" 2>&1 ||
	{ tail -n 30 "$BUILD/pkg-rpm.log"; die "make rpm failed"; }
rpmarch=$(rpm --eval '%{_arch}')
libdir=$(rpm --eval '%{_libdir}')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for pkg in braid braid-default-plugin; do
	r="$BUILD/pkg/$pkg-$version-1.$rpmarch.rpm"
	d="$BUILD/pkg/${pkg}_${version}_$arch.deb"
	[ -s "$r" ] || die "missing $r"
	[ -s "$d" ] || die "missing $d"
	[ "$(rpm -qp --qf '%{NAME} %{VERSION}' "$r")" = "$pkg $version" ] || die "$r is not $pkg $version"
	# files and links, not folders; mapped to one convention
	rpm -qlvp "$r" | awk '$1 !~ /^d/ { print $9 }' |
		sed -e "s|^$libdir/|LIBDIR/|" -e 's|\.gz$||' | sort >"$tmp/$pkg.rpm"
	dpkg-deb -c "$d" | awk '$1 !~ /^d/ { print $6 }' | sed -e 's|^\./|/|' \
		-e "s|^/usr/lib/$multiarch/|LIBDIR/|" -e 's|\.gz$||' |
		grep -v -x -E '/usr/share/doc/[^/]+/(copyright|changelog(\.Debian)?)|/usr/share/doc/braid-default-plugin|/usr/share/lintian/overrides/.*' |
		sort >"$tmp/$pkg.deb"
	echo "== $pkg: $(wc -l <"$tmp/$pkg.rpm") files in the .rpm, $(wc -l <"$tmp/$pkg.deb") in the .deb"
	if ! diff -u "$tmp/$pkg.deb" "$tmp/$pkg.rpm"; then
		echo "FAIL: $pkg: the .rpm and the .deb differ (- deb, + rpm)"
		fails=$((fails + 1))
	fi
done
grep -q -x 'LIBDIR/libnccl-net.so' "$tmp/braid.rpm" && die "the braid rpm must not ship libnccl-net.so"
grep -q -x 'LIBDIR/libnccl-net.so' "$tmp/braid-default-plugin.rpm" || die "braid-default-plugin.rpm lacks libnccl-net.so"
r="$BUILD/pkg/braid-$version-1.$rpmarch.rpm"
rec=$(rpm -qp --recommends "$r" | tr '\n' ' ')
req=$(rpm -qp --requires "$r" | tr '\n' ' ')
echo "Recommends: $rec"
for lib in libibverbs libfabric; do
	grep -q -w "$lib" <<<"$rec" || die "the rpm does not recommend $lib"
	grep -q -E "(^| )$lib[ .(]" <<<"$req" && die "the rpm must not require $lib (dlopen()ed)"
done
for so in libhwloc.so.15 libjansson.so.4 libmicrohttpd.so.12; do
	grep -q -F "$so" <<<"$req" || die "the rpm's computed Requires lack $so"
done
[ "$fails" -eq 0 ] || die "$fails package(s) differ"
echo "rpm: same files as the .deb"
