#!/usr/bin/env bash
# bootstrap.sh: install the Debian 12 packages hvupdater needs to build, test and run its
# labs, only when they are missing. Safe to run again. Needs root (or sudo).
# nginx-light is test/bench/hook-bench.sh's anchor (it starts its own nginx on a free port).
set -euo pipefail

BUILD_PKGS="build-essential cmake pkg-config git ca-certificates curl
  libmicrohttpd-dev libgnutls28-dev libyajl-dev libyaml-dev libcurl4-openssl-dev libxml2-dev
  libvirt-dev libcmocka-dev libssl-dev libcurl3-gnutls"
TEST_PKGS="clang libclang-rt-14-dev valgrind clang-format cppcheck python3 python3-jsonschema
  openssl curl wrk procps iproute2 python3-libvirt python3-yaml
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils
  golang-go golang-github-vmware-govmomi-dev lintian
  linux-image-cloud-amd64 busybox-static qemu-guest-agent cpio
  nginx-light umoci mmdebstrap"

want="$BUILD_PKGS"
case "${1:-all}" in
  build) ;;
  all|test) want="$BUILD_PKGS $TEST_PKGS" ;;
  *) echo "usage: $0 [build|test|all]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -z "$missing" ]; then
  echo "bootstrap: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "bootstrap: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "bootstrap: done"
