#!/usr/bin/python3
"""libvirt-bench.py: 20 running TCG domains updated at once, through hvupdater (the HTTPS
UpdateMachine hook, as CAPI would call it, polled every 0.1 s) versus the same live changes
issued directly with the libvirt API (one DIMM attach of 512 MiB + one vCPU hot-plug each,
from 20 threads). Prints both wall times and their ratio from one run. Not a test: it asserts
only that every change really happened.

Needs the lab daemon (test/lab/libvirt-up.sh). Usage: libvirt-bench.py BUILD_DIR [N]
"""
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import hvtest  # noqa: E402

import libvirt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
URI = os.environ.get("HV_LIBVIRT_LAB_URI", "qemu:///system")
DIMM = ("<memory model='dimm'><target><size unit='MiB'>512</size><node>0</node></target>"
        "</memory>")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    libvirt.registerErrorHandler(lambda c, e: None, None)
    conn = libvirt.open(URI)
    xml = open(os.path.join(ROOT, "test/lab/domains/dimm.xml")).read()
    names = ["hvt-bench-%02d" % k for k in range(n)]
    for name in names:
        try:
            d = conn.lookupByName(name)
            if d.isActive():
                d.destroy()
            d.undefine()
        except libvirt.libvirtError:
            pass
        conn.defineXML(re.sub(r"hvt-dimm(?=[<.])", name, xml)).create()  # name, console log
    ids = {name: conn.lookupByName(name).ID() for name in names}

    # 1. direct: 1024 -> 1536 MiB, 1 -> 2 vCPUs, all at once
    def direct(name):
        c = libvirt.open(URI)
        d = c.lookupByName(name)
        live_cfg = libvirt.VIR_DOMAIN_AFFECT_LIVE | libvirt.VIR_DOMAIN_AFFECT_CONFIG
        d.attachDeviceFlags(DIMM, live_cfg)
        d.setVcpusFlags(2, live_cfg)
        c.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=direct, args=(nm,)) for nm in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    direct_s = time.monotonic() - t0

    # 2. hvupdater: 1536 -> 2048 MiB, 2 -> 3 vCPUs, the same kind of change, all at once
    server = hvtest.Server(os.path.abspath(os.path.join(build, "hvupdater")),
                           {"libvirt": {"uris": [URI]}, "engine": {"workers": 8}},
                           env={}).start()
    server.env = {}
    answers = {}
    calls = []

    def through(name):
        c = server.client()
        mach = hvtest.machine(name)
        req = hvtest.update_request(hvtest.libvirt_machine(name, 2048, 3), mach)
        last, msgs, _ = hvtest.drive(c, req, timeout=120, poll=0.1)
        answers[name] = last
        calls.append(len(msgs))

    t0 = time.monotonic()
    threads = [threading.Thread(target=through, args=(nm,)) for nm in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hv_s = time.monotonic() - t0
    server.stop()

    ok = True
    for name in names:
        d = conn.lookupByName(name)
        mem = int(re.search(r"<memory unit='KiB'>(\d+)</memory>", d.XMLDesc(0)).group(1)) // 1024
        vcpus = d.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        if mem != 2048 or vcpus != 3 or d.ID() != ids[name] or answers[name]["status"] != "Success":
            ok = False
            print("WRONG %s: memory %d, vCPUs %d, id %d->%d, %s" % (name, mem, vcpus, ids[name],
                                                                   d.ID(), answers[name]))
        d.destroy()
        d.undefine()
    print("libvirt bench: %d running TCG domains, +512 MiB DIMM and +1 vCPU each, at once" % n)
    print("  direct libvirt API : %.3f s" % direct_s)
    print("  through hvupdater  : %.3f s (UpdateMachine polled every 0.1 s until done)" % hv_s)
    print("  ratio              : %.1fx" % (hv_s / direct_s))
    print("  all changes verified live, no domain restarted: %s" % ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
