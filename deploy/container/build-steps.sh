#!/bin/sh
# build-steps.sh: the build stage of deploy/container/Containerfile, kept as a script so
# CI runs exactly these steps outside a container builder (test/deploy, deploy.container).
#
#   build-steps.sh SRC OUT [BUILD]
#
# Installs the build packages (scripts/bootstrap.sh build, the same script CI uses), builds
# hvupdater in Release with warnings as errors, and stages the install under OUT
# (OUT/usr/bin/hvupdater and the files the runtime stage copies). BUILD defaults to
# SRC/build-release. Needs root only when packages are missing.
set -eu

SRC=${1:?usage: build-steps.sh SRC OUT [BUILD]}
OUT=${2:?usage: build-steps.sh SRC OUT [BUILD]}
BUILD=${3:-$SRC/build-release}

"$SRC/scripts/bootstrap.sh" build

cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHV_WERROR=ON -DBUILD_TESTING=OFF
cmake --build "$BUILD" --target hvupdater -j"$(nproc)"
DESTDIR="$OUT" cmake --install "$BUILD" --prefix /usr --strip

# The staged binary runs and every shared library it needs resolves.
"$OUT/usr/bin/hvupdater" version
if ldd "$OUT/usr/bin/hvupdater" | grep -q 'not found'; then
    ldd "$OUT/usr/bin/hvupdater" >&2
    echo "build-steps: unresolved shared libraries" >&2
    exit 1
fi
echo "build-steps: staged $OUT/usr/bin/hvupdater"
