#!/usr/bin/env bash
# make soak: the soak scenario with CONF_SOAK_TRANSFERS (default 100,000) transfers on
# each backend: ofi tcp;ofi_rxm, ofi shm, ib on softverbs (with BRAID_IB_FLUSH=always and
# BRAID_OFI_FLUSH=always, so that every random iflush reads the buffer back). Each prints
# its seed; replay a run with CONF_SOAK_SEED=N and the same CONF_SOAK_TRANSFERS. make test
# runs the same scenario with 2,000 transfers inside tcp.sh, shm.sh and the ib conformance
# scripts.
set -u
here=$(dirname "$0")
. "$here/lib.sh"
export CONF_SOAK_TRANSFERS=${CONF_SOAK_TRANSFERS:-100000}
fail=0
for t in tcp:"$here/tcp.sh" shm:"$here/shm.sh" ib-softverbs:"$here/../ib/conformance-ib.sh"; do
	name=${t%%:*} script=${t#*:}
	t0=$SECONDS
	BRAID_IB_FLUSH=always BRAID_OFI_FLUSH=always "$script" --api 11 --scenario soak 2>&1 |
		grep -E 'soak (seed|done|FAILED)|FAIL|SKIP' | sed "s/^/[$name] /"
	rc=${PIPESTATUS[0]}
	echo "[$name] exit $rc in $((SECONDS - t0)) s"
	[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail=1
done
[ "$fail" -eq 0 ] || die "soak failed (the seeds above replay it)"
echo "soak: all passed"
