#!/usr/bin/env bash
# libvirt-up.sh: start a private privileged libvirtd + virtlogd for hvupdater's QEMU tests
# (Debian 12, root, TCG only). Idempotent: a daemon that already answers on qemu:///system is
# reused and never stopped by libvirt-down.sh.
#
# WARNING: for test machines only. It rewrites /etc/libvirt/qemu.conf (QEMU runs as root with
# security_driver "none": no sVirt/AppArmor confinement) and creates the kvm group and the
# libvirt-qemu user. Never run it on a production KVM host.
# Daemons started here are recorded (pid files) under $HV_LAB_STATE (/run/hvupdater-lab).
#
# Usage: libvirt-up.sh            build the lab guest (test/lab/guest/build.sh, cached), set up,
#                                 start, wait until `virsh version` answers, and print
#                                 `export HV_LIBVIRT_LAB_URI=qemu:///system` on stdout
#        libvirt-up.sh --restart  stop and start again the libvirtd started here (running
#                                 QEMU domains survive; tests use it to prove reconnection)
#        libvirt-up.sh --stop     stop the libvirtd started here (running QEMU domains
#                                 survive); `libvirt-up.sh` starts it again. Tests use the pair
#                                 to call hvupdater while the daemon is surely down
set -euo pipefail
if [ -n "${HV_LAB_TRACE:-}" ]; then # timestamped trace on stderr, for slow-start hunting
    PS4='+ $(date +%T.%N) '
    set -x
fi

URI=qemu:///system
STATE=${HV_LAB_STATE:-/run/hvupdater-lab}
QEMU_CONF=/etc/libvirt/qemu.conf
MARK="# written by hvupdater test/lab/libvirt-up.sh"
WAIT_S=${HV_LAB_WAIT_S:-30}

log() { echo "libvirt-up: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (privileged libvirtd for qemu:///system)"
for b in libvirtd virtlogd virsh qemu-system-x86_64 qemu-img; do
    command -v "$b" >/dev/null || die "$b missing: run scripts/bootstrap.sh test"
done

alive() { # alive PIDFILE: the pid in PIDFILE names a live process
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

answers() { virsh -c "$URI" version >/dev/null 2>&1; }

wait_ready() {
    local i
    for ((i = 0; i < WAIT_S * 10; i++)); do
        answers && return 0
        sleep 0.1
    done
    die "libvirtd did not answer on $URI within ${WAIT_S}s"
}

setup_host() {
    # the QEMU driver resolves its built-in default user and group (libvirt-qemu:libvirt-qemu
    # on Debian) before it reads qemu.conf, so all three names must exist
    getent group kvm >/dev/null || groupadd --system kvm
    getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
    getent passwd libvirt-qemu >/dev/null ||
        useradd --system -g kvm -M -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
    mkdir -p /var/log/libvirt/qemu /var/run/libvirt /var/lib/libvirt/qemu /etc/libvirt "$STATE"
    local want
    want=$(printf '%s\nuser = "root"\ngroup = "root"\nsecurity_driver = "none"\n' "$MARK")
    if [ -f "$QEMU_CONF" ] && ! grep -qF "$MARK" "$QEMU_CONF"; then
        # somebody else's configuration: keep it aside, libvirt-down.sh puts it back
        [ -f "$STATE/qemu.conf.orig" ] || cp -p "$QEMU_CONF" "$STATE/qemu.conf.orig"
    fi
    if [ ! -f "$QEMU_CONF" ] || [ "$(cat "$QEMU_CONF")" != "$want" ]; then
        log "WARNING: rewriting $QEMU_CONF (QEMU as root, no security driver): test machines only"
        printf '%s\n' "$want" >"$QEMU_CONF"
    fi
}

# Run a daemon with only stdin/stdout/stderr: one that kept an inherited descriptor (e.g. of
# `flock /tmp/hv-test.lock ...`, which callers wrap this script in) would hold that lock for
# as long as it lives, and every later locked run would wait forever.
bare() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
    done
    exec "$@"
}

start_virtlogd() {
    alive "$STATE/virtlogd.pid" && return 0
    if pgrep -x virtlogd >/dev/null; then
        return 0 # somebody else's virtlogd serves us; not ours to stop
    fi
    (bare virtlogd -d -p "$STATE/virtlogd.pid")
}

# libvirtd re-probes QEMU (about 4 s per emulator binary) when the host CPUID it reads differs
# from its cache, and on these VMs CPUID differs between host CPUs: an unpinned daemon re-probes
# on about every other start. Pinned to one CPU it reads the same CPUID every time. QEMU is not
# affected: libvirt gives every domain all host CPUs again. HV_LAB_LIBVIRTD_CPU="" disables.
LIBVIRTD_CPU=${HV_LAB_LIBVIRTD_CPU-0}

start_libvirtd() {
    if [ -n "$LIBVIRTD_CPU" ] && command -v taskset >/dev/null; then
        (bare taskset -c "$LIBVIRTD_CPU" libvirtd -d -p "$STATE/libvirtd.pid")
    else
        (bare libvirtd -d -p "$STATE/libvirtd.pid")
    fi
    wait_ready
}

stop_libvirtd() {
    alive "$STATE/libvirtd.pid" || die "no libvirtd started by this script to restart"
    local pid i
    pid=$(cat "$STATE/libvirtd.pid")
    kill -TERM "$pid"
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$STATE/libvirtd.pid"
}

case "${1:-up}" in
up)
    # the guest the lab domains boot (cached; rebuilt only when its packages or files change)
    "$(dirname "$0")/guest/build.sh" >/dev/null
    if alive "$STATE/libvirtd.pid"; then
        wait_ready
    elif answers; then
        log "reusing a libvirtd that already answers on $URI"
    else
        setup_host
        start_virtlogd
        start_libvirtd
        log "libvirtd $(libvirtd --version | awk '{print $NF}') answers on $URI"
    fi
    echo "export HV_LIBVIRT_LAB_URI=$URI"
    ;;
--restart)
    stop_libvirtd
    start_libvirtd
    ;;
--stop)
    stop_libvirtd
    ;;
*)
    die "usage: $0 [up|--restart|--stop]"
    ;;
esac
