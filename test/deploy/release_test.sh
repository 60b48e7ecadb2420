#!/bin/sh
# release_test.sh SOURCE WORK: scripts/release.sh writes the release's files and checksums;
# the clusterctl files are the committed ones (deploy/clusterctl); a version other than the
# project's is refused. One "ok"/"FAIL" line per check.
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
    client-certs-patch.json "hvupdater-$version.tgz" SHA256SUMS; do
    if [ -s "$work/out/$f" ]; then ok "release holds $f"; else fail "release lacks $f"; fi
done
deb=$(ls "$work"/out/hvupdater_"$version"_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ] && dpkg-deb -f "$deb" Version | grep -qx "$version"; then
    ok "release holds the .deb of version $version"
else
    fail "release lacks hvupdater_${version}_*.deb"
fi
if (cd "$work/out" && sha256sum --quiet -c SHA256SUMS) >"$work/sums.log" 2>&1 &&
    [ "$(wc -l <"$work/out/SHA256SUMS")" = 6 ]; then
    ok "SHA256SUMS covers the six files and matches them"
else
    fail "SHA256SUMS: $(cat "$work/sums.log") ($(wc -l <"$work/out/SHA256SUMS") lines)"
fi
for f in runtime-extension-components.yaml metadata.yaml client-certs.yaml client-certs-patch.json; do
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
