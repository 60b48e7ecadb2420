#!/usr/bin/env python3
"""check_cli.py: docs/cli.md describes every command and flag the built binary lists.

  check_cli.py [--binary BIN] [--doc FILE]

Runs `hvupdater --help` and `hvupdater COMMAND --help` for each command the first lists,
and requires in docs/cli.md: each command in backticks, each `--flag` of each help text in
backticks, and a row for each exit code the help texts name. Prints `ok`/`FAIL` per item
and `N passed, N failed`; exit 1 on any failure.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "hvupdater"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "cli.md"))
    a = ap.parse_args(argv)
    doc = open(a.doc).read()
    passed = failed = 0

    def report(ok, what):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        print(("ok " if ok else "FAIL ") + what)

    top = subprocess.run([a.binary, "--help"], capture_output=True, text=True)
    report(top.returncode == 0, "hvupdater --help exits 0")
    section = top.stdout.split("commands:", 1)[-1].split("\n\n", 1)[0]
    commands = re.findall(r"^\s+([a-z]+)\s", section, re.M)
    report(len(commands) >= 3, "hvupdater --help lists commands (%s)" % ", ".join(commands))
    codes = set(re.findall(r"\b([0-9]) [a-z]", top.stdout.split("exit codes:", 1)[-1]))
    for cmd in commands:
        report("`%s`" % cmd in doc, "command %s described" % cmd)
        if cmd in ("help", "version"):
            continue
        h = subprocess.run([a.binary, cmd, "--help"], capture_output=True, text=True)
        report(h.returncode == 0, "hvupdater %s --help exits 0" % cmd)
        for flag in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", h.stdout))):
            report(re.search(r"`%s[ `=]" % re.escape(flag), doc) is not None,
                   "hvupdater %s %s described" % (cmd, flag))
        codes |= set(re.findall(r"\b([0-9]) [a-z]", h.stdout.split("exit codes:", 1)[-1]))
    for code in sorted(codes):
        report(re.search(r"^\| %s \|" % code, doc, re.M) is not None,
               "exit code %s in the exit code table" % code)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
