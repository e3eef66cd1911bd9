#!/usr/bin/env bash
# make deb: the packages are built with Debian's tools from a copy of the tree, leave the
# source tree as it was, carry the version from VERSION, put the plugin in the multiarch
# folder under the name NCCL loads, braid in /usr/bin with its man pages and docs,
# compute Depends (shlibs), only recommend libibverbs1 and libfabric1, keep
# libnccl-net.so out of the main package, and are lintian clean (overrides explained in
# packaging/debian/*.lintian-overrides).
set -u
. "$(dirname "$0")/lib.sh"
skip_sanitizer_build
for t in dpkg-buildpackage dh lintian; do
	command -v $t >/dev/null || die "$t is missing (packaging/debian-packages.txt)"
done
version=$(cat VERSION)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
tree_state() { git status --porcelain --ignored 2>/dev/null | grep -v -E "^!! ($BUILD|build|build-san)/\$"; }
before=$(tree_state)
make --no-print-directory BUILD="$BUILD" deb >"$BUILD/pkg-deb.log" 2>&1 ||
	{ tail -n 30 "$BUILD/pkg-deb.log"; die "make deb failed"; }
after=$(tree_state)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after"); die "make deb changed the source tree"; }
deb="$BUILD/pkg/braid_${version}_$arch.deb"
def="$BUILD/pkg/braid-default-plugin_${version}_$arch.deb"
[ -s "$deb" ] && [ -s "$def" ] || die "missing $deb or $def"
ls -l "$BUILD"/pkg/*.deb

field() { dpkg-deb -f "$1" "$2"; }
[ "$(field "$deb" Version)" = "$version" ] || die "Version $(field "$deb" Version), VERSION says $version"
depends=$(field "$deb" Depends)
recommends=$(field "$deb" Recommends)
echo "Depends: $depends"
echo "Recommends: $recommends"
# shlibs: what the binaries link (hwloc for both, jansson and microhttpd for braid)
for lib in libc6 libhwloc15 libjansson4 libmicrohttpd12; do
	grep -q -E "(^|, )$lib( |,|$)" <<<"$depends" || die "Depends lacks $lib (not computed from the binaries?)"
done
for lib in libibverbs1 libfabric1; do
	grep -q -E "(^|, )$lib( |,|$)" <<<"$recommends" || die "Recommends lacks $lib"
	grep -q -E "(^|, )$lib( |,|$)" <<<"$depends" && die "$lib must not be in Depends (dlopen()ed)"
done

files=$(dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|')
want="/usr/bin/braid /usr/lib/$multiarch/libnccl-net-braid.so /usr/share/doc/braid/copyright
/usr/share/doc/braid/README.md.gz /usr/share/man/man1/braid.1.gz"
for page in "$BUILD"/man/braid-*.1; do want="$want /usr/share/man/man1/$(basename "$page").gz"; done
for f in $want; do grep -q -x -F "$f" <<<"$files" || die "$deb lacks $f"; done
grep -q 'libnccl-net\.so' <<<"$files" && die "$deb must not ship libnccl-net.so (braid-default-plugin does)"
link=$(dpkg-deb -c "$def" | grep "libnccl-net.so ")
echo "braid-default-plugin: $link"
grep -q -E "usr/lib/$multiarch/libnccl-net\.so -> libnccl-net-braid\.so\$" <<<"$link" ||
	die "braid-default-plugin lacks usr/lib/$multiarch/libnccl-net.so -> libnccl-net-braid.so"
field "$def" Depends | grep -q -F "braid (= $version)" || die "braid-default-plugin must depend on braid (= $version)"

# --pedantic: every tag down to pedantic is a failure unless overridden with a reason
lintian --display-info --pedantic --fail-on error,warning,info,pedantic "$BUILD"/pkg/deb/*.changes \
	>"$BUILD/pkg/lintian.log" 2>&1
rc=$?
grep -v 'running with root privileges' "$BUILD/pkg/lintian.log"
[ "$rc" -eq 0 ] || die "lintian is not clean"
echo "deb: ok ($(basename "$deb"), $(basename "$def")), lintian clean"
