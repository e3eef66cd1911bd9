#!/usr/bin/env bash
# braid stat --serve scraped by a real Prometheus server (Debian's prometheus package) on
# loopback, every second, while a real `braid perf` streams over libfabric's tcp;ofi_rxm:
# Prometheus' HTTP API then gives a non-zero rate(braid_bytes_total[5s]) for the sending
# process, and braid_slow_path == 1 with backend ofi and provider tcp;ofi_rxm (tcp is a
# slow path). Every wait is bounded; everything started here is killed at exit.
set -u
. "$(dirname "$0")/lib.sh"
unset BRAID_SHM_DIR # the plugin writes /dev/shm/braid-<pid>
command -v prometheus >/dev/null ||
	skip "prometheus is not installed (Debian's prometheus package, packaging/debian-packages.txt)"
command -v curl >/dev/null || skip "curl is not installed (packaging/debian-packages.txt)"
command -v ss >/dev/null || skip "ss is not installed (iproute2)"
command -v fi_info >/dev/null && fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1 ||
	skip "libfabric's tcp;ofi_rxm provider is not usable here (fi_info -p 'tcp;ofi_rxm')"
[ -d /dev/shm ] && [ -w /dev/shm ] || skip "no writable /dev/shm"

# a loopback port nobody listens on now (prometheus is retried on another if it loses a race)
free_port() {
	local p _
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 30000))
		[ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return 0; }
	done
	return 1
}
# query PROMQL OUT: the API's answer in OUT; 0 when it says success
query() {
	curl -sS -m 3 -G "$papi/api/v1/query" --data-urlencode "query=$1" >"$2" 2>&1 &&
		grep -q '"status":"success"' "$2"
}
# values of the result vector in a query's answer, one a line
values() { grep -o '"value":\[[0-9.e+-]*,"[^"]*"\]' "$1" | sed 's/.*,"//; s/"\]$//'; }

# ---- the exporter
"$BRAID" stat --serve 127.0.0.1:0 --dir /dev/shm >"$T/serve" 2>&1 &
HELPERS+=("$!")
target=
for _ in $(seq 100); do
	target=$(grep -Eo '127\.0\.0\.1:[0-9]+' "$T/serve" | head -n1)
	[ -n "$target" ] && break
	sleep 0.05
done
[ -n "$target" ] || { fail "braid stat --serve did not start:"; show "$T/serve"; finish; }
pass "exporter: $(cat "$T/serve")"

# ---- Prometheus, scraping it every second, its storage in $T
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: braid
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['$target']
EOF
papi=
for try in 1 2 3; do
	pport=$(free_port) || { fail "no free loopback port"; finish; }
	prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/data.$try" \
		--web.listen-address="127.0.0.1:$pport" --log.level=warn >"$T/prometheus.log" 2>&1 &
	prom=$!
	HELPERS+=("$prom")
	for _ in $(seq 100); do # 10 s
		if curl -sf -m 1 "http://127.0.0.1:$pport/-/ready" >/dev/null 2>&1; then
			papi=http://127.0.0.1:$pport
			break 2
		fi
		kill -0 "$prom" 2>/dev/null || break
		sleep 0.1
	done
	kill "$prom" 2>/dev/null
	grep -q 'address already in use' "$T/prometheus.log" || break
done
[ -n "$papi" ] || { fail "prometheus did not get ready:"; show "$T/prometheus.log"; finish; }
pass "prometheus ready at $papi"
up=
for _ in $(seq 50); do # 10 s
	query 'up{job="braid"}' "$T/q" && up=$(values "$T/q")
	[ "$up" = 1 ] && break
	sleep 0.2
done
[ "$up" = 1 ] && pass "prometheus scrapes braid stat: up{job=\"braid\"} 1" ||
	{ fail "the target never came up: $(cat "$T/q")"; show "$T/prometheus.log"; finish; }

# ---- braid perf: 1 MiB messages over tcp;ofi_rxm, 20 GB: a few seconds on an idle
# machine, more than its own 120 s limit per phase on a loaded one (2 cores beside two busy
# loops: about 160 MB/s). It only has to stream while Prometheus scrapes: it is stopped
# once the checks are done, not waited for.
BRAID_SOCKET_IFNAME=lo "$BRAID" perf --backend ofi --provider 'tcp;ofi_rxm' \
	--bw-only --min 1M --max 1M --iters 20000 --warmup 2 >"$T/perf" 2>&1 &
perf=$!
HELPERS+=("$perf")
rate=
for _ in $(seq 60); do # 15 s
	q="rate(braid_bytes_total{job=\"braid\",pid=\"$perf\",direction=\"tx\"}[5s])"
	query "$q" "$T/rate" && rate=$(values "$T/rate" | awk '$1 + 0 > 0 { print; exit }')
	[ -n "$rate" ] && break
	kill -0 "$perf" 2>/dev/null || break
	sleep 0.25
done
echo "query: $q"
cat "$T/rate"
echo
if [ -n "$rate" ]; then
	pass "Prometheus: rate(braid_bytes_total[5s]) of braid perf's sending process: $rate bytes/s"
else
	fail "Prometheus never gave braid perf (pid $perf) a tx rate above 0"
	show "$T/perf"
fi
q="braid_slow_path{job=\"braid\",pid=\"$perf\"}"
query "$q" "$T/slow"
echo "query: $q"
cat "$T/slow"
echo
expect "$T/slow" '"backend":"ofi"' "braid_slow_path: backend ofi"
expect "$T/slow" '"provider":"tcp;ofi_rxm"' "braid_slow_path: provider tcp;ofi_rxm"
[ "$(values "$T/slow")" = 1 ] && pass "Prometheus: braid_slow_path of braid perf is 1 (tcp)" ||
	fail "braid_slow_path of pid $perf: '$(values "$T/slow")', not 1"

# Still streaming, as it should be unless the machine is fast: stop it and its peer (a
# child of it), and remove their counters files (/dev/shm/braid-<pid>, which the plugin
# would otherwise sweep later as orphans). Already done: it must have succeeded.
peer=$(ps -o pid= --ppid "$perf" | tr -d ' ')
if kill -0 "$perf" 2>/dev/null; then
	pass "braid perf still streaming when the checks were done: stopped"
	# shellcheck disable=SC2086 # the peer's pid, or none
	kill "$perf" $peer 2>/dev/null
	wait "$perf" 2>/dev/null
	for _ in $(seq 50); do # 5 s
		[ -n "$peer" ] && kill -0 "$peer" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$peer" ] && kill -KILL "$peer" 2>/dev/null
	rm -f "/dev/shm/braid-$perf" ${peer:+"/dev/shm/braid-$peer"}
else
	wait "$perf"
	rc=$?
	[ $rc -eq 0 ] && pass "braid perf succeeded" || { fail "braid perf: exit $rc"; show "$T/perf"; }
fi
finish
