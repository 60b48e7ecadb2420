#!/usr/bin/env python3
"""check_catalog.py: every stable message template in the code (a string literal wrapped in
HV_MSG(...) in src/ or backends/) must appear verbatim, in backticks, in docs/messages.md.

  check_catalog.py [ROOT]          check; prints `N passed, N failed` (one per template)
  check_catalog.py --list [ROOT]   print every template with where it is used
"""
import ast
import glob
import os
import re
import sys

LIT = r'"(?:[^"\\\n]|\\.)*"'
CALL = re.compile(r'HV_MSG\(\s*((?:%s\s*)+)\)' % LIT)


def templates(root):
    found = {}
    files = sorted(glob.glob(os.path.join(root, "src", "**", "*.c"), recursive=True) +
                   glob.glob(os.path.join(root, "backends", "**", "*.c"), recursive=True))
    for path in files:
        text = open(path).read()
        for m in CALL.finditer(text):
            parts = re.findall(LIT, m.group(1))
            value = "".join(ast.literal_eval(p) for p in parts)
            line = text.count("\n", 0, m.start()) + 1
            found.setdefault(value, []).append("%s:%d" % (os.path.relpath(path, root), line))
    return found


def main(argv):
    listing = "--list" in argv
    args = [a for a in argv if a != "--list"]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    found = templates(root)
    if listing:
        for t in sorted(found):
            print("%-90s %s" % ("`%s`" % t, ", ".join(found[t])))
        return 0
    doc = open(os.path.join(root, "docs", "messages.md")).read()
    passed = failed = 0
    for t in sorted(found):
        if "`%s`" % t in doc:
            passed += 1
        else:
            failed += 1
            print("missing from docs/messages.md: `%s` (%s)" % (t, ", ".join(found[t])))
    if not found:
        print("no HV_MSG templates found: the scan is broken")
        failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
