#!/usr/bin/env bash
# libvirt-down.sh: undo libvirt-up.sh. Destroys and undefines every test domain named hvt-*,
# then stops the libvirtd and virtlogd that libvirt-up.sh started (and only those), restores
# a qemu.conf it set aside, and leaves no process behind. Safe to run any number of times.
set -uo pipefail

URI=qemu:///system
STATE=${HV_LAB_STATE:-/run/hvupdater-lab}
QEMU_CONF=/etc/libvirt/qemu.conf

log() { echo "libvirt-down: $*" >&2; }

[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }

if virsh -c "$URI" version >/dev/null 2>&1; then
    for d in $(virsh -c "$URI" list --all --name 2>/dev/null | grep '^hvt-' || true); do
        virsh -c "$URI" destroy "$d" >/dev/null 2>&1 || true
        virsh -c "$URI" undefine "$d" >/dev/null 2>&1 || true
        log "removed domain $d"
    done
    # the storage pool of disk images (test/lab/disk-image.sh), its volumes and directory
    if virsh -c "$URI" pool-info hvt-images >/dev/null 2>&1; then
        for vol in $(virsh -q -c "$URI" vol-list hvt-images 2>/dev/null | awk '{print $1}'); do
            virsh -c "$URI" vol-delete "$vol" --pool hvt-images >/dev/null 2>&1 || true
        done
        virsh -c "$URI" pool-destroy hvt-images >/dev/null 2>&1 || true
        virsh -c "$URI" pool-undefine hvt-images >/dev/null 2>&1 || true
        log "removed storage pool hvt-images"
    fi
fi
rm -rf /var/lib/libvirt/images/hvt /var/lib/libvirt/images/hvt-loose

stop_pidfile() { # stop_pidfile FILE NAME: TERM, then KILL after 10 s, and wait for the exit
    local f=$1 pid i
    [ -s "$f" ] || return 0
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
        log "stopped $2 ($pid)"
    fi
    rm -f "$f"
}

stop_pidfile "$STATE/libvirtd.pid" libvirtd
stop_pidfile "$STATE/virtlogd.pid" virtlogd

# QEMU processes of hvt-* domains that a dead libvirtd could not destroy
for pid in $(pgrep -f -- '-name guest=hvt-' || true); do
    kill -KILL "$pid" 2>/dev/null && log "killed leftover QEMU $pid"
done

if [ -f "$STATE/qemu.conf.orig" ]; then
    mv -f "$STATE/qemu.conf.orig" "$QEMU_CONF"
    log "restored the previous $QEMU_CONF"
fi
rmdir "$STATE" 2>/dev/null || true
exit 0
