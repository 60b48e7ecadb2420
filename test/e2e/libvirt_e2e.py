#!/usr/bin/python3
"""libvirt_e2e.py: every libvirt scenario end to end, through the HTTPS hooks of the real
server (CanUpdateMachine, then UpdateMachine until done) against real libvirtd + QEMU (TCG
domains with no guest OS), checking what libvirt shows afterwards through its API.

Needs the lab daemon (test/lab/libvirt-up.sh) and Debian's python3-libvirt; run with the
system python: /usr/bin/python3 test/e2e/libvirt_e2e.py --build build [-k NAME]...
"""
import argparse
import json
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


def record(name):
    """hvupdater's operation record on the domain (dict), or None."""
    dom = conn().lookupByName(name)
    try:
        text = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                            "https://hvupdater.dev/xmlns/operation/1", 0)
    except libvirt.libvirtError:
        return None
    inner = ET.fromstring(text).text
    return json.loads(inner) if inner else None


def wait_for(what, cond, timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.2)


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
        # Idempotent after completion: more calls, done again, no step, no record write.
        meta = record(s.name)
        hvtest.assert_idempotent_after_done(s.client, hvtest.update_request(
            s.infra(2048, 3), s.mach))
        assert state(s.name) == after
        assert record(s.name) == meta
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
                    resp, _ = c.post("UpdateMachine", req)
                except Exception:
                    if server.alive():
                        raise
                    continue
                assert time.monotonic() < deadline, "failpoint %s never reached" % point
                time.sleep(hvtest.retry_wait(resp))
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


def test_two_replicas_never_answer_a_stale_done():
    # Replica A takes the VM to 2048 MiB, replica B to 3072; A asked for 2048 again must not
    # answer "done" from what it concluded before: every done it gives must be true.
    s = scenario("dimm", "hvt-e2e-stale")
    b = hvtest.Server(BINARY, CONFIG).start()
    try:
        def check_done(resp):
            if resp["status"] == "Success" and resp["retryAfterSeconds"] == 0:
                want = int(re.search(r"memory (\d+) MiB", resp["message"]).group(1))
                seen = state(s.name)["memory"]
                assert seen == want, "false done %r: the VM shows %d MiB" % (resp, seen)

        a_req = hvtest.update_request(s.infra(2048, 1), s.mach, FAST)
        last, msgs, _ = hvtest.drive(s.client, a_req, on_answer=check_done)
        assert last["retryAfterSeconds"] == 0 and last["status"] == "Success", msgs
        last, msgs, _ = hvtest.drive(b.client(), hvtest.update_request(s.infra(3072, 1), s.mach,
                                                                       FAST),
                                     on_answer=check_done)
        assert last["retryAfterSeconds"] == 0 and state(s.name)["memory"] == 3072, msgs
        first, _ = s.client.post("UpdateMachine", a_req)
        check_done(first)
        assert first["status"] == "Success" and first["retryAfterSeconds"] > 0, first
        # A goes on: a shrink back to 2048 (a power cycle), done only when the VM shows it.
        last, msgs, _ = hvtest.drive(s.client, a_req, on_answer=check_done)
        assert last["retryAfterSeconds"] == 0 and last["status"] == "Success", msgs
        after = state(s.name)
        assert after["running"] and after["memory"] == 2048, after
        print("     A asked for 2048 again after B's 3072: %s" % msgs)
    finally:
        stop(b)
        s.close()


def stop(server):
    if server.alive():
        server.stop()


def test_abandoned_power_cycle_finishes_and_frees_the_slot():
    # CAPI stops calling once the cycle has begun (Machine deleted, cluster paused, network
    # cut): the engine finishes the cycle on its own and gives the host's only slot back.
    cfg = dict(CONFIG, engine={"workers": 2, "maxConcurrentPowerCycles": 4,
                               "maxPowerCyclesPerHost": 1})
    s = scenario("plain", "hvt-e2e-gone", config=cfg)
    other = "hvt-e2e-next"
    new_domain("plain", other)
    try:
        before = state(s.name)
        req = hvtest.update_request(s.infra(768, 2), s.mach, FAST)
        # Call until the guest has been asked to shut down (the guest has no OS and ignores
        # ACPI, so the engine must also power it off after shutdownTimeoutSeconds), then stop.
        msgs = []
        deadline = time.monotonic() + 30
        while True:
            resp, _ = s.client.post("UpdateMachine", req)
            msgs.append(resp["message"])
            assert resp["status"] == "Success" and resp["retryAfterSeconds"] > 0, msgs
            if "shut" in resp["message"]:  # "shutting the guest down", "waiting for ..."
                break
            assert time.monotonic() < deadline, msgs
            time.sleep(hvtest.retry_wait(resp))
        # No more calls for this VM from here on.
        after = wait_for("the abandoned VM to come back on with the desired size",
                         lambda: (lambda st: st if st["running"] and st["memory"] == 768
                                  and st["id"] != before["id"] else None)(state(s.name)))
        assert after["vcpus"] == 2 and after["config_memory"] == 768, after
        wait_for("the record to say done", lambda: (record(s.name) or {}).get("phase") == "done")
        # The host's only power-cycle slot is free again: another VM gets its cycle.
        mach = hvtest.machine(other)
        o_before = state(other)
        last, omsgs, _ = hvtest.drive(s.client, hvtest.update_request(
            hvtest.libvirt_machine(other, 768, 1), mach, FAST), timeout=90)
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, omsgs
        o_after = state(other)
        assert o_after["memory"] == 768 and o_after["id"] != o_before["id"], o_after
        print("     abandoned after %s; second VM: %s" % (msgs[-1], omsgs))
    finally:
        remove_domain(other)
        s.close()


def host_refusable_mib():
    """A memory size QEMU cannot allocate on this host (3x its RAM: the kernel's overcommit
    heuristic refuses it), so the start with it really fails."""
    with open("/proc/meminfo") as f:
        kib = int(next(l for l in f if l.startswith("MemTotal:")).split()[1])
    return (kib * 3 // 1024 + 1023) // 1024 * 1024


def test_failed_power_on_is_rolled_back():
    s = scenario("plain", "hvt-e2e-rollback")
    try:
        before = state(s.name)
        huge = host_refusable_mib()
        last, msgs, _ = s.update((huge, 1), dict(FAST, powerOffMode="Hard"), timeout=180)
        assert last["status"] == "Failure", msgs
        # the reason is libvirt's error class for QEMU's "cannot set up guest memory"
        assert last["message"].startswith(
            "the VM could not start with memory %d MiB, 1 vCPU (step power-on failed 3 times: "
            % huge), last
        assert last["message"].endswith(
            "); its previous configuration (memory 1024 MiB, 2 vCPUs) was restored and it was "
            "started"), last
        after = state(s.name)
        assert after["running"] and after["id"] != before["id"], after
        assert after["memory"] == 1024 and after["vcpus"] == 2, after
        assert after["config_memory"] == 1024 and after["config_vcpus"] == 2, after
        # Sticky: the same answer again, and no further step.
        again, _ = s.client.post("UpdateMachine", hvtest.update_request(
            s.infra(huge, 1), s.mach, dict(FAST, powerOffMode="Hard")))
        assert again == last, again
        assert state(s.name)["id"] == after["id"]
        print("     %s" % last["message"])
    finally:
        s.close()


CASES = [test_dimm_and_vcpu_hotplug_live, test_vcpu_growth_only,
         test_virtio_mem_without_guest_times_out_into_failure,
         test_virtio_mem_without_guest_falls_back_to_power_cycle,
         test_shrink_soft_power_off_mode_fails_and_keeps_vm_running,
         test_shrink_cold_path_trysoft, test_hard_power_off_mode_skips_shutdown,
         test_power_cycle_never_declines_cold_change, test_missing_domain,
         test_libvirtd_restart_mid_operation, test_sigkill_at_each_cold_step,
         test_two_concurrent_calls_and_two_replicas_one_power_cycle, test_lab_cli_apply_live,
         test_two_replicas_never_answer_a_stale_done,
         test_abandoned_power_cycle_finishes_and_frees_the_slot,
         test_failed_power_on_is_rolled_back]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("-k", action="append", help="run cases whose name contains this")
    a = ap.parse_args()
    BINARY = os.path.abspath(os.path.join(a.build, "hvupdater"))
    sys.exit(hvtest.run(CASES, a.k))
