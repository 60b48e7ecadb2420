#!/usr/bin/python3
"""libvirt-bench.py: N (default 20) running TCG domains booting the lab guest, updated at once
(1024 -> 1536 MiB by a DIMM and 1 -> 2 vCPUs each), three times in one run, each time on
guests freshly booted for it:

1. directly with the libvirt API, one thread and connection per domain: attachDeviceFlags of
   the DIMM and setVcpusFlags, then waiting for the same guest evidence hvupdater's "done"
   needs (guestVerification IfAvailable): the balloon statistics' "available" (the guest's
   MemTotal) showing the new size, and the guest agent counting the new vCPUs online;
2. through hvupdater's UpdateMachine hook over HTTPS, one driver thread per domain calling the
   way CAPI does: after each in-progress answer it waits exactly retryAfterSeconds (not
   scaled), until done. engine.workers is 20, as many passes at once as the direct side has
   threads;
3. directly again, as in 1: hvupdater's time is compared with the mean of the direct sides
   before and after it, and with each (the spread between them is the run's noise).

Every side meets the same guests: booted anew, nothing added yet. (Before, one set of guests
took the three changes in turn, and each change met guests the ones before had grown: the
guests' own time to show the change grew from 12-14 s to 18-19 s (median) from the first
change to the third, so whichever side went second was timed on slower guests.)

Every side starts with every guest booted, its agent connected, balloon statistics collected
every 2 s (the period hvupdater sets itself when a domain has none), and the side's
connections (libvirt; TLS keep-alive to hvupdater, as CAPI keeps one) already open.

Every side polls each guest's view every 0.1 s from the start of the side to the guest showing
the change, on a thread per domain of their own (the direct side's wait ends when it does; on
the hvupdater side it is the figure), so libvirtd and the guests carry the same load on every
side while the change is made.

Prints, for each side: wall time for all domains, and per domain (median and max) the time
to the hot-plug (the libvirt DEVICE_ADDED event of the DIMM, seen by this script's own event
loop), to the guest showing the change (polled every 0.1 s by this script), and to "done"
answered (hvupdater) or to the end of the guest wait (direct); for hvupdater also the number
of calls and the seconds spent waiting retryAfterSeconds; then where the time goes (hot-plug
to guest, guest to done). Then the ratios:

  hvupdater / direct API with the guest evidence  target at most 1.2x (issue 10 item 2)
  hvupdater / direct API calls alone              for reference (no guest evidence: not the
                                                  same work as a verified "done")

Not a test: it asserts only that every change really happened, live, without a restart.
Needs the lab daemon (test/lab/libvirt-up.sh). Usage: libvirt-bench.py BUILD_DIR [N]
With HV_BENCH_LIBVIRT_LOG=FILE, hvupdater's libvirt client logs every API call it makes to FILE
(LIBVIRT_LOG_OUTPUTS, debug level, for where the time goes; it slows hvupdater's side).
"""
import os
import re
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import hvtest  # noqa: E402

import libvirt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
URI = os.environ.get("HV_LIBVIRT_LAB_URI", "qemu:///system")
STATS_PERIOD_S = 2  # hvupdater's own period for domains that have none (LV_BALLOON_PERIOD_S)
POLL_S = 0.1
BOOT_S = 180  # the lab guest boots in about 60 s when 20 boot at once on two cores
WORKERS = 20  # engine.workers: as many passes at once as the direct side has threads
# The guest shows a DIMM when its MemTotal grew by all of it, against its own total before:
# the lab guest's kernel keeps nothing of memory it adds (measured in the QEMU lab: 715 -> 1227
# MiB for a 512 MiB DIMM, test/e2e/libvirt_e2e.py). This script's own criterion, not
# hvupdater's rule (src/engine/pass_guest.c), so a "done" its rule lets through early fails
# here (issue 26: the old rule allowed a 128 MiB block and 1/32 to be missing).
DIMM_MIB = 512
DIMM = ("<memory model='dimm'><target><size unit='MiB'>%d</size><node>0</node></target>"
        "</memory>" % DIMM_MIB)


def guest_view(d):
    """(MemTotal MiB or -1, online vCPUs or -1) as the guest reports them."""
    mem = cpus = -1
    try:
        mem = d.memoryStats().get("available", -1)
        mem = mem // 1024 if mem > 0 else -1
    except libvirt.libvirtError:
        pass
    try:
        cpus = d.vcpusFlags(libvirt.VIR_DOMAIN_VCPU_GUEST)
    except libvirt.libvirtError:
        pass
    return mem, cpus


def guest_shows(d, base_mib, cpus):
    """The guest's MemTotal is at least base_mib (its own total before, plus the DIMMs added
    since) and it has cpus vCPUs online."""
    m, c = guest_view(d)
    return m > 0 and m >= base_mib and c == cpus


class Events:
    """This script's own libvirt event loop: when each domain's DIMM was added."""

    def __init__(self):
        libvirt.virEventRegisterDefaultImpl()
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()
        self.conn = libvirt.open(URI)
        self.added = {}
        self.lock = threading.Lock()
        self.cb = self.conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, self.on_added, None)

    def loop(self):
        while not self.stop:
            libvirt.virEventRunDefaultImpl()

    def on_added(self, conn, dom, dev, opaque):
        with self.lock:
            self.added.setdefault(dom.name(), time.monotonic())

    def reset(self):
        with self.lock:
            self.added = {}


def boot(conn, names):
    """Define and start every domain anew and wait until each guest reports (booted); returns
    each guest's own MemTotal. A guest that has not reported within BOOT_S is started again,
    once (the lab guest under TCG on two shared cores hangs early in boot, rarely: seen once
    in 20 boots x 3 sides, stuck after its kernel's first lines); the bench times updates, not
    boots."""
    xml = open(os.path.join(ROOT, "test/lab/domains/dimm.xml")).read()

    def start(name):
        try:
            d = conn.lookupByName(name)
            if d.isActive():
                d.destroy()
            d.undefine()
        except libvirt.libvirtError:
            pass
        d = conn.defineXML(re.sub(r"hvt-dimm(?=[<.])", name, xml))  # name, console log
        d.create()
        d.setMemoryStatsPeriod(STATS_PERIOD_S, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    for name in names:
        start(name)
    base = {}
    for again in (False, True):
        deadline = time.monotonic() + BOOT_S
        late = []
        for name in names:
            if name in base:
                continue
            d = conn.lookupByName(name)
            while not guest_shows(d, 1, 1) and time.monotonic() < deadline:  # reports: booted
                time.sleep(0.5)
            if guest_shows(d, 1, 1):
                base[name] = guest_view(d)[0]
            elif again:
                raise SystemExit("%s: the guest did not boot within %d s, twice: %s"
                                 % (name, BOOT_S, guest_view(d)))
            else:
                print("%s: the guest did not boot within %d s (%s): started again"
                      % (name, BOOT_S, guest_view(d)))
                late.append(name)
        for name in late:
            start(name)
    return base


def fig(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "      -"
    return "%5.2f / %5.2f s" % (statistics.median(xs), max(xs))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    libvirt.registerErrorHandler(lambda c, e: None, None)
    ev = Events()
    conn = libvirt.open(URI)
    names = ["hvt-bench-%02d" % k for k in range(n)]
    t_boot = time.monotonic()
    base = boot(conn, names)  # each guest's own MemTotal before any change
    boot_s = time.monotonic() - t_boot

    def watch_guest(c, name, t0, mib, cpus, seen, stop):
        """Poll the guest's view every POLL_S from t0, the start of the side, until it shows mib
        and cpus (the time goes to seen[name]) or stop is set; on its own connection c, opened
        before the clock started and closed here."""
        d = c.lookupByName(name)
        while not stop.is_set() and time.monotonic() - t0 < 300:
            if guest_shows(d, mib, cpus):
                seen[name] = time.monotonic() - t0
                break
            time.sleep(POLL_S)
        c.close()

    def start_side(body, base, seen, stop):
        """Start, at once, a thread running body(name, t0) and a guest watcher (seen, stop) for
        each domain, the watchers' connections opened before the clock starts. Returns t0, the
        watchers and the body threads."""
        wconns = {nm: libvirt.open(URI) for nm in names}
        t0 = time.monotonic()
        watchers = [threading.Thread(target=watch_guest, args=(
            wconns[nm], nm, t0, base[nm] + DIMM_MIB, 2, seen, stop)) for nm in names]
        threads = [threading.Thread(target=body, args=(nm, t0)) for nm in names]
        for t in watchers + threads:
            t.start()
        return t0, watchers, threads

    def direct_side(base):
        """Every domain at once with the libvirt API directly, one thread and connection each: a
        DIMM and a second vCPU, then the guest evidence (its MemTotal at base + the DIMM, 2 vCPUs
        online). The side ends when every guest shows it."""
        api, guest = {}, {}
        ev.reset()
        dconns = {nm: libvirt.open(URI) for nm in names}  # connected before the clock starts

        def one(name, t0):
            d = dconns[name].lookupByName(name)
            live_cfg = libvirt.VIR_DOMAIN_AFFECT_LIVE | libvirt.VIR_DOMAIN_AFFECT_CONFIG
            d.attachDeviceFlags(DIMM, live_cfg)
            d.setVcpusFlags(2, live_cfg)
            api[name] = time.monotonic() - t0

        t0, watchers, threads = start_side(one, base, guest, threading.Event())
        for t in threads + watchers:
            t.join()
        wall = time.monotonic() - t0
        for c in dconns.values():
            c.close()
        return {"api": api, "guest": guest, "added": {k: v - t0 for k, v in ev.added.items()},
                "wall": wall, "api_wall": max(api.values())}

    # 1. direct: 1024 -> 1536 MiB, 1 -> 2 vCPUs, all at once, then the guest evidence
    before = direct_side(base)
    # 2. hvupdater: the same change of the same guests, booted anew
    base = boot(conn, names)
    ids = {name: conn.lookupByName(name).ID() for name in names}

    log = os.environ.get("HV_BENCH_LIBVIRT_LOG")
    server_env = {"LIBVIRT_LOG_FILTERS": "1:libvirt.domain 1:libvirt.host",
                  "LIBVIRT_LOG_OUTPUTS": "1:file:" + os.path.abspath(log)} if log else {}
    server = hvtest.Server(os.path.abspath(os.path.join(build, "hvupdater")),
                           {"libvirt": {"uris": [URI]}, "engine": {"workers": WORKERS}},
                           env=server_env).start()
    server.env = {}
    answers, ncalls, waited, done_at, guest_at, false_done = {}, {}, {}, {}, {}, []
    ev.reset()
    finished = threading.Event()

    # each driver's TLS keep-alive connection is open before the clock starts, as CAPI's is
    clients = {nm: server.client() for nm in names}
    for c in clients.values():
        c.post("Discovery", {"apiVersion": hvtest.API, "kind": "DiscoveryRequest"})

    def through(name, t0):
        c = clients[name]
        req = hvtest.update_request(hvtest.libvirt_machine(name, 1536, 2), hvtest.machine(name))
        calls, slept = 0, 0.0
        while True:
            resp, _ = c.post("UpdateMachine", req)
            calls += 1
            if resp["status"] == "Failure" or resp["retryAfterSeconds"] == 0:
                break
            if time.monotonic() - t0 > 300:
                raise SystemExit("%s still in progress after 300 s: %s" % (name, resp))
            time.sleep(resp["retryAfterSeconds"])  # as CAPI: exactly what was asked
            slept += resp["retryAfterSeconds"]
        done_at[name] = time.monotonic() - t0
        answers[name], ncalls[name], waited[name] = resp, calls, slept
        # the guest's view only grows here: a "done" it does not back up now was false
        if not guest_shows(conn.lookupByName(name), base[name] + DIMM_MIB, 2):
            false_done.append(name)

    t0, watchers, threads = start_side(through, base, guest_at, finished)
    for t in threads:
        t.join()
    hv_s = time.monotonic() - t0
    finished.set()
    for t in watchers:
        t.join()
    hv_added = {k: v - t0 for k, v in ev.added.items()}
    server.stop()

    ok = True
    for name in names:
        d = conn.lookupByName(name)
        mem = int(re.search(r"<memory unit='KiB'>(\d+)</memory>", d.XMLDesc(0)).group(1)) // 1024
        vcpus = d.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        if mem != 1536 or vcpus != 2 or d.ID() != ids[name] or answers[name]["status"] != "Success" \
                or "the guest shows it" not in answers[name].get("message", ""):
            ok = False
            print("WRONG %s: memory %d, vCPUs %d, id %d->%d, %s" % (name, mem, vcpus, ids[name],
                                                                   d.ID(), answers[name]))

    # 3. direct again, on the guests booted anew
    after = direct_side(boot(conn, names))
    for name in names:
        for side, what in ((before, "first"), (after, "second")):
            if name not in side["guest"]:
                ok = False
                print("WRONG %s: the %s direct change did not show in the guest within 300 s"
                      % (name, what))
        d = conn.lookupByName(name)
        d.destroy()
        d.undefine()
    direct_s = (before["wall"] + after["wall"]) / 2
    direct_api_s = (before["api_wall"] + after["api_wall"]) / 2
    early = sorted(false_done)
    print("libvirt bench: %d running TCG domains (lab guest booted in %.0f s), +512 MiB DIMM "
          "and +1 vCPU each, at once, three times on guests booted anew" % (n, boot_s))
    print("  per domain: median / max, from the start of the side")
    for side, what in ((before, "before"), (after, "after")):
        print("  direct libvirt API (%s)" % what)
        print("    hot-plug (DIMM added event)        : %s" % fig(side["added"].values()))
        print("    API calls returned                 : %s" % fig(side["api"].values()))
        print("    guest shows it (polled %.1f s)      : %s" % (POLL_S, fig(side["guest"].values())))
    print("  through hvupdater (UpdateMachine, retryAfterSeconds honoured as CAPI does, "
          "engine.workers %d)" % WORKERS)
    print("    hot-plug (DIMM added event)        : %s" % fig(hv_added.values()))
    print("    guest shows it (polled %.1f s)      : %s" % (POLL_S, fig(guest_at.values())))
    print("    done answered                      : %s" % fig(done_at.values()))
    print("    calls per domain                   : %s" % fig(ncalls.values()).replace(" s", ""))
    print("    retryAfterSeconds waited           : %s" % fig(waited.values()))

    def gap(a, b):
        return [b[k] - a[k] for k in a if k in b]

    print("  where the time goes, per domain")
    print("    direct before: hot-plug -> guest shows it : %s"
          % fig(gap(before["added"], before["guest"])))
    print("    direct after: hot-plug -> guest shows it  : %s"
          % fig(gap(after["added"], after["guest"])))
    print("    hvupdater: hot-plug -> guest shows it     : %s" % fig(gap(hv_added, guest_at)))
    print("    hvupdater: guest shows it -> done         : %s" % fig(gap(guest_at, done_at)))
    print("  wall time, all domains")
    print("    direct API calls alone (before, after) : %.3f, %.3f s"
          % (before["api_wall"], after["api_wall"]))
    print("    direct API + guest evidence (before, after): %.3f, %.3f s"
          % (before["wall"], after["wall"]))
    print("    through hvupdater (verified done)      : %.3f s" % hv_s)
    print("  ratio hvupdater / direct with guest evidence : %.2fx (target <= 1.2x; the mean of "
          "before and after; %.2fx, %.2fx)" % (hv_s / direct_s, hv_s / before["wall"],
                                              hv_s / after["wall"]))
    print("  ratio hvupdater / direct API calls alone     : %.2fx (reference, not the same work)"
          % (hv_s / direct_api_s))
    print("  done answered while the guest did not show it (checked right after): %s"
          % (", ".join(early) or "none"))
    print("  all changes verified live, done says 'the guest shows it', no domain restarted: %s"
          % ("yes" if ok and not early else "NO"))
    ev.stop = True
    return 0 if ok and not early else 1

if __name__ == "__main__":
    sys.exit(main())
