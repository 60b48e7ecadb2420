#!/usr/bin/env bash
# capi-test.sh: CAPI drives hvupdater's KubeVirt backend on CAPK Machines (kubevirt_capi_test.py)
# as one command (ctest -L kubevirt): under flock /tmp/hv-lab.lock, up.sh --capk, the test,
# down.sh and the QEMU lab's daemons stopped. Root; HV_BUILD: the directory of the hvupdater
# binary (the CAPI lab starts it; the test restarts it with a kubevirt section). Prints the
# stage's time.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export HV_BUILD=${HV_BUILD:-$ROOT/build}
# HV_LAB_LOCK_HELD=1: the caller holds /tmp/hv-lab.lock already (scripts/test-all.sh run as
# `flock /tmp/hv-lab.lock .ci/run`): a flock on a new descriptor would wait for it for ever
if [ "${HV_LAB_LOCK_HELD:-0}" != 1 ]; then
    exec 9>/tmp/hv-lab.lock
    flock 9
fi
t0=$(date +%s)
if env=$("$HERE/up.sh" --capk); then
    eval "$env"
    /usr/bin/python3 "$HERE/kubevirt_capi_test.py" "$@"
    rc=$?
    # HV_KUBEVIRT_LOGS_TO=DIR: the lab's logs (hvupdater, CAPI, CAPK, the stand-in) kept there
    if [ -n "${HV_KUBEVIRT_LOGS_TO:-}" ]; then
        mkdir -p "$HV_KUBEVIRT_LOGS_TO"
        cp "$HV_CAPI_STATE"/*.log "$HV_KUBEVIRT_STATE"/*.log "$HV_KUBEVIRT_LOGS_TO"/ 2>/dev/null
    fi
else
    rc=1
fi
"$HERE/down.sh"
"$ROOT/test/lab/libvirt-down.sh"
echo "kubevirt capi: $(($(date +%s) - t0)) s with up.sh and down.sh (exit $rc)"
exit $rc
