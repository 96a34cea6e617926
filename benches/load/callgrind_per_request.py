#!/usr/bin/env python3
"""Instructions per request from a callgrind dump and the load that ran while it counted.

    callgrind_per_request.py LOAD_OUTPUT DUMP LABEL

LOAD_OUTPUT is wrk's or h2load's output (the requests completed), DUMP the callgrind
dump of the same window. The rule-set folder's periodic resync (a background thread
that reads and hashes every component, some 300 million instructions under valgrind
for the shipped ones) is left out: it runs every ten seconds whatever the load, and a
window it falls in would otherwise read tens of thousands of instructions too many
per request.
"""
import re
import sys

# The resync: every call of it, with what it calls.
RESYNC = re.compile(r"botgate_rules::registry::Registry::sync$")


def requests(load_output):
    for line in load_output.splitlines():
        if m := re.match(r"\s*(\d+) requests in", line):  # wrk
            return int(m.group(1))
        if m := re.match(r"requests: \d+ total, \d+ started, (\d+) done", line):  # h2load
            return int(m.group(1))
    sys.exit("no request count in the load's output")


def instructions(dump):
    """The dump's total and the inclusive cost of every call of the resync."""
    names, total, resync = {}, 0, 0
    callee, in_call = None, False
    for line in dump.splitlines():
        if line.startswith(("fn=", "cfn=")):
            # `(id) name` the first time, `(id)` after; a plain name without compression.
            m = re.match(r"c?fn=(?:\((\d+)\))? ?(.*)", line)
            if m.group(1) and m.group(2):
                names[m.group(1)] = m.group(2)
            name = names.get(m.group(1), "") if m.group(1) else m.group(2)
            if line.startswith("cfn="):
                callee = name
        elif line.startswith("calls="):
            in_call = True
        elif in_call:
            # The line after `calls=`: the call's inclusive cost.
            in_call = False
            if RESYNC.search(callee or ""):
                resync += int(line.split()[1])
        elif line.startswith(("summary:", "totals:")):
            total = int(line.split()[1])
    return total, resync


def main():
    load_output, dump, label = sys.argv[1:4]
    n = requests(open(load_output).read())
    if n == 0:
        sys.exit(f"{label}: no request completed; see {load_output}")
    total, resync = instructions(open(dump, errors="replace").read())
    note = f"; a resync's {resync} left out" if resync else ""
    print(f"{label}: {(total - resync) / n:.0f} instructions per request ({n} requests{note})")


if __name__ == "__main__":
    main()
