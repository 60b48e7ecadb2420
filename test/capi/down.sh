#!/usr/bin/env bash
# down.sh: stop what test/capi/up.sh started (hvupdater, the stand-in provider, CAPI's
# managers, kube-apiserver, etcd: by their pid files in $HV_CAPI_STATE), remove the QEMU
# domains the provider made (hvt-capi-*), and delete the state directory. The QEMU lab's
# libvirtd stays (test/lab/libvirt-down.sh stops it). Logs are kept when HV_CAPI_KEEP=1.
set -uo pipefail
STATE=${HV_CAPI_STATE:-/run/hvupdater-capi}
URI=${HV_LIBVIRT_LAB_URI:-qemu:///system}
for name in hvupdater provider kcp-manager capi-manager kube-apiserver etcd; do
    f=$STATE/$name.pid
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    if kill -TERM "$pid" 2>/dev/null; then
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$f"
done
if virsh -c "$URI" version >/dev/null 2>&1; then
    for d in $(virsh -q -c "$URI" list --all --name | grep '^hvt-capi-'); do
        virsh -q -c "$URI" destroy "$d" >/dev/null 2>&1
        virsh -q -c "$URI" undefine "$d" >/dev/null 2>&1
    done
fi
[ "${HV_CAPI_KEEP:-0}" = 1 ] || rm -rf "$STATE"
exit 0
