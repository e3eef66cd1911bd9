#!/usr/bin/env bash
# Generate the man pages from the --help text of a built braid, with help2man: braid(1)
# and braid-COMMAND(1) for each command that `braid --help` lists, so they cannot drift
# from the program. Usage: packaging/man.sh BRAID OUTDIR
# The version comes from `braid --version` (VERSION, through the Makefile).
set -euo pipefail
braid=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
command -v help2man >/dev/null ||
	{ echo "man.sh: help2man is not installed (packaging/debian-packages.txt)" >&2; exit 1; }
version=$("$braid" --version | sed -n '1s/^braid //p')
[ -n "$version" ] || { echo "man.sh: $braid --version printed no version" >&2; exit 1; }
# Reproducible pages: the date comes from SOURCE_DATE_EPOCH (dpkg-buildpackage sets it
# from debian/changelog), else from the VERSION file's last commit, else 0.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$(dirname "$0")/.." log -1 --format=%ct -- VERSION 2>/dev/null || true)
	export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0}
fi
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
h2m() { # PROGRAM NAME-LINE OUTPUT
	help2man --no-info --version-string="$version" --source="braid $version" \
		--section=1 --name="$2" --output="$3.tmp" "$1"
	mv "$3.tmp" "$3"
}
h2m "$braid" "NCCL network plugin: tools to check, measure and watch it" "$out/braid.1"
# One "  NAME  summary" line per command, under "commands:" in braid --help.
"$braid" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z0-9-]*\) \+\(.*\)$/\1\t\2/p' |
	while IFS=$'\t' read -r cmd summary; do
		# help2man runs one program: braid-COMMAND runs `braid COMMAND`.
		printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$braid" "$cmd" >"$tmp/braid-$cmd"
		chmod +x "$tmp/braid-$cmd"
		h2m "$tmp/braid-$cmd" "$summary" "$out/braid-$cmd.1"
	done
