#!/usr/bin/env bash
# cppcheck over braid's sources: plugin/ net_ib/ net_ofi/ topo/ tools/ (include/ through
# them), C11 with _GNU_SOURCE, the project's include paths, the POSIX library model (fd and
# memory leaks through open(), socket(), strdup(), ...), and the warning, style, performance
# and portability checks. `make lint` runs it, and it is in TESTS.
#
# Fails on any finding that tests/lint/cppcheck.supp does not list, and on a line of that
# file that no longer matches a finding (fixed or moved: update the file). The file is in
# cppcheck's suppressions format: an id alone (a check that does not fit this code base)
# is given to cppcheck; id:file:line lines (one finding each) are matched here, since
# cppcheck 2.10 does not report those that went stale. Inline suppressions
# (/* cppcheck-suppress id ; reason */ on the line before) are honoured.
set -u
supp=tests/lint/cppcheck.supp
dirs=(plugin net_ib net_ofi topo tools include)
command -v cppcheck >/dev/null ||
	{ echo "FAIL: cppcheck is not installed (Debian package cppcheck: make deps)"; exit 1; }

whole=()
while read -r entry _; do
	case $entry in '' | '#'*) continue ;; *:*) ;; *) whole+=("--suppress=$entry") ;; esac
done <"$supp"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# BRAID_VERSION comes from VERSION through the Makefile (tools/cmds.h)
cppcheck --std=c11 -D_GNU_SOURCE -DBRAID_VERSION="\"$(cat VERSION)\"" -I. -Iinclude --library=posix \
	--enable=warning,style,performance,portability,information "${whole[@]}" --inline-suppr \
	--error-exitcode=1 --quiet --template='{file}:{line}: {severity}({id}): {message}' \
	"${dirs[@]}" 2>"$out"
rc=$?

# Each finding against the id:file:line lines of $supp.
awk -v supp="$supp" -v rc="$rc" '
FNR == NR {
	if ($1 ~ /^[^#].*:.*:[0-9]+$/)
		listed[$1] = FNR
	next
}
match($0, /^[^:]+:[0-9]+: [a-z]+\([A-Za-z0-9_]+\): /) {
	key = substr($0, 1, RLENGTH - 2)
	split(key, f, /[:()]/) # file, line, " severity", id
	key = f[4] ":" f[1] ":" f[2]
	findings++
	if (key in listed) {
		seen[key] = 1
		suppressed++
		next
	}
	print
	bad++
	next
}
{
	print # anything else cppcheck said
	other++
}
END {
	for (k in listed)
		if (!(k in seen)) {
			printf "%s:%d: %s no longer matches a finding (fixed or moved): update it\n",
			       supp, listed[k], k
			bad++
		}
	if (rc != 0 && findings == 0) {
		printf "cppcheck failed (exit %d) without a finding\n", rc
		bad++
	}
	printf "cppcheck: %d findings listed in %s; %d problems (findings not listed, stale " \
	       "lines), %d other messages\n", suppressed + 0, supp, bad + 0, other + 0
	exit (bad || other) ? 1 : 0
}' "$supp" "$out"
