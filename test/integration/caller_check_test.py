#!/usr/bin/env python3
"""serve beyond loopback starts only when something checks who calls (issue 28 item 3).

Refusals are in startup_errors_test.py; here the three ways it does start on 0.0.0.0: the
machine check on (kubernetes.server), --client-ca with --client-name, and the explicit
--insecure-any-caller (with its warning), each up to its "listening" line, then stopped.
Usage: caller_check_test.py HVUPDATER_BINARY
"""
import json
import os
import select
import subprocess
import sys
import tempfile
import time


def start(binary, args, env):
    """Run serve until it logs listening (returns the events seen) or exits (None)."""
    p = subprocess.Popen([binary, "serve"] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env)
    events, buf, end = [], "", time.monotonic() + 20
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([p.stderr], [], [], max(0.0, end - time.monotonic()))
            if not r:
                break
            line = p.stderr.readline()
            if not line:
                return None, events
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            events.append(ev)
            if ev.get("event") == "listening":
                return ev, events
        return None, events
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    binary = os.path.abspath(sys.argv[1])
    failed = 0
    with tempfile.TemporaryDirectory(prefix="hv-caller-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        env["HOME"] = tmp
        ca_key, ca = os.path.join(tmp, "ca.key"), os.path.join(tmp, "ca.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key, "-out", ca,
                        "-days", "2", "-subj", "/CN=test-ca"], check=True,
                       capture_output=True)
        kube = os.path.join(tmp, "kube.json")
        with open(kube, "w", encoding="utf-8") as f:
            json.dump({"kubernetes": {"server": "https://127.0.0.1:1",
                                      "tokenFile": os.path.join(tmp, "token"),
                                      "caFile": ca}}, f)
        cases = [
            ("machine check on", ["--config", kube], None),
            ("client CA with names", ["--client-ca", ca, "--client-name", "capi-controller"],
             None),
            ("--insecure-any-caller", ["--insecure-any-caller"], "insecure-any-caller"),
        ]
        for i, (name, args, warn) in enumerate(cases):
            argv = args + ["--listen", "0.0.0.0:0", "--cert-dir", os.path.join(tmp, f"tls{i}")]
            ev, events = start(binary, argv, env)
            seen = [e.get("event") for e in events]
            why = []
            if not ev:
                why.append(f"did not start: {events[-3:]}")
            if warn and warn not in seen:
                why.append(f"no {warn} warning: {seen}")
            if not warn and "insecure-any-caller" in seen:
                why.append("warned insecure-any-caller although the caller is checked")
            if why:
                failed += 1
                print(f"FAIL {name}: {'; '.join(why)}")
            else:
                print(f"ok {name}: listening on {ev.get('listen')} ({', '.join(seen)})")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
