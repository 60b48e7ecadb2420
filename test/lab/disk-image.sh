#!/usr/bin/env bash
# disk-image.sh: make a qcow2 image for a lab domain as a volume of the lab's storage pool
# "hvt-images" (a directory pool at /var/lib/libvirt/images/hvt, defined, built and started
# here when missing), so libvirt can grow it whether the domain runs or not. Prints its path.
# Usage: disk-image.sh NAME [SIZE_GIB]   (NAME must start with hvt-; SIZE_GIB defaults to 1)
# libvirt-down.sh deletes the pool, its volumes and the directory.
set -euo pipefail
URI=qemu:///system
POOL=hvt-images
DIR=/var/lib/libvirt/images/hvt
name=${1:?usage: $0 NAME [SIZE_GIB]}
gib=${2:-1}
case "$name" in hvt-*) ;; *) echo "disk-image: NAME must start with hvt-" >&2; exit 2 ;; esac
command -v qemu-img >/dev/null || { echo "disk-image: qemu-img missing: run scripts/bootstrap.sh test" >&2; exit 1; }
v() { virsh -q -c "$URI" "$@"; }
if ! v pool-info "$POOL" >/dev/null 2>&1; then
    mkdir -p "$DIR"
    v pool-define-as "$POOL" dir --target "$DIR" >/dev/null
    v pool-autostart "$POOL" >/dev/null
fi
if [ "$(v pool-info "$POOL" | awk '/^State:/ {print $2}')" != running ]; then
    mkdir -p "$DIR"
    v pool-start "$POOL" >/dev/null
fi
v pool-refresh "$POOL" >/dev/null
v vol-delete "$name.qcow2" --pool "$POOL" >/dev/null 2>&1 || true
v vol-create-as "$POOL" "$name.qcow2" "${gib}G" --format qcow2 >/dev/null
echo "$DIR/$name.qcow2"
