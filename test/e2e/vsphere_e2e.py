#!/usr/bin/python3
"""vsphere_e2e.py: every vSphere scenario end to end, through the HTTPS hooks of the real
server (CanUpdateMachine, then UpdateMachine until done) against govmomi's vCenter simulator
(test/vcsim: a fresh model per scenario), checking what vCenter shows afterwards through
its own SOAP API (RetrievePropertiesEx for hardware and power, QueryEvents for the VM's
event history) and the launcher's call counters (/hvtest/stats).

Needs the hvupdater binary and the launcher (test/vcsim/build.sh OUT); run with the system
python: /usr/bin/python3 test/e2e/vsphere_e2e.py --build build [--vcsim BIN] [-k NAME]...
(--vcsim defaults to $HV_VCSIM_BIN, else BUILD/vcsim/vcsim). HV_E2E_KEEP=1 keeps every
launcher's and server's directory (logs, info.json) instead of removing them.
"""
import argparse
import collections
import json
import os
import select
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvtest  # noqa: E402

if sys.flags.optimize:  # python -O / PYTHONOPTIMIZE strips assert, and these checks are asserts
    raise SystemExit("%s: run without -O or PYTHONOPTIMIZE: its checks are assert statements"
                     % os.path.basename(__file__))

BINARY = None
VCSIM = None
USER = "hv-e2e-operator"  # distinctive, so a leak into a message is easy to spot
SERVER = "vc-e2e"
INFRA_API = "infrastructure.cluster.x-k8s.io/v1beta1"
FAST = {"shutdownTimeoutSeconds": "3", "liveTimeoutSeconds": "5"}
ENGINE = {"workers": 4, "maxConcurrentPowerCycles": 8, "maxPowerCyclesPerHost": 8,
          "stepTimeoutSeconds": 20}
KEEP = bool(os.environ.get("HV_E2E_KEEP"))  # keep launcher and server dirs for a post-mortem
POWER_EVENTS = ("VmGuestShutdownEvent", "VmStoppingEvent", "VmPoweredOffEvent",
                "VmStartingEvent", "VmPoweredOnEvent")

SOAP_NS = "http://schemas.xmlsoap.org/soap/envelope/"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
HEAD = ('<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="%s" '
        'xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="%s"><soapenv:Body>'
        % (SOAP_NS, XSI_NS))
TAIL = "</soapenv:Body></soapenv:Envelope>"


def local(tag):
    return tag.rsplit("}", 1)[-1]


def child(el, name):
    for c in el:
        if local(c.tag) == name:
            return c
    return None


def children(el, name):
    return [c for c in el if local(c.tag) == name]


def xsi_type(el):
    return el.get("{%s}type" % XSI_NS) or el.get("type") or ""


class VimFault(Exception):
    def __init__(self, method, kind, text):
        super().__init__("%s: %s (%s)" % (method, kind, text))
        self.kind = kind


class Vim:
    """A tiny vim25 SOAP client (urllib, verified against the launcher's CA) for reading
    what vCenter shows. It counts its own calls so tests can subtract them from the
    launcher's counters."""

    def __init__(self, url, ca, user, password):
        self.url, self.user, self.password = url, user, password
        self.ctx = ssl.create_default_context(cafile=ca)
        self.cookie = None
        self.content = None
        self.calls = collections.Counter()

    def _post(self, method, this_type, this_value, inner=""):
        body = (HEAD + '<%s xmlns="urn:vim25"><_this type="%s">%s</_this>%s</%s>'
                % (method, this_type, this_value, inner, method) + TAIL)
        req = urllib.request.Request(self.url, data=body.encode(), headers={
            "Content-Type": "text/xml; charset=utf-8", "SOAPAction": "urn:vim25/6.5"})
        if self.cookie:
            req.add_header("Cookie", self.cookie)
        self.calls[method] += 1
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=60) as r:
                raw, headers = r.read(), r.headers
        except urllib.error.HTTPError as e:
            raw, headers = e.read(), e.headers
        for sc in headers.get_all("Set-Cookie") or []:
            if sc.startswith("vmware_soap_session="):
                self.cookie = sc.split(";", 1)[0]
        root = ET.fromstring(raw)
        body_el = child(root, "Body")
        fault = child(body_el, "Fault")
        if fault is not None:
            detail = child(fault, "detail")
            kind = ""
            if detail is not None and len(detail):
                kind = xsi_type(detail[0]) or local(detail[0].tag)
            text = child(fault, "faultstring")
            raise VimFault(method, kind, text.text if text is not None else "")
        resp = body_el[0]
        # Property reads without a valid session answer per-property NotAuthenticated faults
        # in missingSet (the simulator does this) rather than a SOAP fault.
        for ms in resp.iter():
            if local(ms.tag) == "missingSet":
                f = child(child(ms, "fault"), "fault")
                raise VimFault(method, xsi_type(f) if f is not None else "missingSet",
                               child(ms, "path").text)
        return resp

    def login(self):
        if self.content is None:
            rv = child(self._post("RetrieveServiceContent", "ServiceInstance",
                                  "ServiceInstance"), "returnval")
            self.content = {local(c.tag): c.text for c in rv}
        self.cookie = None
        self._post("Login", "SessionManager", self.content["sessionManager"],
                   "<userName>%s</userName><password>%s</password>"
                   % (escape(self.user), escape(self.password)))

    def call(self, method, this_type, this_key, inner=""):
        if self.cookie is None:
            self.login()
        this = self.content[this_key]
        try:
            return self._post(method, this_type, this, inner)
        except VimFault as f:
            if "NotAuthenticated" not in f.kind:
                raise
        self.login()  # our session expired too (the expiry scenarios)
        return self._post(method, this_type, this, inner)

    def vm(self, moref):
        """Power state, hardware, hot-add settings and hvupdater's record, as vCenter shows."""
        paths = ["runtime.powerState", "config.hardware.memoryMB", "config.hardware.numCPU",
                 "config.hardware.numCoresPerSocket", "config.extraConfig",
                 "config.hardware.device"]
        inner = ("<specSet><propSet><type>VirtualMachine</type><all>false</all>" +
                 "".join("<pathSet>%s</pathSet>" % p for p in paths) +
                 '</propSet><objectSet><obj type="VirtualMachine">%s</obj><skip>false</skip>'
                 "</objectSet></specSet><options></options>" % moref)
        resp = self.call("RetrievePropertiesEx", "PropertyCollector", "propertyCollector",
                         inner)
        out = {"record": None, "disk": None}
        for obj in children(child(resp, "returnval"), "objects"):
            for ps in children(obj, "propSet"):
                name, val = child(ps, "name").text, child(ps, "val")
                if name == "config.hardware.device":
                    for dev in children(val, "VirtualDevice"):
                        if xsi_type(dev).endswith("VirtualDisk") and out["disk"] is None:
                            b, kb = child(dev, "capacityInBytes"), child(dev, "capacityInKB")
                            out["disk"] = (int(b.text) if b is not None and int(b.text) > 0
                                           else int(kb.text) * 1024) // (1 << 20)
                elif name == "config.extraConfig":
                    for ov in children(val, "OptionValue"):
                        if child(ov, "key").text == "hvupdater.operation":
                            out["record"] = child(ov, "value").text  # the last one wins
                else:
                    out[name] = val.text
        return {"on": out["runtime.powerState"] == "poweredOn",
                "memory": int(out["config.hardware.memoryMB"]),
                "cpus": int(out["config.hardware.numCPU"]),
                "cores": int(out["config.hardware.numCoresPerSocket"]),
                "disk_mib": out["disk"],
                "record": json.loads(out["record"]) if out["record"] else None}

    def events(self, moref):
        """The VM's event history, oldest first: list of event type names."""
        inner = ('<filter><entity><entity type="VirtualMachine">%s</entity>'
                 "<recursion>self</recursion></entity><maxCount>1000</maxCount></filter>"
                 % moref)
        resp = self.call("QueryEvents", "EventManager", "eventManager", inner)
        evs = []
        for rv in children(resp, "returnval"):
            key = child(rv, "key")
            evs.append((int(key.text) if key is not None else 0, xsi_type(rv)))
        return [t for _, t in sorted(evs)]


class Launcher:
    """One vcsim launcher process (fresh model) with its info.json and control endpoints."""

    def __init__(self, *flags, vms=4, hosts=2, username=USER):
        self.dir = tempfile.mkdtemp(prefix="hv-vse-")
        # every VM's first disk is the 25 GiB the VSphereMachines below ask for
        args = [VCSIM, "-dir", self.dir, "-stdin", "-hosts", str(hosts), "-vms", str(vms),
                "-username", username, "-vm", "all:disk=25"] + list(flags)
        self.stderr = open(os.path.join(self.dir, "stderr"), "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        line, deadline = b"", time.monotonic() + 30
        while b"VCSIM_READY" not in line:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("launcher did not start: " +
                                   open(os.path.join(self.dir, "stderr")).read()[-2000:])
            if select.select([self.proc.stdout], [], [], left)[0]:
                line = self.proc.stdout.readline()
        self.info = json.load(open(os.path.join(self.dir, "info.json")))
        self.password = open(self.info["password_file"]).read().strip()
        self.user = username
        self.ctx = ssl.create_default_context(cafile=self.info["ca"])
        self.vim = Vim(self.info["url"], self.info["ca"], username, self.password)

    def control(self, what):
        with urllib.request.urlopen(self.info["control_url"] + "/" + what, context=self.ctx,
                                    timeout=30) as r:
            return json.loads(r.read())

    def stats(self):
        """The launcher's per-method SOAP call counts, minus the calls this test made."""
        s = self.control("stats")
        calls = collections.Counter(s["calls"])
        calls.subtract(self.vim.calls)
        return calls, s["requests"] - sum(self.vim.calls.values())

    def vm(self, i):
        return self.info["vms"][i]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.stderr):
            f.close()
        if not KEEP:
            shutil.rmtree(self.dir, ignore_errors=True)


def stop_server(server):
    """SIGTERM (must exit 0), then remove its directory (certificates, log), unless
    hvtest.run() owns it: that keeps the directories of a run with a failed case (it says
    so: their server logs tell what happened) and removes them when every case passed."""
    try:
        server.stop()
    finally:
        if not server.alive() and not KEEP and server.dir not in hvtest.MADE_DIRS:
            shutil.rmtree(server.dir, ignore_errors=True)


def server_config(sim, thumbprint=None, engine=None, name=SERVER):
    ufile = os.path.join(sim.dir, "username")
    with open(ufile, "w") as f:
        f.write(sim.user + "\n")
    srv = {"name": name, "url": sim.info["url"], "usernameFile": ufile,
           "passwordFile": sim.info["password_file"],
           "thumbprint": thumbprint or sim.info["thumbprint_sha256"]}
    return {"vsphere": {"servers": [srv]}, "engine": dict(ENGINE, **(engine or {}))}


def vsphere_machine(name, memory_mib, cpus, server=SERVER, provider_id=None, cores=None,
                    disk_gib=25):
    spec = {"server": server, "datacenter": "DC0", "datastore": "LocalDS_0",
            "folder": "vm", "template": "ubuntu-2204-kube-v1.31.0", "cloneMode": "linkedClone",
            "diskGiB": disk_gib, "network": {"devices": [{"networkName": "VM Network",
                                                    "dhcp4": True}]},
            "memoryMiB": memory_mib, "numCPUs": cpus}
    if cores is not None:
        spec["numCoresPerSocket"] = cores
    if provider_id:
        spec["providerID"] = provider_id
    return {"apiVersion": INFRA_API, "kind": "VSphereMachine",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def machine(name, provider_id):
    spec = {"clusterName": "lab", "version": "v1.31.0", "bootstrap": {"dataSecretName": name},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                  "kind": "VSphereMachine", "name": name}}
    if provider_id:
        spec["providerID"] = provider_id
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def power_events(evs):
    return [e for e in evs if e in POWER_EVENTS]


class Scenario:
    """A fresh launcher + one hvupdater server pointed at it (thumbprint-verified); cleans
    both up. Every hook answer is checked for leaked credentials and timed."""

    def __init__(self, *flags, vms=4, config=None, env=None, server_ref=SERVER,
                 pid_on_infra=False, engine=None):
        self.sim = Launcher(*flags, vms=vms)
        self.server = None
        try:
            self.config = config or server_config(self.sim, engine=engine)
            self.server = hvtest.Server(BINARY, self.config, env=env).start()
        except Exception:
            self.sim.stop()
            raise
        self.client = self.server.client()
        self.server_ref = server_ref
        self.pid_on_infra = pid_on_infra
        self.max_ms = 0.0
        self.lock = threading.Lock()
        self.before = {}

    def uuid(self, i):
        return self.sim.vm(i)["uuid"]

    def infra(self, i, mem, cpus, cores=None, disk=25):
        pid = "vsphere://" + self.uuid(i) if self.pid_on_infra else None
        return vsphere_machine("m%d" % i, mem, cpus, self.server_ref, pid, cores, disk)

    def mach(self, i):
        return machine("m%d" % i, None if self.pid_on_infra else "vsphere://" + self.uuid(i))

    def check(self, resp, ms):
        msg = resp.get("message") or ""
        for secret in (self.sim.password, self.sim.user):
            assert secret not in msg, "credentials in an answer: %r" % msg
        with self.lock:
            self.max_ms = max(self.max_ms, ms)

    def post(self, hook, req, client=None, **kw):
        resp, ms = (client or self.client).post(hook, req, **kw)
        self.check(resp, ms)
        return resp

    def can_update(self, i, cur, des, settings=None, **kw):
        return self.post("CanUpdateMachine", hvtest.can_update_request(
            self.infra(i, *cur), self.infra(i, *des), self.mach(i), settings), **kw)

    def update_req(self, i, des, settings=None):
        return hvtest.update_request(self.infra(i, *des), self.mach(i), settings)

    def update(self, i, des, settings=None, client=None, timeout=120, on_answer=None,
               scale=None):
        client = client or self.client
        req = self.update_req(i, des, settings)
        wrapped = client.post

        def post(hook, body, timeout=10):
            resp, ms = wrapped(hook, body, timeout)
            self.check(resp, ms)
            return resp, ms

        client.post = post  # instance attribute: only this client is wrapped
        try:
            return hvtest.drive(client, req, timeout=timeout, on_answer=on_answer, scale=scale)
        finally:
            del client.post

    def state(self, i):
        return self.sim.vim.vm(self.sim.vm(i)["moref"])

    def mark(self, i):
        """Remember the VM's event history so far; events(i) returns what came after."""
        self.before[i] = len(self.sim.vim.events(self.sim.vm(i)["moref"]))

    def events(self, i):
        evs = self.sim.vim.events(self.sim.vm(i)["moref"])
        return power_events(evs[self.before.get(i, 0):])

    def close(self):
        try:
            if self.server:
                stop_server(self.server)
        finally:
            self.sim.stop()


def assert_done(last, msgs):
    assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, (last, msgs)


def assert_one_cycle(evs, graceful):
    want = (["VmGuestShutdownEvent"] if graceful else ["VmStoppingEvent"]) + [
        "VmPoweredOffEvent", "VmStartingEvent", "VmPoweredOnEvent"]
    assert evs == want, "want one %s power cycle, events: %s" % (
        "graceful" if graceful else "hard", evs)


def patched(resp):
    return {o["path"]: o["value"] for o in hvtest.patch_ops(resp, "infrastructureMachinePatch")}


# ---- scenarios ---------------------------------------------------------------------------


def test_hot_add_memory_and_cpu_live():
    # spec.server is the bare host of the configured URL; providerID on the VSphereMachine.
    s = Scenario("-vm", "0:memory=4096,cpus=2,memhotadd,cpuhotadd,tools", vms=2,
                 server_ref="127.0.0.1", pid_on_infra=True)
    try:
        s.mark(0)
        resp = s.can_update(0, (4096, 2), (8192, 4))
        assert resp["status"] == "Success", resp
        assert patched(resp) == {"/spec/memoryMiB": 8192, "/spec/numCPUs": 4}, resp
        assert resp["message"] == "memoryMiB 4096->8192 live; numCPUs 2->4 live", resp
        never = s.can_update(0, (4096, 2), (8192, 4), {"powerCycle": "Never"})
        assert patched(never) == {"/spec/memoryMiB": 8192, "/spec/numCPUs": 4}, never
        last, msgs, first_ms = s.update(0, (8192, 4), FAST)
        assert_done(last, msgs)
        assert last["message"] == "done: memory 8192 MiB, 4 vCPUs, disk 25 GiB (not verified in the guest)", last
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        rec = st["record"]
        assert rec and rec["phase"] == "done" and not rec["cold"], rec
        assert rec["desired"]["memoryMiB"] == 8192 and rec["plan"]["memory"] == "live:hot-add"
        assert s.events(0) == [], "a live change must not power-cycle: %s" % s.events(0)
        calls, _ = s.sim.stats()
        for m in ("PowerOffVM_Task", "PowerOnVM_Task", "ShutdownGuest"):
            assert calls[m] == 0, (m, dict(calls))
        # Idempotent after completion: done again once the queued passes have looked, and
        # they took no step and wrote no record (no reconfiguration at all).
        reconf = calls["ReconfigVM_Task"]
        for _ in range(2):
            again = hvtest.assert_idempotent_after_done(s.client, s.update_req(0, (8192, 4), FAST))
            assert again == last, again
        assert s.sim.stats()[0]["ReconfigVM_Task"] == reconf
        assert s.state(0)["record"] == rec
        print("     first UpdateMachine call %.1f ms; steps: %s" % (first_ms, msgs))
    finally:
        s.close()


def test_no_hot_add_power_cycle_graceful_with_tools():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools", vms=2)
    try:
        s.mark(0)
        # Under powerCycle=IfNeeded CanUpdateMachine classifies growth statically ("live")
        # without asking vCenter; under Never it asks, and declines what is cold on this VM.
        resp = s.can_update(0, (4096, 2), (8192, 4))
        assert patched(resp) == {"/spec/memoryMiB": 8192, "/spec/numCPUs": 4}, resp
        never = s.can_update(0, (4096, 2), (8192, 4), {"powerCycle": "Never",
                                                       "onUncoverable": "Block"})
        assert never["status"] == "Failure", never
        assert "memory hot-add is disabled on this VM" in never["message"], never
        assert "CPU hot-add is disabled on this VM" in never["message"], never
        last, msgs, _ = s.update(0, (8192, 4), FAST)
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        assert_one_cycle(s.events(0), graceful=True)
        calls, _ = s.sim.stats()
        assert calls["ShutdownGuest"] == 1 and calls["PowerOffVM_Task"] == 0, dict(calls)
        assert calls["PowerOnVM_Task"] == 1, dict(calls)
        print("     steps: %s" % msgs)
    finally:
        s.close()


def test_no_hot_add_power_cycle_without_tools_powers_off():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools=0", vms=2)
    try:
        s.mark(0)
        last, msgs, _ = s.update(0, (8192, 4), FAST)  # powerOffMode TrySoft (default)
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        assert_one_cycle(s.events(0), graceful=False)
        calls, _ = s.sim.stats()
        assert calls["ShutdownGuest"] == 0 and calls["PowerOffVM_Task"] == 1, dict(calls)
        print("     steps: %s" % msgs)
    finally:
        s.close()


def test_soft_power_off_mode_without_tools_fails_and_keeps_vm_running():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools=0", vms=1)
    try:
        s.mark(0)
        last, msgs, _ = s.update(0, (8192, 2), dict(FAST, powerOffMode="Soft"))
        assert last["status"] == "Failure", msgs
        assert last["message"] == ("the guest cannot be asked to shut down (no guest tools "
                                   "running) and powerOffMode is Soft"), last
        st = s.state(0)
        assert st["on"] and st["memory"] == 4096 and s.events(0) == [], (st, s.events(0))
    finally:
        s.close()


def test_shrink_is_cold():
    s = Scenario("-vm", "0:memory=8192,cpus=4,memhotadd,cpuhotadd,cpuhotremove,tools", vms=1)
    try:
        s.mark(0)
        resp = s.can_update(0, (8192, 4), (4096, 4))
        assert resp["message"] == "memoryMiB 8192->4096 with a power cycle", resp
        never = s.can_update(0, (8192, 4), (4096, 4), {"powerCycle": "Never"})
        assert patched(never) == {}, never
        last, msgs, _ = s.update(0, (4096, 4), FAST)
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 4096 and st["cpus"] == 4, st
        assert_one_cycle(s.events(0), graceful=True)
    finally:
        s.close()


def test_3072_rule_goes_cold():
    s = Scenario("-vm", "0-1:memory=2048,cpus=2,memhotadd,cpuhotadd,tools", vms=2)
    try:
        s.mark(0)
        s.mark(1)
        never = s.can_update(0, (2048, 2), (4096, 2), {"powerCycle": "Never"})
        assert never["status"] == "Success" and patched(never) == {}, never
        assert "infrastructureMachine.spec.memoryMiB" in never["message"], never
        block = s.can_update(0, (2048, 2), (4096, 2),
                             {"powerCycle": "Never", "onUncoverable": "Block"})
        assert block["status"] == "Failure", block
        assert ("not possible live on this VM now: growing past 3072 MiB from 3072 MiB or "
                "less needs a power cycle") in block["message"], block
        # UpdateMachine under powerCycle=Never: a Failure saying why, sticky, VM untouched.
        last, msgs, _ = s.update(1, (4096, 2), dict(FAST, powerCycle="Never"))
        assert last["status"] == "Failure", msgs
        assert last["message"] == (
            "memory needs a power cycle (growing past 3072 MiB from 3072 MiB or less needs a "
            "power cycle (Linux guests)) and powerCycle is Never"), last
        again = s.post("UpdateMachine", s.update_req(1, (4096, 2), dict(FAST,
                                                                         powerCycle="Never")))
        assert again == last, again
        assert s.events(1) == [] and s.state(1)["memory"] == 2048
        # IfNeeded (default): cold, through one power cycle.
        last, msgs, _ = s.update(0, (4096, 2), FAST)
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 4096, st
        assert_one_cycle(s.events(0), graceful=True)
    finally:
        s.close()


def test_hot_add_increment_and_limit_go_cold():
    # VM0/2: hot-add increment 3072 MiB (4096 -> 8192 is +4096: not a multiple).
    # VM1/3: hot-add limit 6144 MiB (8192 is above it).
    s = Scenario("-vm", "all:memory=4096,cpus=2,memhotadd,cpuhotadd,tools",
                 "-vm", "0:increment=3072", "-vm", "2:increment=3072",
                 "-vm", "1:limit=6144", "-vm", "3:limit=6144", vms=4)
    reasons = {0: "memory increase is not a multiple of the VM's hot-add increment (3072 MiB)",
               1: "memory would exceed the VM's hot-add limit (6144 MiB)"}
    never = dict(FAST, powerCycle="Never")
    try:
        for i in range(4):
            s.mark(i)
        for i in (2, 3):
            reason = reasons[i - 2]
            resp = s.can_update(i, (4096, 2), (8192, 2), {"powerCycle": "Never"})
            assert resp["status"] == "Success" and patched(resp) == {}, resp
            assert "infrastructureMachine.spec.memoryMiB" in resp["message"], resp
            if reason not in resp["message"]:
                print("     note: declined without the reason under onUncoverable=Fallback: "
                      "%r" % resp["message"])
            block = s.can_update(i, (4096, 2), (8192, 2),
                                 {"powerCycle": "Never", "onUncoverable": "Block"})
            assert block["status"] == "Failure", block
            assert "not possible live on this VM now: " + reason in block["message"], block
            # A change that stays within the rules is still live under Never.
            ok = s.can_update(i, (4096, 2), (4096, 4), {"powerCycle": "Never"})
            assert patched(ok) == {"/spec/numCPUs": 4}, ok
            last, msgs, _ = s.update(i, (8192, 2), never)
            assert last["status"] == "Failure", msgs
            assert last["message"] == "memory needs a power cycle (%s) and powerCycle is Never" \
                % reason, last
            assert s.events(i) == [] and s.state(i)["memory"] == 4096
        for i in (0, 1):
            resp = s.can_update(i, (4096, 2), (8192, 2))
            assert patched(resp) == {"/spec/memoryMiB": 8192}, resp
            last, msgs, _ = s.update(i, (8192, 2), FAST)
            assert_done(last, msgs)
            st = s.state(i)
            assert st["on"] and st["memory"] == 8192, st
            assert_one_cycle(s.events(i), graceful=True)
        # Within the increment (+3072) the same VM grows live.
        s.mark(0)
        last, msgs, _ = s.update(0, (11264, 2), FAST)
        assert_done(last, msgs)
        assert s.state(0)["memory"] == 11264 and s.events(0) == [], s.events(0)
    finally:
        s.close()


def test_wrong_thumbprint_fails_without_login():
    sim = Launcher(vms=1)
    server = None
    try:
        good = sim.info["thumbprint_sha256"]
        bad = good[:-1] + ("0" if good[-1] != "0" else "1")
        server = hvtest.Server(BINARY, server_config(sim, thumbprint=bad)).start()
        c = server.client()
        v = sim.vm(0)
        pid = "vsphere://" + v["uuid"]
        req = hvtest.update_request(vsphere_machine("m0", 8192, 2), machine("m0", pid), FAST)
        answers = []
        for _ in range(3):
            resp, _ = c.post("UpdateMachine", req)
            answers.append(resp)
            time.sleep(0.3)
        last = answers[-1]
        assert last["status"] == "Failure", answers
        assert answers[-2] == last, "message not stable: %s" % answers
        assert "certificate does not match" in last["message"], last
        for secret in (sim.password, sim.user):
            assert secret not in last["message"], last
        calls, requests = sim.stats()  # before any SOAP call of ours
        assert calls["Login"] == 0 and requests == 0, (dict(calls), requests)
        probe, _ = c.post("CanUpdateMachine", hvtest.can_update_request(
            vsphere_machine("m0", 4096, 2), vsphere_machine("m0", 8192, 2),
            machine("m0", pid), {"powerCycle": "Never"}))
        for secret in (sim.password, sim.user):
            assert secret not in probe.get("message", ""), probe
        assert sim.stats()[0]["Login"] == 0
        print("     UpdateMachine: %r" % last["message"])
        print("     CanUpdateMachine(Never): %r" % probe["message"])
        log = open(server.log_path).read()
        assert sim.password not in log, "password in the server log"
    finally:
        if server:
            stop_server(server)
        sim.stop()


def test_wrong_password_failure_has_no_credentials():
    sim = Launcher(vms=1)
    server = None
    try:
        cfg = server_config(sim)
        pw = os.path.join(sim.dir, "wrong-password")
        wrong = "Wr0ng-" + sim.password[::-1]
        with open(pw, "w") as f:
            f.write(wrong + "\n")
        cfg["vsphere"]["servers"][0]["passwordFile"] = pw
        server = hvtest.Server(BINARY, cfg).start()
        c = server.client()
        pid = "vsphere://" + sim.vm(0)["uuid"]
        req = hvtest.update_request(vsphere_machine("m0", 8192, 2), machine("m0", pid), FAST)
        answers = []
        for _ in range(3):
            answers.append(c.post("UpdateMachine", req)[0])
            time.sleep(0.3)
        last = answers[-1]
        assert last["status"] == "Failure" and answers[-2] == last, answers
        for secret in (sim.password, wrong, sim.user):
            assert secret not in last["message"], last
        assert last["message"] == ("cannot observe the VM: the hypervisor refused hvupdater's "
                                   "credentials"), last
        log = open(server.log_path).read()
        assert wrong not in log and sim.password not in log, "password in the server log"
        print("     %r" % last["message"])
    finally:
        if server:
            stop_server(server)
        sim.stop()


def test_vm_not_found():
    s = Scenario(vms=1)
    try:
        pid = "vsphere://4a1e0000-0000-4000-8000-00000000dead"
        req = hvtest.update_request(vsphere_machine("ghost", 8192, 2), machine("ghost", pid))
        last, msgs, _ = hvtest.drive(s.client, req)
        assert last["status"] == "Failure", msgs
        assert last["message"] == ("VM 4a1e0000-0000-4000-8000-00000000dead not found on any "
                                   "configured vsphere host"), last
        other = hvtest.update_request(vsphere_machine("m0", 8192, 2, server="vc.elsewhere"),
                                      machine("m0", "vsphere://" + s.uuid(0)))
        last, _, _ = hvtest.drive(s.client, other)
        assert last["status"] == "Failure" and "vc.elsewhere" in last["message"], last
    finally:
        s.close()


def test_session_expired_mid_operation():
    # Steps run back to back in one engine pass; a delay on each reconfigure stretches the
    # operation so the sessions expire while it is under way.
    s = Scenario("-delay", "ReconfigVM_Task=300ms", "-vm", "0:memory=4096,cpus=2,tools", vms=1)
    try:
        s.mark(0)
        expired = []

        def on_answer(resp):
            if not expired and "in progress" in (resp.get("message") or ""):
                # the pass is under way once vCenter has its first reconfigure (each lasts
                # 300 ms): wait for that, not for a fixed time
                deadline = time.monotonic() + 60
                while s.sim.stats()[0]["ReconfigVM_Task"] < 1:
                    assert time.monotonic() < deadline, "no ReconfigVM_Task within 60 s"
                    time.sleep(0.02)
                expired.append(s.sim.control("expire-sessions"))

        last, msgs, _ = s.update(0, (8192, 4), FAST, on_answer=on_answer)
        assert expired, msgs
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        assert_one_cycle(s.events(0), graceful=True)
        calls, _ = s.sim.stats()
        assert calls["Login"] >= 2, "hvupdater did not log in again: %s" % dict(calls)
        print("     expired %s; hvupdater logins: %d" % (expired[0], calls["Login"]))
    finally:
        s.close()


def test_session_idle_timeout_mid_operation():
    s = Scenario("-session-idle", "1s", "-vm", "0:memory=4096,cpus=2,memhotadd,cpuhotadd",
                 "-fail", "ReconfigVM_Task=1:InsufficientResourcesFault@DC0_C0_RP0_VM0", vms=1)
    try:
        # The first pass's first ReconfigVM fails once, then vCenter forgets the idle session:
        # the retry, mid-operation, logs in again. (Without the failure one pass makes the
        # whole hot-add and nothing is left to do.) A change of two steps stores its record
        # before the first (vSphere keeps it in extraConfig, written by ReconfigVM), so the
        # call that fails is that write: a Failure for that call only, which CAPI follows with
        # another call after its back-off (CONTRACT: "CAPI keeps calling"), as done here.
        req = s.update_req(0, (8192, 4), FAST)
        first = s.post("UpdateMachine", req)
        assert first["status"] == "Success", first
        deadline = time.monotonic() + 10
        while s.sim.stats()[0]["ReconfigVM_Task"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.sim.stats()[0]["ReconfigVM_Task"] >= 1, s.sim.stats()[0]
        time.sleep(2.5)
        last, msgs, _ = s.update(0, (8192, 4), FAST)
        for _ in range(5):  # CAPI's back-off after a Failure: 1 s, then growing
            if last["status"] != "Failure":
                break
            assert last["message"] == ("cannot store the operation record on the VM: "
                                       "the host lacks the resources"), (last, msgs)
            time.sleep(1)
            last, more, _ = s.update(0, (8192, 4), FAST)
            msgs = msgs + more
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        calls, _ = s.sim.stats()
        assert calls["Login"] >= 2, dict(calls)
        print("     hvupdater logins: %d" % calls["Login"])
    finally:
        s.close()


def test_power_on_fails_twice_then_succeeds():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools",
                 "-fail", "PowerOnVM_Task=2:InsufficientResourcesFault@DC0_C0_RP0_VM0", vms=2)
    try:
        s.mark(0)
        last, msgs, _ = s.update(0, (8192, 4), FAST)
        assert_done(last, msgs)
        assert any("retrying power-on" in m for m in msgs), msgs
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        assert_one_cycle(s.events(0), graceful=True)
        calls, _ = s.sim.stats()
        assert calls["PowerOnVM_Task"] == 3, dict(calls)
        print("     steps: %s" % msgs)
    finally:
        s.close()


def test_disk_grows_live_25_to_40():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools", vms=2)
    try:
        s.mark(0)
        resp = s.can_update(0, (4096, 2, None, 25), (4096, 2, None, 40))
        assert resp["status"] == "Success", resp
        assert patched(resp) == {"/spec/diskGiB": 40}, resp
        assert resp["message"] == "diskGiB 25->40 live", resp
        last, msgs, _ = s.update(0, (4096, 2, None, 40), FAST)
        assert_done(last, msgs)
        assert last["message"] == "done: memory 4096 MiB, 2 vCPUs, disk 40 GiB (not verified in the guest)", last
        st = s.state(0)
        assert st["on"] and st["disk_mib"] == 40 * 1024, st
        rec = st["record"]
        assert rec["phase"] == "done" and not rec["cold"], rec
        assert rec["desired"]["diskMiB"] == 40 * 1024 and rec["plan"]["disk"] == "live:hot-extend"
        assert s.events(0) == [], "a disk grows without a power cycle: %s" % s.events(0)
        # the other VM's 25 GiB disk is untouched
        assert s.state(1)["disk_mib"] == 25 * 1024
        print("     steps: %s" % msgs)
    finally:
        s.close()


def test_disk_only_change_under_required_fails_at_once():
    """Issue 17.3: no guest shows a disk's size, so under guestVerification Required a
    disk-only change is not covered, and UpdateMachine (asked anyway) fails it at once with a
    stable reason: no step, no wait, no power cycle (one would not make the guest tell)."""
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools", vms=1)
    try:
        s.mark(0)
        req = {"guestVerification": "Required"}
        resp = s.can_update(0, (4096, 2, None, 25), (4096, 2, None, 40), req)
        assert resp["status"] == "Success", resp
        assert patched(resp) == {}, resp
        assert ("diskGiB (guestVerification is Required and no guest shows this field)"
                in resp["message"]), resp
        t0 = time.monotonic()
        last, msgs, _ = s.update(0, (4096, 2, None, 40), dict(FAST, **req))
        took = time.monotonic() - t0
        assert last["status"] == "Failure", msgs
        assert last["message"] == ("guestVerification is Required but the guest cannot show "
                                   "the disk size"), msgs
        assert took < 5, (took, msgs)
        st = s.state(0)
        assert st["on"] and st["disk_mib"] == 25 * 1024, st
        assert s.events(0) == [], "power events: %s" % s.events(0)
    finally:
        s.close()


def test_disk_shrink_declined_and_blocked():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools", vms=1)
    try:
        resp = s.can_update(0, (4096, 2, None, 40), (8192, 2, None, 25))
        assert resp["status"] == "Success", resp
        assert patched(resp) == {"/spec/memoryMiB": 8192}, resp
        assert resp["message"] == ("memoryMiB 4096->8192 live; not covered, left to CAPI: "
                                   "infrastructureMachine.spec.diskGiB (disks cannot shrink)"), resp
        block = s.can_update(0, (4096, 2, None, 40), (4096, 2, None, 25),
                             {"onUncoverable": "Block"})
        assert block["status"] == "Failure", block
        assert block["message"] == ("cannot update in place (onUncoverable=Block): "
                                    "infrastructureMachine.spec.diskGiB (disks cannot shrink)"), block
        # UpdateMachine asked for less than the VM has (a spec behind a disk grown by hand):
        # the disk is left as it is, the Machine is not failed for it, nothing is sent.
        reconf = s.sim.stats()[0]["ReconfigVM_Task"]
        last, msgs, _ = s.update(0, (4096, 2, None, 20), FAST)
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, (last, msgs)
        assert s.state(0)["disk_mib"] == 25 * 1024
        assert s.sim.stats()[0]["ReconfigVM_Task"] == reconf
    finally:
        s.close()


def test_disk_refused_with_snapshots_and_on_full_datastore():
    s = Scenario("-vm", "all:memory=4096,cpus=2", "-vm", "0:snapshot", "-vm", "1:thick",
                 "-fail", "ReconfigVM_Task=1:NoDiskSpace@DC0_C0_RP0_VM2", vms=3)
    try:
        last, msgs, _ = s.update(0, (4096, 2, None, 40), FAST)
        assert last["status"] == "Failure", (last, msgs)
        assert last["message"] == ("cannot change disk: the VM has snapshots, and vSphere cannot "
                                   "grow a disk that has them; delete or consolidate them"), last
        # thick and larger than the datastore's free space (about 200 PiB)
        huge = 200 * 1024 * 1024
        last, msgs, _ = s.update(1, (4096, 2, None, huge), FAST)
        assert last["status"] == "Failure", (last, msgs)
        assert last["message"] == ("cannot change disk: the datastore lacks the free space to "
                                   "grow the disk"), last
        # vCenter refuses once (NoDiskSpace): retried, then done
        last, msgs, _ = s.update(2, (4096, 2, None, 30), FAST)
        assert_done(last, msgs)
        assert "in progress: retrying live-disk (the host lacks the resources)" in msgs, msgs
        assert s.state(2)["disk_mib"] == 30 * 1024
        assert s.state(0)["disk_mib"] == 25 * 1024 and s.state(1)["disk_mib"] == 25 * 1024
    finally:
        s.close()


def test_ide_disk_grows_with_a_power_cycle():
    s = Scenario("-vm", "0:memory=4096,cpus=2,idedisk,tools", vms=1)
    try:
        s.mark(0)
        never = s.can_update(0, (4096, 2, None, 25), (4096, 2, None, 30), {"powerCycle": "Never"})
        assert patched(never) == {}, never
        assert "disks on an IDE controller grow only while the VM is off" in never["message"], never
        last, msgs, _ = s.update(0, (4096, 2, None, 30), FAST)
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["disk_mib"] == 30 * 1024, st
        assert st["record"]["plan"]["disk"] == "cold", st
        assert_one_cycle(s.events(0), graceful=True)
    finally:
        s.close()


# Where hvupdater can die in a cold change, and whether the VM has VMware Tools there.
KILL_POINTS = [("after:power-off", False), ("before:power-on", False),
               ("before:power-off", False), ("before:reconfigure", False),
               ("after:reconfigure", False), ("after:power-on", False),
               ("before:shutdown", True), ("after:shutdown", True)]


def call_until_killed(server, req, point):
    """Call UpdateMachine on a server started with HV_FAILPOINT=point until it SIGKILLs
    itself there."""
    c = server.client()
    deadline = time.monotonic() + 60
    while server.alive():
        try:
            c.post("UpdateMachine", req)
        except Exception:
            if not server.ends_within(10):
                raise
        assert time.monotonic() < deadline, "failpoint %s never reached" % point
        time.sleep(0.1)
    assert server.proc.returncode == -9, (point, server.proc.returncode)


def kill_and_recover(points, engine=None):
    """For each (failpoint, tools): a VM of its own gets a cold change 4096/2 -> 8192/4 from
    a server that SIGKILLs itself at the failpoint; a restarted server (no failpoint) must
    finish it. Returns one dict per point: answer, VM state, power events, seconds from the
    restart to done."""
    flags = []
    for i, (_, tools) in enumerate(points):
        flags += ["-vm", "%d:memory=4096,cpus=2,tools=%d" % (i, int(tools))]
    sim = Launcher(*flags, vms=len(points))
    out = []
    try:
        cfg = server_config(sim, engine=engine)
        for i, (point, tools) in enumerate(points):
            moref = sim.vm(i)["moref"]
            before = len(sim.vim.events(moref))
            req = hvtest.update_request(vsphere_machine("m%d" % i, 8192, 4),
                                        machine("m%d" % i, "vsphere://" + sim.vm(i)["uuid"]),
                                        FAST)
            server = hvtest.Server(BINARY, cfg, env={"HV_FAILPOINT": point}).start()
            try:
                call_until_killed(server, req, point)
                mid = sim.vim.vm(moref)
                server.start(env={"HV_FAILPOINT": ""})
                t0 = time.monotonic()
                last, msgs, _ = hvtest.drive(server.client(), req, timeout=120)
                r = {"point": point, "tools": tools, "last": last, "msgs": msgs,
                     "took": time.monotonic() - t0, "state": sim.vim.vm(moref),
                     "events": power_events(sim.vim.events(moref)[before:])}
                out.append(r)
                print("     %-18s killed with the VM %s; done %.1fs after the restart; events %s"
                      % (point, "on" if mid["on"] else "off", r["took"], r["events"]))
            finally:
                stop_server(server)
        return out
    finally:
        sim.stop()


def test_sigkill_during_cold_change():
    bad = []
    for r in kill_and_recover(KILL_POINTS):
        st, evs = r["state"], r["events"]
        if not (r["last"]["status"] == "Success" and r["last"]["retryAfterSeconds"] == 0 and
                st["on"] and st["memory"] == 8192 and st["cpus"] == 4 and
                evs.count("VmPoweredOffEvent") == 1 and evs.count("VmPoweredOnEvent") == 1):
            bad.append(r)
    assert not bad, "failed recoveries: %s" % bad


def test_sigkill_before_a_step_recovers_promptly_and_gracefully():
    # The record says the step was taken but the process died before taking it. A restarted
    # server should not wait stepTimeoutSeconds for a power-off that was never sent, nor
    # hard-power-off a guest with VMware Tools running that was never asked to shut down.
    step_timeout = 30
    bad = []
    for r in kill_and_recover([("before:power-off", False), ("before:shutdown", True)],
                              engine={"stepTimeoutSeconds": step_timeout}):
        assert r["last"]["status"] == "Success", r
        if r["took"] > 10:
            bad.append("%s: done only %.1fs after the restart (stepTimeoutSeconds %d); steps %s"
                       % (r["point"], r["took"], step_timeout, r["msgs"]))
        if r["tools"] and "VmGuestShutdownEvent" not in r["events"]:
            bad.append("%s: VMware Tools running and powerOffMode TrySoft, but the guest was "
                       "never asked to shut down: %s; steps %s"
                       % (r["point"], r["events"], r["msgs"]))
    assert not bad, "\n".join(bad)


def test_two_concurrent_calls_and_a_replica_one_power_cycle():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools", vms=2)
    replica = hvtest.Server(BINARY, s.config).start()
    try:
        s.mark(0)
        results, errors = [], []

        def worker(client):
            try:
                results.append(s.update(0, (8192, 4), FAST, client=client))
            except Exception as e:  # reported below, the thread must not die silently
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(c,)) for c in
                   (s.server.client(), s.server.client(), replica.client())]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for last, msgs, _ in results:
            assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        evs = s.events(0)
        calls, _ = s.sim.stats()
        print("     events: %s; calls: ShutdownGuest %d, PowerOffVM_Task %d, PowerOnVM_Task %d"
              % (evs, calls["ShutdownGuest"], calls["PowerOffVM_Task"],
                 calls["PowerOnVM_Task"]))
        assert evs.count("VmPoweredOffEvent") == 1 and evs.count("VmPoweredOnEvent") == 1, evs
    finally:
        stop_server(replica)
        s.close()


def test_slow_vcenter_hooks_stay_fast():
    s = Scenario("-delay", "RetrievePropertiesEx=2s", "-delay", "ReconfigVM_Task=2s",
                 "-vm", "0:memory=4096,cpus=2,memhotadd,cpuhotadd", vms=1,
                 engine={"stepTimeoutSeconds": 60})
    try:
        t0 = time.monotonic()
        resp = s.can_update(0, (4096, 2), (8192, 4))
        assert resp["status"] == "Success" and patched(resp), resp
        last, msgs, first_ms = s.update(0, (8192, 4), dict(FAST, liveTimeoutSeconds="60"),
                                        timeout=180)
        took = time.monotonic() - t0
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        print("     operation %.1fs; max hook answer %.1f ms (first UpdateMachine %.1f ms)"
              % (took, s.max_ms, first_ms))
        assert s.max_ms < 500, "a hook call took %.1f ms" % s.max_ms
    finally:
        s.close()


def test_slow_vcenter_can_update_never_probe():
    # CanUpdateMachine under powerCycle=Never asks vCenter whether the change is live now.
    s = Scenario("-delay", "RetrievePropertiesEx=2s",
                 "-vm", "0:memory=4096,cpus=2,memhotadd,cpuhotadd", vms=1)
    try:
        # The first answer may not wait for vCenter: a retryable Failure (never a decline, which
        # would make CAPI replace the Machine); CAPI retries and gets the probe's result.
        answers = []
        for _ in range(20):
            resp = s.can_update(0, (4096, 2), (8192, 4), {"powerCycle": "Never"},
                                retry_asking=False)
            answers.append(resp)
            if resp["status"] == "Success":
                break
            assert resp["message"] == ("still asking the hypervisor whether the change can be "
                                       "done live on this VM; retry"), resp
            assert "infrastructureMachinePatch" not in resp, resp
            time.sleep(0.5)
        print("     CanUpdateMachine(powerCycle=Never): %d calls, slowest %.1f ms, last: %s"
              % (len(answers), s.max_ms, answers[-1].get("message")))
        assert answers[-1]["status"] == "Success", answers
        assert "memoryMiB 4096->8192 live" in answers[-1]["message"], answers[-1]
        assert s.max_ms < 1000, "CanUpdateMachine blocked %.1f ms on vCenter" % s.max_ms
    finally:
        s.close()


def lab(sim, cmd, i, *extra):
    v = sim.info
    args = [BINARY, cmd, "--vm-uuid", sim.vm(i)["uuid"], "--vsphere-url", v["url"],
            "--vsphere-user", sim.user, "--vsphere-password-file", v["password_file"],
            "--vsphere-thumbprint", v["thumbprint_sha256"]] + list(extra)
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    for secret in (sim.password,):
        assert secret not in r.stdout + r.stderr, "password in CLI output"
    return r


def test_lab_cli_plan_and_apply():
    sim = Launcher("-vm", "0:memory=4096,cpus=2,memhotadd,cpuhotadd",
                   "-vm", "1:memory=4096,cpus=2,tools", vms=2)
    try:
        evs0 = len(sim.vim.events(sim.vm(0)["moref"]))
        evs1 = len(sim.vim.events(sim.vm(1)["moref"]))
        p = lab(sim, "plan", 0, "--memory-mib", "8192", "--cpus", "4")
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert "memory            4096 -> 8192: live (hot-add)" in p.stdout, p.stdout
        assert "vCPUs             2 -> 4: live (hot-add)" in p.stdout, p.stdout
        a = lab(sim, "apply", 0, "--memory-mib", "8192", "--cpus", "4", "--wait",
                "--poll-ms", "100")
        assert a.returncode == 0, (a.stdout, a.stderr)
        assert "done: memory 8192 MiB, 4 vCPUs" in a.stdout, a.stdout
        st = sim.vim.vm(sim.vm(0)["moref"])
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        assert power_events(sim.vim.events(sim.vm(0)["moref"])[evs0:]) == []

        p = lab(sim, "plan", 1, "--memory-mib", "8192", "--cpus", "4")
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert ("memory            4096 -> 8192: with a power cycle (memory hot-add is "
                "disabled on this VM)") in p.stdout, p.stdout
        a = lab(sim, "apply", 1, "--memory-mib", "8192", "--cpus", "4", "--wait",
                "--poll-ms", "100", "--set", "shutdownTimeoutSeconds=3")
        assert a.returncode == 0, (a.stdout, a.stderr)
        assert "powering the VM on" in a.stdout, a.stdout  # shutdown and reconfigure came first
        assert "done: memory 8192 MiB, 4 vCPUs" in a.stdout, a.stdout
        st = sim.vim.vm(sim.vm(1)["moref"])
        assert st["on"] and st["memory"] == 8192 and st["cpus"] == 4, st
        assert_one_cycle(power_events(sim.vim.events(sim.vm(1)["moref"])[evs1:]), True)
        # powerCycle=Never through the CLI: exit 1 with the reason.
        n = lab(sim, "apply", 1, "--memory-mib", "4096", "--set", "powerCycle=Never")
        assert n.returncode == 1, (n.stdout, n.stderr)
        assert "memory cannot shrink while the VM runs" in n.stdout, n.stdout
        # A bad thumbprint: exit 1, a stable reason, no credentials.
        v = sim.info
        bad = subprocess.run([BINARY, "plan", "--vm-uuid", sim.vm(0)["uuid"], "--vsphere-url",
                              v["url"], "--vsphere-user", sim.user, "--vsphere-password-file",
                              v["password_file"], "--vsphere-thumbprint", "AB" * 32,
                              "--memory-mib", "8192"], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode == 1, (bad.stdout, bad.stderr)
        assert sim.password not in bad.stdout + bad.stderr
        print("     bad thumbprint: %s" % (bad.stdout.strip() or bad.stderr.strip()))
    finally:
        sim.stop()


def test_two_replicas_never_answer_a_stale_done():
    # A -> B -> A across two replicas that share only the VM. Replica 1 is called once for
    # 8192 MiB while the VM shows it (its pass concludes done; CAPI takes replica 2's done
    # instead), replica 2 then takes the VM to 12288, and CAPI comes back to 8192 on replica
    # 1, which must not answer the done it concluded before 12288. CAPI's waits are not scaled
    # down here: the engine relies on CAPI waiting what it was told (retryAfterSeconds).
    s = Scenario("-vm", "0:memory=4096,cpus=2,memhotadd,cpuhotadd,tools", vms=1)
    b = hvtest.Server(BINARY, s.config).start()
    try:
        def check_done(resp):
            if resp["status"] == "Success" and resp["retryAfterSeconds"] == 0:
                want = int(resp["message"].split("memory ")[1].split(" MiB")[0])
                seen = s.state(0)["memory"]
                assert seen == want, "false done %r: the VM shows %d MiB" % (resp, seen)

        last, msgs, _ = s.update(0, (8192, 2), FAST, client=b.client(), on_answer=check_done,
                                 scale=1)
        assert_done(last, msgs)
        # replica 1 looks (in progress; its pass sees 8192), CAPI waits what it was told ...
        first = s.post("UpdateMachine", s.update_req(0, (8192, 2), FAST))
        check_done(first)
        assert first["status"] == "Success" and first["retryAfterSeconds"] > 0, first
        time.sleep(hvtest.retry_wait(first, scale=1))  # CAPI's wait, not synchronisation
        # ... and runs B on replica 2
        last, msgs, _ = s.update(0, (12288, 2), FAST, client=b.client(), on_answer=check_done,
                                 scale=1)
        assert_done(last, msgs)
        assert s.state(0)["memory"] == 12288
        # back to 8192 on replica 1: a done from its look before B is the bug this test is
        # named after (check_done compares every done with what the simulator shows then)
        again = s.post("UpdateMachine", s.update_req(0, (8192, 2), FAST))
        check_done(again)
        assert again["status"] == "Success" and again["retryAfterSeconds"] > 0, again
        # replica 1 goes on: a shrink back to 8192 (a power cycle), done only when the VM
        # shows it
        last, msgs, _ = s.update(0, (8192, 2), FAST, on_answer=check_done)
        assert_done(last, msgs)
        st = s.state(0)
        assert st["on"] and st["memory"] == 8192, st
        print("     replica 1 asked for 8192 again after replica 2's 12288: %r, then %s"
              % (again["message"], msgs))
    finally:
        stop_server(b)
        s.close()


def test_abandoned_power_cycle_finishes_and_frees_the_slot():
    # The first start after the reconfiguration fails; CAPI stops calling right then (Machine
    # deleted, cluster paused, network cut). The engine finishes the cycle on its own and
    # gives the vCenter's only power-cycle slot back for the next VM.
    s = Scenario("-vm", "0-1:memory=4096,cpus=2",
                 "-fail", "PowerOnVM_Task=1:InsufficientResourcesFault@DC0_C0_RP0_VM0", vms=2,
                 engine={"maxPowerCyclesPerHost": 1})
    try:
        # One call: its pass powers the VM off (no VMware Tools), reconfigures it, and the
        # start fails. CAPI calls no more.
        first = s.post("UpdateMachine", s.update_req(0, (8192, 4), FAST))
        assert first["status"] == "Success" and first["retryAfterSeconds"] > 0, first
        deadline = time.monotonic() + 30
        while True:
            st = s.state(0)
            rec = st["record"] or {}
            if rec.get("phase") == "power-on" and rec.get("attempts") == 1:
                break
            assert time.monotonic() < deadline, "the start never failed: %s" % st
            time.sleep(0.05)
        assert not st["on"], st
        msgs = [first["message"]]
        # No more calls for VM 0 from here on.
        deadline = time.monotonic() + 60
        while True:
            st = s.state(0)
            if st["on"] and (st["record"] or {}).get("phase") == "done":
                break
            assert time.monotonic() < deadline, "abandoned VM not finished: %s" % st
            time.sleep(0.2)
        assert st["memory"] == 8192 and st["cpus"] == 4, st
        last, omsgs, _ = s.update(1, (8192, 4), FAST, timeout=60)
        assert_done(last, omsgs)
        assert s.state(1)["memory"] == 8192, s.state(1)
        print("     abandoned at %r; second VM: %s" % (msgs[-1], omsgs))
    finally:
        s.close()


def test_restart_mid_shutdown_finishes_on_its_own():
    # Issue 17 item 5 on vSphere. hvupdater dies right after asking VM 0's guest to shut down
    # (its guest takes 8 s to go off). The restarted process gets calls for VM 0 only until a
    # pass has looked, then none (CAPI stopped calling): the guest goes off after that, and
    # the resumed cycle must still reconfigure and start the VM, on its own.
    sim = Launcher("-vm", "0:memory=4096,cpus=2,tools,shutdowndelay=8", vms=1)
    server = None
    try:
        cfg = server_config(sim, engine={"maxPowerCyclesPerHost": 1})
        moref = sim.vm(0)["moref"]
        req = hvtest.update_request(vsphere_machine("m0", 8192, 4),
                                    machine("m0", "vsphere://" + sim.vm(0)["uuid"]),
                                    dict(FAST, shutdownTimeoutSeconds="60"))
        server = hvtest.Server(BINARY, cfg, env={"HV_FAILPOINT": "after:shutdown"}).start()
        call_until_killed(server, req, "after:shutdown")
        mid = sim.vim.vm(moref)
        assert mid["on"] and mid["record"]["phase"] == "shutdown", mid
        server.start(env={"HV_FAILPOINT": ""})
        c = server.client()
        deadline = time.monotonic() + 30
        while True:  # the last calls for VM 0
            resp, _ = c.post("UpdateMachine", req)
            if resp["message"] != "in progress: observing the VM":
                break
            assert time.monotonic() < deadline, resp
            time.sleep(0.2)
        assert resp["status"] == "Success" and resp["retryAfterSeconds"] > 0, resp
        assert sim.vim.vm(moref)["on"], "the guest went off before the restarted process looked"
        deadline = time.monotonic() + 60
        while True:
            st = sim.vim.vm(moref)
            if st["on"] and (st["record"] or {}).get("phase") == "done":
                break
            assert time.monotonic() < deadline, "resumed cycle not finished: %s" % st
            time.sleep(0.2)
        assert st["memory"] == 8192 and st["cpus"] == 4, st
        print("     after the restart: %r, then no call" % resp["message"])
    finally:
        if server:
            stop_server(server)
        sim.stop()


def test_restart_with_the_vm_off_and_no_call_finishes_it():
    # Issue 17 item 5 on vSphere: hvupdater dies right after powering VM 0 off for a cold
    # change (no VMware Tools), and no call for VM 0 ever comes again (CAPI stopped calling).
    # The restarted process finds the cycle its previous life left (the record in the VM's
    # extraConfig) by itself, and the VM comes back on with the new configuration.
    sim = Launcher("-vm", "0:memory=4096,cpus=2", vms=1)
    server = None
    try:
        cfg = server_config(sim, engine={"maxPowerCyclesPerHost": 1})
        moref = sim.vm(0)["moref"]
        req = hvtest.update_request(vsphere_machine("m0", 8192, 4),
                                    machine("m0", "vsphere://" + sim.vm(0)["uuid"]), FAST)
        server = hvtest.Server(BINARY, cfg, env={"HV_FAILPOINT": "after:power-off"}).start()
        call_until_killed(server, req, "after:power-off")
        mid = sim.vim.vm(moref)
        assert not mid["on"] and mid["record"]["phase"] == "power-off", mid
        server.start(env={"HV_FAILPOINT": ""})  # and no call
        t0 = time.monotonic()
        deadline = t0 + 60
        while True:
            st = sim.vim.vm(moref)
            if st["on"]:
                break
            assert time.monotonic() < deadline, "the VM stayed off after the restart: %s" % st
            time.sleep(0.2)
        assert st["memory"] == 8192 and st["cpus"] == 4, st
        assert st["record"]["phase"] in ("power-on", "done"), st
        print("     back on %.1fs after the restart, with no call" % (time.monotonic() - t0))
    finally:
        if server:
            stop_server(server)
        sim.stop()


def test_failed_power_on_is_rolled_back():
    s = Scenario("-vm", "0:memory=4096,cpus=2,tools",
                 "-fail", "PowerOnVM_Task=3:InsufficientResourcesFault@DC0_C0_RP0_VM0", vms=1)
    try:
        s.mark(0)
        last, msgs, _ = s.update(0, (8192, 4), FAST)
        assert last["status"] == "Failure", msgs
        assert last["message"] == (
            "the VM could not start with memory 8192 MiB, 4 vCPUs, disk 25 GiB (step power-on failed 3 "
            "times: the host lacks the resources); its previous configuration (memory 4096 MiB, "
            "2 vCPUs) was restored and it was started"), last
        st = s.state(0)
        assert st["on"] and st["memory"] == 4096 and st["cpus"] == 2, st
        assert st["record"]["phase"] == "failed" and st["record"]["rollback"], st["record"]
        calls, _ = s.sim.stats()
        assert calls["PowerOnVM_Task"] == 4, dict(calls)
        again = s.post("UpdateMachine", s.update_req(0, (8192, 4), FAST))
        assert again == last, again
        assert s.sim.stats()[0]["PowerOnVM_Task"] == 4
        print("     %s" % last["message"])
    finally:
        s.close()


CASES = [test_hot_add_memory_and_cpu_live, test_no_hot_add_power_cycle_graceful_with_tools,
         test_no_hot_add_power_cycle_without_tools_powers_off,
         test_soft_power_off_mode_without_tools_fails_and_keeps_vm_running,
         test_shrink_is_cold, test_3072_rule_goes_cold, test_hot_add_increment_and_limit_go_cold,
         test_disk_grows_live_25_to_40, test_disk_only_change_under_required_fails_at_once,
         test_disk_shrink_declined_and_blocked,
         test_disk_refused_with_snapshots_and_on_full_datastore,
         test_ide_disk_grows_with_a_power_cycle,
         test_wrong_thumbprint_fails_without_login,
         test_wrong_password_failure_has_no_credentials, test_vm_not_found,
         test_session_expired_mid_operation, test_session_idle_timeout_mid_operation,
         test_power_on_fails_twice_then_succeeds, test_sigkill_during_cold_change,
         test_sigkill_before_a_step_recovers_promptly_and_gracefully,
         test_two_concurrent_calls_and_a_replica_one_power_cycle,
         test_slow_vcenter_hooks_stay_fast, test_slow_vcenter_can_update_never_probe,
         test_lab_cli_plan_and_apply, test_two_replicas_never_answer_a_stale_done,
         test_abandoned_power_cycle_finishes_and_frees_the_slot,
         test_restart_mid_shutdown_finishes_on_its_own,
         test_restart_with_the_vm_off_and_no_call_finishes_it,
         test_failed_power_on_is_rolled_back]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--vcsim", default=os.environ.get("HV_VCSIM_BIN"))
    ap.add_argument("-k", action="append", help="run cases whose name contains this")
    a = ap.parse_args()
    BINARY = os.path.abspath(os.path.join(a.build, "hvupdater"))
    VCSIM = os.path.abspath(a.vcsim or os.path.join(a.build, "vcsim", "vcsim"))
    for path in (BINARY, VCSIM):
        if not os.access(path, os.X_OK):
            sys.exit("vsphere_e2e: %s is missing (build hvupdater; test/vcsim/build.sh %s)"
                     % (path, VCSIM))
    sys.exit(hvtest.run(CASES, a.k))
