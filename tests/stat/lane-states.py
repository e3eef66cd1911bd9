#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What `braid stat --json` says of NICs and lanes, for tests that take a NIC down.

Reads one or more `braid stat --json` documents on stdin (one per process, concatenated)
and prints one line: each device's port state, then each comm lane's state, as NAME:up or
NAME:down, each set sorted, joined by " / ". tests/ib/faults.sh and
tests/conformance/netns-failover.sh compare it with what the fault should show.
`--kind send|recv`: the lanes of that kind of comm only.
"""
import json
import sys

kind = sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--kind" else None
dec, text, lanes, devs = json.JSONDecoder(), sys.stdin.read(), set(), set()
while text.strip():
    doc, n = dec.raw_decode(text.lstrip())
    text = text.lstrip()[n:]
    for p in doc.get("processes", []):
        devs |= {"%s:%s" % (d["name"], "down" if d.get("port_down") else "up")
                 for d in p.get("devices", [])}
        for c in p.get("comms", []):
            if kind and c.get("kind") != kind:
                continue
            lanes |= {"%s:%s" % (l["name"], "up" if l.get("up") else "down")
                      for l in c.get("lanes", [])}
print(" ".join(sorted(devs)), "/", " ".join(sorted(lanes)))
