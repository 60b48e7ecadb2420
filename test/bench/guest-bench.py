#!/usr/bin/python3
"""guest-bench.py: how long a change takes until the guest itself shows it, per live method
(DIMM hot-add, virtio-mem growth plugged by the guest's driver, vCPU hot-plug), through
hvupdater's HTTPS UpdateMachine hook (polled every 0.3 s, as a sped-up CAPI) on QEMU (TCG)
domains booting the lab guest. For each method it prints the time from the first
UpdateMachine call until (a) the guest's serial console shows the new MemTotal / CPU count
and (b) the hook answers done. Not a test: it asserts only that every change happened.

Needs the lab daemon (test/lab/libvirt-up.sh). Usage: guest-bench.py [BUILD_DIR] [ROUNDS]
"""
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import hvtest  # noqa: E402
import libvirt_e2e as lab  # noqa: E402

if sys.flags.optimize:  # python -O / PYTHONOPTIMIZE strips assert, and these checks are asserts
    raise SystemExit("%s: run without -O or PYTHONOPTIMIZE: its checks are assert statements"
                     % os.path.basename(__file__))

# method: (domain style, from (MiB, vCPUs), to, guest shows it when)
METHODS = [
    ("DIMM", "dimm", (1024, 1), (1536, 1), lambda v: v[0] > 1400),
    ("virtio-mem", "vmem", (1024, 1), (1536, 1), lambda v: v[0] > 1400),
    ("vCPU", "dimm", (1024, 1), (1024, 3), lambda v: v[1] == 3),
]


def one(server, method, style, want, shows, k):
    name = "hvt-bench-guest-%s-%d" % (style, k)
    lab.new_domain(style, name)  # booted: the guest printed its first view
    try:
        mark = len(lab.console(name))
        client = server.client()
        req = hvtest.update_request(hvtest.libvirt_machine(name, *want), hvtest.machine(name),
                                    {"liveTimeoutSeconds": "60"})
        done = {}

        def drive():
            last, msgs, _ = hvtest.drive(client, req, timeout=120)
            done["t"] = time.monotonic()
            done["last"] = last

        t0 = time.monotonic()
        th = threading.Thread(target=drive)
        th.start()
        view = lab.wait_guest(name, shows, 120, mark)
        t_guest = time.monotonic()
        th.join()
        last = done["last"]
        assert last["status"] == "Success" and last["retryAfterSeconds"] == 0, last
        return (t_guest - t0) * 1000, (done["t"] - t0) * 1000, view, last["message"]
    finally:
        lab.remove_domain(name)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    binary = os.path.abspath(os.path.join(build, "hvupdater"))
    server = hvtest.Server(binary, lab.CONFIG).start()
    try:
        print("%-11s %5s %22s %22s  %s" % ("method", "round", "first call->guest ms",
                                            "first call->done ms", "guest view / answer"))
        for method, style, _, want, shows in METHODS:
            for k in range(rounds):
                g, d, view, msg = one(server, method, style, want, shows, k)
                print("%-11s %5d %22.0f %22.0f  MemTotal %d MiB, %d CPUs / %s" %
                      (method, k + 1, g, d, view[0], view[1], msg))
                sys.stdout.flush()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
