#!/usr/bin/env bash
# braid stat --json: one document that python3's json module parses, with the fields
# docs/stat.md lists and the values the counters files hold; slow path first; an ended
# process in "ended", not in "processes"; a file of another version in "not_read" with
# both versions and nothing read from it; strings escaped (quotes, backslashes) and
# unprintable bytes replaced.
set -u
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "python3 is not installed (the JSON is checked with it)"
D=$BRAID_SHM_DIR
out=$T/out.json

hold --dir "$D" --backend ofi --provider 'verbs;ofi_rxm' --gdr --regs 0,6
fast=$HELD
hold --dir "$D" --backend ofi --provider 'tcp;ofi_rxm' --slow
slow=$HELD
hold --dir "$D" --backend ib --provider 'svroce0,svroce1' --ib --regs 4,2
ib=$HELD
hold --dir "$D" --provider "$(printf 'q"uote\\back\tslash')"
odd=$HELD
dead=$(dead_pid)
# The counters layout version this braid reads (plugin/counters.h), and one newer.
V=$(sed -n 's/^#define BRAID_CTR_VERSION \([0-9]*\).*/\1/p' plugin/counters.h)
NEWER=$((V + 1))
"$MK" --file "$D/braid-$dead" --provider shm
"$MK" --file "$D/braid-999001" --version $NEWER --backend MISREAD --provider MISREAD
"$MK" --file "$D/braid-999003" --size 1000 --provider MISREAD

"$BRAID" stat --json >"$out" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] && pass "exit status 0" || { fail "exit status $rc"; show "$T/err"; }
if python3 -m json.tool "$out" >/dev/null 2>"$T/err"; then
	pass "python3 -m json.tool parses it"
else
	fail "not JSON:"; show "$T/err"; show "$out"
fi
cat "$out"

# Each check prints "ok: ..." or "FAIL: ..."; the count of FAIL lines is added to ours.
V=$V python3 - "$out" "$D" "$fast" "$slow" "$ib" "$odd" "$dead" >"$T/py" 2>&1 <<'PY'
import json, os, sys
V = int(os.environ["V"])
path, d, fast, slow, ib, odd, dead = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
doc = json.load(open(path))
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
def has(obj, keys, what):
    missing = [k for k in keys if k not in obj]
    check(not missing, what + (": missing " + ", ".join(missing) if missing else ""))

has(doc, ["braid_stat", "layout_version", "dir", "time_ns", "processes", "ended", "not_read"],
    "top-level members")
check(doc.get("braid_stat") == 1 and doc.get("layout_version") == V and doc.get("dir") == d,
      "schema 1, layout 4, dir")
procs = doc.get("processes", [])
pids = [p.get("pid") for p in procs]
check(sorted(pids) == sorted([fast, slow, ib, odd]), "processes: the four running ones, %s" % pids)
check(pids[:1] == [slow], "the slow-path process first: %s" % pids)
by = {p.get("pid"): p for p in procs}
for p in procs:
    has(p, ["file", "path", "pid", "live", "liveness", "pid_namespace", "start_time_ns",
            "uptime_s", "backend", "provider", "slow_path", "why", "gpudirect", "link_layer",
            "gid_index", "gid_type", "mtu", "devices", "comms", "qps"], "pid %s members" % p.get("pid"))
    check(p.get("live") is True and p.get("pid_namespace") == "this",
          "pid %s live, in this PID namespace" % p.get("pid"))
s, f, i = by.get(slow, {}), by.get(fast, {}), by.get(ib, {})
check(s.get("backend") == "ofi" and s.get("provider") == "tcp;ofi_rxm" and s.get("slow_path") is True,
      "slow process: backend, provider, slow_path")
check(f.get("provider") == "verbs;ofi_rxm" and f.get("slow_path") is False, "fast process: provider, not slow")
check(f.get("gpudirect") == {"on": True, "mode": "dma-buf", "why": "mkregion: dma-buf on every device",
                             "recv_regs_gpu": 0, "recv_regs_host": 6, "used": False},
      "GPUDirect on (offered), not used: %s" % f.get("gpudirect"))
check(s.get("gpudirect", {}).get("on") is False, "GPUDirect off")
check("used" in s.get("gpudirect", {}) and s["gpudirect"]["used"] is None,
      "GPUDirect used: null before any registration")
check({k: i.get("gpudirect", {}).get(k) for k in ("recv_regs_gpu", "recv_regs_host", "used")} ==
      {"recv_regs_gpu": 4, "recv_regs_host": 2, "used": True}, "GPUDirect used: %s" % i.get("gpudirect"))
check(s.get("file") == "braid-%d" % slow and s.get("path") == "%s/braid-%d" % (d, slow), "file and path")
check(10 <= (s.get("uptime_s") or 0) < 60, "uptime_s about 10: %s" % s.get("uptime_s"))
dev = (f.get("devices") or [{}])[0]
has(dev, ["index", "name", "provider", "in_use", "tx_bytes", "tx_msgs", "rx_bytes", "rx_msgs",
          "completions", "errors", "av_entries", "strangers", "slow_lanes", "stalls", "port_down"],
    "device members")
check(dev.get("name") == "mkdev0" and dev.get("rx_bytes") == 2000000000 and dev.get("strangers") == 7
      and dev.get("completions") == 3000 and dev.get("tx_bytes", 0) >= 1000000000, "device values: %s" % dev)
check(f.get("qps") is None, "ofi: qps null")
check(i.get("link_layer") == "RoCE" and i.get("gid_index") == 3 and i.get("gid_type") == "RoCEv2"
      and i.get("mtu") == 4096, "ib: link layer, GID, MTU")
check([x.get("slow_lanes") for x in i.get("devices", [])] == [0, 3], "ib: slow_lanes per device")
check([x.get("stalls") for x in i.get("devices", [])] == [5, 6], "ib: stalls per device")
check([x.get("port_down") for x in i.get("devices", [])] == [False, True], "ib: port_down per device")
comms = i.get("comms", [])
check([(c.get("slot"), c.get("kind"), c.get("nlanes")) for c in comms] == [(0, "send", 2), (2, "recv", 1)],
      "ib: comms slot, kind, nlanes")
lanes = comms[0].get("lanes", []) if comms else []
check([(l.get("name"), l.get("bytes"), round(l.get("share", 0), 3), round(l.get("weight", 0), 3),
        l.get("rate_Bps"), l.get("slow")) for l in lanes] ==
      [("svroce0:1", 480000000, 0.8, 0.8, 12000000000, False),
       ("svroce1:1", 120000000, 0.2, 0.2, 3000000000, True)], "ib: lanes %s" % lanes)
# NIC 0 failed twice and came back twice: up; NIC 1 failed and did not come back: down
check([(l.get("failovers"), l.get("recoveries"), l.get("up")) for l in lanes] ==
      [(2, 2, True), (1, 0, False)], "ib: lanes' failovers, recoveries, up: %s" %
      [(l.get("failovers"), l.get("recoveries"), l.get("up")) for l in lanes])
check([c.get("failovers") for c in comms] == [3, 0], "ib: failovers per comm")
check([c.get("recoveries") for c in comms] == [2, 0], "ib: recoveries per comm")
check(len(comms) > 1 and comms[1].get("lanes") == [] and comms[1].get("peer") == "192.0.2.8:40002",
      "one-NIC comm: no lanes, peer")
qps = i.get("qps") or []
check([(q.get("qpn"), q.get("remote_qpn"), q.get("flow_label"), q.get("sport"), q.get("dev")) for q in qps] ==
      [(0x100 + k, 0x200 + k, 0x1000 + k, 49152 + k, k % 2) for k in range(4)], "ib: qps")
o = by.get(odd, {})
check(o.get("provider") == 'q"uote\\back?slash', "quote and backslash kept, tab replaced: %r" % o.get("provider"))
ended = doc.get("ended", [])
check([e.get("pid") for e in ended] == [dead] and dead not in pids, "the dead pid: ended, not a process")
check(ended and ended[0].get("provider") == "shm", "ended: its provider")
nr = {e.get("file"): e for e in doc.get("not_read", [])}
v = nr.get("braid-999001", {})
check(v.get("reason") == "version" and v.get("version") == V + 1 and v.get("reads_version") == V
      and v.get("running") is False, "a newer version: not_read with both versions: %s" % v)
check(nr.get("braid-999003", {}).get("reason") == "truncated", "truncated: not_read")
check("MISREAD" not in open(path).read(), "nothing read from files not read")
PY
prc=$?
cat "$T/py"
[ $prc -eq 0 ] || fail "the python checks exited with $prc"
nfail=$((nfail + $(grep -c '^FAIL' "$T/py")))
finish
