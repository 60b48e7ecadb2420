#!/usr/bin/env python3
"""check_phase_table.py: docs/how-it-works.md "The phase table" is the engine's.

  check_phase_table.py [ROOT]

Reads the allowed[from][to] table of src/engine/phase.c (the one the engine checks every
phase move against, and the simulation's invariant 7-legal-transition) and the Markdown
table between the phase-table markers of docs/how-it-works.md, and compares them cell by
cell; then checks the state diagram of "Phases" (the mermaid stateDiagram) against the same
table: every arrow between two phases is a move the table allows (an arrow from `observe`,
the start of every pass, is a move from `none`: a new operation's record), and every phase
of the table is drawn. Prints `FAIL` per differing cell or arrow (or a missing table or
diagram) and `N passed, N failed`.
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


def diagram_edges(root):
    """The arrows of the first mermaid stateDiagram of docs/how-it-works.md, as (from, to,
    label) with each state named as the table names it (its alias, or its id)."""
    text = open(os.path.join(root, "docs/how-it-works.md"), encoding="utf-8").read()
    m = re.search(r"```mermaid\nstateDiagram-v2\n(.*?)```", text, re.S)
    if not m:
        return None
    names = {}
    for alias, sid in re.findall(r'^\s*state "([^"]+)" as (\w+)', m.group(1), re.M):
        names[sid] = alias
    edges = []
    for a, b, label in re.findall(r"^\s*(\S+)\s*-->\s*(\S+?)(?::\s*(.*))?$", m.group(1), re.M):
        edges.append((names.get(a, a), names.get(b, b), label.strip()))
    return edges


def check_diagram(root, eng):
    """(passed, failed) for the diagram's arrows against the engine's table."""
    edges = diagram_edges(root)
    if edges is None:
        print("FAIL docs/how-it-works.md: no mermaid stateDiagram")
        return 0, 1
    passed = failed = 0
    drawn = set()
    for a, b, label in edges:
        if a == "[*]" or b == "[*]":
            continue
        frm = "none" if a.startswith("observe") else a
        if frm not in PHASES or b not in PHASES:
            print("FAIL diagram arrow %s -> %s: not a phase of the table" % (a, b))
            failed += 1
            continue
        drawn.update((frm, b))
        if eng[frm][PHASES.index(b)]:
            passed += 1
        else:
            failed += 1
            print("FAIL diagram arrow %s -> %s (%s): the engine's table forbids it" % (a, b, label))
    for ph in PHASES:
        if ph not in drawn:
            failed += 1
            print("FAIL diagram: phase %s is not drawn" % ph)
    return passed, failed


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
    dp, df = check_diagram(root, eng)
    passed += dp
    failed += df
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
