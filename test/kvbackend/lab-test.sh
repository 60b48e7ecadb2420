#!/usr/bin/env bash
# lab-test.sh: backends/kubevirt against the KubeVirt lab as one command (ctest -L kubevirt):
# under flock /tmp/hv-lab.lock, test/kubevirt/up.sh, kubevirt_backend_test.py, down.sh and the
# QEMU lab's daemons stopped. Root; HV_BUILD: the directory of the hvupdater binary.
# HV_KUBEVIRT_LAB_DIR: where the lab's scripts are (default test/kubevirt of this checkout).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LAB=${HV_KUBEVIRT_LAB_DIR:-$ROOT/test/kubevirt}
BUILD=${HV_BUILD:-$ROOT/build}
if [ ! -x "$LAB/up.sh" ] || [ ! -f "$LAB/kvlab.py" ]; then
    echo "FAIL no KubeVirt lab at $LAB (test/kubevirt, or HV_KUBEVIRT_LAB_DIR)"
    exit 1
fi
LABROOT=$(cd "$LAB/../.." && pwd)
# HV_LAB_LOCK_HELD=1: the caller holds /tmp/hv-lab.lock already (scripts/test-all.sh run as
# `flock /tmp/hv-lab.lock .ci/run`): a flock on a new descriptor would wait for it for ever
if [ "${HV_LAB_LOCK_HELD:-0}" != 1 ]; then
    exec 9>/tmp/hv-lab.lock
    flock 9
fi
t0=$(date +%s)
if env=$(HV_BUILD=$BUILD "$LAB/up.sh"); then
    eval "$env"
    HV_KUBEVIRT_LAB_DIR=$LAB /usr/bin/python3 "$HERE/kubevirt_backend_test.py" \
        --binary "$BUILD/hvupdater" "$@"
    rc=$?
else
    rc=1
fi
"$LAB/down.sh"
"$LABROOT/test/lab/libvirt-down.sh"
echo "kubevirt backend lab: $(($(date +%s) - t0)) s with up.sh and down.sh (exit $rc)"
exit $rc
