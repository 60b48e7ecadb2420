#!/usr/bin/env bash
# build.sh: build (once, cached) the KubeVirt lab's stand-in (standin/) with the versions pinned
# in go.mod next to this script. Output: /var/cache/hvupdater-lab/kubevirt-<key>/bin/standin
# (HV_KUBEVIRT_CACHE overrides the parent), <key> a hash over go.mod, go.sum, this script and
# the Go sources. A build whose key exists is reused.
# Usage: build.sh [--print]   (stdout: the bin directory; --print: only compute and print it)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${HV_KUBEVIRT_CACHE:-/var/cache/hvupdater-lab}
GO=${GO:-/usr/local/go/bin/go}
cd "$HERE"
key=$( (cat go.mod go.sum build.sh; for f in $(find . -name '*.go' | sort); do echo "$f"; cat "$f"; done) |
    sha256sum | cut -c1-16)
BIN=$CACHE/kubevirt-$key/bin
if [ "${1:-}" = --print ]; then
    echo "$BIN"
    exit 0
fi
[ -x "$BIN/standin" ] && { echo "$BIN"; exit 0; }
[ -x "$GO" ] || { echo "kubevirt-build: no Go toolchain at $GO" >&2; exit 1; }
mkdir -p "$CACHE"
t0=$(date +%s)
tmp=$(mktemp -d "$CACHE/.kubevirt-bin.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
GOFLAGS="-trimpath -buildvcs=false" CGO_ENABLED=0 nice -n 10 "$GO" build -ldflags '-s -w' \
    -o "$tmp/standin" ./standin || { echo "kubevirt-build: building the stand-in failed" >&2; exit 1; }
rm -rf "$CACHE/kubevirt-$key"
mkdir -p "$CACHE/kubevirt-$key"
mv "$tmp" "$BIN"
trap - EXIT
echo "kubevirt-build: stand-in built in $(($(date +%s) - t0)) s: $BIN" >&2
echo "$BIN"
