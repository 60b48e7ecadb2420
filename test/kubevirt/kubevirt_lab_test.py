#!/usr/bin/python3
"""kubevirt_lab_test.py: the KubeVirt lab itself behaves as KubeVirt's LiveUpdate rules say.

Needs the lab (eval "$(test/kubevirt/up.sh)"). Everything is read back from the API server
(VM, VMI), libvirt (virsh) and the guest's serial console. One VM, kubevirt-lab/labtest
(1Gi of maxGuest 3Gi, 1 socket of maxSockets 4), through these scenarios in order:
  boot            VMI Running and Ready, domain running, the guest reports 1 CPU; VMI
                  status.memory guestAtBoot = guestCurrent = guestRequested = 1Gi
  live            memory.guest 1Gi->2Gi and sockets 1->2 on the VM: while the (skipped)
                  migration is held (fault switch hold-migration) the VMI's spec and
                  guestRequested follow, HotMemoryChange and HotVCPUChange are True and the
                  domain is unchanged; released, the conditions go, the domain's virtio-mem
                  device plugs 1 GiB, guestCurrent is 2Gi, currentCPUTopology.sockets 2, the
                  guest shows about 1 GiB more and 2 CPUs; same VMI, same domain
  stuck           the kubevirt #12101 trap (fault switch stuck-guestcurrent): 2Gi->3Gi ends
                  its migration (completed, HotMemoryChange gone, guestRequested 3Gi) with
                  guestCurrent still 2Gi and the domain not resized; the switch off, it moves
  restart-needed  guest 4Gi with maxGuest 4Gi (above the max, and maxGuest is not live): the
                  VM's RestartRequired (KubeVirt's message), the VMI's spec unchanged; then
                  sockets 3 (live-updatable) is seen (desiredGeneration) and not applied
                  while RestartRequired is set (observedGeneration stays older)
  restart         PUT .../virtualmachines/labtest/restart through the API server (202): a new
                  VMI (new UID) booted with 4Gi and 3 sockets, RestartRequired gone, the guest
                  shows 3 CPUs
  down            fault switch down: the restart subresource answers 503 (through the
                  aggregator); off again, a POST restart is accepted
  stop            runStrategy Halted: VMI and domain gone, VM Stopped; the VM deleted
With HV_KUBEVIRT_CAPK=1 (eval "$(test/kubevirt/up.sh --capk)"), after those:
  capk            CAPK v0.1.10's controller beside CAPI v1.14.2: a Cluster on a KubevirtCluster
                  with a control-plane Machine and a MachineDeployment of 1 Machine
                  (KubevirtMachineTemplate: 1Gi of 3Gi, 1 socket of 4): CAPK creates one VM
                  per KubevirtMachine (its template's domain), the stand-in runs it and
                  registers its Node, CAPK sets providerID kubevirt://NAME on the
                  KubevirtMachine and the Node, CAPI's Machines reach Running with that
                  providerID and nodeRef; the guests report
Prints one line per scenario and closes with `N passed, N failed`.
Usage: kubevirt_lab_test.py [-k NAME]...
"""
import argparse
import json
import os
import sys
import time
import traceback

if sys.flags.optimize:
    raise SystemExit("kubevirt_lab_test: run without -O: its checks are assert statements")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvlab as kv  # noqa: E402

NAME = "labtest"
DOM = kv.domain(NAME)
GI = 1024 * 1024  # kB


def log(msg):
    print("  %s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def vmi():
    return kv.get("virtualmachineinstance", NAME)


def vmobj():
    return kv.get("virtualmachine", NAME)


def mem(o):
    return (o.get("status") or {}).get("memory") or {}


def status_true(o, typ):
    return kv.cond(o, typ).get("status") == "True"


STATE = {}


def scenario_boot():
    kv.kubectl("apply", "-f", "-", stdin=json.dumps(kv.vm(NAME)))
    v = kv.wait("VMI Running and Ready", lambda: (lambda o: o if o and (o.get("status") or {}).get("phase") == "Running"
                                                  and status_true(o, "Ready") else None)(vmi()))
    assert kv.virsh("domstate", DOM) == "running"
    view = kv.wait("the guest's first report", lambda: kv.console_view(DOM))
    assert view[1] == 1, view
    assert mem(v) == {"guestAtBoot": "1Gi", "guestCurrent": "1Gi", "guestRequested": "1Gi"}, mem(v)
    assert v["status"]["currentCPUTopology"]["sockets"] == 1
    assert v["spec"]["domain"]["memory"] == {"guest": "1Gi", "maxGuest": "3Gi"}
    kv.wait("VM Running", lambda: (vmobj().get("status") or {}).get("printableStatus") == "Running")
    STATE.update(uid=v["metadata"]["uid"], domuuid=kv.virsh("domuuid", DOM), boot_kb=view[0])
    log("booted: guest MemTotal=%d kB cpus=%d" % view)


def scenario_live():
    kv.fault("hold-migration")
    try:
        kv.patch_vm(NAME, {"memory": {"guest": "2Gi"}, "cpu": {"sockets": 2}})
        v = kv.wait("HotMemoryChange and HotVCPUChange", lambda: (lambda o: o if status_true(o, "HotMemoryChange")
                                                                  and status_true(o, "HotVCPUChange") else None)(vmi()))
        assert v["spec"]["domain"]["memory"]["guest"] == "2Gi"
        assert v["spec"]["domain"]["cpu"]["sockets"] == 2
        assert mem(v)["guestRequested"] == "2Gi" and mem(v)["guestCurrent"] == "1Gi", mem(v)
        assert v["status"]["migrationState"]["completed"] is False
        assert kv.vmem(DOM) == (0, 0, 1), kv.vmem(DOM)  # held: the domain is unchanged
    finally:
        kv.fault("hold-migration", on=False)
    v = kv.wait("the change done on the VMI", lambda: (lambda o: o if not kv.cond(o, "HotMemoryChange")
                                                       and not kv.cond(o, "HotVCPUChange")
                                                       and mem(o).get("guestCurrent") == "2Gi"
                                                       and o["status"]["currentCPUTopology"]["sockets"] == 2
                                                       else None)(vmi()))
    assert v["status"]["migrationState"]["completed"] is True
    assert kv.vmem(DOM) == (1024, 1024, 2), kv.vmem(DOM)
    view = kv.wait("the guest showing 2 CPUs and more memory",
                   lambda: (lambda w: w if w and w[1] == 2 and w[0] - STATE["boot_kb"] >= 0.9 * GI else None)(kv.console_view(DOM)))
    assert v["metadata"]["uid"] == STATE["uid"] and kv.virsh("domuuid", DOM) == STATE["domuuid"]
    assert not kv.cond(vmobj(), "RestartRequired")
    log("live: guest MemTotal=%d kB cpus=%d" % view)


def scenario_stuck():
    kv.fault("stuck-guestcurrent", text="%s/%s\n" % (kv.NS, NAME))
    try:
        kv.patch_vm(NAME, {"memory": {"guest": "3Gi"}})
        v = kv.wait("the migration completed", lambda: (lambda o: o if mem(o).get("guestRequested") == "3Gi"
                                                        and not kv.cond(o, "HotMemoryChange")
                                                        and o["status"]["migrationState"]["completed"]
                                                        else None)(vmi()))
        # completed, no condition, and yet: nothing moved
        assert mem(v)["guestCurrent"] == "2Gi", mem(v)
        assert kv.vmem(DOM)[:2] == (1024, 1024), kv.vmem(DOM)
    finally:
        kv.fault("stuck-guestcurrent", on=False)
    kv.wait("guestCurrent 3Gi once unstuck", lambda: mem(vmi()).get("guestCurrent") == "3Gi")
    assert kv.vmem(DOM)[:2] == (2048, 2048)


def scenario_restart_needed():
    kv.patch_vm(NAME, {"memory": {"guest": "4Gi", "maxGuest": "4Gi"}})
    o = kv.wait("RestartRequired", lambda: (lambda o: o if status_true(o, "RestartRequired") else None)(vmobj()))
    assert kv.cond(o, "RestartRequired")["message"] == \
        "a non-live-updatable field was changed in the template spec"
    kv.patch_vm(NAME, {"cpu": {"sockets": 3}})
    # seen (desiredGeneration, as KubeVirt's controller writes it) and not applied: the VMI
    # still runs an older generation (observedGeneration)
    gen = vmobj()["metadata"]["generation"]
    o = kv.wait("desiredGeneration %d" % gen, lambda: (lambda o: o if o["status"].get("desiredGeneration") == gen
                                                       else None)(vmobj()))
    assert o["status"]["observedGeneration"] < gen, o["status"]
    v = vmi()
    assert v["spec"]["domain"]["memory"] == {"guest": "3Gi", "maxGuest": "3Gi"}, v["spec"]["domain"]["memory"]
    assert v["spec"]["domain"]["cpu"]["sockets"] == 2
    assert not kv.cond(v, "HotVCPUChange")


def scenario_restart():
    old = vmi()["metadata"]["uid"]
    rc, err = kv.restart(NAME, method="PUT")
    assert rc == 0, err
    v = kv.wait("a new VMI Running", lambda: (lambda o: o if o and o["metadata"]["uid"] != old
                                              and (o.get("status") or {}).get("phase") == "Running" else None)(vmi()))
    assert v["spec"]["domain"]["memory"] == {"guest": "4Gi", "maxGuest": "4Gi"}
    assert v["spec"]["domain"]["cpu"]["sockets"] == 3
    kv.wait("RestartRequired gone", lambda: not kv.cond(vmobj(), "RestartRequired"))
    v = kv.wait("guestAtBoot 4Gi", lambda: (lambda o: o if mem(o).get("guestAtBoot") == "4Gi" else None)(vmi()))
    assert mem(v)["guestCurrent"] == "4Gi", mem(v)
    view = kv.wait("the rebooted guest showing 3 CPUs",
                   lambda: (lambda w: w if w and w[1] == 3 else None)(kv.console_view(DOM)))
    assert view[0] - STATE["boot_kb"] >= 2.9 * GI, view
    assert kv.virsh("domuuid", DOM) != STATE["domuuid"]  # the lab re-creates the domain
    log("restarted: guest MemTotal=%d kB cpus=%d" % view)


def scenario_down():
    kv.fault("down")
    try:
        rc, err = kv.restart(NAME, method="POST")
        assert rc != 0 and ("ServiceUnavailable" in err or "503" in err), (rc, err)
        log("down: %s" % err.splitlines()[-1][:160])
    finally:
        kv.fault("down", on=False)
    old = vmi()["metadata"]["uid"]
    rc, err = kv.restart(NAME, method="POST")
    assert rc == 0, err
    kv.wait("a new VMI Running", lambda: (lambda o: o and o["metadata"]["uid"] != old
                                          and (o.get("status") or {}).get("phase") == "Running")(vmi()))


def scenario_stop():
    kv.kubectl("patch", "virtualmachine", NAME, "-n", kv.NS, "--type", "merge",
               "-p", '{"spec":{"runStrategy":"Halted"}}')
    kv.wait("VMI gone", lambda: vmi() is None)
    kv.wait("VM Stopped", lambda: (vmobj().get("status") or {}).get("printableStatus") == "Stopped")
    assert kv.virsh("domstate", DOM, check=False).returncode != 0  # undefined
    kv.kubectl("delete", "virtualmachine", NAME, "-n", kv.NS)


def scenario_capk():
    ns = "capk-lab"
    kv.apply(kv.capk_cluster(ns, "kv"))
    kv.apply([kv.capk_template(ns, "kv-md-1"), kv.capk_machine_deployment(ns, "kv", "kv-md", "kv-md-1", 1)])

    def machines():
        items = json.loads(kv.kubectl("get", "machine", "-n", ns, "-o", "json"))["items"]
        return items if len(items) == 2 and all((m.get("status") or {}).get("phase") == "Running"
                                                for m in items) else None
    ms = kv.wait("2 Machines Running", machines, timeout=300)
    for m in ms:
        name = m["spec"]["infrastructureRef"]["name"]
        assert m["spec"]["providerID"] == "kubevirt://" + name, m["spec"]
        assert m["status"]["nodeRef"]["name"] == name, m["status"].get("nodeRef")
        km = kv.get("kubevirtmachine", name, ns)
        assert km["spec"]["providerID"] == "kubevirt://" + name and km["status"]["ready"] is True
        v = kv.get("virtualmachine", name, ns)
        assert v["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "kv"
        assert v["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "1Gi", "maxGuest": "3Gi"}
        node = json.loads(kv.kubectl("get", "node", name, "-o", "json"))
        assert node["spec"]["providerID"] == "kubevirt://" + name
        dom = kv.domain(name, ns)
        assert kv.virsh("domstate", dom) == "running"
        view = kv.wait("the guest of %s reporting" % name, lambda: kv.console_view(dom))
        log("%s: Machine Running, VM and domain %s, guest MemTotal=%d kB cpus=%d" % ((name, dom) + view))


SCENARIOS = [scenario_boot, scenario_live, scenario_stuck, scenario_restart_needed,
             scenario_restart, scenario_down, scenario_stop]
CAPK_SCENARIOS = [scenario_capk]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", action="append", default=[])
    a = ap.parse_args()
    capk = os.environ.get("HV_KUBEVIRT_CAPK") == "1"
    chosen = [fn for fn in SCENARIOS + (CAPK_SCENARIOS if capk else [])
              if not a.k or any(k in fn.__name__ for k in a.k)]
    if not chosen:
        sys.exit("kubevirt_lab_test: -k %s selects no scenario" % " -k ".join(a.k))
    for v in ("KUBECONFIG", "HV_CAPI_BIN", "HV_KUBEVIRT_FAULTS"):
        if not os.environ.get(v):
            sys.exit("kubevirt_lab_test: %s is not set: eval \"$(test/kubevirt/up.sh)\" first" % v)
    passed = failed = 0
    for fn in chosen:
        t0 = time.monotonic()
        try:
            fn()
            print("ok   %s (%.1fs)" % (fn.__name__, time.monotonic() - t0), flush=True)
            passed += 1
        except Exception:
            print("FAIL %s (%.1fs)" % (fn.__name__, time.monotonic() - t0), flush=True)
            traceback.print_exc()
            failed += 1
            if fn in SCENARIOS:
                break  # each scenario builds on the one before
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or passed != len(chosen) else 0


if __name__ == "__main__":
    sys.exit(main())
