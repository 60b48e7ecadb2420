#!/usr/bin/env bash
# hvt-domain.sh: define and start one TCG test domain from STYLE.xml next to this script
# (dimm, vmem or plain) under NAME (must start with hvt- so libvirt-down.sh removes it).
# Usage: hvt-domain.sh STYLE NAME   (needs the lab daemon: test/lab/libvirt-up.sh)
set -euo pipefail
style=${1:?usage: $0 dimm|vmem|plain NAME}
name=${2:?usage: $0 dimm|vmem|plain NAME}
case "$name" in hvt-*) ;; *) echo "hvt-domain: NAME must start with hvt-" >&2; exit 2 ;; esac
xml="$(dirname "$0")/$style.xml"
[ -f "$xml" ] || { echo "hvt-domain: no style $style" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sed "s|<name>hvt-[a-z]*</name>|<name>$name</name>|" "$xml" >"$tmp"
virsh -c qemu:///system define "$tmp" >/dev/null
virsh -c qemu:///system start "$name" >/dev/null
echo "$name"
