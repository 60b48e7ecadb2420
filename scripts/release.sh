#!/usr/bin/env bash
# release.sh VERSION OUTDIR: write a release's files into OUTDIR (no container image: build
# that from deploy/container/Containerfile where a container runtime exists):
#   runtime-extension-components.yaml  the clusterctl provider components (clusterctl
#                                      variables; HVUPDATER_IMAGE is required)
#   metadata.yaml                      clusterctl's release series -> contract
#   client-certs.yaml                  the optional client-certificate component (kubectl
#   client-certs-patch.json            apply; then patch the Deployment with the JSON patch)
#   hvupdater-VERSION.tgz              the Helm chart (helm package)
#   hvupdater_VERSION_<arch>.deb       the Debian package (Release build, cpack)
#   SHA256SUMS                         sha256sum of all of the above
# As a clusterctl local repository: OUTDIR's files go to
#   <repo>/runtime-extension-hvupdater/vVERSION/ (see deploy/README.md, clusterctl).
# VERSION must be the project's version (CMakeLists.txt project(... VERSION)); the chart's
# version and appVersion follow it. Helm comes from test/helm/build.sh (built, cached).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "release: $*" >&2; }
die() { log "$*"; exit 1; }

[ $# = 2 ] || die "usage: scripts/release.sh VERSION OUTDIR"
VERSION=${1#v}
OUT=$2
PROJECT=$(sed -n 's/^project(hvupdater VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[ "$VERSION" = "$PROJECT" ] ||
    die "VERSION $VERSION is not the project's version $PROJECT (CMakeLists.txt)"
grep -q "^  - major: ${VERSION%%.*}\$" "$ROOT/deploy/clusterctl/metadata.yaml" &&
    awk -v maj="${VERSION%%.*}" -v min="$(echo "$VERSION" | cut -d. -f2)" '
        /- major:/ {m=$3} /minor:/ {if (m==maj && $2==min) found=1} END {exit !found}' \
        "$ROOT/deploy/clusterctl/metadata.yaml" ||
    die "deploy/clusterctl/metadata.yaml has no release series for $VERSION"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TOOLS=$("$ROOT/test/helm/build.sh")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

log "clusterctl provider files"
python3 "$ROOT/scripts/render-manifests.py" --tools "$TOOLS" --out "$WORK/render" \
    --version "$VERSION" >/dev/null
for f in runtime-extension-components.yaml client-certs.yaml client-certs-patch.json; do
    cp "$WORK/render/deploy/clusterctl/$f" "$OUT/$f"
done
cp "$ROOT/deploy/clusterctl/metadata.yaml" "$OUT/metadata.yaml"

log "Helm chart"
"$TOOLS/helm" package "$ROOT/deploy/helm/hvupdater" --version "$VERSION" \
    --app-version "$VERSION" -d "$OUT" >/dev/null

log "Debian package (Release build)"
cmake -S "$ROOT" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release >"$WORK/cmake.log" 2>&1 ||
    { cat "$WORK/cmake.log"; die "cmake failed"; }
cmake --build "$WORK/build" -j"$(nproc)" --target hvupdater >"$WORK/build.log" 2>&1 ||
    { tail -50 "$WORK/build.log"; die "build failed"; }
cpack -G DEB --config "$WORK/build/CPackConfig.cmake" -B "$WORK/deb" >"$WORK/cpack.log" 2>&1 ||
    { cat "$WORK/cpack.log"; die "cpack failed"; }
cp "$WORK"/deb/hvupdater_"$VERSION"_*.deb "$OUT/"

log "checksums"
(cd "$OUT" && rm -f SHA256SUMS &&
    sha256sum runtime-extension-components.yaml metadata.yaml client-certs.yaml \
        client-certs-patch.json "hvupdater-$VERSION.tgz" hvupdater_"$VERSION"_*.deb >SHA256SUMS.tmp &&
    mv SHA256SUMS.tmp SHA256SUMS)
log "release $VERSION in $OUT:"
ls -1 "$OUT" >&2
