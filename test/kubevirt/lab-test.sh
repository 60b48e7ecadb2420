#!/usr/bin/env bash
# lab-test.sh: the KubeVirt lab's own test as one command (ctest -L kubevirt): under
# flock /tmp/hv-lab.lock, up.sh, kubevirt_lab_test.py, down.sh and the QEMU lab's daemons
# stopped (test/lab/libvirt-down.sh stops only what libvirt-up.sh started). Root; HV_BUILD: the
# directory of the hvupdater binary (the CAPI lab starts it). Prints the stage's time.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
exec 9>/tmp/hv-lab.lock
flock 9
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
