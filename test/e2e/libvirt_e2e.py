#!/usr/bin/python3
"""libvirt_e2e.py: every libvirt scenario end to end, through the HTTPS hooks of the real
server (CanUpdateMachine, then UpdateMachine until done) against real libvirtd + QEMU (TCG
domains with no guest OS), checking what libvirt shows afterwards through its API.

Needs the lab daemon (test/lab/libvirt-up.sh) and Debian's python3-libvirt; run with the
system python: /usr/bin/python3 test/e2e/libvirt_e2e.py --build build [-k NAME]...
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvtest  # noqa: E402

import libvirt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
URI = os.environ.get("HV_LIBVIRT_LAB_URI", "qemu:///system")
BINARY = None
CONFIG = {"libvirt": {"uris": [URI]},
          "engine": {"workers": 4, "maxConcurrentPowerCycles": 8, "maxPowerCyclesPerHost": 8}}
FAST = {"shutdownTimeoutSeconds": "2", "liveTimeoutSeconds": "3"}

libvirt.registerErrorHandler(lambda ctx, err: None, None)
_conn = None


def conn():
    """The test's own libvirt connection, reopened after libvirtd restarts."""
    global _conn
    if _conn is None or not _conn.isAlive():
        _conn = libvirt.open(URI)
    return _conn


def new_domain(style, name):
    """Define and start a fresh TCG domain from test/lab/domains/STYLE.xml."""
    remove_domain(name)
    xml = open(os.path.join(ROOT, "test/lab/domains", style + ".xml")).read()
    xml = re.sub(r"<name>hvt-[a-z]*</name>", "<name>%s</name>" % name, xml)
    dom = conn().defineXML(xml)
    dom.create()
    return dom


def remove_domain(name):
    try:
        dom = conn().lookupByName(name)
    except libvirt.libvirtError:
        return
    if dom.isActive():
        dom.destroy()
    dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM if hasattr(libvirt, "VIR_DOMAIN_UNDEFINE_NVRAM") else 0)


def state(name):
    """What libvirt shows: running, id, live memory MiB (total incl. DIMMs), live vCPUs,
    persistent memory MiB and vCPUs."""
    dom = conn().lookupByName(name)
    live = ET.fromstring(dom.XMLDesc(0))
    inactive = ET.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))

    def mem(root):
        m = root.find("memory")
        assert m.get("unit", "KiB") == "KiB", m.attrib
        return int(m.text) // 1024

    def vcpus(root):
        v = root.find("vcpu")
        return int(v.get("current", v.text))

    return {"running": bool(dom.isActive()), "id": dom.ID(), "memory": mem(live),
            "vcpus": vcpus(live), "config_memory": mem(inactive),
            "config_vcpus": vcpus(inactive)}


def lab(*args):
    global _conn
    subprocess.run([os.path.join(ROOT, "test/lab/libvirt-up.sh")] + list(args), check=True,
                   stdout=subprocess.DEVNULL)
    _conn = None  # the daemon may have restarted: our own connection is gone


class Scenario:
    """A domain + a server; cleans both up."""

    def __init__(self, style, name, config=None, env=None):
        self.name = name
        self.dom = new_domain(style, name)
        self.server = hvtest.Server(BINARY, config or CONFIG, env=env).start()
        self.client = self.server.client()
        self.mach = hvtest.machine(name)

    def infra(self, mem, vcpu):
        return hvtest.libvirt_machine(self.name, mem, vcpu)

    def can_update(self, cur, des, settings=None):
        resp, _ = self.client.post("CanUpdateMachine", hvtest.can_update_request(
            self.infra(*cur), self.infra(*des), self.mach, settings))
        return resp

    def update(self, des, settings=None, timeout=120, on_answer=None):
        return hvtest.drive(self.client, hvtest.update_request(self.infra(*des), self.mach,
                                                               settings), timeout=timeout,
                            on_answer=on_answer)

    def close(self):
        try:
            self.server.stop()
        finally:
            remove_domain(self.name)


def scenario(*a, **kw):
    return Scenario(*a, **kw)


# ---- scenarios ---------------------------------------------------------------------------


def test_dimm_and_vcpu_hotplug_live():
    s = scenario("dimm", "hvt-e2e-live")
    try:
        before = state(s.name)
        resp = s.can_update((1024, 1), (2048, 3))
        assert resp["status"] == "Success", resp
        ops = hvtest.patch_ops(resp, "infrastructureMachinePatch")
        assert {(o["path"], o["value"]) for o in ops} == {("/spec/memoryMiB", 2048),
                                                          ("/spec/vcpu", 3)}, ops
        assert "live" in resp["message"], resp
        last, msgs, first_ms = s.update((2048, 3))
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, (last, msgs)
        after = state(s.name)
        assert after["id"] == before["id"], "domain restarted: %s -> %s" % (before, after)
        assert after["memory"] == 2048 and after["vcpus"] == 3, after
        assert after["config_memory"] == 2048 and after["config_vcpus"] == 3, after
        print("     first UpdateMachine call: %.1f ms; steps: %s" % (first_ms, msgs))
        # Idempotent after completion: more calls, same end state, no new step.
        again, _ = s.client.post("UpdateMachine", hvtest.update_request(
            s.infra(2048, 3), s.mach))
        assert again["status"] == "Success", again
        assert state(s.name) == after
    finally:
        s.close()


def test_vcpu_growth_only():
    s = scenario("dimm", "hvt-e2e-vcpu")
    try:
        before = state(s.name)
        last, msgs, _ = s.update((1024, 2))
        assert last["retryAfterSeconds"] == 0 and last["status"] == "Success", msgs
        after = state(s.name)
        assert after["vcpus"] == 2 and after["id"] == before["id"], after
    finally:
        s.close()


def test_virtio_mem_without_guest_times_out_into_failure():
    s = scenario("vmem", "hvt-e2e-vmem-fail")
    try:
        before = state(s.name)
        settings = dict(FAST, powerCycle="Never")
        last, msgs, _ = s.update((1536, 1), settings)
        assert last["status"] == "Failure", msgs
        assert "did not show within 3 s" in last["message"], last
        # Sticky: same desired spec, same message, no new step and no restart.
        again, _ = s.client.post("UpdateMachine", hvtest.update_request(
            s.infra(1536, 1), s.mach, settings))
        assert again["status"] == "Failure" and again["message"] == last["message"], again
        assert state(s.name)["id"] == before["id"]
    finally:
        s.close()


def test_virtio_mem_without_guest_falls_back_to_power_cycle():
    s = scenario("vmem", "hvt-e2e-vmem-cold")
    try:
        before = state(s.name)
        last, msgs, _ = s.update((1536, 1), FAST)
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, msgs
        after = state(s.name)
        assert after["running"] and after["id"] != before["id"], (before, after)
        assert after["memory"] == 1536, after
    finally:
        s.close()


def test_shrink_soft_power_off_mode_fails_and_keeps_vm_running():
    s = scenario("dimm", "hvt-e2e-soft")
    try:
        before = state(s.name)
        resp = s.can_update((1024, 1), (512, 1))
        assert resp["status"] == "Success" and "power cycle" in resp["message"], resp
        last, msgs, _ = s.update((512, 1), dict(FAST, powerOffMode="Soft"))
        assert last["status"] == "Failure", msgs
        assert last["message"] == ("the guest did not shut down within 2 s and powerOffMode "
                                   "is Soft"), last
        after = state(s.name)
        assert after["running"] and after["id"] == before["id"], after
    finally:
        s.close()


def test_shrink_cold_path_trysoft():
    s = scenario("dimm", "hvt-e2e-shrink")
    try:
        before = state(s.name)
        last, msgs, _ = s.update((512, 1), FAST)
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, msgs
        assert any("shut" in m for m in msgs), msgs
        after = state(s.name)
        assert after["running"] and after["id"] != before["id"], after
        assert after["memory"] == 512 and after["config_memory"] == 512, after
    finally:
        s.close()


def test_hard_power_off_mode_skips_shutdown():
    s = scenario("plain", "hvt-e2e-hard")
    try:
        before = state(s.name)
        last, msgs, _ = s.update((768, 2), dict(FAST, powerOffMode="Hard"))
        assert last["retryAfterSeconds"] == 0 and last["status"] == "Success", msgs
        assert not any("shutting the guest down" in m for m in msgs), msgs
        after = state(s.name)
        assert after["memory"] == 768 and after["vcpus"] == 2 and after["id"] != before["id"]
    finally:
        s.close()


def test_power_cycle_never_declines_cold_change():
    s = scenario("plain", "hvt-e2e-never")
    try:
        resp = s.can_update((1024, 1), (2048, 1), {"powerCycle": "Never"})
        assert resp["status"] == "Success", resp
        assert hvtest.patch_ops(resp, "infrastructureMachinePatch") == [], resp
        assert "infrastructureMachine.spec.memoryMiB" in resp["message"], resp
        resp = s.can_update((1024, 1), (2048, 1),
                            {"powerCycle": "Never", "onUncoverable": "Block"})
        assert resp["status"] == "Failure", resp
        assert "not possible live on this VM now" in resp["message"], resp
    finally:
        s.close()


def test_missing_domain():
    server = hvtest.Server(BINARY, CONFIG).start()
    try:
        c = server.client()
        mach = hvtest.machine("hvt-e2e-nope")
        last, _, _ = hvtest.drive(c, hvtest.update_request(
            hvtest.libvirt_machine("hvt-e2e-nope", 2048, 2), mach))
        assert last["status"] == "Failure", last
        assert last["message"] == "VM hvt-e2e-nope not found on any configured libvirt host", last
        resp, _ = c.post("CanUpdateMachine", hvtest.can_update_request(
            hvtest.libvirt_machine("hvt-e2e-nope", 1024, 1),
            hvtest.libvirt_machine("hvt-e2e-nope", 2048, 1), mach,
            {"powerCycle": "Never"}))
        assert resp["status"] == "Success" and "not found" in resp["message"], resp
    finally:
        server.stop()


def test_libvirtd_restart_mid_operation():
    s = scenario("dimm", "hvt-e2e-restart")
    try:
        before = state(s.name)
        restarted = []

        def on_answer(resp):
            if not restarted and "shut" in (resp.get("message") or ""):
                lab("--restart")
                restarted.append(True)

        last, msgs, _ = s.update((512, 1), dict(FAST, shutdownTimeoutSeconds="4"),
                                 on_answer=on_answer)
        assert restarted, msgs
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, msgs
        after = state(s.name)
        assert after["memory"] == 512 and after["running"] and after["id"] != before["id"]
    finally:
        s.close()


COLD_POINTS = ["before:shutdown", "after:shutdown", "before:power-off", "after:power-off",
               "before:reconfigure", "after:reconfigure", "before:power-on", "after:power-on"]


def test_sigkill_at_each_cold_step():
    for point in COLD_POINTS:
        name = "hvt-e2e-kill"
        dom_before = new_domain("dimm", name)
        del dom_before
        server = hvtest.Server(BINARY, CONFIG, env={"HV_FAILPOINT": point}).start()
        try:
            c = server.client()
            req = hvtest.update_request(hvtest.libvirt_machine(name, 512, 2),
                                        hvtest.machine(name), FAST)
            deadline = time.monotonic() + 60
            while server.alive():
                try:
                    c.post("UpdateMachine", req)
                except Exception:
                    if server.alive():
                        raise
                assert time.monotonic() < deadline, "failpoint %s never reached" % point
                time.sleep(0.2)
            assert server.proc.returncode == -9, (point, server.proc.returncode)
            server.start(env={"HV_FAILPOINT": ""})
            last, msgs, _ = hvtest.drive(server.client(), req)
            assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, (point, msgs)
            after = state(name)
            assert after["running"], (point, after)
            assert after["memory"] == 512 and after["vcpus"] == 2, (point, after)
            assert after["config_memory"] == 512, (point, after)
            print("     %s: recovered (%s)" % (point, msgs[-1]))
        finally:
            server.stop()
            remove_domain(name)


def test_two_concurrent_calls_and_two_replicas_one_power_cycle():
    s = scenario("dimm", "hvt-e2e-conc")
    replica = hvtest.Server(BINARY, CONFIG).start()
    try:
        before = state(s.name)
        req = hvtest.update_request(s.infra(512, 1), s.mach, FAST)
        results = []

        def worker(client):
            results.append(hvtest.drive(client, req))

        threads = [threading.Thread(target=worker, args=(c,)) for c in
                   (s.server.client(), s.server.client(), replica.client())]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for last, msgs, _ in results:
            assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, msgs
        after = state(s.name)
        # libvirt numbers each start; exactly one start since `before` means one power cycle.
        assert after["id"] == before["id"] + 1, (before, after)
        assert after["memory"] == 512
    finally:
        replica.stop()
        s.close()


def test_lab_cli_apply_live():
    name = "hvt-e2e-cli"
    new_domain("dimm", name)
    try:
        before = state(name)
        plan = subprocess.run([BINARY, "plan", "--libvirt-uri", URI, "--domain", name,
                               "--memory-mib", "2048", "--cpus", "3"],
                              capture_output=True, text=True)
        assert plan.returncode == 0, plan
        assert "live (dimm)" in plan.stdout and "live (vcpu hot-plug)" in plan.stdout, plan.stdout
        r = subprocess.run([BINARY, "apply", "--libvirt-uri", URI, "--domain", name,
                            "--memory-mib", "2048", "--cpus", "3", "--wait"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "done: memory 2048 MiB, 3 vCPUs" in r.stdout, r.stdout
        after = state(name)
        assert after["id"] == before["id"] and after["memory"] == 2048 and after["vcpus"] == 3
    finally:
        remove_domain(name)


TRANSIENT_WHY = "transient domain: a power cycle would delete it"


def new_transient(style, name):
    """Start a transient TCG domain (virDomainCreateXML): it exists only while it runs."""
    remove_domain(name)
    xml = open(os.path.join(ROOT, "test/lab/domains", style + ".xml")).read()
    xml = re.sub(r"<name>hvt-[a-z]*</name>", "<name>%s</name>" % name, xml)
    dom = conn().createXML(xml, 0)
    assert not dom.isPersistent()
    return dom


def remove_transient(name):
    try:
        dom = conn().lookupByName(name)
    except libvirt.libvirtError:
        return
    persistent = dom.isPersistent()
    if dom.isActive():
        dom.destroy()
    if persistent:
        dom.undefine()


def test_transient_domain_is_never_power_cycled():
    name = "hvt-e2e-transient"
    new_transient("dimm", name)
    server = hvtest.Server(BINARY, CONFIG).start()
    try:
        c = server.client()
        mach = hvtest.machine(name)
        before = state(name)
        # UpdateMachine: a sticky Failure, the domain untouched and still running.
        req = hvtest.update_request(hvtest.libvirt_machine(name, 512, 1), mach, FAST)
        last, msgs, _ = hvtest.drive(c, req)
        assert last["status"] == "Failure", msgs
        assert last["message"] == "cannot change memory: " + TRANSIENT_WHY, last
        after = state(name)
        assert after["running"] and after["id"] == before["id"], (before, after)
        assert after["memory"] == 1024, after
        # Under Never, CanUpdateMachine sees the domain and does not cover a shrink.
        resp, _ = c.post("CanUpdateMachine", hvtest.can_update_request(
            hvtest.libvirt_machine(name, 1024, 1), hvtest.libvirt_machine(name, 512, 1), mach,
            {"powerCycle": "Never", "onUncoverable": "Block"}))
        for _ in range(50):
            if "still asking" not in resp.get("message", ""):
                break
            time.sleep(0.1)
            resp, _ = c.post("CanUpdateMachine", hvtest.can_update_request(
                hvtest.libvirt_machine(name, 1024, 1), hvtest.libvirt_machine(name, 512, 1),
                mach, {"powerCycle": "Never", "onUncoverable": "Block"}))
        assert resp["status"] == "Failure" and TRANSIENT_WHY in resp["message"], resp
        # Live growth still works: DIMM hot-add and vCPU hot-plug, no restart.
        last, msgs, _ = hvtest.drive(c, hvtest.update_request(
            hvtest.libvirt_machine(name, 2048, 3), mach, FAST))
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, msgs
        after = state(name)
        assert after["running"] and after["id"] == before["id"], (before, after)
        assert after["memory"] == 2048 and after["vcpus"] == 3, after
    finally:
        server.stop()
        remove_transient(name)


def test_transient_domain_live_change_that_does_not_show_is_not_power_cycled():
    # virtio-mem without a guest driver: accepted, never shows. A persistent domain falls
    # back to a power cycle under IfNeeded; a transient one would be deleted by it.
    name = "hvt-e2e-transient-vmem"
    new_transient("vmem", name)
    server = hvtest.Server(BINARY, CONFIG).start()
    try:
        before = state(name)
        last, msgs, _ = hvtest.drive(server.client(), hvtest.update_request(
            hvtest.libvirt_machine(name, 1536, 1), hvtest.machine(name), FAST))
        assert last["status"] == "Failure", msgs
        assert last["message"] == "cannot power-cycle the VM: " + TRANSIENT_WHY, last
        after = state(name)
        assert after["running"] and after["id"] == before["id"], (before, after)
    finally:
        server.stop()
        remove_transient(name)


class DeafHost:
    """A TCP port that accepts connections and never answers (a libvirt host hung
    mid-handshake)."""

    def __init__(self):
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        import socket
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            c.close()


def drive_capi(client, req, timeout=90):
    """UpdateMachine as CAPI calls it: again after retryAfterSeconds (scaled by 0.5), until
    done or Failure. Returns (last answer, number of calls)."""
    deadline = time.monotonic() + timeout
    calls = 0
    while True:
        resp, _ = client.post("UpdateMachine", req)
        calls += 1
        if resp["status"] == "Failure" or resp["retryAfterSeconds"] == 0:
            return resp, calls
        assert time.monotonic() < deadline, "still in progress after %ds: %s" % (timeout, resp)
        time.sleep(resp["retryAfterSeconds"] * 0.5)


def test_dead_host_does_not_stall_the_lab_host():
    deaf = DeafHost()
    names = ["hvt-e2e-deaf-a", "hvt-e2e-deaf-b"]
    for n in names:
        new_domain("dimm", n)
    config = dict(CONFIG, libvirt={"uris": ["qemu+tcp://127.0.0.1:%d/system" % deaf.port, URI]})
    server = hvtest.Server(BINARY, config).start()
    try:
        results = {}

        def update(n, mem, vcpu):
            results[n] = drive_capi(server.client(), hvtest.update_request(
                hvtest.libvirt_machine(n, mem, vcpu), hvtest.machine(n)))

        # Two domains at once, found by name: the dead host is listed first, so the first
        # passes wait for its connection attempt once (libvirt.connectTimeoutSeconds, 10 s).
        threads = [threading.Thread(target=update, args=(n, 2048, 2)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for n in names:
            last, calls = results[n]
            assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, (n, last)
            assert state(n)["memory"] == 2048 and state(n)["vcpus"] == 2, state(n)
        # Their host is known now: a further change takes the usual number of calls (first
        # answer, hot-plugged, done) and never goes near the dead host.
        update(names[0], 2048, 3)
        last, calls = results[names[0]]
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, last
        assert calls <= 4, "took %d calls" % calls
        assert state(names[0])["vcpus"] == 3
        assert len(deaf.conns) == 1, "dead host asked %d times" % len(deaf.conns)
        print("     first updates: %s calls; then %d calls" % (
            [results[n][1] for n in names[1:]], calls))
    finally:
        server.stop()
        deaf.close()
        for n in names:
            remove_domain(n)


CASES = [test_dimm_and_vcpu_hotplug_live, test_vcpu_growth_only,
         test_virtio_mem_without_guest_times_out_into_failure,
         test_virtio_mem_without_guest_falls_back_to_power_cycle,
         test_shrink_soft_power_off_mode_fails_and_keeps_vm_running,
         test_shrink_cold_path_trysoft, test_hard_power_off_mode_skips_shutdown,
         test_power_cycle_never_declines_cold_change, test_missing_domain,
         test_libvirtd_restart_mid_operation, test_sigkill_at_each_cold_step,
         test_two_concurrent_calls_and_two_replicas_one_power_cycle, test_lab_cli_apply_live,
         test_transient_domain_is_never_power_cycled,
         test_transient_domain_live_change_that_does_not_show_is_not_power_cycled,
         test_dead_host_does_not_stall_the_lab_host]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("-k", action="append", help="run cases whose name contains this")
    a = ap.parse_args()
    BINARY = os.path.abspath(os.path.join(a.build, "hvupdater"))
    sys.exit(hvtest.run(CASES, a.k))
