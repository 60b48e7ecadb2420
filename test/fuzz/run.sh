#!/bin/sh
# run.sh BUILD_DIR [SECONDS [TARGET...]]: configure a clang build with -DHV_FUZZ=ON in
# BUILD_DIR, build the fuzz targets and their seed corpora, and fuzz each TARGET for SECONDS
# (default 60) in turn. Targets (default: all): hooks (request bodies: JSON, hooks, JSON
# Patch), soap (vCenter answers), domxml (libvirt domain XML, record metadata), oprecord
# (the operation record on a VM), config (the config file), base64, kube (Kubernetes API
# answers: CAPV identities, selectors, Machines for the remediation hold, the machine check's
# Machines, MachineSets and infra machines, the dry-run claim check's Machine lists and
# dryRun=All answers), kubeconfig (the kubeconfig of CAPK's infraClusterSecretRef Secret).
# Prints one line per target: executions, coverage (edges) and features, corpus size.
# Exits non-zero when a fuzzer finds a crash (the input is saved in
# BUILD_DIR/fuzz-artifacts/<target>/, reproduce it with `BUILD_DIR/test/fuzz/fuzz_<target>
# FILE`). The growing corpora are kept in BUILD_DIR/fuzz-corpus/<target>.
# Environment: FUZZ_JOBS (parallel fuzzing processes per target, default 1), FUZZ_PARALLEL
# (targets fuzzed side by side, default 1), CC (clang).
set -eu

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [SECONDS [TARGET...]]" >&2
    exit 2
fi
mkdir -p "$1"
build=$(cd "$1" && pwd)
seconds=${2:-60}
[ $# -ge 2 ] && shift 2 || shift $#
targets=${*:-hooks soap domxml oprecord config base64 kube kubeconfig}
src=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${FUZZ_JOBS:-1}

cmake -S "$src" -B "$build" -DHV_FUZZ=ON -DCMAKE_C_COMPILER="${CC:-clang}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || {
    cat "$build/configure.log" >&2
    exit 1
}
rm -f "$build/configure.log"
for t in $targets; do
    cmake --build "$build" --target "fuzz_$t" -j "$(nproc 2>/dev/null || echo 2)"
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# One target: fuzz it, then leave its summary line in fuzz-T.result and its status in
# fuzz-T.status (targets may run side by side, FUZZ_PARALLEL).
fuzz_target() {
    t=$1
    fuzzer=$build/test/fuzz/fuzz_$t
    if [ "$t" = hooks ]; then
        seeds=$build/test/fuzz/seeds
        dict="-dict=$src/test/fuzz/hooks.dict"
    else
        seeds=$build/test/fuzz/parser-seeds/fuzz_$t
        dict=
    fi
    corpus=$build/fuzz-corpus/$t
    artifacts=$build/fuzz-artifacts/$t
    log=$build/fuzz-$t.log
    mkdir -p "$corpus" "$artifacts" "$build/fuzz-work/$t"
    cd "$build/fuzz-work/$t" # -jobs writes fuzz-N.log into the working directory
    set -- -max_len=65536 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" -print_final_stats=1
    [ -n "$dict" ] && set -- "$@" "$dict"
    if [ "$jobs" -gt 1 ]; then
        set -- "$@" -jobs="$jobs" -workers="$jobs"
    fi
    echo "fuzz_$t: fuzzing for $seconds s (corpus $corpus, seeds $seeds)"
    rc=0
    before=$(ls "$artifacts" | wc -l)
    "$fuzzer" "$@" "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
    after=$(ls "$artifacts" | wc -l)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    done_line=$(grep -E "^#[0-9]+[[:space:]]+(DONE|INITED)" "$log" | tail -1)
    cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$done_line" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$done_line" | sed -n 's/.*corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p')
    echo "fuzz_$t: ${execs:-?} executions in $seconds s, coverage ${cov:-?} edges, ${ft:-?} features, corpus ${corp:-?}" >"$build/fuzz-$t.result"
    if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then # a -jobs parent may exit 0
        {
            tail -40 "$log"
            echo "fuzz_$t: FAILED (exit $rc); crash inputs (newest first):"
            for f in $(ls -t "$artifacts"); do
                echo "  reproduce: $fuzzer $artifacts/$f"
            done
            echo "  log: $log"
        } >"$build/fuzz-$t.failure"
        echo 1 >"$build/fuzz-$t.status"
    else
        cat "$build/fuzz-$t.result"
        echo 0 >"$build/fuzz-$t.status"
    fi
}

# FUZZ_PARALLEL targets at a time (default 1), each a process of its own: every target gets its
# whole time budget whatever the others do.
parallel=${FUZZ_PARALLEL:-1}
running=0
for t in $targets; do
    rm -f "$build/fuzz-$t.result" "$build/fuzz-$t.status" "$build/fuzz-$t.failure"
    (fuzz_target "$t") &
    running=$((running + 1))
    if [ "$running" -ge "$parallel" ]; then
        wait
        running=0
    fi
done
wait

failed=0
summary=
for t in $targets; do
    if [ "$(cat "$build/fuzz-$t.status" 2>/dev/null)" != 0 ]; then
        if [ -f "$build/fuzz-$t.failure" ]; then
            cat "$build/fuzz-$t.failure" >&2
        else
            echo "fuzz_$t: FAILED (it left no status)" >&2
        fi
        failed=1
    fi
    summary="$summary$(cat "$build/fuzz-$t.result" 2>/dev/null || echo "fuzz_$t: no result")
"
done
printf '\nfuzz summary:\n%s' "$summary"
if [ "$failed" -ne 0 ]; then
    exit 1
fi
echo "fuzz: no crash"
