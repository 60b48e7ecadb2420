#!/usr/bin/python3
"""compose-bench.py: what a downstream extension adds to a CanUpdateMachine answer.

Starts test/compose/testext.py (Python, one keep-alive TLS connection from hvupdater) and two
hvupdater servers on libvirt's test:///default, one alone and one with the extension
downstream, sends the same version+memory request N times to each and prints latency
figures. Nothing is asserted.   compose-bench.py [BUILD_DIR] [N]
"""
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "compose"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import compose_test as ct  # noqa: E402

build = sys.argv[1] if len(sys.argv) > 1 else "build"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
ct.BINARY = os.path.abspath(os.path.join(build, "hvupdater"))
ct.PKI = ct.make_pki(os.path.join(ct.WORK, "pki"))
ext = ct.Ext("kubeup").start()
try:
    for label, ds in (("alone", []), ("with one downstream", [ct.ds_entry(ext)])):
        srv = ct.hvupdater(ds)
        c = srv.client()
        req = ct.cu_request("test", {"memory": 2048}, {"memory": 4096, "version": "v1.32.0"})
        ms = [c.post("CanUpdateMachine", req)[1] for _ in range(n)][n // 10:]
        ms.sort()
        print("CanUpdateMachine %-20s p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  (n=%d)" % (
            label, statistics.median(ms), ms[int(len(ms) * .9)], ms[int(len(ms) * .99)],
            len(ms)))
        srv.stop()
finally:
    ext.stop()
