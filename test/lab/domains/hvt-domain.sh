#!/usr/bin/env bash
# hvt-domain.sh: define and start one TCG test domain from STYLE.xml next to this script
# (dimm, vmem, plain or disk) under NAME (must start with hvt- so libvirt-down.sh removes it).
# dimm, vmem and plain boot the lab guest (built by test/lab/libvirt-up.sh); its serial
# console goes to /var/log/libvirt/qemu/NAME.console.log. SWITCHES (e.g. hvguest.noonline)
# are appended to the guest's kernel command line (see test/lab/guest/init); so is
# crashkernel=SIZE (e.g. crashkernel=192M: the guest kernel reserves that much for kdump at
# boot and reports a MemTotal that much lower, as RHEL/Rocky and Ubuntu guests do). The disk style
# gets a fresh qcow2 image of DISK_GIB (default 1) GiB from ../disk-image.sh.
# Usage: hvt-domain.sh STYLE NAME [SWITCH...]     (needs the lab daemon: test/lab/libvirt-up.sh)
#        hvt-domain.sh disk NAME [DISK_GIB]
set -euo pipefail
style=${1:?usage: $0 dimm|vmem|plain|disk NAME [SWITCH...|DISK_GIB]}
name=${2:?usage: $0 dimm|vmem|plain|disk NAME [SWITCH...|DISK_GIB]}
shift 2
case "$name" in hvt-*) ;; *) echo "hvt-domain: NAME must start with hvt-" >&2; exit 2 ;; esac
xml="$(dirname "$0")/$style.xml"
[ -f "$xml" ] || { echo "hvt-domain: no style $style" >&2; exit 2; }
image=/nonexistent
if [ "$style" = disk ]; then
    image=$("$(dirname "$0")/../disk-image.sh" "$name" "${1:-1}")
    [ $# -gt 0 ] && shift
fi
for s in "$@"; do
    case "$s" in
    hvguest.[a-z]* | crashkernel=[0-9]*[MG]) ;; # crashkernel=: the guest reserves memory at boot
    *) echo "hvt-domain: not a guest switch: $s" >&2; exit 2 ;;
    esac
done
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sed -e "s|/var/lib/libvirt/images/hvt/hvt-disk.qcow2|$image|" \
    -e "s|hvt-$style\([<.]\)|$name\1|g" -e "s|</cmdline>|${*:+ $*}</cmdline>|" "$xml" >"$tmp"
rm -f "/var/log/libvirt/qemu/$name.console.log" "/var/log/libvirt/qemu/$name.log"
virsh -c qemu:///system define "$tmp" >/dev/null
virsh -c qemu:///system start "$name" >/dev/null
echo "$name"
