#!/usr/bin/env bash
# build.sh: build (once, cached) the binaries of the CAPI lab from the versions pinned in
# go.mod next to this script: etcd, kube-apiserver, kubectl, Cluster API's core manager
# (capi-manager), its KubeadmControlPlane manager (kcp-manager), clusterctl, and the lab's own
# stand-in infrastructure provider (provider).
#
# Output: a directory /var/cache/hvupdater-lab/capi-<key>/bin (HV_CAPI_CACHE overrides the
# parent), <key> a hash over go.mod, go.sum, this script and the lab's Go sources. The large
# upstream binaries depend on go.mod/go.sum only and are kept in capi-deps-<modkey>/ so a
# change to the provider relinks the provider alone. A build whose key exists is reused.
# bin/capi-config holds CAPI's CRDs and webhook manifests of the pinned release.
# Usage: build.sh [--print]   (stdout: the bin directory; --print: only compute and print it)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SELF="$HERE/$(basename "$0")" # "$0" may be relative, and the key is taken after cd "$HERE"
CACHE=${HV_CAPI_CACHE:-/var/cache/hvupdater-lab}
GO=${GO:-/usr/local/go/bin/go}
UPSTREAM="etcd:./cmd/etcd kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver
kubectl:k8s.io/kubernetes/cmd/kubectl capi-manager:sigs.k8s.io/cluster-api/core
clusterctl:sigs.k8s.io/cluster-api/cmd/clusterctl"
ldflags() { # ldflags NAME: -ldflags for NAME, with the release versions its module reports
    local v
    case "$1" in
    kube-apiserver | kubectl)
        v=$("$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)
        v=${v%%+*}
        local m=${v#v} x=k8s.io/component-base/version
        echo "-s -w -X $x.gitVersion=$v -X $x.gitMajor=${m%%.*} -X $x.gitMinor=$(echo "$m" | cut -d. -f2) -X $x.gitTreeState=clean"
        ;;
    capi-manager | clusterctl)
        v=$("$GO" list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
        local m=${v#v} x=sigs.k8s.io/cluster-api/version
        echo "-s -w -X $x.gitVersion=$v -X $x.gitMajor=${m%%.*} -X $x.gitMinor=$(echo "$m" | cut -d. -f2) -X $x.gitTreeState=clean"
        ;;
    *) echo "-s -w" ;;
    esac
}
# (end of the upstream build definition: the lines from UPSTREAM= to here are in the key)

log() { echo "capi-build: $*" >&2; }
die() { log "$*"; exit 1; }

cd "$HERE"
srcs=$(find . -name '*.go' -not -path './cmd/etcd/*' | sort)
modkey=$( (cat go.mod go.sum cmd/etcd/main.go; sed -n '/^UPSTREAM=/,/^# (end of the upstream build definition/p' "$SELF") |
    sha256sum | cut -c1-16)
key=$( (echo "$modkey"; cat "$SELF"; for f in $srcs; do echo "$f"; cat "$f"; done) |
    sha256sum | cut -c1-16)
BIN=$CACHE/capi-$key/bin
DEPS=$CACHE/capi-deps-$modkey
if [ "${1:-}" = --print ]; then
    echo "$BIN"
    exit 0
fi
[ -x "$BIN/provider" ] && { echo "$BIN"; exit 0; }
[ -x "$GO" ] || die "no Go toolchain at $GO (Go 1.26 from the module proxy setup)"
"$GO" version | grep -qE 'go1\.(2[6-9]|[3-9][0-9])' || die "$GO is older than Go 1.26"
mkdir -p "$CACHE"
export GOFLAGS="-trimpath -buildvcs=false" CGO_ENABLED=0

if [ ! -x "$DEPS/clusterctl" ]; then
    log "building etcd, kube-apiserver, kubectl, capi-manager, clusterctl ($modkey)"
    t0=$(date +%s)
    tmp=$(mktemp -d "$CACHE/.capi-deps.XXXXXX")
    chmod 755 "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    for e in $UPSTREAM; do
        name=${e%%:*} pkg=${e#*:}
        nice -n 10 "$GO" build -ldflags "$(ldflags "$name")" -o "$tmp/$name" "$pkg" ||
            die "building $pkg failed"
    done
    # CAPI's CRDs and webhook manifests of the same release, for up.sh
    capi=$("$GO" list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
    mkdir -p "$tmp/capi-config/core/config/crd" "$tmp/capi-config/core/config/webhook"
    cp -r "$capi/core/config/crd/bases" "$tmp/capi-config/core/config/crd/"
    cp "$capi/core/config/webhook/manifests.yaml" "$tmp/capi-config/core/config/webhook/"
    rm -rf "$DEPS"
    mv "$tmp" "$DEPS"
    trap - EXIT
    log "upstream binaries built in $(($(date +%s) - t0)) s"
fi

# KubeadmControlPlane's manager (kcp-manager, the same module; up.sh --kcp starts it) with its
# CRDs and webhooks and the KubeadmConfig CRDs (CAPI's kubeadm bootstrap manager does not build
# with this go.mod: provider/ stands in for it). Added to DEPS on first use so that the key of
# the upstream binaries above stays what it was.
if [ ! -x "$DEPS/kcp-manager" ]; then
    log "building kcp-manager ($modkey)"
    t0=$(date +%s)
    capi=$("$GO" list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
    nice -n 10 "$GO" build -ldflags "$(ldflags capi-manager)" -o "$DEPS/.kcp-manager.tmp" \
        sigs.k8s.io/cluster-api/controlplane/kubeadm || die "building kcp-manager failed"
    for d in controlplane/kubeadm bootstrap/kubeadm; do
        mkdir -p "$DEPS/capi-config/$d/config/crd" "$DEPS/capi-config/$d/config/webhook"
        cp -r "$capi/$d/config/crd/bases" "$DEPS/capi-config/$d/config/crd/"
        cp "$capi/$d/config/webhook/manifests.yaml" "$DEPS/capi-config/$d/config/webhook/"
    done
    mv "$DEPS/.kcp-manager.tmp" "$DEPS/kcp-manager"
    log "kcp-manager built in $(($(date +%s) - t0)) s"
fi

tmp=$(mktemp -d "$CACHE/.capi-bin.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
for e in $UPSTREAM kcp-manager; do ln "$DEPS/${e%%:*}" "$tmp/${e%%:*}"; done
cp -r "$DEPS/capi-config" "$tmp/capi-config"
nice -n 10 "$GO" build -ldflags '-s -w' -o "$tmp/provider" ./provider ||
    die "building the stand-in provider failed"
rm -rf "$CACHE/capi-$key"
mkdir -p "$CACHE/capi-$key"
mv "$tmp" "$BIN"
trap - EXIT
log "binaries in $BIN"
echo "$BIN"
