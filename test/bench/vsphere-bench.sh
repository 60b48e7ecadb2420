#!/bin/sh
# vsphere-bench.sh BUILD_DIR: hot-add memory (4096 -> 8192 MiB) on BENCH_VMS (100) vCenter
# simulator VMs at once, through hvupdater and directly with govmomi, from one run each.
#
# hvupdater: a fresh launcher (test/vcsim) with BENCH_VMS hot-add-enabled VMs, one
# `hvupdater serve` (thumbprint-verified, BENCH_WORKERS engine workers) and BENCH_CLIENTS
# (64, at most BENCH_VMS) keep-alive client connections, as CAPI's bounded controller
# workers would hold, calling UpdateMachine for each VM every BENCH_POLL seconds (a sped-up
# CAPI) until it is done: test/bench/capiclient, a small Go program (standard library), since
# the CAPI it stands in for runs on other machines and a Python client's per-call cost took
# as much of the two shared cores as hvupdater itself. (One connection per VM from one
# address would exceed the server's per-address connection limit, 128, from 129 VMs on: the
# 1,000-VM run stalled that way.)
# govmomi: a second fresh launcher, test/bench/govmomi-reconfig (login, FindByUuid and
# ReconfigVM_Task for every VM concurrently, then wait for every task).
# Both are timed from the first request to the last VM done; SOAP round trips come from the
# launcher's /hvtest/stats (every /sdk POST it answered), minus the reads this script makes
# to check the result (every VM at 8192 MiB, still powered on, no power event).
# Prints: wall time and SOAP calls per VM of both, with the per-method breakdown, their
# ratios against the targets (wall <= 1.0x govmomi's, calls per VM <= govmomi's), the hook
# latency (p50/p99/max at the client, and the p99 bucket of the server's own histogram;
# target p99 < 50 ms), the server's RSS (end, peak), when the last VM's hardware changed on
# the hypervisor in each run (its first VmReconfiguredEvent's createdTime: hvupdater's wall
# with an ideal poller, without the client's BENCH_POLL wait and the verifying pass) and the
# CPU seconds each process used during its run (the machine's cores are shared by the
# simulator, hvupdater and the bench's clients: capiclient with its start, and this script).
# For the 1,000-VM run: BENCH_VMS=1000.
# Nothing asserts timings; the exit status is non-zero only when something is broken (an
# error, a wrong end state, or a VM not done within BENCH_TIMEOUT seconds, 600).
# Environment: BENCH_VMS, BENCH_WORKERS, BENCH_CLIENTS, BENCH_POLL, BENCH_TIMEOUT,
# HV_VCSIM_BIN.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$build/hvupdater
vcsim=${HV_VCSIM_BIN:-$build/vcsim/vcsim}
gobench=$build/bench/govmomi-reconfig
capiclient=$build/bench/capiclient

for tool in go /usr/bin/python3; do
    command -v "$tool" >/dev/null || { echo "vsphere-bench: $tool is not installed" >&2; exit 2; }
done
if [ ! -x "$bin" ]; then
    cmake --build "$build" --target hvupdater >/dev/null
fi
"$root/test/vcsim/build.sh" "$vcsim"

# The govmomi baseline, GOPATH mode against Debian's govmomi (as test/vcsim/build.sh).
mkdir -p "$(dirname "$gobench")"
gopath=$(mktemp -d /tmp/hv-vbench-gopath-XXXXXX)
trap 'rm -rf "$gopath"' EXIT INT TERM
(cd "$here/govmomi-reconfig" &&
    GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" \
    GOCACHE="${HV_VCSIM_GOCACHE:-$(dirname "$vcsim")/.vcsim-gocache}" GOFLAGS='' \
    go build -o "$gobench" .)

# The CAPI stand-in (module mode, standard library only, like test/bench/gopeer).
gobin=${GO:-/usr/local/go/bin/go}
[ -x "$gobin" ] || { echo "vsphere-bench: $gobin is not installed" >&2; exit 2; }
(cd "$here/capiclient" && GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    GOCACHE="${HV_VCSIM_GOCACHE:-$(dirname "$vcsim")/.vcsim-gocache}" \
    "$gobin" build -o "$capiclient" .)

PYTHONDONTWRITEBYTECODE=1 HV_BENCH_BIN=$bin HV_BENCH_CLIENT=$capiclient HV_BENCH_VCSIM=$vcsim HV_BENCH_GO=$gobench \
    HV_BENCH_E2E=$root/test/e2e \
    /usr/bin/python3 - <<'PY'
import calendar
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.environ["HV_BENCH_E2E"])
import hvtest  # noqa: E402
import vsphere_e2e as e2e  # noqa: E402

e2e.BINARY = os.environ["HV_BENCH_BIN"]
e2e.VCSIM = os.environ["HV_BENCH_VCSIM"]
N = int(os.environ.get("BENCH_VMS", "100"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "16"))
POLL = float(os.environ.get("BENCH_POLL", "0.2"))
CLIENTS = max(1, min(N, int(os.environ.get("BENCH_CLIENTS", "64"))))
TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", "600"))
FLAGS = ["-hosts", "4", "-vm", "all:memory=4096,cpus=2,memhotadd,cpuhotadd,tools"]
WANT = 8192


def launcher():
    return e2e.Launcher(*FLAGS, vms=N)


def verify(sim, before):
    """Every VM at WANT MiB, powered on, no power event since `before` (event counts)."""
    bad = []
    for i, vm in enumerate(sim.info["vms"]):
        st = sim.vim.vm(vm["moref"])
        evs = e2e.power_events(sim.vim.events(vm["moref"])[before[i]:])
        if not st["on"] or st["memory"] != WANT or evs:
            bad.append((vm["name"], st["on"], st["memory"], evs))
    if bad:
        sys.exit("vsphere-bench: wrong end state on %d VMs, e.g. %s" % (len(bad), bad[:3]))


def event_counts(sim):
    return [len(sim.vim.events(vm["moref"])) for vm in sim.info["vms"]]


def epoch(stamp):
    """An xsd:dateTime in UTC (vcsim's createdTime) as Unix seconds."""
    day, _, clock = stamp.rstrip("Z").partition("T")
    whole, _, frac = clock.partition(".")
    t = calendar.timegm(time.strptime(day + "T" + whole, "%Y-%m-%dT%H:%M:%S"))
    return t + (float("0." + frac) if frac else 0.0)


def changed_at(sim, since):
    """When each VM's hardware changed on the hypervisor: the createdTime of its first
    reconfiguration event from unix time since on (the launcher's own set-up reconfigures
    too), in unix seconds; None when it has none. A later reconfiguration (hvupdater's
    record write) changes no hardware."""
    out = []
    for vm in sim.info["vms"]:
        inner = ('<filter><entity><entity type="VirtualMachine">%s</entity>'
                 "<recursion>self</recursion></entity>"
                 "<type>VmReconfiguredEvent</type><maxCount>1000</maxCount></filter>"
                 % vm["moref"])
        resp = sim.vim.call("QueryEvents", "EventManager", "eventManager", inner)
        stamps = []
        for rv in e2e.children(resp, "returnval"):
            ct = e2e.child(rv, "createdTime")
            if ct is not None and ct.text and epoch(ct.text) >= since:
                stamps.append(epoch(ct.text))
        out.append(min(stamps) if stamps else None)
    return out


def children_cpu_since(t0):
    """CPU seconds (user + system) of the child processes waited for since os.times() t0."""
    t = os.times()
    return t.children_user + t.children_system - t0.children_user - t0.children_system


def cpu_s(pid):
    """CPU seconds (user + system, every thread) process pid has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def own_cpu_s():
    t = os.times()
    return t.user + t.system


def delta(sim, c0, r0):
    c1, r1 = sim.stats()
    c1.subtract(c0)
    return +c1, r1 - r0


def run_hvupdater():
    """CLIENTS connections (like CAPI's bounded controller workers, and within the server's
    per-address connection limit) drive the N VMs: each takes the VM whose next call is due
    soonest, calls UpdateMachine, and puts it back due POLL seconds later until it is done
    (test/bench/capiclient, a Go program: CAPI runs elsewhere, so its stand-in costs the
    shared cores as little as it can; its CPU is counted as the clients'). Any error stops
    every client at once."""
    sim = launcher()
    server = None
    try:
        before = event_counts(sim)
        cfg = e2e.server_config(sim, engine={"workers": WORKERS})
        server = hvtest.Server(e2e.BINARY, cfg).start()
        reqs = [hvtest.update_request(e2e.vsphere_machine("m%d" % i, WANT, 2),
                                      e2e.machine("m%d" % i, "vsphere://" + vm["uuid"]))
                for i, vm in enumerate(sim.info["vms"])]
        req_file = os.path.join(server.dir, "requests.json")
        with open(req_file, "w") as f:  # the bodies the Python client sent, byte for byte
            f.write("[" + ",".join(json.dumps(r) for r in reqs) + "]")
        c0, r0 = sim.stats()
        cpu0 = (cpu_s(server.proc.pid), cpu_s(sim.proc.pid), own_cpu_s())
        kids0 = os.times()
        p = subprocess.run([os.environ["HV_BENCH_CLIENT"], "-addr", "127.0.0.1:%d" % server.port,
                            "-ca", os.path.join(server.dir, "tls", "ca.crt"),
                            "-requests", req_file, "-clients", str(CLIENTS),
                            "-poll", str(POLL), "-timeout", str(TIMEOUT)],
                           capture_output=True, text=True, timeout=TIMEOUT + 120)
        client_cpu = children_cpu_since(kids0)
        if p.returncode != 0:
            sys.exit("vsphere-bench: the CAPI client failed: %s" % p.stderr[-2000:])
        res = json.loads(p.stdout.strip().splitlines()[-1])
        if res["errors"]:
            sys.exit("vsphere-bench: hvupdater flows failed (%d VMs not done): %s"
                     % (res["left"], res["errors"][:5]))
        hook_ms = res["hook_ms"]
        wall = res["wall"]
        cpu = (cpu_s(server.proc.pid) - cpu0[0], cpu_s(sim.proc.pid) - cpu0[1],
               own_cpu_s() - cpu0[2] + client_cpu)
        t0_unix = res["t0"]  # the simulator stamps its events with the system clock
        # the server's own view of its UpdateMachine handling (from the request to the
        # answer, without TLS, queueing or this client's threads): its histogram's p99 bucket
        m = hvtest.metrics(server.client())
        series = 'hvupdater_hook_duration_seconds_bucket{hook="UpdateMachine",le="%s"}'
        total = m.get('hvupdater_hook_duration_seconds_count{hook="UpdateMachine"}', 0)
        server_p99 = None
        for le in ("0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                   "0.25", "0.5", "1", "2.5", "5", "10"):
            if total and m.get(series % le, 0) >= 0.99 * total:
                server_p99 = float(le) * 1000
                break
        rss = {}
        with open("/proc/%d/status" % server.proc.pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    rss[k] = int(v.split()[0]) / 1024.0
        calls, requests = delta(sim, c0, r0)
        verify(sim, before)
        changed = [c - t0_unix for c in changed_at(sim, t0_unix - 0.01) if c is not None]
        hook_ms.sort()
        return {"wall": wall, "requests": requests, "calls": calls,
                "hook_p50": hook_ms[len(hook_ms) // 2],
                "hook_p99": hook_ms[min(len(hook_ms) - 1, int(len(hook_ms) * 0.99))],
                "hook_max": hook_ms[-1], "hook_calls": len(hook_ms), "server_p99": server_p99,
                "rss": rss.get("VmRSS", 0), "hwm": rss.get("VmHWM", 0),
                "changed": max(changed) if changed else None, "cpu": cpu}
    finally:
        if server:
            e2e.stop_server(server)
        sim.stop()


def run_govmomi():
    sim = launcher()
    try:
        before = event_counts(sim)
        c0, r0 = sim.stats()
        sim_cpu0 = cpu_s(sim.proc.pid)
        kids0 = os.times()
        t0 = time.monotonic()
        t0_unix = time.time()
        p = subprocess.run([os.environ["HV_BENCH_GO"], "-info",
                            os.path.join(sim.dir, "info.json"), "-memory", str(WANT)],
                           capture_output=True, text=True, timeout=600)
        outer = time.monotonic() - t0
        sim_cpu = cpu_s(sim.proc.pid) - sim_cpu0
        go_cpu = children_cpu_since(kids0)
        if p.returncode != 0:
            sys.exit("vsphere-bench: govmomi-reconfig failed: %s" % p.stderr[-2000:])
        res = json.loads(p.stdout.strip().splitlines()[-1])
        calls, requests = delta(sim, c0, r0)
        verify(sim, before)
        changed = [c - t0_unix for c in changed_at(sim, t0_unix - 0.01) if c is not None]
        return {"wall": res["seconds"], "process": outer, "requests": requests, "calls": calls,
                "changed": max(changed) if changed else None, "cpu": (go_cpu, sim_cpu)}
    finally:
        sim.stop()


def fmt_calls(calls):
    top = sorted(calls.items(), key=lambda kv: -kv[1])
    return ", ".join("%s %.1f" % (k, v / N) for k, v in top)


print("vsphere-bench: %d VMs, memory 4096 -> %d MiB hot-add; hvupdater %d workers, %d client "
      "connections, poll %.2fs" % (N, WANT, WORKERS, CLIENTS, POLL), flush=True)
hv = run_hvupdater()
print("hvupdater SOAP calls per VM: " + fmt_calls(hv["calls"]), flush=True)
go = run_govmomi()
print("govmomi   SOAP calls per VM: " + fmt_calls(go["calls"]), flush=True)
print()
print("== vsphere-bench (%d VMs, one run each) ==" % N)
print("%-10s %10s %16s" % ("", "wall (s)", "SOAP calls/VM"))
print("%-10s %10.2f %16.1f" % ("hvupdater", hv["wall"], hv["requests"] / N))
print("%-10s %10.2f %16.1f   (process incl. start %.2fs)"
      % ("govmomi", go["wall"], go["requests"] / N, go["process"]))
print("%-10s %10.2fx %15.2fx   (targets: wall <= 1.0x, calls/VM <= 1.0x)"
      % ("ratio", hv["wall"] / go["wall"], hv["requests"] / go["requests"]))
print("hvupdater hooks: %d UpdateMachine calls, p50 %.1f ms, p99 %.1f ms (target < 50 ms), "
      "max %.1f ms (at the client); the server's own p99 <= %s ms (its histogram's bucket)"
      % (hv["hook_calls"], hv["hook_p50"], hv["hook_p99"], hv["hook_max"],
         "%g" % hv["server_p99"] if hv["server_p99"] is not None else "?"))
print("hvupdater RSS: %.1f MiB at the end, peak (VmHWM) %.1f MiB" % (hv["rss"], hv["hwm"]))
if hv["changed"] is not None and go["changed"] is not None:
    print("last VM changed on the hypervisor at %.2f s (hvupdater run) and %.2f s (govmomi run); "
          "hvupdater answered its last done %.2f s after its change (the poll and the verifying "
          "pass): with an ideal poller hvupdater's wall would be about %.2f s, %.2fx govmomi's"
          % (hv["changed"], go["changed"], hv["wall"] - hv["changed"], hv["changed"],
             hv["changed"] / go["wall"]))
print("CPU seconds during the run: hvupdater %.1f, its simulator %.1f, the bench's clients %.1f; "
      "govmomi program %.1f (with its process start), its simulator %.1f"
      % (hv["cpu"][0], hv["cpu"][1], hv["cpu"][2], go["cpu"][0], go["cpu"][1]))
# Every check passed: the server's directory (its log, certificates and the requests file)
# goes, as hvtest.run() does for passing cases; a failed run above keeps it for a post-mortem.
for d in hvtest.MADE_DIRS:
    shutil.rmtree(d, ignore_errors=True)
PY
