#!/bin/sh
# release_test.sh SOURCE WORK: scripts/release.sh writes the release's files and checksums;
# the clusterctl files are the committed ones (deploy/clusterctl) but for the image, which
# the components and the chart pin to the OCI archive's manifest digest; the archive is an
# OCI layout whose manifest has that digest, the Containerfile's user and entrypoint, and a
# root in which the binary runs (chroot); a version other than the project's is refused.
# Needs root, mmdebstrap, umoci and the Debian mirror (scripts/oci-image.sh).
# One "ok"/"FAIL" line per check.
set -u
src=$1
work=$2
fails=0 passes=0
ok() { echo "ok $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
rm -rf "$work" && mkdir -p "$work" || exit 1
version=$(sed -n 's/^project(hvupdater VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
if "$src/scripts/release.sh" "$version" "$work/out" >"$work/release.log" 2>&1; then
    ok "release.sh $version exits 0"
else
    fail "release.sh $version: $(tail -20 "$work/release.log")"
fi
for f in runtime-extension-components.yaml metadata.yaml client-certs.yaml \
    client-certs-patch.json mhc-hold.yaml mhc-hold-patch.json "hvupdater-$version.tgz" "hvupdater-$version.oci.tar" \
    "hvupdater-$version.oci.digest" SHA256SUMS; do
    if [ -s "$work/out/$f" ]; then ok "release holds $f"; else fail "release lacks $f"; fi
done
deb=$(ls "$work"/out/hvupdater_"$version"_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ] && dpkg-deb -f "$deb" Version | grep -qx "$version"; then
    ok "release holds the .deb of version $version"
else
    fail "release lacks hvupdater_${version}_*.deb"
fi
if (cd "$work/out" && sha256sum --quiet -c SHA256SUMS) >"$work/sums.log" 2>&1 &&
    [ "$(wc -l <"$work/out/SHA256SUMS")" = 10 ]; then
    ok "SHA256SUMS covers the ten files and matches them"
else
    fail "SHA256SUMS: $(cat "$work/sums.log") ($(wc -l <"$work/out/SHA256SUMS") lines)"
fi
# The image: an OCI layout whose tagged manifest is the digest the release pins.
digest=$(cat "$work/out/hvupdater-$version.oci.digest" 2>/dev/null)
mkdir -p "$work/oci" && tar -C "$work/oci" -xf "$work/out/hvupdater-$version.oci.tar" 2>/dev/null
if python3 - "$work/oci" "$version" "$digest" >"$work/oci.log" 2>&1 <<'EOF'
import hashlib, json, os, sys
lay, version, digest = sys.argv[1:]
def blob(d):
    data = open(os.path.join(lay, "blobs", *d.split(":")), "rb").read()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == d, "blob %s does not match" % d
    return json.loads(data)
idx = json.load(open(os.path.join(lay, "index.json")))
tagged = [m["digest"] for m in idx["manifests"]
          if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == version]
assert tagged == [digest], "index.json tags %s, the release says %s" % (tagged, digest)
man = blob(digest)
cfg = blob(man["config"]["digest"])
c = cfg["config"]
assert (cfg["os"], cfg["architecture"]) == ("linux", "amd64"), (cfg["os"], cfg["architecture"])
assert c.get("User") == "65532:65532", c.get("User")
assert c.get("Entrypoint") == ["/usr/bin/hvupdater", "serve"], c.get("Entrypoint")
assert "9443/tcp" in c.get("ExposedPorts", {}), c.get("ExposedPorts")
EOF
then
    ok "the OCI archive's manifest is $digest: linux/amd64, user 65532:65532, entrypoint hvupdater serve, port 9443"
else
    fail "the OCI archive: $(tail -3 "$work/oci.log")"
fi
if umoci unpack --image "$work/oci:$version" "$work/bundle" >"$work/unpack.log" 2>&1 &&
    chroot "$work/bundle/rootfs" /usr/bin/hvupdater version >"$work/run.log" 2>&1 &&
    grep -q "$version" "$work/run.log"; then
    ok "the image's root runs /usr/bin/hvupdater version ($(head -1 "$work/run.log"))"
else
    fail "the image's binary does not run: $(tail -3 "$work/unpack.log" "$work/run.log")"
fi
if grep -qx "          image: [$]{HVUPDATER_IMAGE}@$digest" \
    "$work/out/runtime-extension-components.yaml"; then
    ok "the clusterctl components pin the image to \${HVUPDATER_IMAGE}@$digest"
else
    fail "the clusterctl components do not pin @$digest: $(grep 'image:' "$work/out/runtime-extension-components.yaml")"
fi
# but for that pin, the committed components
sed -e "s|^          image: [$]{HVUPDATER_IMAGE}@$digest\$|          image: \${HVUPDATER_IMAGE}|" \
    -e '/^#   [$]{HVUPDATER_IMAGE}  (required: REGISTRY/{N;s/.*/#   ${HVUPDATER_IMAGE}  (required)/;}' \
    "$work/out/runtime-extension-components.yaml" >"$work/unpinned.yaml"
if cmp -s "$work/unpinned.yaml" "$src/deploy/clusterctl/runtime-extension-components.yaml"; then
    ok "runtime-extension-components.yaml is deploy/clusterctl's but for the pinned image"
else
    fail "runtime-extension-components.yaml differs from deploy/clusterctl's beyond the image: $(diff "$work/unpinned.yaml" "$src/deploy/clusterctl/runtime-extension-components.yaml" | head -10)"
fi
if tar -xOzf "$work/out/hvupdater-$version.tgz" hvupdater/values.yaml 2>/dev/null |
    grep -q "^  tag: \"$version@$digest\""; then
    ok "the packaged chart's image.tag is $version@$digest"
else
    fail "the packaged chart's image.tag is not $version@$digest"
fi
for f in metadata.yaml client-certs.yaml client-certs-patch.json mhc-hold.yaml mhc-hold-patch.json; do
    if cmp -s "$work/out/$f" "$src/deploy/clusterctl/$f"; then
        ok "$f is deploy/clusterctl/$f"
    else
        fail "$f differs from deploy/clusterctl/$f"
    fi
done
if tar -xOzf "$work/out/hvupdater-$version.tgz" hvupdater/Chart.yaml 2>/dev/null |
    grep -qx "version: $version"; then
    ok "the packaged chart has version $version"
else
    fail "the packaged chart's version is not $version"
fi
if "$src/scripts/release.sh" 9.9.9 "$work/wrong" >"$work/wrong.log" 2>&1; then
    fail "release.sh 9.9.9 (not the project version) should fail"
elif grep -q "not the project's version" "$work/wrong.log"; then
    ok "release.sh refuses a version other than the project's"
else
    fail "release.sh 9.9.9 failed for another reason: $(tail -5 "$work/wrong.log")"
fi
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
