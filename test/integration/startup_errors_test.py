#!/usr/bin/env python3
"""startup_errors_test.py: every way `hvupdater serve` can refuse to start, with a canary
password planted wherever a credential can sit (user info of a vSphere URL or a libvirt URI,
the username and password files, the pinned server's config). For each case the binary must
exit non-zero, never print the canary (stdout or stderr), write only JSON lines on stderr,
and say why (the expected words).

usage: startup_errors_test.py HVUPDATER_BINARY
Prints "ok <case>" or "FAIL <case>: why" per case; exits 1 when any failed.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

CANARY = "Canary-Pw-5f1e9c"


def main():
    binary = os.path.abspath(sys.argv[1])
    failed = 0
    with tempfile.TemporaryDirectory(prefix="hv-startup-") as tmp:
        def path(name, text=None):
            p = os.path.join(tmp, name)
            if text is not None:
                with open(p, "w", encoding="utf-8") as f:
                    f.write(text)
            return p

        pw = path("password", CANARY + "\n")
        user = path("username", "admin-" + CANARY + "\n")
        server = {"name": "vc", "url": "https://vc.example.com/sdk", "usernameFile": user,
                  "passwordFile": pw}

        def config(name, doc):
            return path(name, doc if isinstance(doc, str) else json.dumps(doc))

        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        busy_port = busy.getsockname()[1]
        cases = [
            # (name, args, expected exit code, words the error must hold)
            ("vsphere url with user info",
             ["--config", config("c1", {"vsphere": {"servers": [
                 dict(server, url=f"https://admin:{CANARY}@vc.example.com/sdk")]}})],
             1, "must not hold user info"),
            ("vsphere url with user info, second server",
             ["--config", config("c2", {"vsphere": {"servers": [server, dict(
                 server, name="vc2", url=f"https://{CANARY}@vc2.example.com:443/sdk")]}})],
             1, "servers[1].url must not hold user info"),
            ("libvirt uri with a password",
             ["--config", config("c3", {"libvirt": {"uris": [
                 f"qemu+ssh://root:{CANARY}@kvm1.example.com/system"]}})],
             1, "must not hold a password"),
            ("invalid JSON right after a credential",
             ["--config", config("c4", '{"vsphere":{"servers":[{"url":"https://a:'
                                 + CANARY + '@h/sdk" !}]}}')],
             1, "invalid JSON"),
            ("unknown key next to a credential URL",
             ["--config", config("c5", {"vsphere": {"servers": [
                 dict(server, url=f"https://a:{CANARY}@h/sdk", passwrd=CANARY)]}})],
             1, "unknown key"),
            ("wrong type where a credential URL sits",
             ["--config", config("c6", {"vsphere": {"servers": [
                 dict(server, url=[f"https://a:{CANARY}@h/sdk"])]}})],
             1, "url must be a non-empty string"),
            ("http vSphere URL with user info",
             ["--config", config("c7", {"vsphere": {"servers": [
                 dict(server, url=f"http://a:{CANARY}@h/sdk")]}})],
             1, "must start with https://"),
            ("duplicate vCenter names",
             ["--config", config("c8", {"vsphere": {"servers": [server, server]}})],
             1, "configured twice"),
            ("bad thumbprint",
             ["--config", config("c9", {"vsphere": {"servers": [
                 dict(server, thumbprint="AB:CD")]}})],
             1, "thumbprint"),
            ("missing config file", ["--config", path("absent.json")], 1, "cannot open"),
            ("listen host name",
             ["--config", config("c12", {"listen": "nowhere.example.com:9443",
                                         "vsphere": {"servers": [server]}})],
             1, "listen"),
            ("bad listen flag", ["--listen", "127.0.0.1:notaport"], 1, "want ADDR:PORT"),
            ("port in use",
             ["--config", config("c10", {"vsphere": {"servers": [server]}}), "--listen",
              f"127.0.0.1:{busy_port}", "--cert-dir", path("tls-busy")],
             1, "cannot listen"),
            ("cert without key", ["--tls-cert", pw], 1, "go together"),
            ("unreadable serving certificate",
             ["--config", config("c11", {"vsphere": {"servers": [server]}}), "--tls-cert", pw,
              "--tls-key", pw, "--listen", "127.0.0.1:0"],
             1, ""),
            ("unknown flag", ["--password", CANARY], 2, "unknown flag"),
            ("unknown flag with its value", [f"--password={CANARY}"], 2, "unknown flag"),
            ("stray argument", [f"https://admin:{CANARY}@vc/sdk"], 2, "unexpected argument"),
            ("bad log level", ["--log-level", "loud"], 2, "--log-level"),
            ("threads out of range", ["--threads", "0"], 2, "--threads"),
        ]
        cases += extra_cases(path, config, server)
        for name, args, code, words in cases:
            why = []
            try:
                p = subprocess.run([binary, "serve"] + args, capture_output=True, text=True,
                                   timeout=20, env=dict(os.environ, HOME=tmp))
            except subprocess.TimeoutExpired as e:
                why.append("still running after 20 s: it started instead of refusing")
                p = subprocess.CompletedProcess(e.cmd, -1, str(e.stdout or ""),
                                                str(e.stderr or ""))
            if p.returncode != code:
                why.append(f"exit {p.returncode}, want {code}")
            if CANARY in p.stdout or CANARY in p.stderr:
                why.append("the canary credential was printed")
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            errors = []
            for ln in lines:
                try:
                    obj = json.loads(ln)
                except ValueError:
                    why.append(f"stderr line is not JSON: {ln[:120]}")
                    continue
                if obj.get("level") == "error":
                    errors.append(obj.get("error", ""))
            if not errors:
                why.append("no error line on stderr")
            elif words and not any(words in e for e in errors):
                why.append(f"error {errors!r} lacks {words!r}")
            if why:
                failed += 1
                print(f"FAIL {name}: {'; '.join(why)}\n  stderr: {p.stderr.strip()[:600]}")
            else:
                print(f"ok {name}: {errors[-1]}")
        busy.close()
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def valid_ca(path):
    """A CA certificate serve loads as --client-ca."""
    ca = path("any-ca.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("any-ca.key"), "-out",
                    ca, "-days", "2", "-subj", "/CN=any-ca"], check=True, capture_output=True)
    return ca


def extra_cases(path, config, server):
    """Client CA, status listener and drain: their startup errors."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    extra_cases.keep = busy  # stays bound while the cases run
    port = busy.getsockname()[1]
    cfg = config("x1", {"vsphere": {"servers": [server]}})
    return [
        ("client CA that is a password file",
         ["--config", cfg, "--listen", "127.0.0.1:0", "--cert-dir", path("tls-x1"),
          "--client-ca", server["passwordFile"]], 1, "client CA"),
        ("client CA missing",
         ["--config", cfg, "--listen", "127.0.0.1:0", "--cert-dir", path("tls-x2"),
          "--client-ca", path("absent-ca.pem")], 1, "client CA"),
        ("clientCAFile empty in the config",
         ["--config", config("x3", {"clientCAFile": "", "vsphere": {"servers": [server]}})],
         1, "clientCAFile"),
        ("metrics port in use",
         ["--config", cfg, "--listen", "127.0.0.1:0", "--cert-dir", path("tls-x4"),
          "--metrics-listen", f"127.0.0.1:{port}"], 1, "metrics listener"),
        ("metricsListen host name",
         ["--config", config("x5", {"metricsListen": "metrics.example.com:8080",
                                    "vsphere": {"servers": [server]}})], 1, "metricsListen"),
        ("bad --metrics-listen",
         ["--config", cfg, "--listen", "127.0.0.1:0", "--cert-dir", path("tls-x6"),
          "--metrics-listen", "nowhere"], 1, "metrics listener"),
        ("bad --drain-seconds", ["--drain-seconds", "-1"], 2, "--drain-seconds"),
        # issue 28: beyond loopback, something must check who calls
        ("all addresses, nothing checks the caller",
         ["--config", cfg, "--listen", "0.0.0.0:0", "--cert-dir", path("tls-x8")], 1,
         "--listen 0.0.0.0:0 is not a loopback address and nothing checks who calls"),
        ("a pod address, client CA without names",
         ["--config", cfg, "--listen", "[::]:0", "--cert-dir", path("tls-x9"),
          "--client-ca", valid_ca(path)], 1, "--insecure-any-caller"),
        ("machine check turned off",
         ["--config", config("x10", {"kubernetes": {"server": "https://127.0.0.1:1",
                                                    "checkMachines": False},
                                     "vsphere": {"servers": [server]}}),
          "--listen", "0.0.0.0:0", "--cert-dir", path("tls-x10")], 1, "nothing checks"),
        ("check-config with a credential URL",
         ["--check-config", "--config", config("x7", {"vsphere": {"servers": [
             dict(server, url="https://admin:" + CANARY + "@vc.example.com/sdk")]}})],
         1, "must not hold user info"),
    ]


if __name__ == "__main__":
    sys.exit(main())
