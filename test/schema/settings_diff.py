#!/usr/bin/env python3
"""settings_diff.py: the server's settings parser and schemas/common.json's
$defs/extensionSettings (the source of the Helm chart's extension.settings schema) judge
every ExtensionConfig settings map alike.

Each case (a settings map) is judged twice, independently: by the JSON Schema validator of
test/schema/validate.py (ECMA pattern semantics) and by the server's parser,
hv_settings_apply (src/hooks/settings.c), through `hvupdater plan --set NAME=VALUE ...`
against libvirt's test:///default (exit 2 with "setting" in the message: refused). The
cases: every allowed value of every named setting, near misses of each (case, spaces,
another setting's value), unknown and misspelt names, and for the seconds settings every
boundary of their ranges and of each digit count, signs, spaces, leading zeros, fractions,
exponents, non-ASCII digits, a trailing newline, plus seeded random numbers.

usage: settings_diff.py --binary HVUPDATER
Prints "ok <case>" or "FAIL <case>: ..." per case and "N passed, N failed"; exits 1 on any
failure.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import validate  # noqa: E402  (test/schema/validate.py)

ENUMS = {"powerCycle": ["IfNeeded", "Never"], "onUncoverable": ["Fallback", "Block"],
         "powerOffMode": ["TrySoft", "Soft", "Hard"],
         "guestVerification": ["IfAvailable", "Required", "Off"]}
SECONDS = {"liveTimeoutSeconds": 86400, "shutdownTimeoutSeconds": 86400,
           "deadlineSeconds": 604800}


def cases():
    out = []
    for name, values in ENUMS.items():
        for v in values:
            out += [{name: v}, {name: v.lower()}, {name: v.upper()}, {name: " " + v},
                    {name: v + " "}, {name: v + "\n"}]
        out += [{name: ""}, {name: "Sometimes"}, {name: "120"}]
        for other, ovalues in ENUMS.items():
            if other != name:
                out.append({name: ovalues[0]})
    rnd = random.Random(30)
    for name, top in SECONDS.items():
        nums = {0, 1, 2, 9, 10, 11, top - 1, top, top + 1, 86399, 86400, 86401, 604799, 604800,
                604801, 123456789, 999999999, 1000000000, 1234567890}
        for n in range(1, 8):
            nums |= {10 ** n - 1, 10 ** n, 10 ** n + 1}
        for lo in (10000, 79999, 80000, 85999, 86000, 600000, 603999, 604000):
            nums |= {lo - 1, lo, lo + 1}
        nums |= {rnd.randint(1, 2 * top) for _ in range(12)}
        out += [{name: str(n)} for n in sorted(nums)]
        out += [{name: v} for v in ("", "060", "00", "+60", "-1", "-0", " 60", "60 ", "6 0",
                                    "1.5", "60.0", "1e3", "0x10", "abc", "60s", "60\n",
                                    "\u0663", "\uff16\uff10")]
    for bad in ("powerCycel", "PowerCycle", "powercycle", "liveTimeout", "deadline",
                "failurePolicy", "settings"):
        out.append({bad: "IfNeeded"})
    out += [{"powerCycle": "Never", "powerOffMode": "Hard", "deadlineSeconds": "600"},
            {"powerCycle": "Never", "deadlineSeconds": "0"},
            {"powerCycle": "Never", "powerCycel": "Never"}, {}]
    return out


def name_of(case):
    return ",".join(f"{k}={v!r}" for k, v in case.items()) or "(no settings)"


def server_verdict(binary, case, home):
    argv = [binary, "plan", "-c", "test:///default", "--domain", "test", "--memory-mib", "1024"]
    for k, v in case.items():
        argv += ["--set", f"{k}={v}"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, HOME=home))
    refused = p.returncode == 2 and "setting" in p.stderr
    if p.returncode not in (0, 2) or (p.returncode == 2 and not refused):
        return None, f"exit {p.returncode}: {p.stderr.strip()[:200]}"
    return not refused, p.stderr.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    schemas = validate.load_schemas()
    schemas["_settings"] = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                            "$id": validate.schema_id("_settings"),
                            "$ref": "common.json#/$defs/extensionSettings"}
    validator = validate.make_validator(schemas, "_settings")
    passed = failed = 0
    kinds = {True: 0, False: 0}
    with tempfile.TemporaryDirectory(prefix="hv-settings-diff-") as home:
        for case in cases():
            errs = list(validator.iter_errors(case))
            schema_ok = not errs
            server_ok, why = server_verdict(a.binary, case, home)
            if server_ok is None:
                print(f"FAIL {name_of(case)}: the server's answer is neither: {why}")
                failed += 1
            elif schema_ok != server_ok:
                print(f"FAIL {name_of(case)}: the schema says "
                      f"{'valid' if schema_ok else 'invalid (' + errs[0].message + ')'}, the "
                      f"server {'accepts it' if server_ok else 'refuses it (' + why + ')'}")
                failed += 1
            else:
                print(f"ok   {name_of(case)}: {'valid' if schema_ok else 'invalid'} for both")
                kinds[schema_ok] += 1
                passed += 1
    # Both verdicts occur: a parser that refused (or accepted) everything would show here.
    if not kinds[True] or not kinds[False]:
        print(f"FAIL the cases hold valid ({kinds[True]}) and invalid ({kinds[False]}) ones")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
