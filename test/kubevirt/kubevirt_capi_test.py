#!/usr/bin/python3
"""kubevirt_capi_test.py: CAPI drives hvupdater's KubeVirt backend on CAPK Machines (issue 29 item 4).

Needs the KubeVirt lab with CAPK (eval "$(test/kubevirt/up.sh --capk)"): CAPI v1.14.2's core
manager, CAPK v0.1.10's controller, the KubeVirt stand-in on QEMU guests, and the CAPI lab's
`hvupdater serve` registered as CAPI's runtime extension (ExtensionConfig `hvupdater`, the
machine check and dry-run claims on, as test/capi/up.sh starts it). Everything is read back
from the API server (Machines, KubevirtMachines, VMs, VMIs), libvirt (virsh) and the guests'
serial consoles; hvupdater's own log only says which hooks CAPI called and what they answered.

Scenarios, in order, on a Cluster on a KubevirtCluster (namespace capk-capi) with a
MachineDeployment of 2 CAPK Machines (KubevirtMachineTemplate: memory.guest 1Gi of maxGuest
3Gi, 1 socket of maxSockets 4; rollingUpdate maxSurge 0 / maxUnavailable 1):
  hvupdater   the lab's hvupdater gets a `kubevirt` section (the lab's API server, its own
              service account token, namespaces [capk-capi]) and the RBAC docs/kubevirt.md
              lists, and is restarted (test/capi/up.sh --restart-hvupdater)
  scale-up    CAPK makes a VM per KubevirtMachine, the stand-in runs them; both Machines
              up to date and Available, the guests report
  in-place    a new KubevirtMachineTemplate with memory.guest 2Gi and 2 sockets (within
              maxGuest and maxSockets): CAPI asks CanUpdateMachineSet, then UpdateMachine per
              Machine; the same Machines, KubevirtMachines, VMs, VMIs (no restart) and domains
              (UUID, libvirt id, no shutdown in their QEMU log); the KubevirtMachines, the
              VMs' spec and the VMIs' status (guestCurrent = guestRequested = 2Gi,
              currentCPUTopology.sockets 2, no HotMemoryChange/HotVCPUChange) show the new
              values, virsh shows the virtio-mem device plugged 1 GiB and 2 vCPUs, the guests
              show 2 CPUs and about 1 GiB more; the machine check passed CAPI's calls
  beyond-max  memory.guest 4Gi, above the VMs' maxGuest 3Gi (the template keeps maxGuest 3Gi:
              a change of maxGuest itself is outside the profile and CAPI would replace the
              Machines): under powerCycle Never, UpdateMachine refuses it ("memory needs a
              power cycle (above memory.maxGuest) and powerCycle is Never"), the VM and its
              VMI untouched (same VMI, spec 2Gi, runStrategy Always, no shutdown); then under
              IfNeeded both Machines are updated by a restart: the same Machines, KubevirtMachines
              and VMs, a new VMI booted with guest 4Gi (maxGuest raised to 4Gi by hvupdater),
              runStrategy Always again, the guests show about 3 GiB more than at first
Prints one line per scenario, the measured durations, and closes with `N passed, N failed`.
Usage: kubevirt_capi_test.py [-k NAME]...
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback

if sys.flags.optimize:
    raise SystemExit("kubevirt_capi_test: run without -O: its checks are assert statements")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "capi"))
import kvlab as kv  # noqa: E402
import capi_e2e as ce  # noqa: E402  (hvupdater's log, the ExtensionConfig, CAPI's rollout)

NS, CL, MD = "capk-capi", "kvc", "kvc-md"
GI = 1024 * 1024  # kB
STATE = {}
RESULTS = {}
RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hvupdater-lab-kubevirt}
rules:
- apiGroups: [kubevirt.io]
  resources: [virtualmachines]
  verbs: [get, list, watch, patch]
- apiGroups: [kubevirt.io]
  resources: [virtualmachineinstances]
  verbs: [get]
- apiGroups: [kubevirt.io]
  resources: [kubevirts]
  verbs: [get, list]
- apiGroups: [subresources.kubevirt.io]
  resources: [virtualmachines/restart]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: hvupdater-lab-kubevirt}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hvupdater-lab-kubevirt}
subjects:
- {kind: ServiceAccount, name: hvupdater, namespace: hvupdater-lab}
"""


def log(msg):
    print("  %s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def mem(o):
    return ((o or {}).get("status") or {}).get("memory") or {}


def vm_domain(o):
    return o["spec"]["template"]["spec"]["domain"]


def snapshot():
    """{Machine name: what identifies it and its VM}: the KubevirtMachine, the VM's and the
    VMI's uid, the domain's name, UUID and libvirt id, the shutdowns in its QEMU log"""
    out = {}
    for m in ce.machines(NS, MD):
        km = m["spec"]["infrastructureRef"]["name"]
        assert m["spec"].get("providerID") == "kubevirt://" + km, m["spec"]
        vm = kv.get("virtualmachine", km, NS)
        vmi = kv.get("virtualmachineinstance", km, NS)
        dom = kv.domain(km, NS)
        out[m["metadata"]["name"]] = {
            "kubevirtmachine": km, "kubevirtmachine_uid": kv.get("kubevirtmachine", km, NS)["metadata"]["uid"],
            "vm_uid": vm["metadata"]["uid"], "vmi_uid": vmi["metadata"]["uid"] if vmi else None,
            "domain": dom, "domuuid": kv.virsh("domuuid", dom), "domid": kv.virsh("domid", dom),
            "shutdowns": ce.shutdowns(dom)}
    return out


def settled_vmi(name, guest, sockets):
    """the VMI of VM name runs with guest and sockets, no hot-plug in flight; or None"""
    o = kv.get("virtualmachineinstance", name, NS)
    if not o or (o.get("status") or {}).get("phase") != "Running":
        return None
    if mem(o).get("guestCurrent") != guest or mem(o).get("guestRequested") != guest:
        return None
    if (o["status"].get("currentCPUTopology") or {}).get("sockets") != sockets:
        return None
    if kv.cond(o, "HotMemoryChange") or kv.cond(o, "HotVCPUChange"):
        return None
    return o


def rolled_out(tmpl, guest, sockets):
    """The MachineDeployment's rollout to tmpl is over (capi_e2e.md_settled) as of a status CAPI
    wrote after the template change (observedGeneration), and every Machine's KubevirtMachine
    has the template's memory.guest and sockets: the Machines' conditions from before the
    change say up to date too, until CAPI has looked"""
    d = ce.get("machinedeployment", NS, MD)
    if (d.get("status") or {}).get("observedGeneration", 0) < d["metadata"]["generation"]:
        return None
    ms = ce.md_settled(NS, MD, 2, tmpl)
    for m in ms or []:
        km = kv.get("kubevirtmachine", m["spec"]["infrastructureRef"]["name"], NS)
        kd = km["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["domain"]
        if kd["memory"]["guest"] != guest or kd["cpu"]["sockets"] != sockets:
            return None
    return ms


def hook_lines(calls, hook):
    return ["%s %s: %s" % (c[3], c[1], c[2]) for c in calls if c[0] == hook]


# ---- scenarios ----------------------------------------------------------------------------

def scenario_hvupdater():
    """The lab's hvupdater with a kubevirt section and its RBAC, restarted."""
    state = os.environ["HV_CAPI_STATE"]
    path = os.path.join(state, "hvupdater.json")
    cfg = json.load(open(path))
    k = cfg["kubernetes"]
    cfg["kubevirt"] = {"clusters": [{"name": "lab", "server": k["server"], "tokenFile": k["tokenFile"],
                                     "caFile": k["caFile"], "namespaces": [NS]}]}
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    kv.kubectl("apply", "-f", "-", stdin=RBAC)
    # the same binary as the running one (up.sh --restart-hvupdater takes HV_BUILD)
    pid = open(os.path.join(state, "hvupdater.pid")).read().strip()
    build = os.environ.get("HV_BUILD") or os.path.dirname(os.readlink("/proc/%s/exe" % pid))
    subprocess.run([os.path.join(ROOT, "test", "capi", "up.sh"), "--restart-hvupdater"],
                   check=True, env=dict(os.environ, HV_BUILD=build))
    ce.set_settings({})
    log("hvupdater restarted with the kubevirt section (cluster lab, namespaces [%s])" % NS)


def scenario_scale_up():
    t0 = time.monotonic()
    kv.apply(kv.capk_cluster(NS, CL))
    kv.apply([kv.capk_template(NS, "kvt-1g"), kv.capk_machine_deployment(NS, CL, MD, "kvt-1g", 2)])
    ms = ce.wait("2 CAPK Machines up to date and Available", lambda: ce.md_settled(NS, MD, 2, "kvt-1g"), 400)
    RESULTS["scale-up 0->2 CAPK Machines, up to date and Available (s)"] = round(time.monotonic() - t0, 1)
    snap = snapshot()
    views = {}
    for name, s in snap.items():
        views[name] = kv.wait("the guest of %s reporting" % name, lambda: kv.console_view(s["domain"]))
        assert views[name][1] == 1, views[name]
        assert settled_vmi(s["kubevirtmachine"], "1Gi", 1), kv.get("virtualmachineinstance", s["kubevirtmachine"], NS)
    STATE["snap"] = snap
    STATE["boot_kb"] = {n: v[0] for n, v in views.items()}
    log("scale-up: %s in %.1f s; guests %s" % (
        sorted(m["metadata"]["name"] for m in ms),
        RESULTS["scale-up 0->2 CAPK Machines, up to date and Available (s)"], views))


def scenario_in_place():
    before = STATE["snap"]
    mc0 = ce.machine_checks()
    mark = ce.hv_log_lines()
    kv.apply([kv.capk_template(NS, "kvt-2g", guest="2Gi", sockets=2)])
    t0 = time.monotonic()
    ce.set_template(NS, MD, "kvt-2g")
    ms = ce.wait("the in-place rollout to kvt-2g", lambda: rolled_out("kvt-2g", "2Gi", 2), 600)
    took = time.monotonic() - t0
    calls = ce.hv_calls(mark)
    after = snapshot()
    assert sorted(m["metadata"]["name"] for m in ms) == sorted(before), ("Machines changed", before, ms)
    assert after == before, ("Machines, KubevirtMachines, VMs, VMIs or domains changed", before, after)
    for name, s in after.items():
        km = kv.get("kubevirtmachine", s["kubevirtmachine"], NS)
        kd = km["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["domain"]
        assert kd["memory"]["guest"] == "2Gi" and kd["cpu"]["sockets"] == 2, kd
        d = vm_domain(kv.get("virtualmachine", s["kubevirtmachine"], NS))
        assert d["memory"] == {"guest": "2Gi", "maxGuest": "3Gi"}, d["memory"]
        assert d["cpu"]["sockets"] == 2 and d["cpu"]["maxSockets"] == 4, d["cpu"]
        vmi = settled_vmi(s["kubevirtmachine"], "2Gi", 2)
        assert vmi, kv.get("virtualmachineinstance", s["kubevirtmachine"], NS).get("status")
        assert vmi["spec"]["domain"]["memory"]["guest"] == "2Gi", vmi["spec"]["domain"]
        assert kv.vmem(s["domain"]) == (1024, 1024, 2), (s["domain"], kv.vmem(s["domain"]))
        assert not kv.cond(kv.get("virtualmachine", s["kubevirtmachine"], NS), "RestartRequired")
    views = {}
    for name, s in after.items():
        views[name] = kv.wait("the guest of %s showing 2 CPUs and about 1 GiB more" % name, lambda: (
            lambda w: w if w and w[1] == 2 and w[0] - STATE["boot_kb"][name] >= 0.9 * GI else None)(
                kv.console_view(s["domain"])), timeout=240)
    hooks = {c[0] for c in calls}
    assert {"CanUpdateMachineSet", "UpdateMachine"} <= hooks, calls
    bad = [c for c in calls if c[1] == "Failure" and c[0] != "CanUpdateMachineSet" and ce.not_retry_wait(c)]
    assert not bad, ("UpdateMachine failed", bad)
    assert not any(c[2].startswith("machine check:") and not c[2].startswith("machine check: reading")
                   for c in calls), ("the machine check refused CAPI", calls)
    done = [c for c in calls if c[0] == "UpdateMachine" and c[2].startswith("done")]
    assert {c[3] for c in done} == {"%s/%s" % (NS, n) for n in before}, ("done per Machine", done)
    mc = ce.machine_checks()
    assert mc["pass"] > mc0["pass"] and mc["fail"] == mc0["fail"], ("machine check", mc0, mc)
    RESULTS["in-place 2 CAPK Machines 1Gi->2Gi, 1->2 sockets (s)"] = round(took, 1)
    RESULTS["in-place calls"] = ce.summarize(calls)
    RESULTS["in-place machine check pass/wait/fail, API reads"] = "%d/%d/%d, %d" % (
        mc["pass"] - mc0["pass"], mc["wait"] - mc0["wait"], mc["fail"] - mc0["fail"],
        mc["reads"] - mc0["reads"])
    log("in place in %.1f s; guests %s; hvupdater got: %s" % (took, views, ce.summarize(calls)))
    for line in hook_lines(calls, "CanUpdateMachineSet")[-1:] + ["%s %s: %s" % (c[3], c[1], c[2]) for c in done]:
        log("    " + line)
    STATE["snap"] = after


def scenario_beyond_max():
    before = STATE["snap"]
    # 1. powerCycle Never: refused, nothing touched
    ce.set_settings({"powerCycle": "Never"})
    mark = ce.hv_log_lines()
    kv.apply([kv.capk_template(NS, "kvt-4g", guest="4Gi", sockets=2)])
    t0 = time.monotonic()
    ce.set_template(NS, MD, "kvt-4g")

    def refused():
        f = [c for c in ce.hv_calls(mark) if c[0] == "UpdateMachine" and c[1] == "Failure"
             and ce.not_retry_wait(c)]
        return f if len(f) >= 2 else None
    fails = ce.wait("UpdateMachine to refuse the change twice under powerCycle Never", refused, 300)
    RESULTS["beyond-max under Never: 2 UpdateMachine Failures (s)"] = round(time.monotonic() - t0, 1)
    msg = fails[-1][2]
    log("hvupdater answered UpdateMachine Failure (%s): %s" % (fails[-1][3], msg))
    assert "memory needs a power cycle (above memory.maxGuest) and powerCycle is Never" in msg, msg
    calls = ce.hv_calls(mark)
    assert not any(c[0] == "UpdateMachine" and c[2].startswith("done") for c in calls), calls
    for name, s in before.items():
        o = kv.get("virtualmachine", s["kubevirtmachine"], NS)
        assert vm_domain(o)["memory"] == {"guest": "2Gi", "maxGuest": "3Gi"}, vm_domain(o)["memory"]
        assert o["spec"]["runStrategy"] == "Always", o["spec"]
        assert settled_vmi(s["kubevirtmachine"], "2Gi", 2)
    assert snapshot() == before, "under powerCycle Never a VM was restarted or replaced"
    m = [x for x in ce.machines(NS, MD) if "%s/%s" % (NS, x["metadata"]["name"]) == fails[-1][3]]
    assert m, fails[-1]
    upd = ce.cond(m[0], "Updating")
    log("    Machine %s Updating: %s %s %s" % (m[0]["metadata"]["name"], upd.get("status"),
                                              upd.get("reason"), upd.get("message", "")))
    # 2. powerCycle IfNeeded: a new operation restarts each VM with the new size
    mark = ce.hv_log_lines()
    t1 = time.monotonic()
    ce.set_settings({})
    ms = ce.wait("the rollout to kvt-4g by restarts", lambda: rolled_out("kvt-4g", "4Gi", 2), 900)
    took = time.monotonic() - t1
    calls = ce.hv_calls(mark)
    after = snapshot()
    assert sorted(m["metadata"]["name"] for m in ms) == sorted(before), ("Machines changed", before, ms)
    views = {}
    for name, s in after.items():
        b = before[name]
        for k in ("kubevirtmachine", "kubevirtmachine_uid", "vm_uid", "domain"):
            assert s[k] == b[k], (name, k, b[k], s[k])
        assert s["vmi_uid"] != b["vmi_uid"], ("no restart", name)
        assert s["shutdowns"] > b["shutdowns"], ("no shutdown in the QEMU log", name, s, b)
        o = kv.get("virtualmachine", s["kubevirtmachine"], NS)
        assert vm_domain(o)["memory"] == {"guest": "4Gi", "maxGuest": "4Gi"}, vm_domain(o)["memory"]
        assert vm_domain(o)["cpu"]["sockets"] == 2
        assert o["spec"]["runStrategy"] == "Always", o["spec"]
        assert "hvupdater.io/run-strategy" not in (o["metadata"].get("annotations") or {})
        assert not kv.cond(o, "RestartRequired")
        vmi = settled_vmi(s["kubevirtmachine"], "4Gi", 2)
        assert vmi and mem(vmi).get("guestAtBoot") == "4Gi", mem(vmi)
        views[name] = kv.wait("the guest of %s showing about 3 GiB more and 2 CPUs" % name, lambda: (
            lambda w: w if w and w[1] == 2 and w[0] - STATE["boot_kb"][name] >= 2.9 * GI else None)(
                kv.console_view(s["domain"])), timeout=240)
    done = [c for c in calls if c[0] == "UpdateMachine" and c[2].startswith("done")]
    assert {c[3] for c in done} == {"%s/%s" % (NS, n) for n in before}, ("done per Machine", done)
    bad = [c for c in calls if c[1] == "Failure" and c[0] != "CanUpdateMachineSet" and ce.not_retry_wait(c)]
    RESULTS["beyond-max under IfNeeded: 2 Machines by restart (s)"] = round(took, 1)
    RESULTS["beyond-max calls after IfNeeded"] = ce.summarize(calls)
    log("by restart in %.1f s; guests %s; hvupdater got: %s" % (took, views, ce.summarize(calls)))
    for c in done:
        log("    %s %s: %s" % (c[3], c[1], c[2]))
    for c in bad:  # a Failure left over from the Never operation, answered before it ended
        log("    (Failure after IfNeeded) %s: %s" % (c[3], c[2]))
    assert all("powerCycle is Never" in c[2] for c in bad), ("UpdateMachine failed under IfNeeded", bad)
    STATE["snap"] = after


SCENARIOS = [scenario_hvupdater, scenario_scale_up, scenario_in_place, scenario_beyond_max]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-k", action="append", default=[], help="run only the scenarios whose name has this")
    a = ap.parse_args()
    chosen = [fn for fn in SCENARIOS if not a.k or any(k in fn.__name__ for k in a.k)]
    if not chosen:
        sys.exit("kubevirt_capi_test: -k %s selects no scenario" % " -k ".join(a.k))
    for v in ("KUBECONFIG", "HV_CAPI_BIN", "HV_CAPI_STATE", "HV_CAPI_HVUPDATER_LOG", "HV_KUBEVIRT_FAULTS"):
        if not os.environ.get(v):
            sys.exit("kubevirt_capi_test: %s is not set: eval \"$(test/kubevirt/up.sh --capk)\" first" % v)
    if os.environ.get("HV_KUBEVIRT_CAPK") != "1":
        sys.exit("kubevirt_capi_test: needs CAPK: eval \"$(test/kubevirt/up.sh --capk)\"")
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
            break  # each scenario builds on the one before
    print("\ndurations and calls:")
    for k, v in RESULTS.items():
        print("  %-60s %s" % (k, v))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or passed != len(chosen) else 0


if __name__ == "__main__":
    sys.exit(main())
