#!/bin/sh
# fuzz-bench.sh BUILD_DIR [SECONDS]: the long fuzz run. Every libFuzzer target (request
# bodies, vCenter SOAP answers, libvirt domain XML, the operation record, the config file,
# base64, the Kubernetes API's answers) for SECONDS each (default 600), corpora kept in BUILD_DIR/fuzz-corpus so runs add
# up. Prints executions, coverage (edges), features and corpus size per target; exits
# non-zero on a crash. Environment: FUZZ_JOBS (processes per target), CC.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [SECONDS]" >&2
    exit 2
fi
exec "$(dirname "$0")/../fuzz/run.sh" "$1" "${2:-600}"
