#!/usr/bin/env bash
# Small files with one job: every tracked source of the plugin and the tool (plugin/,
# net_ib/, net_ofi/, topo/, tools/, include/) at most MAX_LINES (700) lines. Tests and
# softverbs are not held to it. Exits 1 naming each file over.
# Usage (repo root): tests/lint/file-size.sh
set -u
max=${MAX_LINES:-700}
over=0 n=0
while read -r f; do
	n=$((n + 1))
	lines=$(wc -l <"$f")
	if [ "$lines" -gt "$max" ]; then
		echo "FAIL: $f has $lines lines (at most $max: split it by job)"
		over=$((over + 1))
	fi
done < <(git ls-files 'plugin/*.[ch]' 'net_ib/*.[ch]' 'net_ofi/*.[ch]' 'topo/*.[ch]' \
	'tools/*.[ch]' 'include/*.h')
[ "$n" -gt 0 ] || { echo "FAIL: no sources found (run from the repo root of a git checkout)"; exit 1; }
[ "$over" -eq 0 ] || exit 1
echo "file-size: $n sources, none over $max lines"
