#!/usr/bin/env python3
"""Per function, instructions per message between two callgrind runs of tests/bench/ipm.sh.

    tests/bench/ipm_diff.py LONG.cg.1 SHORT.cg.1 MESSAGES [TOP]

LONG and SHORT are the same case's callgrind files of its N- and M-message runs
($OUT's ipm-logs/CASE.SIZE.rR.N.cg.1 and ...M.cg.1); MESSAGES is N - M. Prints the
self cost of each function per message, largest first: where a case's instructions go.
"""
import re
import subprocess
import sys


def load(path):
    out = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', path],
                         capture_output=True, text=True, check=True).stdout
    cost = {}
    for line in out.splitlines():
        m = re.match(r'\s*([\d,]+) \([^)]*\)\s+(.*)', line)
        if not m or '=>' in line or 'PROGRAM TOTALS' in line or 'events annotated' in line:
            continue
        cost[m.group(2)] = cost.get(m.group(2), 0) + int(m.group(1).replace(',', ''))
    return cost


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    long_run, short_run = load(sys.argv[1]), load(sys.argv[2])
    msgs = float(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    rows = sorted(((long_run.get(k, 0) - short_run.get(k, 0)) / msgs, k)
                  for k in set(long_run) | set(short_run))
    for per_msg, name in sorted(rows, reverse=True)[:top]:
        print('%9.1f  %s' % (per_msg, name[:150]))


if __name__ == '__main__':
    main()
