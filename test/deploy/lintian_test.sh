#!/bin/sh
# lintian_test.sh BUILD_DIR WORK_DIR: build the Debian package from BUILD_DIR with cpack into
# WORK_DIR and check it with lintian at its default level: any error or warning fails (one
# "FAIL" line per tag). lintian missing is a failure too (scripts/bootstrap.sh installs it).
set -u
build=$1
work=$2
if ! command -v lintian >/dev/null 2>&1; then
    echo "FAIL lintian not installed: run scripts/bootstrap.sh test"
    exit 1
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
if ! cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work" >"$work/cpack.log" 2>&1; then
    echo "FAIL cpack -G DEB"
    cat "$work/cpack.log"
    exit 1
fi
deb=$(ls "$work"/hvupdater_*.deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then
    echo "FAIL no .deb made"
    exit 1
fi
out=$(lintian --tag-display-limit 0 --fail-on error,warning "$deb" 2>&1)
rc=$?
echo "$out" | grep -v 'running with root privileges' | sed -n 's/^\([EW]\): /FAIL \1: /p'
echo "$out" | grep -v 'running with root privileges' | grep -v '^[EW]: ' || true
if [ "$rc" != 0 ]; then
    echo "FAIL lintian exit $rc on $(basename "$deb")"
    exit 1
fi
echo "lintian: $(basename "$deb") clean at the default level"
