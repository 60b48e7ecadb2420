#!/usr/bin/env python3
"""check_extending.py: the worked profile example in docs/extending.md is real.

  check_extending.py [--binary BIN] [--doc FILE]

1. The ```json example-config block validates against schemas/config.json (with
   test/schema/validate.py, so the same strict rules as the schema tests).
2. `hvupdater serve --config` accepts it.
3. For each ```json example-request NAME block, the server's answer equals the
   ```json example-response NAME block (compared as JSON); an UpdateMachine request is
   repeated, as CAPI would, until done or failed, and the last answer is compared. When an
   ```json example-patch NAME block exists, the answer's patch decodes to it.

Prints `ok`/`FAIL` per check and `N passed, N failed`; exit 1 on any failure. Needs a
python3 with jsonschema (Debian's python3-jsonschema).
"""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PREFIX = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/"
PATHS = {
    "CanUpdateMachineRequest": PREFIX + "canupdatemachine/can-update-machine",
    "CanUpdateMachineSetRequest": PREFIX + "canupdatemachineset/can-update-machine-set",
    "UpdateMachineRequest": PREFIX + "updatemachine/update-machine",
}
FENCE = re.compile(r"^```json (example-[a-z]+)(?: ([a-z0-9-]+))?\s*$")


def blocks(text):
    """{(tag, name): parsed JSON} of the ```json example-... blocks."""
    out = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        out[(m.group(1), m.group(2) or "")] = json.loads("\n".join(lines[i + 1:j]))
        i = j + 1
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "hvupdater"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "extending.md"))
    a = ap.parse_args(argv)
    passed = failed = 0

    def report(ok, what, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("ok " + what)
        else:
            failed += 1
            print("FAIL " + what + ("\n     | " + detail.replace("\n", "\n     | ")
                                    if detail else ""))

    ex = blocks(open(a.doc).read())
    config = ex.get(("example-config", ""))
    report(config is not None, "%s has a ```json example-config block" % a.doc)
    if config is None:
        print("%d passed, %d failed" % (passed, failed))
        return 1
    work = tempfile.mkdtemp(prefix="hv-docs-extending-")
    server = None
    try:
        cfg = os.path.join(work, "config.json")
        with open(cfg, "w") as f:
            json.dump(config, f, indent=2)
        v = subprocess.run([sys.executable, os.path.join(ROOT, "test", "schema", "validate.py"),
                            "config", cfg], capture_output=True, text=True)
        report(v.returncode == 0, "example-config validates against schemas/config.json",
               v.stdout + v.stderr)

        port_file = os.path.join(work, "port")
        log = open(os.path.join(work, "server.log"), "w")
        server = subprocess.Popen([a.binary, "serve", "--listen", "127.0.0.1:0", "--port-file",
                                   port_file, "--cert-dir", os.path.join(work, "tls"),
                                   "--config", cfg], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if server.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        started = os.path.exists(port_file) and bool(open(port_file).read().strip())
        report(started, "hvupdater serve starts with example-config",
               open(os.path.join(work, "server.log")).read()[-2000:])
        if not started:
            return 1
        port = int(open(port_file).read())
        ctx = ssl.create_default_context(cafile=os.path.join(work, "tls", "ca.crt"))

        def post(req):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=15)
            try:
                conn.request("POST", PATHS[req["kind"]] + "?timeout=10s",
                             body=json.dumps(req).encode(),
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                return r.status, json.loads(r.read())
            finally:
                conn.close()

        names = [n for (t, n) in ex if t == "example-request"]
        report(bool(names), "the doc has example requests")
        for name in names:
            req = ex[("example-request", name)]
            want = ex.get(("example-response", name))
            status, got = post(req)
            deadline = time.monotonic() + 60
            while (req["kind"] == "UpdateMachineRequest" and got.get("status") == "Success"
                   and got.get("retryAfterSeconds") != 0 and time.monotonic() < deadline):
                time.sleep(0.3)
                status, got = post(req)
            report(status == 200 and got == want, "example %s: the server answers as documented"
                   % name, "server: %s\ndoc:    %s" % (json.dumps(got), json.dumps(want)))
            patch_want = ex.get(("example-patch", name))
            if patch_want is not None:
                fields = [k for k in got if k.endswith("Patch")]
                decoded = (json.loads(base64.b64decode(got[fields[0]]["patch"]))
                           if fields else None)
                report(decoded == patch_want, "example %s: the patch decodes as documented" % name,
                       "server: %s\ndoc:    %s" % (json.dumps(decoded), json.dumps(patch_want)))
    finally:
        if server and server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(work, ignore_errors=True)
        print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
