#!/usr/bin/python3
"""kubevirt_backend_test.py: backends/kubevirt through `hvupdater plan` / `apply` against the
KubeVirt lab (test/kubevirt: the real kube-apiserver with KubeVirt's CRDs and the KubeVirt
stand-in turning VirtualMachines into QEMU domains). Needs the lab up
(eval "$(test/kubevirt/up.sh)") and the hvupdater binary (--binary).

hvupdater reaches the API server as a service account that has exactly the RBAC
docs/kubevirt.md lists (a ClusterRole made here), with a config file's kubevirt section.
One VM, NS/kvback (1Gi of maxGuest 3Gi, 1 socket of maxSockets 4), through these scenarios
in order, everything read back from the API server, virsh and the guest's console:
  boot       the VM runs; `plan` shows it as the VMI reports it
  plan       memory 1Gi->2Gi and sockets 1->2 planned live, 4Gi (above maxGuest 3Gi) with a
             power cycle, with the documented reasons
  live       `apply --wait` 2Gi and 2 sockets: done, same VMI (no restart), same domain,
             guestCurrent 2Gi, currentCPUTopology.sockets 2, the guest shows 2 CPUs
  trap       kubevirt #12101 (stand-in fault stuck-guestcurrent): 2560 MiB under
             powerCycle Never: the migration "succeeds", guestCurrent stays, and hvupdater
             never answers done (fails after liveTimeoutSeconds); unstuck, it moves
  cold       4Gi (beyond maxGuest): done by Halted -> reconfigure -> Always: a new VMI with
             4Gi, maxGuest raised, runStrategy Always again, the kept strategy annotation gone
  restart    cores 1->2 (restart-only) with one `apply` that stops after its first pass (in
             progress, the record annotation on the VM), then a second process: it carries
             the cycle on from that record to done
  never      6Gi (above maxGuest) under powerCycle Never: refused with the documented
             message; VMI, domain and VM spec untouched
  conflict   virt-api's validator (the stand-in) refuses the next 4 VM changes with 409:
             "another task is changing the VM; trying again", then done, same VMI
  down       the stand-in down for 60 s (webhook failing, nothing reconciled) during a socket
             hot-plug: in progress ("cannot be reached; trying again"), done after it is back
  kill9      kill -9 mid-cycle at each step of a restart (HV_FAILPOINT before/after
             shutdown, reconfigure, power-on; cores per socket toggled): a new process
             finishes each cycle from the record: new VMI, runStrategy Always, guest running
  property   10 random (current, desired) pairs of memory, sockets and cores (seed 29,
             HV_KV_PROPERTY_SEED): `plan` says live or a restart; `apply --wait` ends done
             with the VMI showing it, the same VMI exactly when all was planned live
Prints one line per scenario and `N passed, N failed`; exit 1 on any failure.
Usage: kubevirt_backend_test.py --binary BUILD/hvupdater [-k NAME]...
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback

if sys.flags.optimize:
    raise SystemExit("kubevirt_backend_test: run without -O: its checks are assert statements")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB = os.environ.get("HV_KUBEVIRT_LAB_DIR", os.path.join(ROOT, "test", "kubevirt"))
sys.path.insert(0, LAB)
kv = None  # kvlab, imported once a scenario is chosen (main)

NAME = "kvback"
SA = "hvupdater-kubevirt"
STATE = {}
RBAC_TEMPLATE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hvupdater-kubevirt}
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
metadata: {name: hvupdater-kubevirt}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hvupdater-kubevirt}
subjects:
- {kind: ServiceAccount, name: %s, namespace: %s}
"""


def log(msg):
    print("  %s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def hv(cmd, *args, want_rc=None, env=None):
    """hvupdater plan/apply on the lab VM; (exit status, stdout)"""
    argv = [STATE["bin"], cmd, "--kubevirt-vm", "%s/%s" % (kv.NS, NAME), "--config",
            STATE["config"], "--log-level", "warn"] + list(args)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})))
    out = p.stdout + p.stderr
    for line in out.strip().splitlines():
        log("| " + line)
    # the backend's warnings (JSON lines: a failed call's detail) are shown, not judged
    out = "\n".join(l for l in out.splitlines() if not l.startswith('{"ts"')) + "\n"
    if want_rc is not None:
        assert p.returncode == want_rc, "%s exited %d, want %d" % (cmd, p.returncode, want_rc)
    return p.returncode, out


def row(field, a, b, how):
    """one line of `plan`'s table"""
    return "%-17s %d -> %d: %s" % (field, a, b, how)


def vmi():
    return kv.get("virtualmachineinstance", NAME)


def vmobj():
    return kv.get("virtualmachine", NAME)


def mem(o):
    return ((o or {}).get("status") or {}).get("memory") or {}


def settled(o, guest, sockets):
    return (o and (o.get("status") or {}).get("phase") == "Running"
            and mem(o).get("guestCurrent") == guest and mem(o).get("guestRequested") == guest
            and o["status"].get("currentCPUTopology", {}).get("sockets") == sockets
            and not kv.cond(o, "HotMemoryChange") and not kv.cond(o, "HotVCPUChange"))


def scenario_boot():
    kv.kubectl("apply", "-f", "-", stdin=RBAC_TEMPLATE % (SA, kv.NS))
    kv.kubectl("create", "serviceaccount", SA, "-n", kv.NS, check=False)
    token = kv.kubectl("create", "token", SA, "-n", kv.NS, "--duration", "2h").strip()
    server = kv.kubectl("config", "view", "--minify", "-o",
                        "jsonpath={.clusters[0].cluster.server}").strip()
    d = tempfile.mkdtemp(prefix="hv-kvback-")
    with open(os.path.join(d, "token"), "w") as f:
        f.write(token + "\n")
    cfg = {"kubevirt": {"clusters": [{
        "name": "lab", "server": server, "tokenFile": os.path.join(d, "token"),
        "caFile": os.path.join(os.environ["HV_CAPI_STATE"], "pki", "ca.crt"),
        "namespaces": [kv.NS]}]}}
    STATE["config"] = os.path.join(d, "config.json")
    with open(STATE["config"], "w") as f:
        json.dump(cfg, f)
    kv.kubectl("apply", "-f", "-", stdin=json.dumps(kv.vm(NAME)))
    v = kv.wait("VMI Running with 1Gi", lambda: (lambda o: o if settled(o, "1Gi", 1) else None)(vmi()))
    kv.wait("VM Running", lambda: (vmobj().get("status") or {}).get("printableStatus") == "Running")
    kv.wait("the guest's first report", lambda: kv.console_view(kv.domain(NAME)))
    STATE["uid"] = v["metadata"]["uid"]
    STATE["domuuid"] = kv.virsh("domuuid", kv.domain(NAME))
    _, out = hv("plan", "--memory-mib", "1024", want_rc=0)
    assert "VM %s/%s on lab: running, memory 1024 MiB, 1 socket" % (kv.NS, NAME) in out, out


def scenario_plan():
    _, out = hv("plan", "--memory-mib", "2048", "--cpus", "2", want_rc=0)
    assert row("memory", 1024, 2048, "live (memory hot-plug)") in out, out
    assert row("sockets", 1, 2, "live (socket hot-plug)") in out, out
    _, out = hv("plan", "--memory-mib", "4096", "--cpus", "5", "--cores-per-socket", "2",
                want_rc=0)
    assert row("memory", 1024, 4096, "with a power cycle (above memory.maxGuest)") in out, out
    assert row("sockets", 1, 5, "with a power cycle (above cpu.maxSockets)") in out, out
    assert row("cores per socket", 1, 2,
               "with a power cycle (cores per socket change needs a restart)") in out, out
    assert vmi()["metadata"]["uid"] == STATE["uid"]  # planning changes nothing


def scenario_live():
    _, out = hv("apply", "--memory-mib", "2048", "--cpus", "2", "--wait", "--timeout", "300",
                want_rc=0)
    assert "done" in out.strip().splitlines()[-1], out
    v = vmi()
    assert settled(v, "2Gi", 2), v.get("status")
    assert v["metadata"]["uid"] == STATE["uid"], "the VMI was restarted"
    assert kv.virsh("domuuid", kv.domain(NAME)) == STATE["domuuid"]
    dom = vmobj()["spec"]["template"]["spec"]["domain"]
    assert dom["memory"]["guest"] == "2Gi" and dom["cpu"]["sockets"] == 2, dom
    view = kv.wait("the guest showing 2 CPUs", lambda: (lambda w: w if w and w[1] == 2 else None)(
        kv.console_view(kv.domain(NAME))))
    log("live: guest MemTotal=%d kB cpus=%d" % view)


def scenario_trap():
    kv.fault("stuck-guestcurrent", text="%s/%s\n" % (kv.NS, NAME))
    try:
        rc, out = hv("apply", "--memory-mib", "2560", "--set", "powerCycle=Never", "--set",
                     "liveTimeoutSeconds=20", "--wait", "--timeout", "120")
        v = vmi()
        # the (skipped) migration completed, the condition is gone, guestCurrent did not move
        assert mem(v).get("guestRequested") == "2560Mi", mem(v)
        assert mem(v).get("guestCurrent") == "2Gi", mem(v)
        assert v["status"]["migrationState"]["completed"] is True
        assert not kv.cond(v, "HotMemoryChange")
        assert rc == 1, "apply exited %d: the trap must never be done" % rc
        assert "done" not in out, out
        assert "did not show within 20 s" in out, out
    finally:
        kv.fault("stuck-guestcurrent", on=False)
    kv.wait("guestCurrent 2560Mi once unstuck", lambda: mem(vmi()).get("guestCurrent") == "2560Mi")
    assert vmi()["metadata"]["uid"] == STATE["uid"]


def scenario_cold():
    rc, out = hv("apply", "--memory-mib", "4096", "--wait", "--timeout", "400", want_rc=0)
    assert "done" in out.strip().splitlines()[-1], out
    v = vmi()
    assert v["metadata"]["uid"] != STATE["uid"], "no restart"
    assert settled(v, "4Gi", 2), v.get("status")
    o = vmobj()
    dom = o["spec"]["template"]["spec"]["domain"]
    assert dom["memory"] == {"guest": "4Gi", "maxGuest": "4Gi"}, dom["memory"]
    assert o["spec"]["runStrategy"] == "Always", o["spec"]
    ann = o["metadata"].get("annotations") or {}
    assert "hvupdater.io/run-strategy" not in ann, ann
    assert "hvupdater.io/operation" in ann, ann  # the record stays, done
    assert not kv.cond(o, "RestartRequired")
    STATE["uid"] = v["metadata"]["uid"]


def scenario_restart():
    # one pass: the shutdown is sent and recorded; this process then ends (exit 3)
    rc, out = hv("apply", "--cores-per-socket", "2", want_rc=3)
    o = vmobj()
    rec = (o["metadata"].get("annotations") or {}).get("hvupdater.io/operation", "")
    assert rec, "no record on the VM"
    log("record after the first process: %s" % rec[:160])
    assert o["spec"]["runStrategy"] == "Halted", o["spec"]
    assert o["metadata"]["annotations"].get("hvupdater.io/run-strategy") == "Always"
    # a new process carries the cycle on from the record
    _, out = hv("apply", "--cores-per-socket", "2", "--wait", "--timeout", "400", want_rc=0)
    assert "done" in out.strip().splitlines()[-1], out
    v = vmi()
    assert v["metadata"]["uid"] != STATE["uid"]
    assert v["status"]["currentCPUTopology"]["cores"] == 2, v["status"]["currentCPUTopology"]
    o = vmobj()
    assert o["spec"]["runStrategy"] == "Always"
    assert o["spec"]["template"]["spec"]["domain"]["cpu"]["cores"] == 2


def vm_state():
    """what a refused or retried change must leave alone: the VMI, the domain, the VM's spec"""
    o = vmobj()
    return (vmi()["metadata"]["uid"], kv.virsh("domuuid", kv.domain(NAME)),
            json.dumps(o["spec"], sort_keys=True))


def scenario_never():
    # 6Gi is above maxGuest (4Gi since `cold`): a restart, which powerCycle Never forbids
    before = vm_state()
    rc, out = hv("apply", "--memory-mib", "6144", "--set", "powerCycle=Never", "--wait",
                 "--timeout", "120")
    assert rc == 1, "apply exited %d: a change that needs a restart under Never" % rc
    last = out.strip().splitlines()[-1]
    assert "memory needs a power cycle (above memory.maxGuest) and powerCycle is Never" in last, out
    assert vm_state() == before, "a refused change touched the VM"


def scenario_conflict():
    # virt-api's validator (the stand-in) refuses the next 4 changes of the VM with 409
    # Conflict: the backend's three rounds of the first write (the operation record) take 3,
    # the engine answers in progress and writes again on its next pass, which gets through.
    # In progress, then done; never a Failure.
    uid = vmi()["metadata"]["uid"]
    kv.fault("refuse-patch", text="4")
    try:
        _, out = hv("apply", "--cpus", "3", "--wait", "--timeout", "300", want_rc=0)
    finally:
        left = os.path.exists(os.path.join(kv.FAULTS, "refuse-patch"))
        kv.fault("refuse-patch", on=False)
    assert not left, "the validator was not asked 4 times"
    assert "in progress: another task is changing the VM; trying again" in out, out
    assert "cannot store" not in out and "failed" not in out, out
    assert "done" in out.strip().splitlines()[-1], out
    v = vmi()
    assert v["metadata"]["uid"] == uid, "the VMI was restarted"
    assert v["status"]["currentCPUTopology"]["sockets"] == 3, v["status"]["currentCPUTopology"]


def scenario_down():
    # the stand-in (KubeVirt's controllers and virt-api's validator) is down for 60 s: the API
    # server refuses the VM's changes (the webhook fails) and nothing reconciles. The change
    # is in progress all that time and done once KubeVirt is back; never a Failure.
    uid = vmi()["metadata"]["uid"]
    kv.fault("down", text="60")
    t0 = time.monotonic()
    try:
        rc, out = hv("apply", "--cpus", "4", "--wait", "--timeout", "400")
    finally:
        kv.fault("down", on=False)
    took = time.monotonic() - t0
    log("down: apply took %.0f s" % took)
    assert rc == 0, "apply exited %d: KubeVirt down for a minute must not fail the change" % rc
    assert "the hypervisor cannot be reached; trying again" in out, out
    assert "done" in out.strip().splitlines()[-1], out
    assert took >= 55, "done after %.0f s while KubeVirt was down for 60 s" % took
    v = vmi()
    assert v["metadata"]["uid"] == uid, "the VMI was restarted"
    assert v["status"]["currentCPUTopology"]["sockets"] == 4, v["status"]["currentCPUTopology"]


# Where a process can die in a KubeVirt restart (Halted -> reconfigure -> Always)
KILL_POINTS = ["before:shutdown", "after:shutdown", "before:reconfigure", "after:reconfigure",
               "before:power-on", "after:power-on"]


def scenario_kill9():
    # kill -9 mid-cycle, at each step of a restart (cores per socket toggled 2 <-> 1): the
    # process SIGKILLs itself there (HV_FAILPOINT); a new process finishes the cycle from the
    # record annotation: a new VMI with the cores, runStrategy Always again, the kept
    # strategy annotation gone, the guest running
    cores = vmobj()["spec"]["template"]["spec"]["domain"]["cpu"].get("cores", 1)
    for point in KILL_POINTS:
        cores = 1 if cores == 2 else 2
        uid = vmi()["metadata"]["uid"]
        rc, _ = hv("apply", "--cores-per-socket", str(cores), "--wait", "--timeout", "300",
                   env={"HV_FAILPOINT": point})
        assert rc == -9, "%s: apply exited %d, not killed there" % (point, rc)
        mid = vmobj()
        t0 = time.monotonic()
        _, out = hv("apply", "--cores-per-socket", str(cores), "--wait", "--timeout", "400",
                    want_rc=0)
        assert "done" in out.strip().splitlines()[-1], (point, out)
        v = vmi()
        assert v and v["metadata"]["uid"] != uid, (point, "no restart")
        assert v["status"]["currentCPUTopology"]["cores"] == cores, (point, v["status"])
        o = vmobj()
        assert o["spec"]["runStrategy"] == "Always", (point, o["spec"])
        assert o["spec"]["template"]["spec"]["domain"]["cpu"]["cores"] == cores, point
        assert "hvupdater.io/run-strategy" not in (o["metadata"].get("annotations") or {}), point
        log("%-18s killed with runStrategy %s; done %.1f s after the new process began"
            % (point, mid["spec"].get("runStrategy"), time.monotonic() - t0))


PLAN_ROW = re.compile(r"^(memory|sockets|cores per socket)\s+(\d+) -> (\d+): (.*)$")


def qty_mib(q):
    """a Kubernetes memory quantity as KubeVirt writes it (Gi, Mi) in MiB"""
    m = re.match(r"^(\d+)(Gi|Mi)$", q or "")
    assert m, "unexpected quantity %r" % q
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


def scenario_property():
    # the plan property, as for the other two backends: for random (current, desired) pairs,
    # `plan` says how each field changes; `apply --wait` (powerCycle IfNeeded) then always
    # ends done with the VMI showing the desired memory, sockets and cores, and the VMI is
    # the same exactly when every changed field was planned live. Seeded: HV_KV_PROPERTY_SEED.
    seed = int(os.environ.get("HV_KV_PROPERTY_SEED", "29"))
    pairs = int(os.environ.get("HV_KV_PROPERTY_PAIRS", "10"))
    rng = random.Random(seed)
    live_n = cycle_n = 0
    for k in range(pairs):
        want = {"memory": rng.choice([1024, 1536, 2048, 3072, 4096, 5120]),
                "sockets": rng.randint(1, 6), "cores per socket": rng.randint(1, 2)}
        _, out = hv("plan", "--memory-mib", str(want["memory"]), "--cpus", str(want["sockets"]),
                    "--cores-per-socket", str(want["cores per socket"]), want_rc=0)
        rows = {}
        for line in out.splitlines():
            m = PLAN_ROW.match(line.strip())
            if m:
                rows[m.group(1)] = (int(m.group(2)), int(m.group(3)), m.group(4))
        assert set(rows) == set(want), (k, out)
        changed = [f for f, (a, b, _) in rows.items() if a != b]
        live = all(rows[f][2].startswith("live") for f in changed)
        assert all(rows[f][2].startswith(("live", "with a power cycle")) for f in changed), out
        uid = vmi()["metadata"]["uid"]
        _, out = hv("apply", "--memory-mib", str(want["memory"]), "--cpus",
                    str(want["sockets"]), "--cores-per-socket", str(want["cores per socket"]),
                    "--wait", "--timeout", "400", want_rc=0)
        assert "done" in out.strip().splitlines()[-1], (k, out)
        v = vmi()
        shows = {"memory": qty_mib(mem(v).get("guestCurrent")),
                 "sockets": v["status"]["currentCPUTopology"]["sockets"],
                 "cores per socket": v["status"]["currentCPUTopology"]["cores"]}
        assert shows == want, (k, want, shows)
        same = v["metadata"]["uid"] == uid
        assert same == live, (k, "planned %s, VMI %s" % ("live" if live else "a restart",
                                                          "kept" if same else "replaced"), rows)
        live_n += bool(changed) and live
        cycle_n += not live
        log("pair %d: %s -> %s, %s" % (k, {f: a for f, (a, _, _) in rows.items()}, want,
                                       "unchanged" if not changed else
                                       "live" if live else "restart"))
    log("property (seed %d): %d pairs, %d live, %d restarts, all done as planned"
        % (seed, pairs, live_n, cycle_n))
    assert live_n >= 1 and cycle_n >= 1, "the pairs did not reach both paths"


SCENARIOS = [("boot", scenario_boot), ("plan", scenario_plan), ("live", scenario_live),
             ("trap", scenario_trap), ("cold", scenario_cold), ("restart", scenario_restart),
             ("never", scenario_never), ("conflict", scenario_conflict), ("down", scenario_down),
             ("kill9", scenario_kill9), ("property", scenario_property)]


def diagnose():
    """after a failure: what the stand-in and QEMU said last (the lab's state is removed by
    down.sh, so a CI log keeps only this)"""
    dom = kv.domain(NAME)
    for title, path, n in (("the stand-in's log", os.environ.get("HV_KUBEVIRT_STANDIN_LOG"), 40),
                           ("QEMU's log of " + dom, "/var/log/libvirt/qemu/%s.log" % dom, 15),
                           ("the guest's console", "/var/log/libvirt/qemu/%s.console.log" % dom,
                            15)):
        try:
            with open(path or "", errors="replace") as f:
                lines = f.read().splitlines()[-n:]
        except OSError as e:
            lines = ["(cannot read: %s)" % e]
        print("--- %s, last %d lines" % (title, n))
        for line in lines:
            print("  " + line[:300])
    try:
        now = json.dumps((vmi() or {}).get("status"))
    except Exception as e:  # the API server may be what failed
        now = "(cannot read: %s)" % e
    print("--- the VMI's status now: %s" % now, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "hvupdater"))
    ap.add_argument("-k", action="append", default=[], help="run only these scenarios")
    a = ap.parse_args()
    STATE["bin"] = os.path.abspath(a.binary)
    chosen = [s for s in SCENARIOS if not a.k or s[0] in a.k]
    if not chosen:
        print("FAIL no scenario matches %s" % a.k)
        return 1
    global kv
    import kvlab
    kv = kvlab
    passed = failed = 0
    try:
        for name, fn in chosen:
            t0 = time.monotonic()
            try:
                fn()
                passed += 1
                print("ok %s (%.0f s)" % (name, time.monotonic() - t0), flush=True)
            except Exception:
                failed += 1
                traceback.print_exc()
                print("FAIL %s" % name, flush=True)
                diagnose()
                break  # the scenarios build on each other
    finally:
        kv.kubectl("delete", "virtualmachine", NAME, "-n", kv.NS, "--ignore-not-found",
                   check=False)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or passed != len(chosen) else 0


if __name__ == "__main__":
    sys.exit(main())
