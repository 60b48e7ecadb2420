#!/usr/bin/env bash
# down.sh: stop what test/kubevirt/up.sh started: CAPK's manager and the KubeVirt stand-in (pid files in
# $HV_KUBEVIRT_STATE), the hvt-kv-* QEMU domains, then the CAPI lab (test/capi/down.sh). The
# QEMU lab's libvirtd stays (test/lab/libvirt-down.sh stops it). State and logs are kept with
# HV_KUBEVIRT_KEEP=1 (and the CAPI lab's with HV_CAPI_KEEP=1). Run it under the same
# `flock /tmp/hv-lab.lock` as up.sh.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${HV_KUBEVIRT_STATE:-/run/hvupdater-kubevirt}
URI=${HV_LIBVIRT_LAB_URI:-qemu:///system}
for name in capk-manager standin; do
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
    for d in $(virsh -q -c "$URI" list --all --name | grep '^hvt-kv-'); do
        virsh -q -c "$URI" destroy "$d" >/dev/null 2>&1
        virsh -q -c "$URI" undefine "$d" >/dev/null 2>&1
    done
fi
[ "${HV_KUBEVIRT_KEEP:-0}" = 1 ] || rm -rf "$STATE"
"$HERE/../capi/down.sh"
