#!/usr/bin/env bash
# braid stat across PID namespaces and permissions: a running process whose pid is not in
# this PID namespace (a container sharing /dev/shm) is live by its file's lock and said
# to be in another namespace; so is one in a real other PID namespace (unshare --pid, as
# root: its pid there, 1, is another process here); a file braid stat may not open is
# listed as hidden by permissions, with its owner and mode.
set -u
. "$(dirname "$0")/lib.sh"
D=$BRAID_SHM_DIR
out=$T/out

# a pid that is not here, in a file held open (locked) by a running process
ghost=$(dead_pid)
hold --file "$D/braid-$ghost" --backend ofi --provider 'tcp;ofi_rxm'
"$BRAID" stat >"$out" 2>&1
cat "$out"
expect "$out" "^pid $ghost  live, up" "pid not in this namespace, lock held: live"
expect "$out" "^  liveness: live: holds its counters file's lock; in another PID namespace \(a container sharing /dev/shm\): its pid means nothing here$" \
	"said to be in another PID namespace"
if command -v python3 >/dev/null; then
	"$BRAID" stat --json >"$out" 2>&1
	if python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"]; sys.exit(not (len(p)==1 and p[0]["pid"]==int(sys.argv[2]) and p[0]["live"] is True and p[0]["pid_namespace"]=="other"))' "$out" "$ghost"; then
		pass "JSON: live, pid_namespace other"
	else
		fail "JSON: not live in another namespace:"; show "$out"
	fi
fi
kill "$HELD"
wait "$HELD" 2>/dev/null
rm -f "$D"/braid-*

# a real PID namespace: the process is pid 1 there, its file braid-1; pid 1 here is init
if [ "$(id -u)" -eq 0 ] && unshare --pid --fork --kill-child true 2>/dev/null; then
	unshare --pid --fork --kill-child "$MK" --dir "$D" --hold 30 --provider shm >"$T/ns" 2>&1 &
	HELPERS+=("$!")
	for _ in $(seq 200); do grep -q '^ready ' "$T/ns" && break; sleep 0.05; done
	"$BRAID" stat >"$out" 2>&1
	cat "$out"
	expect "$T/ns" "^ready $D/braid-1$" "the process in its own PID namespace is pid 1"
	expect "$out" "^pid 1  live, up" "another PID namespace: live by the lock"
	expect "$out" "in another PID namespace \(a container sharing /dev/shm\)" \
		"another PID namespace: pid 1 here is not the owner"
	expect "$out" "^  backend ofi, provider shm$" "another PID namespace: its counters read"
	# unshare --fork ignores SIGTERM, and pid 1 of a namespace gets from outside only
	# the signals it handles and SIGKILL
	inner=$(ps -o pid= --ppid "${HELPERS[-1]}" | tr -d ' ')
	[ -n "$inner" ] && kill -KILL "$inner"
	wait "${HELPERS[-1]}" 2>/dev/null
	"$BRAID" stat >"$out" 2>&1
	expect "$out" "^  $D/braid-1: pid 1, .*no process holds its lock: ended without removing its file \(its pid here is another process now\)$" \
		"another PID namespace, ended: not live though pid 1 runs here"
	rm -f "$D"/braid-*
else
	echo "note: not root or no unshare --pid: the real other-namespace case is not run"
fi

# hidden by permissions: a file of another user, or of ours without read permission
hold --dir "$D" --provider shm
hidden=$HELD
if [ "$(id -u)" -eq 0 ]; then
	command -v setpriv >/dev/null || skip "root, and no setpriv to run braid stat as another user"
	chmod 0600 "$D/braid-$hidden"
	chmod 0755 "$T" "$D"
	cp "$BRAID" "$T/braid" # reachable by nobody wherever the build tree is
	as_other=(setpriv --reuid=65534 --regid=65534 --clear-groups "$T/braid")
	mode=0600
else
	chmod 0000 "$D/braid-$hidden"
	as_other=("$BRAID")
	mode=0000
fi
"${as_other[@]}" stat >"$out" 2>&1
cat "$out"
expect "$out" "^  $D/braid-$hidden: hidden by permissions \(owner uid $(id -u), mode $mode\): run braid stat as that user or root$" \
	"hidden by permissions, with owner and mode"
expect_not "$out" "^pid $hidden " "hidden: not listed as a process"
expect "$out" "0 running braid process\(es\) .*, 1 file\(s\) not read" "hidden: counted as not read"
finish
