#!/usr/bin/env python3
"""config_diff.py: the config loader and schemas/config.json mean the same thing.

Each case of test/schema/config_corpus.json (a config and whether it is valid) is judged
twice, independently: by the JSON Schema validator of test/schema/validate.py (jsonschema,
draft 2020-12, formats asserted) and by `hvupdater serve --check-config --config FILE`. Both
verdicts must equal the case's. Also checks that every config shipped in the tree (deploy/,
schemas/examples/) passes both.

usage: config_diff.py --binary HVUPDATER [--source DIR]
Prints "ok <case>" or "FAIL <case>: ..." per case and "N passed, N failed"; exits 1 on any
failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import validate  # noqa: E402  (test/schema/validate.py)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(HERE)))
    a = ap.parse_args()
    schemas = validate.load_schemas()
    validator = validate.make_validator(schemas, "config")
    with open(os.path.join(HERE, "config_corpus.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    shipped = ["deploy/kubernetes/base/config.json", "deploy/systemd/config.json",
               "schemas/examples/config.json"]
    for rel in shipped:
        with open(os.path.join(a.source, rel), encoding="utf-8") as f:
            cases.append({"name": f"shipped {rel}", "valid": True, "text": f.read()})
    passed = failed = 0
    names = set()
    with tempfile.TemporaryDirectory(prefix="hv-config-diff-") as tmp:
        for k, case in enumerate(cases):
            name = case["name"]
            if name in names:
                print(f"FAIL {name}: the corpus names two cases alike")
                failed += 1
                continue
            names.add(name)
            text = case.get("text") or json.dumps(case["config"])
            path = os.path.join(tmp, f"case{k}.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            try:
                doc = validate.loads(text.encode("utf-8"))
                errs = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
                schema_ok, schema_why = not errs, errs[0].message if errs else ""
            except validate.LoadError as e:
                schema_ok, schema_why = False, str(e)
            p = subprocess.run([a.binary, "serve", "--check-config", "--config", path],
                               capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, HOME=tmp))
            loader_ok = p.returncode == 0
            loader_why = ""
            for ln in p.stderr.splitlines():
                try:
                    loader_why = json.loads(ln).get("error", loader_why)
                except ValueError:
                    loader_why = ln
            want = case["valid"]
            why = []
            if schema_ok != want:
                why.append(f"schema says {'valid' if schema_ok else 'invalid'}"
                           + (f" ({schema_why})" if schema_why else ""))
            if loader_ok != want:
                why.append(f"loader says {'valid' if loader_ok else 'invalid'}"
                           + (f" ({loader_why})" if loader_why else ""))
            if p.returncode not in (0, 1):
                why.append(f"--check-config exit {p.returncode}")
            if why:
                failed += 1
                print(f"FAIL {name}: want {'valid' if want else 'invalid'}; " + "; ".join(why))
            else:
                passed += 1
                print(f"ok {name}" + (f": {loader_why}" if loader_why else ""))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
