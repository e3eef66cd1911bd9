#!/usr/bin/env bash
# braid stat --serve and --textfile on crafted counters files (mkregion): the exposition
# names every metric with HELP and TYPE, carries the crafted values with their labels,
# escapes label values, leaves out processes that ended and files not read, and passes
# `promtool check metrics` (Debian's prometheus package); /metrics over HTTP with its
# content type, 404 and 405 elsewhere, a clear error when the port is taken; the text
# file is written by a rename (no temporary file left, mode 0644), again with --watch.
set -u
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is not installed (packaging/debian-packages.txt)"
out=$T/out
tf=$T/textfile
mkdir -p "$tf"

# a fused verbs process, a slow ofi one whose provider has a quote and a backslash, one
# whose provider has a newline (the reader makes it '?'), one that ended, one of a newer layout
hold --dir "$BRAID_SHM_DIR" --backend ib --provider mlx5_0,mlx5_1 --ib --gdr --regs 4,2
ib=$HELD
hold --dir "$BRAID_SHM_DIR" --slow --provider 'tcp;"q\b' --regs 0,3
slow=$HELD
hold --dir "$BRAID_SHM_DIR" --provider $'nl\nx'
nl=$HELD
ended=$(dead_pid)
# The counters layout version this braid reads (plugin/counters.h), and one newer.
V=$(sed -n 's/^#define BRAID_CTR_VERSION \([0-9]*\).*/\1/p' plugin/counters.h)
NEWER=$((V + 1))
"$MK" --file "$BRAID_SHM_DIR/braid-$ended" --pid "$ended" >/dev/null
"$MK" --file "$BRAID_SHM_DIR/braid-4200" --pid 4200 --version $NEWER >/dev/null

# ---- --textfile, once
"$BRAID" stat --textfile "$tf" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] && pass "--textfile: exit 0" || { fail "--textfile: exit $rc"; show "$out"; }
prom=$tf/braid.prom
[ -s "$prom" ] || { fail "no $prom"; finish; }
cat "$prom"
[ "$(ls -A "$tf")" = "braid.prom" ] && pass "--textfile: braid.prom alone in the directory" ||
	fail "--textfile: other files left in $tf: $(ls -A "$tf" | tr '\n' ' ')"
[ "$(stat -c %a "$prom")" = 644 ] && pass "--textfile: mode 0644 (node_exporter reads it)" ||
	fail "--textfile: mode $(stat -c %a "$prom")"

for m in braid_up:gauge braid_process_start_time_seconds:gauge braid_slow_path:gauge \
	braid_gpudirect:gauge braid_gpudirect_recv_regs_total:counter braid_gpudirect_used:gauge \
	braid_comms:gauge braid_bytes_total:counter \
	braid_messages_total:counter braid_completions_total:counter braid_errors_total:counter \
	braid_strangers_total:counter braid_slow_lanes_total:counter braid_stalls_total:counter \
	braid_nic_slow:gauge \
	braid_av_entries:gauge braid_qps:gauge braid_lane_bytes_total:counter \
	braid_lane_chunks_total:counter braid_lane_rate_bytes_per_second:gauge \
	braid_lane_weight_ratio:gauge braid_lane_slow:gauge braid_lane_up:gauge \
	braid_lane_failovers_total:counter braid_lane_recoveries_total:counter \
	braid_counters_files:gauge; do
	n=${m%:*}
	expect_before "$prom" "^# HELP $n [^ ]" "^# TYPE $n ${m#*:}$" "$n: HELP, then TYPE ${m#*:}"
done
# every sample line belongs to a family that has a TYPE line before it
awk '/^# TYPE /{t[$3]=1; next} /^#/{next} {n=$0; sub(/[{ ].*/, "", n); if (!(n in t)) print}' \
	"$prom" >"$T/untyped"
[ -s "$T/untyped" ] && { fail "samples without a TYPE line:"; show "$T/untyped"; } ||
	pass "every sample's family has a TYPE line"

expect "$prom" "^braid_up\{pid=\"$ib\"\} 1$" "braid_up of the verbs process"
expect "$prom" "^braid_up\{pid=\"$slow\"\} 1$" "braid_up of the slow process"
expect_not "$prom" "pid=\"($ended|4200)\"" "no series of the ended process nor of the newer layout's file"
expect "$prom" '^braid_counters_files\{state="running"\} 3$' "braid_counters_files running 3"
expect "$prom" '^braid_counters_files\{state="ended"\} 1$' "braid_counters_files ended 1"
expect "$prom" '^braid_counters_files\{state="not_read"\} 1$' "braid_counters_files not_read 1"
expect "$prom" "^braid_slow_path\{pid=\"$slow\",backend=\"ofi\",provider=\"tcp;\\\\\"q\\\\\\\\b\",reason=\"mkregion: ofi provider tcp;\\\\\"q\\\\\\\\b; first choice\"\} 1$" \
	"braid_slow_path 1, label values with \\\" and \\\\ escaped"
expect "$prom" "^braid_slow_path\{pid=\"$ib\",backend=\"ib\",provider=\"mlx5_0,mlx5_1\",reason=\"[^\"]*\"\} 0$" \
	"braid_slow_path 0 for the verbs process"
expect "$prom" "^braid_slow_path\{pid=\"$nl\",backend=\"ofi\",provider=\"nl\?x\"," \
	"a newline in a provider: shown as ?, one line per sample"
expect "$prom" "^braid_gpudirect\{pid=\"$ib\",mode=\"dma-buf\",reason=\"mkregion: dma-buf on every device\"\} 1$" \
	"braid_gpudirect 1 with mode dma-buf"
expect "$prom" "^braid_gpudirect\{pid=\"$slow\",mode=\"none\",reason=\"mkregion: no GPU\"\} 0$" \
	"braid_gpudirect 0 with mode none"
expect "$prom" "^braid_gpudirect_recv_regs_total\{pid=\"$ib\",memory=\"gpu\"\} 4$" \
	"braid_gpudirect_recv_regs_total in GPU memory"
expect "$prom" "^braid_gpudirect_recv_regs_total\{pid=\"$ib\",memory=\"host\"\} 2$" \
	"braid_gpudirect_recv_regs_total in host memory"
expect "$prom" "^braid_gpudirect_used\{pid=\"$ib\"\} 1$" "braid_gpudirect_used 1: buffers in GPU memory"
expect "$prom" "^braid_gpudirect_used\{pid=\"$slow\"\} 0$" "braid_gpudirect_used 0: host memory only"
expect_not "$prom" "^braid_gpudirect_used\{pid=\"$nl\"\}" "braid_gpudirect_used: no sample before a registration"
expect "$prom" "^braid_process_start_time_seconds\{pid=\"$ib\"\} 1[0-9]{9}\.[0-9]{9}$" \
	"start time in seconds since the epoch"
expect "$prom" "^braid_bytes_total\{pid=\"$ib\",dev=\"1\",nic=\"svroce1:1\",direction=\"tx\"\} 2000000000$" \
	"braid_bytes_total tx of dev 1"
expect "$prom" "^braid_bytes_total\{pid=\"$ib\",dev=\"0\",nic=\"svroce0:1\",direction=\"rx\"\} 2000000000$" \
	"braid_bytes_total rx of dev 0"
expect "$prom" "^braid_messages_total\{pid=\"$ib\",dev=\"1\",nic=\"svroce1:1\",direction=\"tx\"\} 1000$" \
	"braid_messages_total tx of dev 1"
expect "$prom" "^braid_errors_total\{pid=\"$ib\",dev=\"1\",nic=\"svroce1:1\"\} 1$" "braid_errors_total"
expect "$prom" "^braid_strangers_total\{pid=\"$ib\",dev=\"0\",nic=\"svroce0:1\"\} 7$" "braid_strangers_total"
expect "$prom" "^braid_slow_lanes_total\{pid=\"$ib\",dev=\"1\",nic=\"svroce1:1\"\} 3$" "braid_slow_lanes_total"
expect "$prom" "^braid_stalls_total\{pid=\"$ib\",dev=\"1\",nic=\"svroce1:1\"\} 6$" "braid_stalls_total"
expect "$prom" "^braid_nic_slow\{pid=\"$ib\",dev=\"1\",nic=\"svroce1:1\"\} 1$" "braid_nic_slow 1 for the slow NIC"
expect "$prom" "^braid_nic_slow\{pid=\"$ib\",dev=\"0\",nic=\"svroce0:1\"\} 0$" "braid_nic_slow 0 for the other"
expect "$prom" "^braid_qps\{pid=\"$ib\",dev=\"0\",nic=\"svroce0:1\"\} 2$" "braid_qps per device"
expect_not "$prom" "^braid_qps\{pid=\"$slow\"" "no braid_qps for ofi (no QP records)"
expect "$prom" "^braid_comms\{pid=\"$ib\",kind=\"send\"\} 1$" "braid_comms send"
expect "$prom" "^braid_comms\{pid=\"$ib\",kind=\"recv\"\} 1$" "braid_comms recv"
lane="pid=\"$ib\",comm=\"0\",peer=\"192.0.2.7:40001\""
expect "$prom" "^braid_lane_bytes_total\{$lane,dev=\"0\",nic=\"svroce0:1\"\} 480000000$" "braid_lane_bytes_total NIC 0"
expect "$prom" "^braid_lane_bytes_total\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 120000000$" "braid_lane_bytes_total NIC 1"
expect "$prom" "^braid_lane_chunks_total\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 120$" "braid_lane_chunks_total"
expect "$prom" "^braid_lane_rate_bytes_per_second\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 3000000000$" \
	"braid_lane_rate_bytes_per_second"
expect "$prom" "^braid_lane_weight_ratio\{$lane,dev=\"0\",nic=\"svroce0:1\"\} 0\.800000$" "braid_lane_weight_ratio"
expect "$prom" "^braid_lane_slow\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 1$" "braid_lane_slow"
expect "$prom" "^braid_lane_up\{$lane,dev=\"0\",nic=\"svroce0:1\"\} 1$" "braid_lane_up NIC 0, failed twice and came back twice"
expect "$prom" "^braid_lane_up\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 0$" "braid_lane_up NIC 1, failed, not back, its port down"
expect "$prom" "^braid_lane_failovers_total\{$lane,dev=\"0\",nic=\"svroce0:1\"\} 2$" "braid_lane_failovers_total NIC 0"
expect "$prom" "^braid_lane_failovers_total\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 1$" "braid_lane_failovers_total NIC 1"
expect "$prom" "^braid_lane_recoveries_total\{$lane,dev=\"0\",nic=\"svroce0:1\"\} 2$" "braid_lane_recoveries_total NIC 0"
expect "$prom" "^braid_lane_recoveries_total\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 0$" "braid_lane_recoveries_total NIC 1"
expect_not "$prom" "^braid_lane_[a-z_]+\{pid=\"$slow\"" "no lanes for a comm of one NIC"

# ---- promtool (Debian's prometheus package)
have_promtool=0
command -v promtool >/dev/null && have_promtool=1
promcheck() { # FILE WHAT
	[ $have_promtool -eq 1 ] || return 0
	if promtool check metrics <"$1" >"$T/promtool" 2>&1; then
		pass "promtool check metrics: $2 clean"
	else
		fail "promtool check metrics: $2:"
		show "$T/promtool"
	fi
}
promcheck "$prom" "the text file"

# ---- --serve
"$BRAID" stat --serve 127.0.0.1:0 >"$T/serve" 2>&1 &
srv=$!
HELPERS+=("$srv")
url=
for _ in $(seq 100); do
	url=$(grep -Eo 'http://127\.0\.0\.1:[0-9]+/metrics' "$T/serve")
	[ -n "$url" ] && break
	kill -0 "$srv" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$url" ]; then
	fail "braid stat --serve 127.0.0.1:0 did not say where it serves:"
	show "$T/serve"
	finish
fi
pass "--serve: $(cat "$T/serve")"
base=${url%/metrics}
port=${base##*:}
code=$(curl -sS -m 5 -o "$T/metrics" -D "$T/headers" -w '%{http_code}' "$url")
[ "$code" = 200 ] && pass "GET /metrics: 200" || fail "GET /metrics: $code"
expect "$T/headers" '^Content-Type: text/plain; version=0\.0\.4; charset=utf-8' "the exposition's content type"
expect "$T/metrics" "^braid_lane_slow\{$lane,dev=\"1\",nic=\"svroce1:1\"\} 1$" "/metrics has the lanes"
expect "$T/metrics" "^braid_up\{pid=\"$slow\"\} 1$" "/metrics has the slow process"
promcheck "$T/metrics" "/metrics"
code=$(curl -sS -m 5 -o /dev/null -w '%{http_code}' "$base/nothing")
[ "$code" = 404 ] && pass "GET /nothing: 404" || fail "GET /nothing: $code"
code=$(curl -sS -m 5 -o /dev/null -w '%{http_code}' -X POST "$url")
[ "$code" = 405 ] && pass "POST /metrics: 405" || fail "POST /metrics: $code"

# a process that ends is gone from the next scrape
kill "$slow"
for _ in $(seq 100); do
	[ -e "$BRAID_SHM_DIR/braid-$slow" ] && kill -0 "$slow" 2>/dev/null || break
	sleep 0.05
done
wait "$slow" 2>/dev/null
curl -sS -m 5 -o "$T/metrics2" "$url"
expect_not "$T/metrics2" "pid=\"$slow\"" "a process that ended: no series at the next scrape"
expect "$T/metrics2" "^braid_up\{pid=\"$ib\"\} 1$" "the others still there"

# the port taken: a clear error, exit 1
timeout 10 "$BRAID" stat --serve "127.0.0.1:$port" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] && pass "--serve on a taken port: exit 1" || fail "--serve on a taken port: exit $rc"
expect "$out" "^braid stat: --serve: cannot listen on 127\.0\.0\.1:$port: Address already in use" \
	"--serve on a taken port: says so"
kill "$srv"
wait "$srv"
rc=$?
[ $rc -eq 0 ] && pass "--serve: SIGTERM, exit 0" || fail "--serve: exit $rc after SIGTERM"

# usage errors
for a in "--serve nope" "--serve 127.0.0.1:70000" "--serve 127.0.0.1:0 --json" \
	"--serve 127.0.0.1:0 --watch 1" "--textfile $tf --json" "--serve 127.0.0.1:0 --textfile $tf"; do
	# shellcheck disable=SC2086 # words on purpose
	timeout 10 "$BRAID" stat $a >"$out" 2>&1
	rc=$?
	[ $rc -ne 0 ] && grep -q '^braid stat: --' "$out" && pass "braid stat $a: refused ($rc): $(head -n1 "$out")" ||
		{ fail "braid stat $a: exit $rc"; show "$out"; }
done
timeout 10 "$BRAID" stat --textfile "$T/none" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] && pass "--textfile of a missing directory: exit 1" || fail "--textfile of a missing directory: exit $rc"
expect "$out" "^braid stat: --textfile $T/none: No such file or directory$" "--textfile: says why"

# ---- --textfile --watch: rewritten every interval, by a rename each time. The first
# file is kept open, as a reader in the middle of it would, so that its inode cannot be
# reused: a later one is another file, and the open one stays whole.
rm -f "$prom"
ino0=
timeout 20 "$BRAID" stat --textfile "$tf" --watch 0.3 --count 3 >"$out" 2>&1 &
tw=$!
for _ in $(seq 200); do
	[ -e "$prom" ] && exec 3<"$prom" && { ino0=$(stat -L -c %i /proc/self/fd/3); break; }
	sleep 0.01
done
wait "$tw"
rc=$?
[ $rc -eq 0 ] && pass "--textfile --watch 0.3 --count 3: exit 0" || { fail "--textfile --watch: exit $rc"; show "$out"; }
if [ -n "$ino0" ] && [ "$(stat -c %i "$prom")" != "$ino0" ]; then
	pass "--textfile --watch: braid.prom replaced by another file at a later interval"
	cat <&3 >"$T/first.prom"
	expect "$T/first.prom" '^braid_counters_files\{state="not_read"\} 1$' \
		"--textfile --watch: the file a reader held open is whole (its last line there)"
	promcheck "$T/first.prom" "the file a reader held open"
else
	fail "--textfile --watch: braid.prom not replaced (inode ${ino0:-none})"
fi
exec 3<&-
[ "$(ls -A "$tf")" = "braid.prom" ] && pass "--textfile --watch: no temporary file left" ||
	fail "--textfile --watch: left in $tf: $(ls -A "$tf" | tr '\n' ' ')"
promcheck "$prom" "the text file of --watch"

[ $have_promtool -eq 1 ] || { [ "$nfail" -eq 0 ] && skip "promtool is not installed (Debian's prometheus package): the exposition was not checked with it"; }
finish
