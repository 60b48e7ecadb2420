#!/usr/bin/env bash
# lab-lock.sh CMD...: run CMD holding /tmp/hv-lab.lock, the lock every user of the CAPI and
# KubeVirt labs takes (test/kubevirt/up.sh leaves taking it to its caller). With
# HV_LAB_LOCK_HELD=1 the caller holds it already (scripts/test-all.sh runs under
# `flock /tmp/hv-lab.lock .ci/run`): a flock on a new descriptor would wait for it for ever.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CMD..." >&2; exit 2; }
if [ "${HV_LAB_LOCK_HELD:-0}" != 1 ]; then
    exec 9>/tmp/hv-lab.lock
    flock 9
fi
exec "$@"
