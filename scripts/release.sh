#!/usr/bin/env bash
# release.sh VERSION OUTDIR: write a release's files into OUTDIR:
#   hvupdater-VERSION.oci.tar          the container image as an OCI archive
#                                      (scripts/oci-image.sh: the Containerfile's image,
#                                      built without a container engine); push it with
#                                      skopeo copy oci-archive:hvupdater-VERSION.oci.tar \
#                                        docker://REGISTRY/hvupdater:VERSION
#   hvupdater-VERSION.oci.digest       its manifest digest (sha256:...), which the files
#                                      below pin (REFERENCE@DIGEST)
#   runtime-extension-components.yaml  the clusterctl provider components (clusterctl
#                                      variables; HVUPDATER_IMAGE is required, e.g.
#                                      REGISTRY/hvupdater:VERSION; the image is
#                                      ${HVUPDATER_IMAGE}@DIGEST)
#   metadata.yaml                      clusterctl's release series -> contract
#   client-certs.yaml                  the optional client-certificate component (kubectl
#   client-certs-patch.json            apply; then patch the Deployment with the JSON patch)
#   mhc-hold.yaml, mhc-hold-patch.json the optional MachineHealthCheck hold (the same way)
#   hvupdater-VERSION.tgz              the Helm chart (helm package; image.tag pinned to
#                                      VERSION@DIGEST, image.repository to set)
#   hvupdater_VERSION_<arch>.deb       the Debian package (Release build, cpack)
#   SHA256SUMS                         sha256sum of all of the above
# As a clusterctl local repository: OUTDIR's files go to
#   <repo>/runtime-extension-hvupdater/vVERSION/ (see deploy/README.md, clusterctl).
# VERSION must be the project's version (CMakeLists.txt project(... VERSION)); the chart's
# version and appVersion follow it. Helm comes from test/helm/build.sh (built, cached).
# Needs root, mmdebstrap and umoci for the image (scripts/oci-image.sh).
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

log "container image (OCI archive)"
DIGEST=$("$ROOT/scripts/oci-image.sh" "$VERSION" "$OUT/hvupdater-$VERSION.oci.tar" "$WORK/image")
case $DIGEST in sha256:[0-9a-f]*) ;; *) die "oci-image.sh printed no digest: $DIGEST" ;; esac
echo "$DIGEST" >"$OUT/hvupdater-$VERSION.oci.digest"

log "clusterctl provider files (image pinned to $DIGEST)"
python3 "$ROOT/scripts/render-manifests.py" --tools "$TOOLS" --out "$WORK/render" \
    --version "$VERSION" >/dev/null
for f in runtime-extension-components.yaml client-certs.yaml client-certs-patch.json \
    mhc-hold.yaml mhc-hold-patch.json; do
    cp "$WORK/render/deploy/clusterctl/$f" "$OUT/$f"
done
cp "$ROOT/deploy/clusterctl/metadata.yaml" "$OUT/metadata.yaml"
python3 - "$OUT/runtime-extension-components.yaml" "$VERSION" "$DIGEST" <<'EOF'
import sys
path, version, digest = sys.argv[1:]
text = open(path).read()
pairs = [("image: ${HVUPDATER_IMAGE}\n", "image: ${HVUPDATER_IMAGE}@%s\n" % digest),
         ("#   ${HVUPDATER_IMAGE}  (required)\n",
          "#   ${HVUPDATER_IMAGE}  (required: REGISTRY/hvupdater:%s, where\n"
          "#     hvupdater-%s.oci.tar was pushed; the image is pinned to @%s)\n"
          % (version, version, digest))]
for old, new in pairs:
    if text.count(old) != 1:
        sys.exit("release: %r is not once in %s" % (old.strip(), path))
    text = text.replace(old, new)
open(path, "w").write(text)
EOF

log "Helm chart (image.tag pinned to $VERSION@$DIGEST)"
cp -r "$ROOT/deploy/helm/hvupdater" "$WORK/chart"
grep -q '^  tag: ""' "$WORK/chart/values.yaml" || die "the chart's values.yaml has no image tag line"
sed -i "s|^  tag: \"\"|  tag: \"$VERSION@$DIGEST\"|" "$WORK/chart/values.yaml"
"$TOOLS/helm" package "$WORK/chart" --version "$VERSION" \
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
        client-certs-patch.json mhc-hold.yaml mhc-hold-patch.json "hvupdater-$VERSION.tgz" hvupdater_"$VERSION"_*.deb \
        "hvupdater-$VERSION.oci.tar" "hvupdater-$VERSION.oci.digest" >SHA256SUMS.tmp &&
    mv SHA256SUMS.tmp SHA256SUMS)
log "release $VERSION in $OUT:"
ls -1 "$OUT" >&2
