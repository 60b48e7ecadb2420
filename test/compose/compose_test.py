#!/usr/bin/python3
"""compose_test.py: hvupdater as the one registered extension, chaining a second, independent
extension (testext.py, a separate HTTPS process) downstream. Every CanUpdate* answer is judged
the way Cluster API v1.12 judges it (capijudge.py); UpdateMachine is driven like CAPI drives
it (honouring retryAfterSeconds, sped up).

  compose_test.py --build BUILD [-k NAME]...      cases on libvirt's in-process test driver
  compose_test.py --build BUILD --lab [-k NAME]   UpdateMachine on a real QEMU domain (needs
                                                  the lab: test/lab/libvirt-up.sh)
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import ssl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, HERE)
import capijudge  # noqa: E402
import hvtest  # noqa: E402

if sys.flags.optimize:  # python -O / PYTHONOPTIMIZE strips assert, and these checks are asserts
    raise SystemExit("%s: run without -O or PYTHONOPTIMIZE: its checks are assert statements"
                     % os.path.basename(__file__))

BINARY = None
PKI = None
WORK = tempfile.mkdtemp(prefix="hv-compose-")
LAB_URI = os.environ.get("HV_LIBVIRT_LAB_URI", "qemu:///system")


# ---- certificates (openssl CLI): a CA, the extension's serving cert, a client cert ----------

def make_pki(d):
    os.makedirs(d, exist_ok=True)

    def run(*a):
        subprocess.run(a, check=True, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test CA")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                      ("client", "extendedKeyUsage=clientAuth")):
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext + "\n")
        run("openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext")
    # An unrelated CA: a downstream configured with it must fail the TLS handshake.
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "other.key", "-out", "other.crt", "-days", "2", "-subj", "/CN=other")
    return d


class Ext:
    """One testext.py process."""
    seq = 0

    def __init__(self, name, prefix=None, port=0, log=None, args=(), client_ca=False):
        self.name, self.prefix, self.port = name, prefix or name, port
        Ext.seq += 1
        self.log = log or os.path.join(WORK, "%s.%d.calls" % (name, Ext.seq))
        self.args, self.client_ca = list(args), client_ca
        self.proc = None

    def start(self):
        pf = os.path.join(WORK, "%s.%d.port" % (self.name, os.getpid()))
        if os.path.exists(pf):
            os.unlink(pf)
        cmd = [sys.executable, os.path.join(HERE, "testext.py"), "--cert",
               os.path.join(PKI, "server.crt"), "--key", os.path.join(PKI, "server.key"),
               "--port", str(self.port), "--port-file", pf, "--name", self.name,
               "--prefix", self.prefix, "--log", self.log] + self.args
        if self.client_ca:
            cmd += ["--client-ca", os.path.join(PKI, "ca.crt")]
        self.proc = subprocess.Popen(cmd)
        for _ in range(200):
            if os.path.exists(pf):
                self.port = int(open(pf).read())
                return self
            if self.proc.poll() is not None:
                raise RuntimeError("testext exited at start")
            time.sleep(0.05)
        raise RuntimeError("testext did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.port

    def control(self, **kw):
        ctx = ssl.create_default_context(cafile=os.path.join(PKI, "ca.crt"))
        if self.client_ca:
            ctx.load_cert_chain(os.path.join(PKI, "client.crt"), os.path.join(PKI, "client.key"))
        r = urllib.request.urlopen(urllib.request.Request(
            self.url + "/control", data=json.dumps(kw).encode(), method="POST"),
            context=ctx, timeout=10)
        assert r.status == 200

    def calls(self, hook=None):
        if not os.path.exists(self.log):
            return []
        out = [json.loads(line) for line in open(self.log)]
        return [c for c in out if c["ext"] == self.name and (hook is None or c["hook"] == hook)]


def ds_entry(ext, **kw):
    e = {"name": ext.name, "url": ext.url, "caFile": os.path.join(PKI, "ca.crt"),
         "timeoutSeconds": 2}
    e.update(kw)
    return e


def hvupdater(downstream, uri="test:///default", **extra):
    cfg = {"libvirt": {"uris": [uri]}, "downstream": downstream}
    cfg.update(extra)
    return hvtest.Server(BINARY, cfg).start()


# ---- requests as CAPI sends them ------------------------------------------------------------

def machine(name, version="v1.31.0", failure_domain=None):
    m = hvtest.machine(name, version=version)
    if failure_domain:
        m["spec"]["failureDomain"] = failure_domain
    return m


def kubeadm_config(name, files=None, image_tag=None):
    spec = {"format": "cloud-config", "files": files or [],
            "clusterConfiguration": {"etcd": {"local": {"imageTag": image_tag or "3.5.15-0"}}}}
    return {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def cu_request(name, cur, des, settings=None):
    """cur/des: dicts with memory, vcpu, version, files, disk (optional)."""
    def objs(x):
        infra = hvtest.libvirt_machine(name, x.get("memory", 2048), x.get("vcpu", 2))
        if "disk" in x:
            infra["spec"]["diskGiB"] = x["disk"]
        return {"machine": machine(name, x.get("version", "v1.31.0")),
                "infrastructureMachine": infra,
                "bootstrapConfig": kubeadm_config(name, x.get("files"))}
    r = {"apiVersion": hvtest.API, "kind": "CanUpdateMachineRequest",
         "current": objs(cur), "desired": objs(des)}
    if settings:
        r["settings"] = settings
    return r


def cus_request(name, cur, des):
    def objs(x):
        ms = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
              "metadata": {"name": name, "namespace": "default"},
              "spec": {"clusterName": "lab", "template": {"spec": {
                  "clusterName": "lab", "version": x.get("version", "v1.31.0"),
                  "bootstrap": {"configRef": {"kind": "KubeadmConfigTemplate", "name": name}},
                  "infrastructureRef": {"kind": "LibvirtMachineTemplate", "name": name}}}}}
        lmt = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
               "kind": "LibvirtMachineTemplate",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"template": {"spec": {"memoryMiB": x.get("memory", 2048), "vcpu": 2}}}}
        kct = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
               "kind": "KubeadmConfigTemplate",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"template": {"spec": {"files": x.get("files", [])}}}}
        return {"machineSet": ms, "infrastructureMachineTemplate": lmt,
                "bootstrapConfigTemplate": kct}
    return {"apiVersion": hvtest.API, "kind": "CanUpdateMachineSetRequest",
            "current": objs(cur), "desired": objs(des)}


FILES = [{"path": "/etc/motd", "content": "hello"}]


def covered(client, req, machine_set=False):
    hook = "CanUpdateMachineSet" if machine_set else "CanUpdateMachine"
    resp, ms = client.post(hook, req)
    assert resp["status"] == "Success", resp
    return resp, capijudge.judge(req, resp, machine_set)


def metrics(server):
    ctx = ssl.create_default_context(cafile=os.path.join(server.dir, "tls", "ca.crt"))
    return urllib.request.urlopen("https://127.0.0.1:%d/metrics" % server.port,
                                  context=ctx, timeout=10).read().decode()


def metric(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^%s\{([^}]*)\} (\S+)$" % re.escape(name), line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            return float(m.group(2))
    return 0.0


# ---- cases ----------------------------------------------------------------------------------

def with_ext(fn):
    """Run fn(ext, server, client) with one downstream extension `kubeup`."""
    def case():
        ext = Ext("kubeup", prefix="kubeup-v1").start()
        srv = hvupdater([ds_entry(ext)])
        try:
            fn(ext, srv, srv.client())
        finally:
            srv.stop()
            ext.stop()
    case.__name__ = fn.__name__
    return case


@with_ext
def test_version_and_memory_covered_by_the_composition(ext, srv, c):
    req = cu_request("test", {"memory": 2048}, {"memory": 4096, "version": "v1.32.0"})
    resp, left = covered(c, req)
    assert left == [], (left, resp)
    assert hvtest.patch_ops(resp, "infrastructureMachinePatch") == [
        {"op": "replace", "path": "/spec/memoryMiB", "value": 4096}], resp
    assert hvtest.patch_ops(resp, "machinePatch") == [
        {"op": "replace", "path": "/spec/version", "value": "v1.32.0"}], resp
    assert "bootstrapConfigPatch" not in resp, resp
    assert resp["message"] == ("memoryMiB 2048->4096 live; downstream kubeup: kubeup covers "
                               "machine.version"), resp
    # The downstream saw the request with hvupdater's patch already applied (CAPI's chaining).
    seen = ext.calls("CanUpdateMachine")[-1]["body"]
    assert seen["current"]["infrastructureMachine"]["spec"]["memoryMiB"] == 4096, seen
    assert seen["current"]["machine"]["spec"]["version"] == "v1.31.0", seen
    # Without the downstream the same request is not covered: the composition is what covers it.
    alone = hvtest.Server(BINARY, {"libvirt": {"uris": ["test:///default"]}}).start()
    try:
        r2, _ = alone.client().post("CanUpdateMachine", req)
        assert capijudge.judge(req, r2) == ["/machine/spec/version"], r2
    finally:
        alone.stop()


@with_ext
def test_each_part_alone(ext, srv, c):
    req = cu_request("test", {"memory": 2048}, {"memory": 3072})
    resp, left = covered(c, req)
    assert left == [] and "machinePatch" not in resp, resp
    assert resp["message"] == "memoryMiB 2048->3072 live; downstream kubeup: kubeup: nothing to cover"
    req = cu_request("test", {}, {"version": "v1.32.0"})
    resp, left = covered(c, req)
    assert left == [] and "infrastructureMachinePatch" not in resp, resp
    assert resp["message"].startswith("nothing hvupdater can change in place; downstream kubeup"), resp
    req = cu_request("test", {}, {"files": FILES})
    resp, left = covered(c, req)
    assert left == [] and hvtest.patch_ops(resp, "bootstrapConfigPatch") == [
        {"op": "replace", "path": "/spec/files", "value": FILES}], resp


@with_ext
def test_affects_availability_of_the_composition(ext, srv, c):
    """false only when hvupdater's part can take no power cycle (powerCycle Never) and every
    downstream that patched something said false; absent (true) from a downstream counts."""
    never = {"powerCycle": "Never"}
    mem = cus_request("md", {"memory": 2048}, {"memory": 4096})
    mem_ver = cus_request("md", {"memory": 2048}, {"memory": 4096, "version": "v1.32.0"})
    for req, settings, affects, want in (
            (mem, None, None, True),           # IfNeeded: a growth may fall back to a cycle
            (mem, never, None, False),         # the downstream patched nothing
            (mem_ver, never, None, True),      # the downstream's version change, no answer
            (mem_ver, never, True, True),
            (mem_ver, never, False, False),
            (mem_ver, None, False, True)):
        ext.control(affects=affects)
        r = dict(req)
        if settings:
            r["settings"] = settings
        resp, left = covered(c, r, machine_set=True)
        assert left == [], (left, resp)
        assert resp.get("affectsAvailability") is want, (settings, affects, resp)


@with_ext
def test_machine_set_version_memory_and_files(ext, srv, c):
    req = cus_request("md", {"memory": 2048}, {"memory": 4096, "version": "v1.32.0",
                                               "files": FILES})
    resp, left = covered(c, req, machine_set=True)
    assert left == [], (left, resp)
    assert hvtest.patch_ops(resp, "machineSetPatch") == [
        {"op": "replace", "path": "/spec/template/spec/version", "value": "v1.32.0"}], resp
    assert hvtest.patch_ops(resp, "infrastructureMachineTemplatePatch") == [
        {"op": "replace", "path": "/spec/template/spec/memoryMiB", "value": 4096}], resp


@with_ext
def test_what_nobody_covers_is_left_to_capi_or_blocks(ext, srv, c):
    # a disk shrink: hvupdater grows disks only, and the downstream ignores disks
    req = cu_request("test", {"disk": 40}, {"disk": 20, "version": "v1.32.0", "memory": 4096})
    resp, left = covered(c, req)
    assert left == ["/infrastructureMachine/spec/diskGiB"], (left, resp)
    assert resp["message"].endswith("; not covered, left to CAPI: "
                                    "infrastructureMachine.spec.diskGiB (disks cannot shrink)"), resp
    req["settings"] = {"onUncoverable": "Block"}
    resp, _ = c.post("CanUpdateMachine", req)
    assert resp["status"] == "Failure", resp
    assert resp["message"] == ("cannot update in place (onUncoverable=Block): not covered by "
                               "hvupdater or its downstream extensions: "
                               "infrastructureMachine.spec.diskGiB (disks cannot shrink)"), resp
    # Block with everything covered by the two together: Success.
    req = cu_request("test", {}, {"version": "v1.32.0", "memory": 4096},
                     {"onUncoverable": "Block"})
    resp, left = covered(c, req)
    assert left == [], resp


@with_ext
def test_downstream_failure_names_it(ext, srv, c):
    ext.control(mode="fail")
    req = cu_request("test", {}, {"version": "v1.32.0", "memory": 4096})
    resp, _ = c.post("CanUpdateMachine", req)
    assert resp["status"] == "Failure", resp
    assert resp["message"] == "downstream kubeup answered Failure: kubeup refuses: etcd is unhealthy"
    assert not any(k.endswith("Patch") for k in resp), resp
    um = hvtest.update_request(hvtest.libvirt_machine("test", 4096, 2), machine("test", "v1.32.0"))
    resp, _ = c.post("UpdateMachine", um)
    assert resp["status"] == "Failure" and resp["retryAfterSeconds"] == 0, resp
    assert resp["message"] == "downstream kubeup answered Failure: kubeup refuses: etcd is unhealthy"
    for mode, want in (("http500", "downstream kubeup answered HTTP 500"),
                       ("garbage", "downstream kubeup answered something that is not a JSON object")):
        ext.control(mode=mode)
        resp, _ = c.post("CanUpdateMachine", req)
        assert resp["status"] == "Failure" and resp["message"] == want, (mode, resp)
    for mode, want in (("badpatch", "downstream kubeup returned a machinePatch that cannot be "
                                    "applied: operation 0 (replace /spec/nope/deeper) cannot be "
                                    "applied"),
                       ("stringpatch", "downstream kubeup returned a bootstrapConfigPatch that "
                                       "cannot be applied: not an object")):
        ext.control(mode=mode)
        resp, _ = c.post("CanUpdateMachine", req)
        assert resp["status"] == "Failure" and resp["message"] == want, (mode, resp)
    ext.control(mode="ok")
    resp, left = covered(c, req)
    assert left == [], resp
    m = metrics(srv)
    assert metric(m, "hvupdater_downstream_calls_total", downstream="kubeup",
                  hook="CanUpdateMachine", status="Failure") == 1, m
    assert metric(m, "hvupdater_downstream_errors_total", downstream="kubeup",
                  hook="CanUpdateMachine", kind="http") == 1, m
    assert metric(m, "hvupdater_downstream_errors_total", downstream="kubeup",
                  hook="CanUpdateMachine", kind="bad-answer") == 1, m
    assert metric(m, "hvupdater_downstream_calls_total", downstream="kubeup",
                  hook="CanUpdateMachine", status="Success") == 3, m
    log = open(srv.log_path).read()
    assert '"downstream":"kubeup"' in log and "downstream-call" in log, log[-2000:]


def test_downstream_down_then_back():
    ext = Ext("kubeup").start()
    port = ext.port
    srv = hvupdater([ds_entry(ext)])
    try:
        c = srv.client()
        req = cu_request("test", {}, {"version": "v1.32.0", "memory": 4096})
        ext.stop()
        resp, _ = c.post("CanUpdateMachine", req)
        assert resp["status"] == "Failure", resp
        assert resp["message"] == "downstream kubeup cannot be reached (connection failed)", resp
        um = hvtest.update_request(hvtest.libvirt_machine("test", 4096, 2), machine("test"))
        resp, _ = c.post("UpdateMachine", um)
        assert resp["status"] == "Failure", resp
        assert resp["message"] == "downstream kubeup cannot be reached (connection failed)", resp
        # Back, with other handler names: discovery runs again and the names come from it.
        ext = Ext("kubeup", prefix="kubeup-v2", port=port).start()
        resp, left = covered(c, req)
        assert left == [], resp
        assert ext.calls("CanUpdateMachine"), "not called"
        m = metrics(srv)
        assert metric(m, "hvupdater_downstream_errors_total", downstream="kubeup",
                      hook="Discovery", kind="unreachable") >= 1, m
    finally:
        srv.stop()
        ext.stop()


@with_ext
def test_renamed_handlers_are_rediscovered_within_the_call(ext, srv, c):
    req = cu_request("test", {}, {"version": "v1.32.0"})
    covered(c, req)
    ext.control(prefix="kubeup-v3")
    resp, left = covered(c, req)
    assert left == [], resp


@with_ext
def test_slow_downstream_is_a_bounded_failure(ext, srv, c):
    ext.control(delay=4)
    req = cu_request("test", {}, {"version": "v1.32.0", "memory": 4096})
    t0 = time.monotonic()
    resp, _ = c.post("CanUpdateMachine", req)
    took = time.monotonic() - t0
    assert resp["status"] == "Failure", resp
    assert resp["message"] == "downstream kubeup did not answer within 2 s", resp
    # The contract, not a speed figure: the answer comes inside CAPI's 10 s handler timeout.
    assert took < 10, took
    print("     slow downstream: answered Failure after %.2f s (timeoutSeconds 2)" % took)
    m = metrics(srv)
    assert metric(m, "hvupdater_downstream_errors_total", downstream="kubeup",
                  hook="CanUpdateMachine", kind="timeout") == 1, m
    ext.control(delay=0)
    resp, left = covered(c, req)
    assert left == [], resp


def test_order_settings_and_two_downstreams():
    log = os.path.join(WORK, "order.calls")
    a = Ext("first", log=log, args=["--covers", "version"]).start()
    b = Ext("second", log=log, args=["--covers", "version,files",
                                     "--patch-type", "JSONMergePatch"]).start()
    srv = hvupdater([ds_entry(a), ds_entry(b, settings={"mode": "strict"})])
    try:
        c = srv.client()
        req = cu_request("test", {"memory": 2048},
                         {"memory": 4096, "version": "v1.32.0", "files": FILES},
                         {"powerCycle": "IfNeeded"})
        resp, left = covered(c, req)
        assert left == [], (left, resp)
        calls = [json.loads(x) for x in open(log)]
        assert [x["ext"] for x in calls] == ["first", "second"], calls
        first, second = calls[0]["body"], calls[1]["body"]
        # first sees hvupdater's patch; second sees hvupdater's and first's.
        assert first["current"]["infrastructureMachine"]["spec"]["memoryMiB"] == 4096
        assert first["current"]["machine"]["spec"]["version"] == "v1.31.0"
        assert second["current"]["machine"]["spec"]["version"] == "v1.32.0"
        assert second["current"]["bootstrapConfig"]["spec"]["files"] == []
        # settings: passed through unchanged, or the entry's override.
        assert first["settings"] == {"powerCycle": "IfNeeded"}, first
        assert second["settings"] == {"mode": "strict"}, second
        assert resp["message"] == ("memoryMiB 2048->4096 live; downstream first: first covers "
                                   "machine.version; downstream second: second covers "
                                   "bootstrapConfig.files"), resp
        # UpdateMachine in the same order: hvupdater's engine, first, second.
        os.unlink(log)
        um = hvtest.update_request(hvtest.libvirt_machine("test", 4096, 2),
                                   machine("test", "v1.32.0"))
        um["desired"]["bootstrapConfig"] = kubeadm_config("test", FILES)
        c.post("UpdateMachine", um)
        assert [json.loads(x)["ext"] for x in open(log)] == ["first", "second"]
    finally:
        srv.stop()
        a.stop()
        b.stop()


def test_client_certificate():
    ext = Ext("mtls", client_ca=True).start()
    pki = lambda f: os.path.join(PKI, f)  # noqa: E731
    good = hvupdater([ds_entry(ext, clientCertFile=pki("client.crt"),
                               clientKeyFile=pki("client.key"))])
    bad = hvupdater([ds_entry(ext)])
    wrong_ca = hvupdater([ds_entry(ext, caFile=pki("other.crt"), clientCertFile=pki("client.crt"),
                                   clientKeyFile=pki("client.key"))])
    try:
        req = cu_request("test", {}, {"version": "v1.32.0"})
        resp, left = covered(good.client(), req)
        assert left == [], resp
        for s in (bad, wrong_ca):
            resp, _ = s.client().post("CanUpdateMachine", req)
            assert resp["status"] == "Failure", resp
            assert resp["message"].startswith("downstream mtls"), resp
        resp, _ = wrong_ca.client().post("CanUpdateMachine", req)
        assert resp["message"] == ("downstream mtls: the TLS handshake failed (check its caFile, "
                                   "clientCertFile and serving certificate)"), resp
    finally:
        for s in (good, bad, wrong_ca):
            s.stop()
        ext.stop()


def drive_update(client, um, timeout=120, scale=0.25):
    """UpdateMachine as CAPI calls it: again after retryAfterSeconds (sped up), until done."""
    answers = []
    deadline = time.monotonic() + timeout
    while True:
        resp, _ = client.post("UpdateMachine", um)
        answers.append(resp)
        if resp["status"] == "Failure" or resp["retryAfterSeconds"] == 0:
            return resp, answers
        assert time.monotonic() < deadline, answers
        time.sleep(resp["retryAfterSeconds"] * scale)


def check_update_both_done(srv, ext, um, min_answers):
    c = srv.client()
    last, answers = drive_update(c, um)
    assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, answers
    assert "downstream kubeup: Extension completed updating Machine" in last["message"], last
    assert any("Extension is updating Machine (step 1 of 3)" in a["message"] for a in answers)
    assert len(answers) >= min_answers, answers
    n = len(ext.calls("UpdateMachine"))
    assert n == 3, n  # done on its third call
    # A done answer ends the update: its dones are forgotten, so CAPI calling again with the
    # same objects asks the downstream once more (it is idempotent: done at once). Remembered
    # dones only spare a finished part while another part of the same update still works.
    # (hvupdater's own part looks at the VM again before it repeats a done: the first call
    # after it may answer "in progress: observing the VM".)
    again, _ = drive_update(c, um)
    assert again["status"] == "Success" and again["retryAfterSeconds"] == 0, again
    assert len(ext.calls("UpdateMachine")) == 4
    # New desired objects: asked again, and the work starts over.
    um2 = json.loads(json.dumps(um))
    um2["desired"]["machine"]["spec"]["version"] = "v1.33.0"
    resp, _ = c.post("UpdateMachine", um2)
    assert resp["retryAfterSeconds"] > 0 and len(ext.calls("UpdateMachine")) == 5, resp
    return last, answers


@with_ext
def test_update_machine_drives_both_to_done(ext, srv, c):
    um = hvtest.update_request(hvtest.libvirt_machine("test", 4096, 2), machine("test", "v1.32.0"))
    last, answers = check_update_both_done(srv, ext, um, 3)
    assert last["message"].startswith("done: memory 4096 MiB"), last
    m = metrics(srv)
    assert metric(m, "hvupdater_downstream_calls_total", downstream="kubeup",
                  hook="UpdateMachine", status="Success") == 5, m


@with_ext
def test_update_machine_for_a_kind_hvupdater_does_not_know(ext, srv, c):
    infra = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachine",
             "metadata": {"name": "d1", "namespace": "default"}, "spec": {}}
    um = hvtest.update_request(infra, machine("d1", "v1.32.0"))
    last, answers = drive_update(c, um)
    assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, answers
    assert last["message"] == "downstream kubeup: Extension completed updating Machine", last


def test_update_machine_smallest_retry_and_first_failure_stops():
    log = os.path.join(WORK, "retry.calls")
    a = Ext("slowpoke", log=log, args=["--retry", "7", "--calls", "3"]).start()
    b = Ext("quick", log=log, args=["--retry", "3", "--calls", "2"]).start()
    srv = hvupdater([ds_entry(a), ds_entry(b)])
    try:
        c = srv.client()
        infra = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachine",
                 "metadata": {"name": "d2", "namespace": "default"}, "spec": {}}
        um = hvtest.update_request(infra, machine("d2", "v1.32.0"))
        r1, _ = c.post("UpdateMachine", um)
        assert r1["status"] == "Success" and r1["retryAfterSeconds"] == 3, r1
        assert r1["message"] == ("downstream slowpoke: Extension is updating Machine (step 1 of "
                                 "3); downstream quick: Extension is updating Machine (step 1 "
                                 "of 2)"), r1
        r2, _ = c.post("UpdateMachine", um)  # quick is done: only slowpoke is still working
        assert r2["retryAfterSeconds"] == 7, r2
        assert r2["message"].endswith("downstream quick: Extension completed updating Machine")
        # The first one fails: Failure naming it, and the one after it is not called.
        a.control(mode="fail")
        um["desired"]["machine"]["spec"]["version"] = "v1.33.0"
        before = len(b.calls("UpdateMachine"))
        r3, _ = c.post("UpdateMachine", um)
        assert r3["status"] == "Failure", r3
        assert r3["message"] == "downstream slowpoke answered Failure: slowpoke refuses: etcd is unhealthy"
        assert len(b.calls("UpdateMachine")) == before
    finally:
        srv.stop()
        a.stop()
        b.stop()


def test_update_machine_a_b_a_calls_the_downstream_again():
    """A -> B -> A on one Machine: the second A is byte-for-byte the first request, but the
    downstream's part of the Machine is at B now. hvupdater must ask it again, and answer done
    only when it says so (issue 17 item 7)."""
    ext = Ext("kubeup").start()  # done on its third call for a desired state
    srv = hvupdater([ds_entry(ext)])
    try:
        c = srv.client()
        infra = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachine",
                 "metadata": {"name": "d3", "namespace": "default"}, "spec": {}}
        a = hvtest.update_request(infra, machine("d3", "v1.32.0"))
        b = json.loads(json.dumps(a))
        b["desired"]["machine"]["spec"]["version"] = "v1.33.0"
        for um in (a, b):
            last, answers = drive_update(c, um)
            assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, answers
        n = len(ext.calls("UpdateMachine"))
        assert n == 6, n
        resp, _ = c.post("UpdateMachine", a)
        assert len(ext.calls("UpdateMachine")) == n + 1, "the downstream was not asked again"
        assert resp["status"] == "Success" and resp["retryAfterSeconds"] > 0, resp
        assert resp["message"] == ("downstream kubeup: Extension is updating Machine (step 1 "
                                   "of 3)"), resp
        last, answers = drive_update(c, a)
        assert last["retryAfterSeconds"] == 0 and len(ext.calls("UpdateMachine")) == n + 3, answers
    finally:
        srv.stop()
        ext.stop()


CASES = [test_version_and_memory_covered_by_the_composition, test_each_part_alone,
         test_affects_availability_of_the_composition, test_machine_set_version_memory_and_files,
         test_what_nobody_covers_is_left_to_capi_or_blocks, test_downstream_failure_names_it,
         test_downstream_down_then_back, test_renamed_handlers_are_rediscovered_within_the_call,
         test_slow_downstream_is_a_bounded_failure, test_order_settings_and_two_downstreams,
         test_client_certificate, test_update_machine_drives_both_to_done,
         test_update_machine_for_a_kind_hvupdater_does_not_know,
         test_update_machine_smallest_retry_and_first_failure_stops,
         test_update_machine_a_b_a_calls_the_downstream_again]


# ---- the QEMU lab ---------------------------------------------------------------------------

def test_lab_version_and_memory_on_a_qemu_domain():
    import libvirt
    sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
    import libvirt_e2e as lv
    lv.URI = LAB_URI
    name = "hvt-compose"
    dom = lv.new_domain("dimm", name)
    ext = Ext("kubeup").start()
    srv = hvupdater([ds_entry(ext)], uri=LAB_URI)
    try:
        before = lv.state(name)
        c = srv.client()
        req = cu_request(name, {"memory": 1024, "vcpu": 1}, {"memory": 2048, "vcpu": 1,
                                                             "version": "v1.32.0"})
        resp, left = covered(c, req)
        assert left == [], (left, resp)
        um = hvtest.update_request(hvtest.libvirt_machine(name, 2048, 1), machine(name, "v1.32.0"))
        last, answers = check_update_both_done(srv, ext, um, 3)
        after = lv.state(name)
        assert after["memory"] == 2048 and after["id"] == before["id"], (before, after)
        print("     %d UpdateMachine calls; last: %s" % (len(answers), last["message"]))
    finally:
        srv.stop()
        ext.stop()
        del dom
        lv.remove_domain(name)
    _ = libvirt


LAB_CASES = [test_lab_version_and_memory_on_a_qemu_domain]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--lab", action="store_true")
    ap.add_argument("-k", action="append")
    a = ap.parse_args()
    BINARY = os.path.abspath(os.path.join(a.build, "hvupdater"))
    PKI = make_pki(os.path.join(WORK, "pki"))
    sys.exit(hvtest.run(LAB_CASES if a.lab else CASES, a.k))
