"""hvtest.py: shared pieces of hvupdater's end-to-end tests.

Starts the real `hvupdater serve` binary (TLS on, self-signed CA), talks to it with Python's
TLS client (certificate verified against the CA the server wrote), and builds Runtime SDK
requests the way Cluster API sends them. Each test case is a function; `run(cases)` prints one
line per case and closes with `N passed, N failed`.
"""
import base64
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import traceback

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
PATHS = {
    "Discovery": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery",
    "CanUpdateMachine": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/can-update-machine",
    "CanUpdateMachineSet": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachineset/can-update-machine-set",
    "UpdateMachine": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/update-machine",
}


class Server:
    """One `hvupdater serve` process with its own port, certificate dir and log."""

    def __init__(self, binary, config=None, env=None, workdir=None):
        self.binary = binary
        self.dir = workdir or tempfile.mkdtemp(prefix="hv-e2e-")
        self.config = config
        self.env = env or {}
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.dir, "server.log")

    def start(self, env=None):
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        args = [self.binary, "serve", "--listen", "127.0.0.1:0", "--port-file", port_file,
                "--cert-dir", os.path.join(self.dir, "tls")]
        if self.config is not None:
            cfg = os.path.join(self.dir, "config.json")
            with open(cfg, "w") as f:
                json.dump(self.config, f)
            args += ["--config", cfg]
        e = dict(os.environ)
        e.update(self.env)
        e.update(env or {})
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, env=e)
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read().strip():
                self.port = int(open(port_file).read())
                return self
            if self.proc.poll() is not None:
                raise RuntimeError("server exited at start: " + self.tail())
            time.sleep(0.05)
        raise RuntimeError("server did not start: " + self.tail())

    def tail(self, n=20):
        try:
            return "".join(open(self.log_path).readlines()[-n:])
        except OSError:
            return ""

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
            if rc != 0:
                raise AssertionError("server exited %d on SIGTERM" % rc)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def client(self):
        return Client("127.0.0.1", self.port, os.path.join(self.dir, "tls", "ca.crt"))


class Client:
    """HTTPS client verifying the server against its CA, one keep-alive connection."""

    def __init__(self, host, port, ca):
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self.host, self.port = host, port
        self.conn = None

    def post(self, hook, body, timeout=10):
        data = json.dumps(body).encode()
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                                        timeout=timeout)
            try:
                t0 = time.monotonic()
                self.conn.request("POST", PATHS[hook] + "?timeout=10s", body=data,
                                  headers={"Content-Type": "application/json"})
                r = self.conn.getresponse()
                raw = r.read()
                ms = (time.monotonic() - t0) * 1000
                if r.status != 200:
                    raise AssertionError("%s: HTTP %d: %s" % (hook, r.status, raw[:300]))
                return json.loads(raw), ms
            except (ConnectionError, http.client.HTTPException, ssl.SSLError, OSError):
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def patch_ops(resp, field):
    p = resp.get(field)
    if not p:
        return []
    assert p["patchType"] == "JSONPatch", p
    return json.loads(base64.b64decode(p["patch"]))


def libvirt_machine(name, memory_mib, vcpu, uuid=None, disk_gib=None):
    m = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "LibvirtMachine",
         "metadata": {"name": name, "namespace": "default"},
         "spec": {"memoryMiB": memory_mib, "vcpu": vcpu}}
    if disk_gib is not None:
        m["spec"]["diskGiB"] = disk_gib
    return m


def machine(name, provider_id=None, version="v1.31.0"):
    spec = {"clusterName": "lab", "version": version,
            "bootstrap": {"dataSecretName": name},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                  "kind": "LibvirtMachine", "name": name}}
    if provider_id:
        spec["providerID"] = provider_id
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def can_update_request(cur_infra, des_infra, mach, settings=None):
    r = {"apiVersion": API, "kind": "CanUpdateMachineRequest",
         "current": {"machine": mach, "infrastructureMachine": cur_infra},
         "desired": {"machine": mach, "infrastructureMachine": des_infra}}
    if settings:
        r["settings"] = settings
    return r


def update_request(des_infra, mach, settings=None):
    r = {"apiVersion": API, "kind": "UpdateMachineRequest",
         "desired": {"machine": mach, "infrastructureMachine": des_infra}}
    if settings:
        r["settings"] = settings
    return r


def drive(client, req, timeout=120, poll=0.3, on_answer=None):
    """Call UpdateMachine until done or Failure (polling faster than retryAfterSeconds, as a
    sped-up CAPI). Returns (last answer, list of distinct messages, first-call ms)."""
    msgs, first_ms = [], None
    deadline = time.monotonic() + timeout
    while True:
        resp, ms = client.post("UpdateMachine", req)
        if first_ms is None:
            first_ms = ms
        assert "retryAfterSeconds" in resp, resp
        if not msgs or msgs[-1] != resp.get("message"):
            msgs.append(resp.get("message"))
        if on_answer:
            on_answer(resp)
        if resp["status"] == "Failure" or resp["retryAfterSeconds"] == 0:
            return resp, msgs, first_ms
        if time.monotonic() > deadline:
            raise AssertionError("still in progress after %ds: %s" % (timeout, msgs))
        time.sleep(poll)


def run(cases, only=None):
    passed = failed = 0
    for fn in cases:
        name = fn.__name__
        if only and not any(o in name for o in only):
            continue
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
            print("ok   %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
        except Exception:
            failed += 1
            print("FAIL %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
            traceback.print_exc()
            sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
