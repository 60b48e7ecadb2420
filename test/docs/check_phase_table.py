#!/usr/bin/env python3
"""check_phase_table.py: docs/how-it-works.md "The phase table" is the engine's.

  check_phase_table.py [ROOT]

Reads the allowed[from][to] table of src/engine/phase.c (the one the engine checks every
phase move against, and the simulation's invariant 7-legal-transition) and the Markdown
table between the phase-table markers of docs/how-it-works.md, and compares them cell by
cell. Prints `FAIL` per differing cell (or a missing table) and `N passed, N failed`.
"""
import os
import re
import sys

PHASES = ["none", "planned", "live", "wait-live", "shutdown", "power-off", "reconfigure",
          "power-on", "done", "failed"]


def engine_table(root):
    text = open(os.path.join(root, "src/engine/phase.c"), encoding="utf-8").read()
    rows = {}
    for name, cells in re.findall(r"^\s*\[HV_PH_(\w+)\]\s*=\s*\{([^}]*)\}", text, re.M):
        phase = name.lower().replace("_", "-")
        rows[phase] = [c.strip() == "1" for c in cells.split(",") if c.strip()]
    return rows


def docs_table(root):
    text = open(os.path.join(root, "docs/how-it-works.md"), encoding="utf-8").read()
    m = re.search(r"<!-- phase-table:.*?-->\n(.*?)<!-- end phase-table -->", text, re.S)
    if not m:
        return None, None
    lines = [l for l in m.group(1).splitlines() if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = [c == "✓" for c in cells[1:]]
    return head, rows


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    passed = failed = 0
    eng = engine_table(root)
    head, doc = docs_table(root)
    if doc is None:
        print("FAIL docs/how-it-works.md: no phase-table markers")
        print("0 passed, 1 failed")
        return 1
    if head != PHASES or sorted(eng) != sorted(PHASES) or sorted(doc) != sorted(PHASES):
        print("FAIL phases: engine %s, docs rows %s, docs columns %s" % (sorted(eng), sorted(doc),
                                                                          head))
        print("0 passed, 1 failed")
        return 1
    for f in PHASES:
        for t, to in enumerate(PHASES):
            e = eng[f][t] if t < len(eng[f]) else False
            d = doc[f][t] if t < len(doc[f]) else False
            if e == d:
                passed += 1
            else:
                failed += 1
                print("FAIL %s -> %s: the engine %s it, the docs %s" %
                      (f, to, "allows" if e else "forbids", "allow" if d else "forbid"))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
