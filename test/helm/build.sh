#!/usr/bin/env bash
# build.sh: build (once, cached) the tools the chart tests use, from their Go modules
# (go.mod/go.sum next to this script pin the versions) with Go >= 1.26 and the module proxy:
#   helm       helm.sh/helm/v3/cmd/helm
#   kustomize  kustomize/main.go: kustomize's own library (krusty), as `kustomize build`
#
# Output: the directory holding both on stdout:
#   $HV_HELM_DIR (default /var/cache/hvupdater-lab/helm)/tools-<key>
# where <key> is a hash of go.mod, go.sum, kustomize/main.go, this script and the Go
# version. A build whose key exists is reused. Usage: build.sh [--print]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BASE=${HV_HELM_DIR:-/var/cache/hvupdater-lab/helm}
GO=${HV_GO:-/usr/local/go/bin/go}

log() { echo "helm-build: $*" >&2; }
die() { log "$*"; exit 1; }

[ -x "$GO" ] || die "no Go at $GO (set HV_GO): Go >= 1.26 is needed"
GOVER=$("$GO" env GOVERSION)
KEY=$( (echo "$GOVER"; cat "$0" "$HERE/go.mod" "$HERE/go.sum" "$HERE/kustomize/main.go") | sha256sum | cut -c1-16)
DIR=$BASE/tools-$KEY
if [ "${1:-}" = --print ]; then
    echo "$DIR"
    exit 0
fi
if [ ! -x "$DIR/helm" ] || [ ! -x "$DIR/kustomize" ]; then
    log "building helm and kustomize ($(grep -m1 'helm.sh/helm' "$HERE/go.mod" | xargs), $GOVER): a few minutes"
    mkdir -p "$BASE"
    tmp=$(mktemp -d "$BASE/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    (cd "$HERE" && GOTOOLCHAIN=local CGO_ENABLED=0 \
        "$GO" build -trimpath -ldflags '-s -w' -o "$tmp/helm" helm.sh/helm/v3/cmd/helm &&
        "$GO" build -trimpath -ldflags '-s -w' -o "$tmp/kustomize" ./kustomize)
    "$tmp/helm" version --short >/dev/null || die "the built helm does not run"
    rm -rf "$DIR"
    mv "$tmp" "$DIR"
    trap - EXIT
fi
echo "$DIR"
