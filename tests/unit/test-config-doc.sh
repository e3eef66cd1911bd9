#!/usr/bin/env bash
# docs/configuration.md must be exactly what the parameter table generates.
set -u
gen="$BUILD/tests/unit/gen-config-doc"
if ! diff -u docs/configuration.md <("$gen"); then
	echo "docs/configuration.md is out of date: run 'make docs' and commit it"
	exit 1
fi
echo "docs/configuration.md matches plugin/params.h"
tests/unit/ib-doc-table.sh --check "$gen" || exit 1
echo "docs/ib.md's NCCL_IB_* table matches plugin/ncclib_env.c"
