#!/usr/bin/env bash
# The C sources against .clang-format: prints what clang-format would change (a unified
# diff per file), then a count; exits 1 when anything would change or clang-format is
# missing. `make format-check` runs it on every tracked .c and .h file (`make format`
# applies the changes).
# Usage (repo root): tests/lint/format-check.sh [FILE...]
set -u
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
command -v "$CLANG_FORMAT" >/dev/null ||
	{ echo "FAIL: no $CLANG_FORMAT (Debian package clang-format)"; exit 1; }
if [ $# -eq 0 ]; then
	mapfile -t files < <(git ls-files '*.c' '*.h' 2>/dev/null ||
		find . -name '*.[ch]' -not -path './build*' | sed 's|^\./||' | sort)
	set -- "${files[@]}"
fi
changed=0 lines=0
for f in "$@"; do
	d=$("$CLANG_FORMAT" --style=file "$f" | diff -u --label "a/$f" --label "b/$f" "$f" -)
	[ -z "$d" ] && continue
	echo "$d"
	changed=$((changed + 1))
	lines=$((lines + $(grep -c '^-[^-]\|^-$' <<<"$d")))
done
if [ "$changed" -ne 0 ]; then
	echo "format-check: $changed of $# files differ from .clang-format ($lines lines would" \
		"change): make format FILES=\"...\" reformats them"
	exit 1
fi
echo "format-check: $# files match .clang-format"
