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
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import traceback

if sys.flags.optimize:  # python -O / PYTHONOPTIMIZE strips assert, and these checks are asserts
    raise SystemExit("%s: run without -O or PYTHONOPTIMIZE: its checks are assert statements"
                     % os.path.basename(__file__))

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
PATHS = {
    "Discovery": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery",
    "CanUpdateMachine": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/can-update-machine",
    "CanUpdateMachineSet": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachineset/can-update-machine-set",
    "UpdateMachine": "/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/update-machine",
}


MADE_DIRS = []  # the work directories Server made; run() removes them when every case passed


class Server:
    """One `hvupdater serve` process with its own port, certificate dir and log."""

    def __init__(self, binary, config=None, env=None, workdir=None):
        self.binary = binary
        if workdir is None:
            workdir = tempfile.mkdtemp(prefix="hv-e2e-")
            MADE_DIRS.append(workdir)
        self.dir = workdir
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

    def ends_within(self, seconds):
        """True when the process has exited or does within seconds: a call that failed
        because the process is killing itself (its sockets reset as it exits) is seen to end
        it, however late its exit status comes after the reset"""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def client(self):
        return Client("127.0.0.1", self.port, os.path.join(self.dir, "tls", "ca.crt"))


class Client:
    """HTTPS client verifying the server against its CA, one keep-alive connection."""

    def __init__(self, host, port, ca):
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self.host, self.port = host, port
        self.conn = None

    def post(self, hook, body, timeout=10, retry_asking=True):
        """One hook call. CanUpdateMachine asks the VM with a bounded wait and may answer the
        retryable Failure "still asking the hypervisor ...; retry": like CAPI, which retries
        a Failure after a back-off, it is asked again (sped up), unless retry_asking is False
        (a test that looks at that answer itself)."""
        resp, ms = self.post_once(hook, body, timeout)
        for _ in range(100):
            if not (retry_asking and hook == "CanUpdateMachine"
                    and resp.get("status") == "Failure"
                    and "still asking the hypervisor" in resp.get("message", "")):
                break
            time.sleep(0.1)
            resp, ms = self.post_once(hook, body, timeout)
        return resp, ms

    def post_once(self, hook, body, timeout=10):
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

    def get(self, path, timeout=10):
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                           timeout=timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            raw = r.read()
            if r.status != 200:
                raise AssertionError("GET %s: HTTP %d: %s" % (path, r.status, raw[:300]))
            return raw.decode()
        finally:
            conn.close()


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


# CAPI waits retryAfterSeconds before it calls UpdateMachine again. The tests wait the same,
# scaled down (never ignored): HV_E2E_RETRY_SCALE (default 0.2) of it, at least MIN_WAIT_S.
RETRY_SCALE = float(os.environ.get("HV_E2E_RETRY_SCALE", "0.2"))
MIN_WAIT_S = 0.05


def retry_wait(resp, scale=None):
    """Seconds a sped-up CAPI waits before calling again after this in-progress answer."""
    s = RETRY_SCALE if scale is None else scale
    return max(MIN_WAIT_S, resp["retryAfterSeconds"] * s)


def drive(client, req, timeout=120, on_answer=None, scale=None):
    """Call UpdateMachine the way CAPI does until done or Failure: after each in-progress
    answer wait retryAfterSeconds (scaled down by HV_E2E_RETRY_SCALE). Returns (last answer,
    list of distinct messages, first-call ms)."""
    msgs, first_ms = [], None
    deadline = time.monotonic() + timeout
    while True:
        resp, ms = client.post("UpdateMachine", req)
        if first_ms is None:
            first_ms = ms
        assert "retryAfterSeconds" in resp, resp
        assert isinstance(resp["retryAfterSeconds"], int) and resp["retryAfterSeconds"] >= 0, resp
        if not msgs or msgs[-1] != resp.get("message"):
            msgs.append(resp.get("message"))
        if on_answer:
            on_answer(resp)
        if resp["status"] == "Failure" or resp["retryAfterSeconds"] == 0:
            return resp, msgs, first_ms
        if time.monotonic() > deadline:
            raise AssertionError("still in progress after %ds: %s" % (timeout, msgs))
        time.sleep(retry_wait(resp, scale))


def metrics(client):
    """The server's /metrics as {series: value} (labels kept in the series name)."""
    out = {}
    for line in client.get("/metrics").splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def steps_taken(m):
    return sum(v for k, v in m.items() if k.startswith("hvupdater_step_duration_seconds_count"))


def wait_engine_idle(client, passes_before, timeout=30):
    """Wait until the engine has run a pass after passes_before and has none queued or running.
    Returns the metrics then."""
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(client)
        if (m.get("hvupdater_passes_total", 0) > passes_before and
                m.get("hvupdater_passes_pending", 0) == 0):
            return m
        if time.monotonic() > deadline:
            raise AssertionError("the engine did not run the queued pass within %ds" % timeout)
        time.sleep(0.05)


def assert_idempotent_after_done(client, req, timeout=60):
    """More UpdateMachine calls after completion: done again (after a fresh observation),
    and the passes they queue take no step and write no record."""
    before = metrics(client)
    last, msgs, _ = drive(client, req, timeout=timeout)
    assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, (last, msgs)
    after = wait_engine_idle(client, before.get("hvupdater_passes_total", 0))
    assert steps_taken(after) == steps_taken(before), ("a step after completion", msgs)
    assert (after.get("hvupdater_record_writes_total", 0) ==
            before.get("hvupdater_record_writes_total", 0)), ("a record write after completion",
                                                              msgs)
    return last


def run(cases, only=None):
    """Run the cases (those whose name contains one of `only`, when given). A selection that
    matches nothing is a failure, never a silent pass."""
    passed = failed = 0
    selected = [fn for fn in cases if not only or any(o in fn.__name__ for o in only)]
    if not selected:
        print("no test case matches %s" % only)
        print("0 passed, 1 failed")
        return 1
    for fn in selected:
        name = fn.__name__
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
    if failed:  # their server logs tell what happened: kept
        print("server directories kept: %s" % " ".join(MADE_DIRS))
    else:
        for d in MADE_DIRS:
            shutil.rmtree(d, ignore_errors=True)
        MADE_DIRS.clear()
    return 1 if failed else 0
