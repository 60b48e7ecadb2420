#!/usr/bin/env python3
"""check_cli.py: docs/cli.md describes every command and flag the built binary lists.

  check_cli.py [--binary BIN] [--doc FILE]

Runs `hvupdater --help` and `hvupdater COMMAND --help` for each command the first lists,
and requires in docs/cli.md: each command in backticks, each `--flag` of each help text in
backticks, and a row for each exit code the help texts name. Also checks claims of docs/cli.md against
what they describe: the `--drain-seconds` value it says the Deployment uses (and
docs/operations.md's) is the rendered Deployment's, and `plan`'s first line names the VM
as the doc says (a positional DOMAIN by its UUID, `--domain NAME` by the name), run on
libvirt's in-process test:///default. Prints `ok`/`FAIL` per item
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
    # The Deployment's --drain-seconds, as cli.md and operations.md state it.
    dep = open(os.path.join(ROOT, "deploy", "kubernetes", "base", "deployment.yaml")).read()
    m = re.search(r'^\s+- --drain-seconds\n\s+- "?([0-9]+)"?$', dep, re.M)
    report(m is not None, "deploy/kubernetes/base/deployment.yaml passes --drain-seconds")
    drain = m.group(1) if m else "?"
    said = re.findall(r"The Deployment uses ([0-9]+)", doc)
    report(said == [drain], "cli.md: the Deployment uses --drain-seconds %s (it says %s)"
           % (drain, said))
    ops = open(os.path.join(ROOT, "docs", "operations.md")).read()
    said = set(re.findall(r"`--drain-seconds ([0-9]+)`", ops))
    report(said == {drain}, "operations.md: the Deployment's --drain-seconds %s (it says %s)"
           % (drain, sorted(said)))
    # plan's first line: a positional DOMAIN by its UUID, --domain NAME by the name.
    uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    for args, want, what in (
            (["-c", "test:///default", "test"], r"VM %s on test:///default: " % uuid,
             "a positional DOMAIN: plan names the VM by its UUID"),
            (["--libvirt-uri", "test:///default", "--domain", "test"],
             r"VM test on test:///default: ", "--domain NAME: plan names the VM by the name")):
        p = subprocess.run([a.binary, "plan", *args, "--memory-mib", "4096"],
                           capture_output=True, text=True)
        report(p.returncode == 0 and re.match(want, p.stdout) is not None,
               "%s (%s)" % (what, p.stdout.split("\n", 1)[0] or p.stderr.strip()[:200]))
    block = re.search(r"\*\*`plan` output\*\*.*?\n```\n(.*?)```", doc, re.S)
    lines = block.group(1).splitlines() if block else []
    report(len(lines) >= 2 and re.match(r"\$ hvupdater plan -c \S+ [a-z][\w-]* ", lines[0])
           and re.match(r"VM %s on " % uuid, lines[1]) is not None,
           "cli.md's plan output example: a positional DOMAIN shown by its UUID")
    report("`--domain NAME` by that name" in doc, "cli.md: --domain NAME shows the name")
    for code in sorted(codes):
        report(re.search(r"^\| %s \|" % code, doc, re.M) is not None,
               "exit code %s in the exit code table" % code)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
