#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sum a callgrind run of tests/bench/ipm by phase, in the buckets ipm.sh reports.

usage: ipm_callgrind.py --plugin SO --driver BIN [--exclude SO]... OUT_PREFIX
       ipm_callgrind.py --result RUN_N RUN_M [RUN_N RUN_M]...
Reads OUT_PREFIX and OUT_PREFIX.<n> (one file per dump; run with --compress-strings=no
--compress-pos=no, threads not separated) and prints one line per phase:

  <phase> total=<Ir> plugin=<Ir> whole=<Ir> excluded=<Ir> driver=<Ir>

  total     every instruction of every thread in the phase
  plugin    instructions in the plugin's own object (self cost of --plugin)
  excluded  the instructions of the --exclude objects (softverbs: the emulated NIC) and
            the inclusive cost of every call they make to other objects (libc), in
            every thread
  driver    the client's own instructions (self cost of --driver) and the calls it makes
            to anything but the plugin (libc: memcmp, sched_yield, clock_gettime ...)
  whole     total - excluded - driver: the plugin, libfabric or libibverbs, libc and the
            loader as the plugin's calls use them

Phases: a dump's trigger ("stream", "idle-rtest", ...); the last dump is "end". Phases
that occur more than once are summed.

--result: RUN_N and RUN_M are two runs of one case (RUN.out: ipm's stdout, RUN.phases:
the lines above). Prints, per message of the N - M messages only the larger run sent:
plugin, whole, whole without the idle correction, and idle calls (see ipm.sh); with
several pairs, the median of each; then the number of pairs, and 1 when a run had idle
calls for more than 1 % of its messages (its counts depend on timing), else 0.
"""
import argparse
import glob
import os
import re
import sys


def parse(path):
    """(trigger, total, self cost by object, [(caller ob, caller fn, callee ob, inclusive)])."""
    trigger, summary = None, None
    self_ob = {}
    edges = []
    ob = fn = None
    cob = None
    pending_call = False
    with open(path, errors="replace") as f:
        for line in f:
            if not line or line == "\n":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if pending_call:
                    edges.append((ob, fn, cob if cob is not None else ob, cost))
                    pending_call = False
                    cob = None
                else:
                    self_ob[ob] = self_ob.get(ob, 0) + cost
                continue
            key, _, val = line.rstrip("\n").partition("=")
            if key == "ob":
                ob = val
            elif key == "fn":
                fn = val
            elif key == "cob":
                cob = val
            elif key == "calls":
                pending_call = True
            elif line.startswith("desc: Trigger:"):
                trigger = line.split(":", 2)[2].strip()
            elif line.startswith("summary:"):
                summary = int(line.split()[1])
    total = sum(self_ob.values())
    if summary is not None and summary != total:
        sys.exit(f"ipm_callgrind: {path}: summary {summary} != sum of costs {total}")
    return trigger, total, self_ob, edges


def phase_name(trigger):
    m = re.match(r"Client Request: (.*)", trigger or "")
    return m.group(1) if m else "end"


def read_run(prefix):
    """(counts from ipm's "ipm:" line, {phase: {bucket: Ir}})."""
    counts = None
    with open(prefix + ".out") as f:
        for line in f:
            if line.startswith("ipm: "):
                w = line.split()[1:]
                counts = {w[i]: w[i + 1] for i in range(0, len(w) - 1, 2)}
    if counts is None:
        sys.exit(f"ipm_callgrind: {prefix}.out has no 'ipm:' line")
    phases = {}
    with open(prefix + ".phases") as f:
        for line in f:
            name, *kv = line.split()
            phases[name] = {k: int(v) for k, v in (x.split("=") for x in kv)}
    for need in ("stream", "idle-rtest"):
        if need not in phases:
            sys.exit(f"ipm_callgrind: {prefix}.phases has no '{need}' phase")
    return counts, phases


def corrected(counts, phases, bucket):
    """The stream's cost in `bucket` less its idle calls at their calibrated cost."""
    k = int(counts["calib_rtest"])
    ki = int(counts["calib_isend"])
    c_test = phases["idle-rtest"][bucket] / k
    # With no NULL isend() to calibrate (the first was taken), a test()'s cost stands in.
    c_isend = phases["idle-isend"][bucket] / ki if ki and "idle-isend" in phases else c_test
    idle_test = sum(int(counts[x]) for x in ("idle_rtest", "idle_stest", "null_irecv"))
    return phases["stream"][bucket] - idle_test * c_test - int(counts["null_isend"]) * c_isend


def idle_calls(counts):
    return sum(int(counts[x]) for x in ("idle_rtest", "idle_stest", "null_irecv", "null_isend"))


def pair_result(run_n, run_m):
    """Per message of the N - M messages: plugin, whole, whole raw, idle calls; and
    whether either run had idle calls for more than 1 % of its messages (its counts
    then depend on timing; below that, the correction is too small to matter)."""
    cn, pn = read_run(run_n)
    cm, pm = read_run(run_m)
    d = int(cn["msgs"]) - int(cm["msgs"])
    if d <= 0 or cn["warmup"] != cm["warmup"] or cn["size"] != cm["size"]:
        sys.exit("ipm_callgrind: the two runs must differ in message count only, N > M")
    per = lambda a, b: (a - b) / d
    return ([per(corrected(cn, pn, "plugin"), corrected(cm, pm, "plugin")),
             per(corrected(cn, pn, "whole"), corrected(cm, pm, "whole")),
             per(pn["stream"]["whole"], pm["stream"]["whole"]),
             per(idle_calls(cn), idle_calls(cm))],
            any(idle_calls(c) * 100 > int(c["msgs"]) + int(c["warmup"]) for c in (cn, cm)))


def result(runs):
    """The median of each column over the pairs (RUN_N RUN_M ...), the number of pairs,
    and 1 when a run had idle calls for more than 1 % of its messages."""
    pairs = [pair_result(runs[i], runs[i + 1]) for i in range(0, len(runs), 2)]
    cols = list(zip(*(p[0] for p in pairs)))
    med = [sorted(c)[(len(c) - 1) // 2] for c in cols]
    print("%.0f %.0f %.0f %.2f %d %d" % (*med, len(pairs), any(p[1] for p in pairs)))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--result" and len(sys.argv) % 2 == 0:
        return result(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--exclude", action="append", default=[])
    ap.add_argument("prefix")
    a = ap.parse_args()
    real = os.path.realpath
    plugin, driver = real(a.plugin), real(a.driver)
    excl = {real(x) for x in a.exclude}
    files = [a.prefix] + sorted(glob.glob(glob.escape(a.prefix) + ".*"),
                                key=lambda p: int(p.rsplit(".", 1)[1]))
    phases = {}
    order = []
    for path in files:
        if not os.path.exists(path):
            sys.exit(f"ipm_callgrind: {path} is missing")
        trigger, total, self_ob, edges = parse(path)
        name = phase_name(trigger)
        obs = {o: real(o) for o in self_ob}
        objs = lambda o: obs.get(o) or real(o)
        # The emulator's own instructions and everything it calls outside itself. Not
        # "calls into it": its threads were entered before instrumentation started,
        # so no call edge leads to them.
        excluded = sum(v for o, v in self_ob.items() if objs(o) in excl)
        excluded += sum(inc for cob_, _, tob, inc in edges
                        if objs(cob_) in excl and objs(tob) not in excl)
        drv = sum(v for o, v in self_ob.items() if objs(o) == driver)
        drv += sum(inc for cob_, cfn, tob, inc in edges
                   if objs(cob_) == driver and cfn != "(below main)"
                   and objs(tob) not in (driver, plugin))
        plug = sum(v for o, v in self_ob.items() if objs(o) == plugin)
        p = phases.setdefault(name, dict(total=0, plugin=0, whole=0, excluded=0, driver=0))
        if name not in order:
            order.append(name)
        p["total"] += total
        p["plugin"] += plug
        p["excluded"] += excluded
        p["driver"] += drv
        p["whole"] += total - excluded - drv
    for name in order:
        p = phases[name]
        print(name, " ".join(f"{k}={p[k]}" for k in ("total", "plugin", "whole", "excluded",
                                                      "driver")))


if __name__ == "__main__":
    main()
