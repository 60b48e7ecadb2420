#!/usr/bin/python3
"""hostile-bench.py: hvupdater's memory under hostile request bodies. A benchmark: it prints
figures and asserts nothing.

Starts `hvupdater serve` (the embedded default: built-in profiles, libvirt's test driver) and
sends, over TLS, ROUNDS rounds of CONC concurrent CanUpdateMachine bodies of SIZE bytes that
are the densest JSON there is (`[0,0,0,...]`: one value per two bytes), then NAMES
UpdateMachine calls for made-up Machines and VMs. Prints the HTTP answers it got, the
server's RSS before, its peak (VmHWM) and its RSS after each phase.

With --max-entries N the server runs with engine.maxEntries N (a config file naming
libvirt's test driver) instead of the default 10,000. --rounds 0 skips the bodies, so the
peak RSS printed after the names is theirs alone.

Usage: hostile-bench.py [--build DIR] [--size BYTES] [--conc N] [--rounds N] [--names N]
                        [--max-entries N]
"""
import argparse
import collections
import http.client
import json
import os
import ssl
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import hvtest  # noqa: E402


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def mib(kib):
    return "%.1f MiB" % (kib / 1024.0)


def hostile_body(size):
    n = max(1, (size - 1) // 2)
    return b"[" + b"0," * (n - 1) + b"0]"


def post_raw(srv, path, body, codes, lock):
    ctx = ssl.create_default_context(cafile=os.path.join(srv.dir, "tls", "ca.crt"))
    conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx, timeout=120)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        code = r.status
    except (OSError, http.client.HTTPException) as e:
        code = "closed (%s)" % type(e).__name__
    finally:
        conn.close()
    with lock:
        codes[code] += 1


def phase_bodies(srv, size, conc, rounds):
    body = hostile_body(size)
    path = hvtest.PATHS["CanUpdateMachine"]
    codes, lock = collections.Counter(), threading.Lock()
    t0 = time.monotonic()
    for _ in range(rounds):
        ts = [threading.Thread(target=post_raw, args=(srv, path, body, codes, lock))
              for _ in range(conc)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    return codes, time.monotonic() - t0


def update_request(k):
    name = "forged-%06d" % k
    return {
        "apiVersion": "hooks.runtime.cluster.x-k8s.io/v1alpha1",
        "kind": "UpdateMachineRequest",
        "settings": {"powerCycle": "Never"},
        "desired": {
            "machine": {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                        "metadata": {"name": name, "namespace": "default", "uid": "u-%d" % k},
                        "spec": {"clusterName": "c", "infrastructureRef": {
                            "apiGroup": "infrastructure.cluster.x-k8s.io",
                            "kind": "LibvirtMachine", "name": name}}},
            "infrastructureMachine": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                "kind": "LibvirtMachine",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"memoryMiB": 4096, "vcpu": 2}},
        },
    }


def phase_names(srv, names):
    c = srv.client()
    answers = collections.Counter()
    t0 = time.monotonic()
    for k in range(names):
        resp, _ = c.post_once("UpdateMachine", update_request(k))
        answers[resp.get("status", "?")] += 1
    return answers, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--size", type=int, default=4 << 20)
    ap.add_argument("--conc", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--names", type=int, default=20000)
    ap.add_argument("--max-entries", type=int, default=0)
    a = ap.parse_args()
    cfg = None
    if a.max_entries:
        cfg = {"libvirt": {"uris": ["test:///default"]}, "engine": {"maxEntries": a.max_entries}}
    srv = hvtest.Server(os.path.join(os.path.abspath(a.build), "hvupdater"), config=cfg)
    srv.start()
    pid = srv.proc.pid
    try:
        srv.client().post_once("Discovery", {"apiVersion": "hooks.runtime.cluster.x-k8s.io/v1alpha1",
                                             "kind": "DiscoveryRequest"})
        rss0 = status_kib(pid, "VmRSS")
        print("server started: RSS %s" % mib(rss0))
        codes, secs = phase_bodies(srv, a.size, a.conc, a.rounds)
        print("hostile bodies: %d rounds of %d concurrent %d-byte [0,0,...] bodies in %.1f s" %
              (a.rounds, a.conc, a.size, secs))
        print("  answers: %s" % ", ".join("%s x%d" % (k, v) for k, v in sorted(codes.items(), key=str)))
        print("  peak RSS %s (+%s over the start), RSS after %s" %
              (mib(status_kib(pid, "VmHWM")), mib(status_kib(pid, "VmHWM") - rss0),
               mib(status_kib(pid, "VmRSS"))))
        if a.names:
            rss1 = status_kib(pid, "VmRSS")
            answers, secs = phase_names(srv, a.names)
            rss2 = status_kib(pid, "VmRSS")
            print("forged names: %d UpdateMachine calls for made-up Machines in %.1f s" %
                  (a.names, secs))
            print("  answers: %s" % ", ".join("%s x%d" % kv for kv in sorted(answers.items())))
            print("  RSS %s -> %s (+%s, %.0f bytes per name), peak RSS %s" %
                  (mib(rss1), mib(rss2), mib(rss2 - rss1), (rss2 - rss1) * 1024.0 / a.names,
                   mib(status_kib(pid, "VmHWM"))))
        print("server alive: %s" % ("yes" if srv.alive() else "NO"))
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
