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
  conflict    virt-api's validator (the stand-in's fault refuse-patch 4) refuses the next 4
              VM changes with 409 while CAPI drives 2Gi->2560Mi and 2->3 sockets: the stand-in
              refused 4 changes, all by hvupdater's service account, of the Machines' VMs, and
              the API server logged the 4 rejections with code 409; hvupdater answered
              UpdateMachine "another task is changing the VM" in progress, never Failure (no
              Failure answer, no failed in-place update in CAPI's log, no Machine's Updating
              condition InPlaceUpdateFailed at any look); then in place as in-place (same
              Machines, VMs, VMIs, domains; spec, VMI status, virsh and the guests show it)
  down        KubeVirt (the stand-in: its loop and virt-api's validator) down for 60 s (fault
              down 60) from the template change to 2816Mi and 4 sockets: the stand-in went
              down and came back by itself, the API server failed hvupdater's VM changes
              closed on the webhook meanwhile, CAPI kept calling UpdateMachine at hvupdater's
              retryAfterSeconds and got "the hypervisor cannot be reached; trying again" in
              progress (shown in the Machine's Updating condition, InPlaceUpdating), never
              Failure as above; done only after the outage, in place
  infra-secret  the VMs' infrastructure cluster reached only through CAPK's
              infraClusterSecretRef: the KubevirtCluster names Secret kvc-infra, a kubeconfig of
              the lab's API server (its CA) with the token of ServiceAccount capk-infra (rights on
              VMs, VMIs, kubevirts, and what CAPK v0.1.10, which follows the same ref, needs);
              hvupdater's own identity loses its rights on VMs and its config gets
              kubevirt.followInfraClusterSecretRef (restarted). Memory +128Mi: the first VM change
              is refused once by virt-api's validator (refuse-patch 1), which names its user:
              capk-infra; while that VM's live change is held (hold-migration), the Secret is
              deleted: UpdateMachine answers Failure "hvupdater cannot use the KubeVirt
              infrastructure cluster's kubeconfig Secret (CAPK infraClusterSecretRef)" (the
              control); the Secret back, both Machines done in place as in-place; then the normal
              RBAC, config (restarted) and no ref again
  kill9       3Gi (memory only): once a Machine's VM carries hvupdater's record and the new
              memory.guest and its VMI a HotMemoryChange the stand-in holds (fault
              hold-migration), hvupdater serve is killed (SIGKILL; its process gone, its port
              refusing), CAPI's next UpdateMachine call fails (connection refused, CAPI's log),
              then hvupdater is started again as the lab starts it (test/capi/up.sh
              --restart-hvupdater) and the hold released: the new process answers done for
              both Machines, in place; hvupdater never answered Failure and CAPI failed no
              call but those that met no hvupdater
  beyond-max  memory.guest 4Gi, above the VMs' maxGuest 3Gi (the template keeps maxGuest 3Gi:
              a change of maxGuest itself is outside the profile and CAPI would replace the
              Machines): under powerCycle Never, UpdateMachine refuses it ("memory needs a
              power cycle (above memory.maxGuest) and powerCycle is Never"), the VM and its
              VMI untouched (same VMI, spec 3Gi, runStrategy Always, no shutdown); then under
              IfNeeded both Machines are updated by a restart: the same Machines, KubevirtMachines
              and VMs, a new VMI booted with guest 4Gi (maxGuest raised to 4Gi by hvupdater),
              runStrategy Always again, the guests show about 3 GiB more than at first and
              4 CPUs
Prints one line per scenario, the measured durations, and closes with `N passed, N failed`.
Usage: kubevirt_capi_test.py [-k NAME]...
"""
import argparse
import base64
import json
import os
import re
import signal
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
FAILED = "InPlaceUpdateFailed"  # CAPI's reason on a Machine's Updating condition
HVSA = "system:serviceaccount:hvupdater-lab:hvupdater"  # the lab's hvupdater, as the API server knows it
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


def mib(q):
    """a Kubernetes memory quantity as KubeVirt and the stand-in write them (Gi, Mi) in MiB"""
    m = re.match(r"^(\d+)(Gi|Mi)$", q or "")
    assert m, "unexpected quantity %r" % q
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


def settled_vmi(name, guest, sockets):
    """the VMI of VM name runs with guest and sockets, no hot-plug in flight; or None"""
    o = kv.get("virtualmachineinstance", name, NS)
    if not o or (o.get("status") or {}).get("phase") != "Running":
        return None
    cur, req = mem(o).get("guestCurrent"), mem(o).get("guestRequested")
    if not cur or not req or mib(cur) != mib(guest) or mib(req) != mib(guest):
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


def lines_of(path):
    with open(path, errors="replace") as f:
        return f.readlines()


def apiserver_lines():
    return lines_of(os.path.join(os.environ["HV_CAPI_STATE"], "kube-apiserver.log"))


def standin_lines():
    return lines_of(os.environ["HV_KUBEVIRT_STANDIN_LOG"])


def capi_update_errors(since):
    """CAPI's machine controller failing an in-place update of one of our Machines (its log,
    after line since): a Failure answer of UpdateMachine, or the call itself failing"""
    return [x.strip() for x in ce.capi_log_lines()[since:]
            if "in-place update failed" in x and ('Machine="%s/' % NS) in x]


def marks():
    """where the logs stand now: hvupdater's, CAPI's, the API server's, the stand-in's"""
    return {"hv": ce.hv_log_lines(), "capi": len(ce.capi_log_lines()),
            "apiserver": len(apiserver_lines()), "standin": len(standin_lines())}


def watch_rollout(what, tmpl, guest, sockets, timeout, seen):
    """rolled_out(tmpl, guest, sockets) within timeout, noting at every look each Machine's
    Updating condition as CAPI shows it: seen gets (Machine, status, reason, message)"""
    def look():
        for m in ce.machines(NS, MD):
            u = ce.cond(m, "Updating")
            if u:
                seen.add((m["metadata"]["name"], u.get("status"), u.get("reason"),
                          u.get("message", "")))
        return rolled_out(tmpl, guest, sockets)
    return ce.wait(what, look, timeout)


def never_failed(calls, seen, capi_mark):
    """No Failure anywhere CAPI's in-place update could show one: no hook answer of UpdateMachine
    (nor of CanUpdateMachineSet, but for the machine check's retryable waits), no failed
    in-place update in CAPI's log, no Machine's Updating condition InPlaceUpdateFailed"""
    bad = [c for c in calls if c[1] == "Failure" and
           (c[0] == "UpdateMachine" or (c[0] == "CanUpdateMachineSet" and ce.not_retry_wait(c)))]
    assert not bad, ("hvupdater answered Failure", bad)
    errs = capi_update_errors(capi_mark)
    assert not errs, ("CAPI failed the in-place update", errs)
    failed = [x for x in seen if x[2] == FAILED]
    assert not failed, ("a Machine's Updating condition said %s" % FAILED, failed)


def assert_in_place(before, guest, sockets, max_guest="3Gi", max_sockets=4):
    """After a rollout meant to be in place: the same Machines, KubevirtMachines, VMs, VMIs and
    domains as before; the KubevirtMachines and the VMs' spec hold guest and sockets, the VMIs
    run them with no hot-plug in flight, virsh shows the virtio-mem device plugged to guest
    and sockets vCPUs, no RestartRequired, the guests show sockets CPUs and the memory grown
    since their boot. Returns the snapshot and the guests' views."""
    after = snapshot()
    assert after == before, ("Machines, KubevirtMachines, VMs, VMIs or domains changed", before, after)
    plugged = mib(guest) - 1024  # the boot size is 1Gi: the rest is the virtio-mem device's
    for name, s in after.items():
        km = kv.get("kubevirtmachine", s["kubevirtmachine"], NS)
        kd = km["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["domain"]
        assert kd["memory"]["guest"] == guest and kd["cpu"]["sockets"] == sockets, kd
        o = kv.get("virtualmachine", s["kubevirtmachine"], NS)
        d = vm_domain(o)
        assert mib(d["memory"]["guest"]) == mib(guest), d["memory"]
        assert mib(d["memory"]["maxGuest"]) == mib(max_guest), d["memory"]
        assert d["cpu"]["sockets"] == sockets and d["cpu"]["maxSockets"] == max_sockets, d["cpu"]
        assert not kv.cond(o, "RestartRequired"), kv.cond(o, "RestartRequired")
        assert o["spec"]["runStrategy"] == "Always", o["spec"]
        vmi = settled_vmi(s["kubevirtmachine"], guest, sockets)
        assert vmi, kv.get("virtualmachineinstance", s["kubevirtmachine"], NS).get("status")
        assert mib(vmi["spec"]["domain"]["memory"]["guest"]) == mib(guest), vmi["spec"]["domain"]
        assert kv.vmem(s["domain"]) == (plugged, plugged, sockets), (s["domain"], kv.vmem(s["domain"]))
    views = {}
    for name, s in after.items():
        views[name] = kv.wait("the guest of %s showing %d CPUs and about %d MiB more" % (name, sockets, plugged),
                              lambda: (lambda w: w if w and w[1] == sockets and
                                       w[0] - STATE["boot_kb"][name] >= 0.9 * plugged * 1024 else None)(
                                  kv.console_view(s["domain"])), timeout=240)
    return after, views


def done_per_machine(calls, before):
    done = [c for c in calls if c[0] == "UpdateMachine" and c[2].startswith("done")]
    assert {c[3] for c in done} == {"%s/%s" % (NS, n) for n in before}, ("done per Machine", done)
    return done


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
    STATE["build"] = build  # (kill9 starts it again the same way)
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
    assert sorted(m["metadata"]["name"] for m in ms) == sorted(before), ("Machines changed", before, ms)
    after, views = assert_in_place(before, "2Gi", 2)
    hooks = {c[0] for c in calls}
    assert {"CanUpdateMachineSet", "UpdateMachine"} <= hooks, calls
    bad = [c for c in calls if c[1] == "Failure" and c[0] != "CanUpdateMachineSet" and ce.not_retry_wait(c)]
    assert not bad, ("UpdateMachine failed", bad)
    assert not any(c[2].startswith("machine check:") and not c[2].startswith("machine check: reading")
                   for c in calls), ("the machine check refused CAPI", calls)
    done = done_per_machine(calls, before)
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
    STATE.update(snap=after, guest="2Gi", sockets=2)


def grow_step(label, tmpl, guest, sockets):
    """The KubevirtMachineTemplate tmpl with guest and sockets (within maxGuest 3Gi and
    maxSockets 4); returns the log marks taken before the MachineDeployment points at it."""
    kv.apply([kv.capk_template(NS, tmpl, guest=guest, sockets=sockets)])
    m = marks()
    log("%s: %s -> %s, %d -> %d sockets" % (label, STATE["guest"], guest, STATE["sockets"], sockets))
    return m


def scenario_conflict():
    """virt-api's validator (the stand-in) refuses the next N changes of a VM with 409 while
    CAPI drives an in-place grow: in progress, never Failure, then done in place."""
    before = STATE["snap"]
    n, tmpl, guest, sockets = 4, "kvt-2560m", "2560Mi", 3
    mk = grow_step("conflict", tmpl, guest, sockets)
    kv.fault("refuse-patch", text=str(n))
    seen = set()
    t0 = time.monotonic()
    try:
        ce.set_template(NS, MD, tmpl)
        ms = watch_rollout("the in-place rollout to %s through %d refused patches" % (tmpl, n),
                           tmpl, guest, sockets, 400, seen)
    finally:
        left = os.path.exists(os.path.join(kv.FAULTS, "refuse-patch"))
        kv.fault("refuse-patch", on=False)
    took = time.monotonic() - t0
    calls = ce.hv_calls(mk["hv"])
    # the fault happened: the stand-in refused n changes, all hvupdater's, of our VMs, and the
    # API server refused them with the webhook's 409
    assert not left, "the stand-in was not asked %d times: no conflict happened" % n
    refused = [x.strip() for x in standin_lines()[mk["standin"]:] if "refused (refuse-patch)" in x]
    vms = {"%s/%s" % (NS, s["kubevirtmachine"]) for s in before.values()}
    assert len(refused) == n, refused
    for x in refused:
        assert ("change by %s refused" % HVSA) in x and any(("VM %s:" % v) in x for v in vms), x
    rejected = [x for x in apiserver_lines()[mk["apiserver"]:]
                if "rejected by webhook" in x and "virtualmachine-validator.kubevirt.io" in x]
    assert len(rejected) == n and all("Code:409" in x for x in rejected), rejected
    # seen by CAPI as in progress, never as a Failure
    never_failed(calls, seen, mk["capi"])
    busy = [c for c in calls if c[0] == "UpdateMachine" and "another task is changing the VM" in c[2]]
    assert busy, ("no UpdateMachine answer said the VM was being changed by another task", calls)
    assert sorted(m["metadata"]["name"] for m in ms) == sorted(before), ("Machines changed", before, ms)
    after, views = assert_in_place(before, guest, sockets)
    done = done_per_machine(calls, before)
    RESULTS["conflict: 4 patches refused (409), 2 Machines in place (s)"] = round(took, 1)
    RESULTS["conflict calls"] = ce.summarize(calls)
    log("in place through %d refusals in %.1f s; guests %s; hvupdater got: %s" % (
        n, took, views, ce.summarize(calls)))
    log("    the stand-in: %s" % refused[0].split(" standin: ", 1)[-1])
    log("    hvupdater answered %s %s: %s" % (busy[0][3], busy[0][1], busy[0][2]))
    for c in done:
        log("    %s %s: %s" % (c[3], c[1], c[2]))
    log("    Machine Updating conditions seen: %s" % sorted({(x[1], x[2]) for x in seen}))
    STATE.update(snap=after, guest=guest, sockets=sockets)


def scenario_down():
    """KubeVirt (the stand-in: its controllers and virt-api's validator) goes down for 60 s as
    CAPI starts an in-place grow: CAPI keeps calling at hvupdater's pace, every answer in
    progress (never Failure), done once KubeVirt is back."""
    before = STATE["snap"]
    outage, tmpl, guest, sockets = 60, "kvt-2816m", "2816Mi", 4
    mk = grow_step("down", tmpl, guest, sockets)
    seen = set()
    kv.fault("down", text=str(outage))
    t0 = time.monotonic()
    try:
        ce.set_template(NS, MD, tmpl)
        ms = watch_rollout("the in-place rollout to %s through %d s of KubeVirt down" % (tmpl, outage),
                           tmpl, guest, sockets, 400 + outage, seen)
    finally:
        left = os.path.exists(os.path.join(kv.FAULTS, "down"))
        kv.fault("down", on=False)
    took = time.monotonic() - t0
    calls = ce.hv_calls(mk["hv"])
    # the fault happened: the stand-in went down and came back by itself after the outage, and
    # the API server refused hvupdater's VM changes meanwhile (the webhook's 503, failing closed)
    assert not left, "the stand-in did not end the outage itself: the rollout ended before it"
    sl = [x.strip() for x in standin_lines()[mk["standin"]:] if "fault switch down:" in x]
    assert [x.rsplit(" ", 1)[-1] for x in sl] == ["true", "false"], sl
    closed = [x.strip() for x in apiserver_lines()[mk["apiserver"]:]
              if "Failed calling webhook, failing closed virtualmachine-validator.kubevirt.io" in x]
    assert closed, "no VM change met KubeVirt down (the API server logged no webhook failure)"
    assert all("the KubeVirt stand-in is down" in x for x in closed), closed  # its 503's Status
    # CAPI kept calling through the outage, every answer in progress, done only after it
    um = [c for c in calls if c[0] == "UpdateMachine"]
    unreachable = [c for c in um if "cannot be reached; trying again" in c[2]]
    assert len(unreachable) >= 3, ("UpdateMachine answers saying KubeVirt cannot be reached", calls)
    first_done = min(k for k, c in enumerate(um) if c[2].startswith("done"))
    assert um.index(unreachable[-1]) < first_done, ("done while KubeVirt was down", um)
    shown = [x for x in seen if "cannot be reached" in x[3]]
    assert shown and all(x[2] == "InPlaceUpdating" for x in shown), ("CAPI's Updating condition", seen)
    never_failed(calls, seen, mk["capi"])
    assert took >= outage - 5, "done %.0f s after KubeVirt went down for %d s" % (took, outage)
    assert sorted(m["metadata"]["name"] for m in ms) == sorted(before), ("Machines changed", before, ms)
    after, views = assert_in_place(before, guest, sockets)
    done = done_per_machine(calls, before)
    RESULTS["down: KubeVirt down 60 s, 2 Machines in place (s)"] = round(took, 1)
    RESULTS["down calls"] = ce.summarize(calls)
    log("in place in %.1f s with KubeVirt down %d s; guests %s; hvupdater got: %s" % (
        took, outage, views, ce.summarize(calls)))
    log("    %d UpdateMachine answers said KubeVirt cannot be reached" % len(unreachable))
    log("    the API server (%d times): %s" % (len(closed), closed[0].split("] ", 1)[-1][:240]))
    log("    hvupdater answered %s %s: %s" % (unreachable[0][3], unreachable[0][1], unreachable[0][2]))
    log("    CAPI showed on %s: Updating %s %s: %s" % shown[0])
    for c in done:
        log("    %s %s: %s" % (c[3], c[1], c[2]))
    STATE.update(snap=after, guest=guest, sockets=sockets)


INFRA_SA, INFRA_SECRET = "capk-infra", "kvc-infra"
INFRA_USER = "system:serviceaccount:%s:%s" % (NS, INFRA_SA)
# the infrastructure cluster's identity (the Secret's kubeconfig user): what hvupdater needs on
# VMs, VMIs and the KubeVirt CR (docs/kubevirt.md, RBAC), and what CAPK v0.1.10 needs there
# too, since it follows the same ref (VMs, VMIs, the cloud-init Secrets, the cluster's Service)
INFRA_RBAC = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: %(sa)s, namespace: %(ns)s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hvupdater-lab-capk-infra}
rules:
- apiGroups: [kubevirt.io]
  resources: [virtualmachines, virtualmachineinstances, kubevirts]
  verbs: ["*"]
- apiGroups: [subresources.kubevirt.io]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: [""]
  resources: [secrets, services, endpoints]
  verbs: ["*"]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: hvupdater-lab-capk-infra}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hvupdater-lab-capk-infra}
subjects:
- {kind: ServiceAccount, name: %(sa)s, namespace: %(ns)s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hvupdater-lab-kubevirt-infra}
rules:
- apiGroups: [cluster.x-k8s.io]
  resources: [clusters]
  verbs: [get]
- apiGroups: [infrastructure.cluster.x-k8s.io]
  resources: [kubevirtmachines, kubevirtclusters]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: hvupdater-lab-kubevirt-infra}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hvupdater-lab-kubevirt-infra}
subjects:
- {kind: ServiceAccount, name: hvupdater, namespace: hvupdater-lab}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: hvupdater-lab-kubevirt-infra-secrets, namespace: %(ns)s}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: hvupdater-lab-kubevirt-infra-secrets, namespace: %(ns)s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: hvupdater-lab-kubevirt-infra-secrets}
subjects:
- {kind: ServiceAccount, name: hvupdater, namespace: hvupdater-lab}
""" % {"sa": INFRA_SA, "ns": NS}


def restart_hvupdater():
    subprocess.run([os.path.join(ROOT, "test", "capi", "up.sh"), "--restart-hvupdater"],
                   check=True, env=dict(os.environ, HV_BUILD=STATE["build"]))
    ce.set_settings({})


def can_i(user, verb, resource):
    p = kv.kubectl("auth", "can-i", verb, resource, "-n", NS, "--as", user, check=False)
    return p.stdout.strip() == "yes"


def scenario_infra_secret():
    """The infrastructure cluster reached only through CAPK's infraClusterSecretRef: the
    KubevirtCluster names Secret kvc-infra, whose kubeconfig is the lab's API server with the
    token of ServiceAccount capk-infra (rights on VMs, VMIs, kubevirts); hvupdater's own
    identity loses its rights on VMs (the ClusterRoleBinding the hvupdater scenario made is
    deleted) and its config gets kubevirt.followInfraClusterSecretRef. A memory-only grow done
    in place proves the Secret was used; the stand-in (fault refuse-patch 1) names the user
    of the first VM change: capk-infra. Then the normal config and RBAC come back."""
    before = STATE["snap"]
    tmpl, guest, sockets = "kvt-infra", "%dMi" % (mib(STATE["guest"]) + 128), STATE["sockets"]
    state = os.environ["HV_CAPI_STATE"]
    path = os.path.join(state, "hvupdater.json")
    normal = open(path).read()
    cfg = json.loads(normal)
    k = cfg["kubernetes"]
    kv.kubectl("apply", "-f", "-", stdin=INFRA_RBAC)
    token = kv.kubectl("create", "token", INFRA_SA, "-n", NS, "--duration", "2h").strip()
    with open(k["caFile"], "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    kubeconfig = "\n".join([
        "apiVersion: v1", "kind: Config", "current-context: infra",
        "clusters:", "- name: infra", "  cluster:", "    server: %s" % k["server"],
        "    certificate-authority-data: %s" % ca,
        "users:", "- name: capk-infra", "  user:", "    token: %s" % token,
        "contexts:", "- name: infra", "  context: {cluster: infra, user: capk-infra, namespace: %s}" % NS, ""])
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": INFRA_SECRET, "namespace": NS},
              "type": "Opaque", "stringData": {"kubeconfig": kubeconfig}}
    kv.apply([secret])
    vms = {s["kubevirtmachine"]: name for name, s in before.items()}
    t0 = time.monotonic()
    try:
        # hvupdater's own identity: no rights on VMs from now on; the Secret's has them
        kv.kubectl("delete", "clusterrolebinding", "hvupdater-lab-kubevirt")
        kv.wait("hvupdater's own identity losing its rights on VMs",
                lambda: not can_i(HVSA, "patch", "virtualmachines.kubevirt.io"), 30)
        assert can_i(INFRA_USER, "patch", "virtualmachines.kubevirt.io"), INFRA_USER
        cfg["kubevirt"]["followInfraClusterSecretRef"] = True
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        restart_hvupdater()
        # the KubevirtCluster names the Secret: CAPK v0.1.10 follows it as well
        kv.kubectl("patch", "kubevirtcluster", CL, "-n", NS, "--type", "merge", "-p", json.dumps(
            {"spec": {"infraClusterSecretRef": {"apiVersion": "v1", "kind": "Secret",
                                                "name": INFRA_SECRET, "namespace": NS}}}))
        mk = grow_step("infra-secret", tmpl, guest, sockets)
        capk_log = os.path.join(os.environ.get("HV_KUBEVIRT_STATE", ""), "capk-manager.log")
        capk_mark = len(lines_of(capk_log)) if os.path.exists(capk_log) else None
        kv.fault("refuse-patch", text="1")
        kv.fault("hold-migration")
        seen = set()
        t1 = time.monotonic()
        ce.set_template(NS, MD, tmpl)

        def in_flight():
            """a VM changed to the new memory.guest (by the Secret's identity: hvupdater's own
            has no rights), its VMI's HotMemoryChange held by the stand-in"""
            for km, name in vms.items():
                o = kv.get("virtualmachine", km, NS)
                if mib(vm_domain(o)["memory"]["guest"]) != mib(guest):
                    continue
                if kv.cond(kv.get("virtualmachineinstance", km, NS), "HotMemoryChange").get("status") == "True":
                    return name, km
            return None
        name, km = ce.wait("a Machine's live change applied on its VM through the Secret and held", in_flight, 300)
        refused = [x.strip() for x in standin_lines()[mk["standin"]:] if "refused (refuse-patch)" in x]
        assert len(refused) == 1 and ("change by %s refused" % INFRA_USER) in refused[0], refused
        # the control: without the Secret, hvupdater cannot reach the infrastructure cluster
        # (its own identity could not change the VM anyway) and says so, for this call only
        kv.kubectl("delete", "secret", INFRA_SECRET, "-n", NS)
        t_del = time.monotonic()

        def refused_secret():
            f = [c for c in ce.hv_calls(mk["hv"]) if c[0] == "UpdateMachine" and c[1] == "Failure"]
            return f or None
        fails = ce.wait("UpdateMachine to answer Failure without the Secret", refused_secret, 120)
        t_fail = time.monotonic() - t_del
        assert all("kubeconfig Secret (CAPK infraClusterSecretRef)" in c[2] for c in fails), fails
        log("without the Secret, %.1f s after its removal: %s %s: %s" % (t_fail, fails[0][3], fails[0][1], fails[0][2]))
        kv.apply([secret])
        kv.fault("hold-migration", on=False)
        ms = watch_rollout("the in-place rollout to %s through the infra Secret" % tmpl,
                           tmpl, guest, sockets, 400, seen)
        took = time.monotonic() - t1
        left = os.path.exists(os.path.join(kv.FAULTS, "refuse-patch"))
        kv.fault("refuse-patch", on=False)
        calls = ce.hv_calls(mk["hv"])
        assert not left, "no VM change met the stand-in's validator"
        assert not [x for x in standin_lines()[mk["standin"]:] if ("change by %s " % HVSA) in x]
        # the only Failures: those answered while the Secret was gone
        bad = [c for c in calls if c[1] == "Failure" and ce.not_retry_wait(c)
               and "kubeconfig Secret (CAPK infraClusterSecretRef)" not in c[2]]
        assert not bad, ("hvupdater answered Failure", bad)
        assert sorted(m["metadata"]["name"] for m in ms) == sorted(before), ("Machines changed", before, ms)
        after, views = assert_in_place(before, guest, sockets)
        done = done_per_machine(calls, before)
        hosts = sorted({m.group(0) for x in lines_of(ce.HVLOG)[mk["hv"]:]
                        for m in re.finditer(r"capk:[a-z0-9.-]+/[a-z0-9.-]+", x)})
        capk = []
        if capk_mark is not None:
            capk = [x.strip() for x in lines_of(capk_log)[capk_mark:] if "infra kubeconfig secret" in x]
        RESULTS["infra-secret: 2 Machines in place through the Secret, with the control (s)"] = round(took, 1)
        RESULTS["infra-secret calls"] = ce.summarize(calls)
        log("in place in %.1f s through Secret %s/%s; guests %s; hvupdater got: %s" % (
            took, NS, INFRA_SECRET, views, ce.summarize(calls)))
        log("    the stand-in: %s" % refused[0].split(" standin: ", 1)[-1])
        log("    hvupdater's own identity may patch VMs: %s; the Secret's: %s; hosts in hvupdater's log: %s" % (
            can_i(HVSA, "patch", "virtualmachines.kubevirt.io"),
            can_i(INFRA_USER, "patch", "virtualmachines.kubevirt.io"), hosts))
        log("    CAPK's log on the Secret while it was gone: %d lines%s" % (
            len(capk), (": " + capk[0][:240]) if capk else ""))
        for c in done:
            log("    %s %s: %s" % (c[3], c[1], c[2]))
        STATE.update(snap=after, guest=guest, sockets=sockets)
    finally:
        # the normal lab: no ref, hvupdater's own rights and config, restarted
        kv.fault("refuse-patch", on=False)
        kv.fault("hold-migration", on=False)
        kv.kubectl("patch", "kubevirtcluster", CL, "-n", NS, "--type", "json", "-p",
                   '[{"op": "remove", "path": "/spec/infraClusterSecretRef"}]', check=False)
        kv.kubectl("apply", "-f", "-", stdin=RBAC)
        with open(path, "w") as f:
            f.write(normal)
        restart_hvupdater()
    RESULTS["infra-secret: the whole scenario (s)"] = round(time.monotonic() - t0, 1)


def hv_events(since):
    """hvupdater's log lines after line since, as JSON objects"""
    out = []
    for x in lines_of(ce.HVLOG)[since:]:
        try:
            out.append(json.loads(x))
        except ValueError:
            continue
    return out


def hv_pid():
    return int(open(os.path.join(os.environ["HV_CAPI_STATE"], "hvupdater.pid")).read().strip())


def gone(pid):
    """pid has exited (a zombie nobody reaped yet counts)"""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def hv_answers():
    """hvupdater's HTTPS endpoint answers /readyz"""
    try:
        return ce.hv_https("GET", "/readyz")[0] == 200
    except OSError:  # (urllib's URLError: connection refused)
        return False


def scenario_kill9():
    """hvupdater killed (kill -9) mid-operation, while a Machine's live change is applied on its
    VM and KubeVirt has not finished it, then started again as the lab starts it: the update
    finishes in place."""
    before = STATE["snap"]
    tmpl, guest, sockets = "kvt-3g", "3Gi", 4
    mk = grow_step("kill9", tmpl, guest, sockets)
    vms = {s["kubevirtmachine"]: name for name, s in before.items()}
    seen = set()

    def in_flight():
        """a VM that carries hvupdater's record and the new memory.guest, its VMI the
        HotMemoryChange KubeVirt has not finished (held by the stand-in)"""
        for km, name in vms.items():
            o = kv.get("virtualmachine", km, NS)
            rec = (o["metadata"].get("annotations") or {}).get("hvupdater.io/operation")
            if not rec or mib(vm_domain(o)["memory"]["guest"]) != mib(guest):
                continue
            vmi = kv.get("virtualmachineinstance", km, NS)
            if kv.cond(vmi, "HotMemoryChange").get("status") == "True":
                return name, km, rec
        return None
    kv.fault("hold-migration")
    t0 = time.monotonic()
    try:
        ce.set_template(NS, MD, tmpl)
        name, km, rec = ce.wait("a Machine's live change applied on its VM and held", in_flight, 300)
        m = [x for x in ce.machines(NS, MD) if x["metadata"]["name"] == name][0]
        assert ce.updating_in_place(m), ("CAPI is not updating Machine %s in place" % name, m["metadata"])
        pid = hv_pid()
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic() - t0
        kv.wait("hvupdater (pid %d) gone after kill -9" % pid, lambda: gone(pid), 30)
        assert not hv_answers(), "hvupdater still answers after kill -9"
        log("kill -9 hvupdater (pid %d) %.1f s into the rollout: Machine %s's VM %s carried the record "
            "and memory.guest %s, its VMI HotMemoryChange" % (pid, t_kill, name, km, guest))
        log("    the record: %s" % rec[:300])
        # CAPI's next UpdateMachine call meets no hvupdater
        refused = ce.wait("CAPI's UpdateMachine call to fail on the killed hvupdater", lambda: [
            x for x in capi_update_errors(mk["capi"]) if "connection refused" in x], 120)
        hv_mark = ce.hv_log_lines()
        subprocess.run([os.path.join(ROOT, "test", "capi", "up.sh"), "--restart-hvupdater"],
                       check=True, env=dict(os.environ, HV_BUILD=STATE["build"]))
        t_start = time.monotonic() - t0
        assert hv_pid() != pid and not gone(hv_pid()), "hvupdater was not started again"
        log("hvupdater started again (pid %d) %.1f s into the rollout, after CAPI's call failed: %s" % (
            hv_pid(), t_start, refused[0][refused[0].find("err="):][:200]))
    finally:
        kv.fault("hold-migration", on=False)
    ms = watch_rollout("the in-place rollout to %s after kill -9" % tmpl, tmpl, guest, sockets, 400, seen)
    took = time.monotonic() - t0
    calls = ce.hv_calls(mk["hv"])
    new_calls = ce.hv_calls(hv_mark)
    # hvupdater itself never answered Failure, before the kill or after; CAPI's only failures
    # were the calls that met no hvupdater
    bad = [c for c in calls if c[1] == "Failure" and
           (c[0] == "UpdateMachine" or (c[0] == "CanUpdateMachineSet" and ce.not_retry_wait(c)))]
    assert not bad, ("hvupdater answered Failure", bad)
    other = [x for x in capi_update_errors(mk["capi"]) if "http call failed" not in x]
    assert not other, ("CAPI failed the update otherwise than on the killed hvupdater", other)
    assert sorted(m["metadata"]["name"] for m in ms) == sorted(before), ("Machines changed", before, ms)
    after, views = assert_in_place(before, guest, sockets)
    done = done_per_machine(new_calls, before)  # both answered done by the new process
    # the new process carried the recorded cycle on: it began none for that VM (an
    # operation-start would mean the record was lost and the change begun again)
    mine = [e for e in hv_events(hv_mark) if str(e.get("vm", "")).endswith("%s/%s" % (NS, km))]
    assert not [e for e in mine if e.get("event") == "operation-start"], ("begun again", mine)
    assert [e for e in mine if e.get("event") == "operation-done"], ("not finished by the new process", mine)
    resumed = [e for e in mine if e.get("event") == "resume"]
    RESULTS["kill9: hvupdater killed mid-operation, 2 Machines in place (s)"] = round(took, 1)
    RESULTS["kill9 calls"] = ce.summarize(calls)
    log("in place in %.1f s across kill -9; guests %s; hvupdater got: %s" % (took, views, ce.summarize(calls)))
    log("    the new process %s" % ("resumed the cycle of %s from its record at start" % km if resumed else
                                    "carried the cycle of %s on at CAPI's next call" % km))
    log("    CAPI's failed calls: %d; Updating conditions seen: %s" % (
        len(capi_update_errors(mk["capi"])), sorted({(x[1], x[2]) for x in seen})))
    for c in done:
        log("    %s %s: %s" % (c[3], c[1], c[2]))
    STATE.update(snap=after, guest=guest, sockets=sockets)


def scenario_beyond_max():
    before = STATE["snap"]
    guest, sockets = STATE["guest"], STATE["sockets"]  # as the scenarios before left them
    # 1. powerCycle Never: refused, nothing touched
    ce.set_settings({"powerCycle": "Never"})
    mark = ce.hv_log_lines()
    kv.apply([kv.capk_template(NS, "kvt-4g", guest="4Gi", sockets=sockets)])
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
        vm_mem = vm_domain(o)["memory"]
        assert (mib(vm_mem["guest"]), mib(vm_mem["maxGuest"])) == (mib(guest), 3072), vm_mem
        assert o["spec"]["runStrategy"] == "Always", o["spec"]
        assert settled_vmi(s["kubevirtmachine"], guest, sockets)
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
    ms = ce.wait("the rollout to kvt-4g by restarts", lambda: rolled_out("kvt-4g", "4Gi", sockets), 900)
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
        assert vm_domain(o)["cpu"]["sockets"] == sockets
        assert o["spec"]["runStrategy"] == "Always", o["spec"]
        assert "hvupdater.io/run-strategy" not in (o["metadata"].get("annotations") or {})
        assert not kv.cond(o, "RestartRequired")
        vmi = settled_vmi(s["kubevirtmachine"], "4Gi", sockets)
        assert vmi and mem(vmi).get("guestAtBoot") == "4Gi", mem(vmi)
        views[name] = kv.wait("the guest of %s showing about 3 GiB more and %d CPUs" % (name, sockets), lambda: (
            lambda w: w if w and w[1] == sockets and w[0] - STATE["boot_kb"][name] >= 2.9 * GI else None)(
                kv.console_view(s["domain"])), timeout=240)
    done = done_per_machine(calls, before)
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


SCENARIOS = [scenario_hvupdater, scenario_scale_up, scenario_in_place, scenario_conflict,
             scenario_down, scenario_infra_secret, scenario_kill9, scenario_beyond_max]


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
