#!/usr/bin/env bash
# lab-test.sh: the KubeVirt lab's own test as one command (ctest -L kubevirt): under
# flock /tmp/hv-lab.lock, up.sh, kubevirt_lab_test.py, down.sh and the QEMU lab's daemons
# stopped (test/lab/libvirt-down.sh stops only what libvirt-up.sh started). Root; HV_BUILD: the
# directory of the hvupdater binary (the CAPI lab starts it). Prints the stage's time.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# HV_LAB_LOCK_HELD=1: the caller holds /tmp/hv-lab.lock already (scripts/test-all.sh run as
# `flock /tmp/hv-lab.lock .ci/run`): a flock on a new descriptor would wait for it for ever
if [ "${HV_LAB_LOCK_HELD:-0}" != 1 ]; then
    exec 9>/tmp/hv-lab.lock
    flock 9
fi
t0=$(date +%s)
if env=$(HV_BUILD=${HV_BUILD:-$ROOT/build} "$HERE/up.sh" --capk); then
    eval "$env"
    /usr/bin/python3 "$HERE/kubevirt_lab_test.py" "$@"
    rc=$?
else
    rc=1
fi
"$HERE/down.sh"
"$ROOT/test/lab/libvirt-down.sh"
echo "kubevirt lab: $(($(date +%s) - t0)) s with up.sh and down.sh (exit $rc)"
exit $rc
