#!/bin/sh
# run.sh BUILD_DIR SECONDS: configure a clang build with -DHV_FUZZ=ON in BUILD_DIR, build
# fuzz_hooks and its seed corpus, and fuzz for SECONDS (default 60). Exits non-zero when the
# fuzzer finds a crash (the input is saved in BUILD_DIR/fuzz-artifacts/, reproduce it with
# `BUILD_DIR/test/fuzz/fuzz_hooks FILE`). The growing corpus is kept in BUILD_DIR/fuzz-corpus.
# Environment: FUZZ_JOBS (parallel fuzzing processes, default 1), CC (default clang).
set -eu

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [SECONDS]" >&2
    exit 2
fi
mkdir -p "$1"
build=$(cd "$1" && pwd)
seconds=${2:-60}
src=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${FUZZ_JOBS:-1}

cmake -S "$src" -B "$build" -DHV_FUZZ=ON -DCMAKE_C_COMPILER="${CC:-clang}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || {
    cat "$build/configure.log" >&2
    exit 1
}
rm -f "$build/configure.log"
cmake --build "$build" --target fuzz_hooks -j "$(nproc 2>/dev/null || echo 2)"

fuzzer=$build/test/fuzz/fuzz_hooks
seeds=$build/test/fuzz/seeds
corpus=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts
mkdir -p "$corpus" "$artifacts"

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

set -- -max_len=65536 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -dict="$src/test/fuzz/hooks.dict" -artifact_prefix="$artifacts/" -print_final_stats=1
if [ "$jobs" -gt 1 ]; then
    set -- "$@" -jobs="$jobs" -workers="$jobs"
fi

echo "fuzz_hooks: fuzzing for $seconds s (corpus $corpus, seeds $seeds)"
rc=0
before=$(ls "$artifacts" | wc -l)
cd "$build" # -jobs writes fuzz-N.log into the working directory
"$fuzzer" "$@" "$corpus" "$seeds" || rc=$?
after=$(ls "$artifacts" | wc -l)
if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then # a -jobs parent may exit 0
    echo "fuzz_hooks: FAILED (exit $rc); crash inputs (newest first):" >&2
    for f in $(ls -t "$artifacts"); do
        echo "  reproduce: $fuzzer $artifacts/$f" >&2
    done
    [ "$jobs" -gt 1 ] && echo "  logs: $build/fuzz-*.log" >&2
    exit 1
fi
echo "fuzz_hooks: no crash in $seconds s"
