#!/usr/bin/env bash
# hvt-domain.sh: define and start one TCG test domain from STYLE.xml next to this script
# (dimm, vmem, plain or disk) under NAME (must start with hvt- so libvirt-down.sh removes it).
# The disk style gets a fresh qcow2 image of DISK_GIB (default 1) GiB from ../disk-image.sh.
# Usage: hvt-domain.sh STYLE NAME [DISK_GIB]   (needs the lab daemon: test/lab/libvirt-up.sh)
set -euo pipefail
style=${1:?usage: $0 dimm|vmem|plain|disk NAME [DISK_GIB]}
name=${2:?usage: $0 dimm|vmem|plain|disk NAME [DISK_GIB]}
case "$name" in hvt-*) ;; *) echo "hvt-domain: NAME must start with hvt-" >&2; exit 2 ;; esac
xml="$(dirname "$0")/$style.xml"
[ -f "$xml" ] || { echo "hvt-domain: no style $style" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
image=/nonexistent
if [ "$style" = disk ]; then
    image=$("$(dirname "$0")/../disk-image.sh" "$name" "${3:-1}")
fi
sed -e "s|<name>hvt-[a-z]*</name>|<name>$name</name>|" \
    -e "s|/var/lib/libvirt/images/hvt/hvt-disk.qcow2|$image|" "$xml" >"$tmp"
virsh -c qemu:///system define "$tmp" >/dev/null
virsh -c qemu:///system start "$name" >/dev/null
echo "$name"
