#!/usr/bin/env python3
"""gen_examples.py: the request/response examples in docs/hook-contract.md, produced by the
real server rather than written by hand.

  gen_examples.py --check [--binary BIN] [--doc FILE]   fail when the doc differs from what
                                                        the server answers now
  gen_examples.py --write [--binary BIN] [--doc FILE]   rewrite the examples in place
  gen_examples.py --print [--binary BIN]                print every example to stdout

It starts `hvupdater serve --listen 127.0.0.1:0 --port-file ...` with a config that keeps the
embedded default's libvirt test:///default driver (whose built-in domain `test` UpdateMachine
really changes) and names the fixtures' vCenter `vcenter.example.com` (a closed local port: CanUpdateMachine, which
asks the VM, answers a retryable Failure for the vSphere fixtures; CanUpdateMachineSet names no
VM), as test/integration does. Requests
are the fixtures in test/fixtures with apiVersion/kind added. Each example lives in the doc
between `<!-- example:NAME -->` and `<!-- /example -->`; everything between the markers is
generated. Answers are deterministic: no timestamps, and UpdateMachine is shown at its first
call and when done (the in-progress answers in between depend on timing, so they are not).

--check prints `ok NAME` or `FAIL NAME` (with a diff) per example and `N passed, N failed`;
exit 1 when anything failed or a marker is missing or unknown.
"""
import argparse
import base64
import copy
import difflib
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
API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
PREFIX = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/"
PATHS = {
    "DiscoveryRequest": PREFIX + "discovery",
    "CanUpdateMachineRequest": PREFIX + "canupdatemachine/can-update-machine",
    "CanUpdateMachineSetRequest": PREFIX + "canupdatemachineset/can-update-machine-set",
    "UpdateMachineRequest": PREFIX + "updatemachine/update-machine",
}
PATCH_FIELDS = ("machinePatch", "infrastructureMachinePatch", "bootstrapConfigPatch",
                "machineSetPatch", "infrastructureMachineTemplatePatch",
                "bootstrapConfigTemplatePatch")
FOLD_LINES = 20  # request bodies longer than this go into a <details> block
BEGIN = re.compile(r"^<!-- example:([a-z0-9-]+) -->$", re.M)
END = "<!-- /example -->"


class Server:
    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="hv-docs-examples-")
        for name, text in (("username", "hvupdater\n"), ("password", "not-a-secret\n")):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)
        config = {
            "libvirt": {"uris": ["test:///default"]},
            "vsphere": {"servers": [{
                "name": "vcenter.example.com", "url": "https://127.0.0.1:9/sdk",
                "usernameFile": os.path.join(self.dir, "username"),
                "passwordFile": os.path.join(self.dir, "password")}]},
        }
        cfg = os.path.join(self.dir, "config.json")
        with open(cfg, "w") as f:
            json.dump(config, f)
        port_file = os.path.join(self.dir, "port")
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--port-file", port_file,
             "--cert-dir", os.path.join(self.dir, "tls"), "--config", cfg],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("hvupdater serve did not start: " +
                                   open(os.path.join(self.dir, "server.log")).read()[-2000:])
            time.sleep(0.05)
        self.port = int(open(port_file).read())
        self.ctx = ssl.create_default_context(cafile=os.path.join(self.dir, "tls", "ca.crt"))

    def call(self, method, path, body):
        """(HTTP status, content type, body text) for one request on a new connection."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=15)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, r.getheader("Content-Type"), r.read().decode()
        finally:
            conn.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- requests -------------------------------------------------------------------------------

def fixture(name):
    with open(os.path.join(ROOT, "test", "fixtures", name + ".json")) as f:
        return json.load(f)


def request(kind, fixture_name=None, drop=(), **extra):
    """{apiVersion, kind, <fixture members>, <extra>}, minus top-level members in drop."""
    r = {"apiVersion": API, "kind": kind}
    if fixture_name:
        for k, v in fixture(fixture_name).items():
            if k not in drop:
                r[k] = v
    r.update(extra)
    return r


def can_update_on_test_domain(**extra):
    """lvm-grow as a CanUpdateMachineRequest, with the LibvirtMachine renamed to `test`."""
    r = request("CanUpdateMachineRequest", "lvm-grow", **extra)
    for side in ("current", "desired"):
        r[side]["infrastructureMachine"]["metadata"]["name"] = "test"
    return r


def update_on_test_domain():
    """lvm-grow's desired objects, with the LibvirtMachine renamed to `test`: the built-in
    domain of libvirt's test:///default driver, found by name (no providerID)."""
    r = request("UpdateMachineRequest", "lvm-grow", drop=("current",))
    r["desired"]["infrastructureMachine"]["metadata"]["name"] = "test"
    return r


# ---- rendering ------------------------------------------------------------------------------

def pretty(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False)


def block(lang, text):
    return "```%s\n%s\n```\n" % (lang, text.rstrip("\n"))


def render_request(kind, body, note, raw=None):
    path = PATHS[kind]
    out = ["**Request** `POST %s?timeout=10s`%s\n" % (path, (" " + note) if note else "")]
    text = raw if raw is not None else pretty(body)
    lang = "text" if raw is not None else "json"
    if text.count("\n") + 1 > FOLD_LINES:
        out.append("<details><summary>request body (%d lines)</summary>\n\n%s\n</details>\n"
                   % (text.count("\n") + 1, block(lang, text)))
    else:
        out.append(block(lang, text))
    return "\n".join(out)


def render_response(status, ctype, text):
    out = ["**Response** HTTP %d, `%s`\n" % (status, ctype)]
    try:
        obj = json.loads(text)
    except ValueError:
        out.append(block("text", text))
        return "\n".join(out)
    out.append(block("json", pretty(obj)))
    for field in PATCH_FIELDS:
        p = obj.get(field)
        if isinstance(p, dict) and isinstance(p.get("patch"), str):
            decoded = json.loads(base64.b64decode(p["patch"], validate=True))
            out.append("`%s.patch` decoded (base64 of the JSON text, as Go's `[]byte` "
                       "travels):\n" % field)
            out.append(block("json", pretty(decoded)))
    return "\n".join(out)


# ---- the examples ---------------------------------------------------------------------------

def post(srv, req):
    status, ctype, text = srv.call("POST", PATHS[req["kind"]] + "?timeout=10s",
                                   json.dumps(req).encode())
    return status, ctype, text


def simple(srv, req, note):
    status, ctype, text = post(srv, req)
    return render_request(req["kind"], req, note) + "\n" + render_response(status, ctype, text)


def drive_update(srv, req, timeout=60):
    """First answer, then call again after retryAfterSeconds (scaled down, like a sped-up
    CAPI) until done or Failure. Returns (first, last) as (status, ctype, text)."""
    first = post(srv, req)
    last = first
    deadline = time.monotonic() + timeout
    while True:
        obj = json.loads(last[2])
        if obj.get("status") == "Failure" or obj.get("retryAfterSeconds") == 0:
            return first, last
        if time.monotonic() > deadline:
            raise RuntimeError("UpdateMachine still in progress after %ds: %s" % (timeout, obj))
        time.sleep(max(0.05, 0.2 * obj.get("retryAfterSeconds", 1)))
        last = post(srv, req)


def generate(binary):
    """{name: markdown} for every example, in doc order."""
    srv = Server(binary)
    ex = {}
    try:
        disc = {"apiVersion": API, "kind": "DiscoveryRequest"}
        ex["discovery"] = simple(srv, disc, "")
        # CanUpdateMachine asks the VM: the examples that cover name test:///default's domain
        ex["can-update-machine-covered"] = simple(
            srv, can_update_on_test_domain(), "(fixture `lvm-grow`, LibvirtMachine renamed `test`)")
        partial = can_update_on_test_domain()
        partial["desired"]["machine"]["spec"]["version"] = "v1.32.0"
        ex["can-update-machine-partial"] = simple(
            srv, partial, "(fixture `lvm-grow`, LibvirtMachine renamed `test`, desired version "
            "`v1.32.0`)")
        blocked = can_update_on_test_domain(settings={"onUncoverable": "Block"})
        blocked["current"]["infrastructureMachine"]["spec"]["diskGiB"] = 40
        blocked["desired"]["infrastructureMachine"]["spec"]["diskGiB"] = 25
        ex["can-update-machine-block"] = simple(
            srv, blocked, "(fixture `lvm-grow`, LibvirtMachine renamed `test`, diskGiB 40 → 25, "
            "with `settings`)")
        ex["can-update-machine-cannot-check"] = simple(
            srv, request("CanUpdateMachineRequest", "vsm-memory-cpu-grow"),
            "(fixture `vsm-memory-cpu-grow`; its vCenter cannot be reached)")
        ex["can-update-machine-unknown-kind"] = simple(
            srv, request("CanUpdateMachineRequest", "unknown-kind"), "(fixture `unknown-kind`)")
        ex["can-update-machine-set"] = simple(
            srv, request("CanUpdateMachineSetRequest", "vsmt-memory-cpu-grow"),
            "(fixture `vsmt-memory-cpu-grow`)")

        upd = update_on_test_domain()
        first, last = drive_update(srv, upd)
        ex["update-machine-first"] = (
            render_request("UpdateMachineRequest", upd,
                           "(fixture `lvm-grow`, `desired` only, LibvirtMachine renamed `test`)")
            + "\n" + render_response(*first))
        # after completion: the engine looks at the VM again, then the same answer
        _, again = drive_update(srv, upd)
        if again != last:
            raise RuntimeError("UpdateMachine after done answered differently: %s / %s"
                               % (last, again))
        ex["update-machine-done"] = render_response(*last)

        missing = request("UpdateMachineRequest", "lvm-grow", drop=("current",))
        first, last = drive_update(srv, missing)
        ex["update-machine-not-found"] = (
            render_request("UpdateMachineRequest", missing,
                           "(fixture `lvm-grow`, `desired` only: domain `hvt-dimm`)")
            + "\n" + render_response(*first) + "\nthen, once the worker has looked:\n\n"
            + render_response(*last))

        ex["error-unknown-setting"] = simple(
            srv, request("CanUpdateMachineRequest", "vsm-memory-grow",
                         settings={"powercycle": "Never"}),
            "(fixture `vsm-memory-grow`, a misspelt setting)")
        ex["error-no-desired"] = simple(
            srv, {"apiVersion": API, "kind": "UpdateMachineRequest"}, "")
        status, ctype, text = srv.call("POST", PATHS["CanUpdateMachineRequest"] + "?timeout=10s",
                                       b'{"kind": ')
        ex["error-not-json"] = (render_request("CanUpdateMachineRequest", None, "",
                                               raw='{"kind": ')
                                + "\n" + render_response(status, ctype, text))
        status, ctype, text = srv.call("GET", PATHS["DiscoveryRequest"], None)
        ex["error-wrong-method"] = ("**Request** `GET %s`\n\n" % PATHS["DiscoveryRequest"]
                                    + render_response(status, ctype, text))
    finally:
        srv.stop()
    return ex


# ---- the doc --------------------------------------------------------------------------------

def sections(doc):
    """[(name, start, end)] of the generated text between each pair of markers."""
    out = []
    for m in BEGIN.finditer(doc):
        end = doc.find(END, m.end())
        if end < 0:
            raise ValueError("example %s has no %s" % (m.group(1), END))
        out.append((m.group(1), m.end() + 1, end))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--print", action="store_true")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "hvupdater"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "hook-contract.md"))
    a = ap.parse_args(argv)

    ex = generate(a.binary)
    if a.print:
        for name, text in ex.items():
            print("<!-- example:%s -->\n%s%s\n" % (name, text, END))
        return 0
    doc = open(a.doc).read()
    secs = sections(doc)
    names = [n for n, _, _ in secs]
    passed = failed = 0
    for name in names:
        if name not in ex:
            print("FAIL %s: marker in %s but no such example is generated" % (name, a.doc))
            failed += 1
    for name in ex:
        if name not in names:
            print("FAIL %s: generated but %s has no <!-- example:%s --> marker"
                  % (name, a.doc, name))
            failed += 1
    if a.write:
        for name, start, end in reversed(secs):
            if name in ex:
                doc = doc[:start] + ex[name] + doc[end:]
        with open(a.doc, "w") as f:
            f.write(doc)
        print("wrote %d examples into %s" % (len([n for n in names if n in ex]), a.doc))
        return 1 if failed else 0
    for name, start, end in secs:
        if name not in ex:
            continue
        have = doc[start:end]
        if have == ex[name]:
            print("ok %s" % name)
            passed += 1
        else:
            print("FAIL %s: the doc differs from what the server answers now "
                  "(run test/docs/gen_examples.py --write)" % name)
            sys.stdout.writelines(difflib.unified_diff(
                have.splitlines(True), ex[name].splitlines(True), "doc", "server", n=2))
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
