#!/usr/bin/env bash
# build.sh: build (once, cached) the lab guest the QEMU test domains boot by direct kernel
# boot: the kernel of Debian's linux-image-cloud-amd64 and a busybox-static initramfs whose
# init (next to this script) onlines hot-added memory and CPUs, powers off on the ACPI power
# button, runs the QEMU guest agent and prints its own view on the serial console.
#
# Output: $HV_GUEST_DIR (default /var/cache/hvupdater-lab/guest) is a symlink to a directory
# named after a key over the package versions, this script and init; it holds vmlinuz and
# initrd.img. A build whose key exists is reused; the symlink is switched atomically.
# Usage: build.sh [--print]   (--print: only print the directory; stdout is that path)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${HV_GUEST_DIR:-/var/cache/hvupdater-lab/guest}
MODS="virtio_pci virtio_blk virtio_balloon virtio_mem virtio_console evdev button"

log() { echo "guest-build: $*" >&2; }
die() { log "$*"; exit 1; }

# the newest installed cloud kernel with its modules
KVER=$(find /lib/modules -maxdepth 1 -name '*-cloud-amd64' -printf '%f\n' 2>/dev/null |
    sort -V | tail -1)
[ -n "$KVER" ] && [ -f "/boot/vmlinuz-$KVER" ] ||
    die "no cloud kernel: install linux-image-cloud-amd64 (scripts/bootstrap.sh test)"
[ -x /bin/busybox ] && /bin/busybox --list | grep -x acpid >/dev/null ||
    die "busybox-static missing: scripts/bootstrap.sh test"
command -v cpio >/dev/null || die "cpio missing: scripts/bootstrap.sh test"

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }
KEY=$( (echo "$KVER" "$(ver busybox-static)" "$(ver qemu-guest-agent)" "$(ver libc6)"
    cat "$0" "$HERE/init") | sha256sum | cut -c1-16)
DIR="$(dirname "$OUT")/guest-$KEY"
if [ "${1:-}" = --print ]; then
    echo "$OUT"
    exit 0
fi

if [ ! -f "$DIR/initrd.img" ]; then
    log "building guest $KEY (kernel $KVER)"
    mkdir -p "$(dirname "$OUT")"
    tmp=$(mktemp -d "$(dirname "$OUT")/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    root=$tmp/root
    mkdir -p "$root"/{bin,sbin,etc/hvguest,proc,sys,dev,run,tmp,usr/sbin,lib/modules}
    cp /bin/busybox "$root/bin/busybox"
    install -m 0755 "$HERE/init" "$root/init"

    # modules in dependency order: each module's dependencies (modules.dep) before it
    dep=/lib/modules/$KVER/modules.dep
    declare -A seen=()
    : >"$root/etc/hvguest/modules"
    add() { # add NAME-OR-PATH
        local path line d
        case "$1" in
        */*) path=$1 ;;
        *) path=$(grep -E "^([^:]*/)?$1\.ko(\.[a-z]+)?:" "$dep" | cut -d: -f1) ;;
        esac
        [ -n "$path" ] || die "module $1 not in $dep"
        [ -n "${seen[$path]:-}" ] && return 0
        seen[$path]=1
        line=$(grep -E "^$path:" "$dep" | cut -d: -f2)
        for d in $line; do add "$d"; done
        case "$path" in *.ko) ;; *) die "compressed module $path: not supported" ;; esac
        mkdir -p "$root/lib/modules/$(dirname "$path")"
        cp "/lib/modules/$KVER/$path" "$root/lib/modules/$path"
        echo "$(basename "$path" .ko) /lib/modules/$path" >>"$root/etc/hvguest/modules"
    }
    for m in $MODS; do add "$m"; done

    # the QEMU guest agent and the shared libraries it links
    if [ -x /usr/sbin/qemu-ga ]; then
        cp /usr/sbin/qemu-ga "$root/usr/sbin/"
        for lib in $(ldd /usr/sbin/qemu-ga | grep -oE '/[^ ]+\.so[^ ]*'); do
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
    fi

    (cd "$root" && find . | sort | cpio -o -H newc --quiet | gzip -1) >"$tmp/initrd.img"
    cp "/boot/vmlinuz-$KVER" "$tmp/vmlinuz"
    rm -rf "$DIR"
    mkdir -p "$DIR"
    mv "$tmp/vmlinuz" "$tmp/initrd.img" "$DIR/"
    log "built $DIR ($(du -sh "$DIR/initrd.img" | cut -f1) initramfs)"
fi
if [ "$(readlink "$OUT" 2>/dev/null)" != "$DIR" ]; then
    ln -sfn "$DIR" "$OUT.tmp.$$"
    mv -T "$OUT.tmp.$$" "$OUT"
fi
echo "$OUT"
