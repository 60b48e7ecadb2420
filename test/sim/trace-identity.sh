#!/bin/sh
# trace-identity.sh: the oracle of a pure engine refactor (issue 27 step 0). Builds sim_main
# twice, from the engine (src/, backends/, top-level CMake) of BASE and of NEW (default: the
# working tree), both against the working tree's test/sim, and compares the simulation's traces run by run
# (every step, call, answer, act and operation-record write, stamped with the simulated clock
# only; sim_main --trace-hash gives each run's line count and hash). Compared:
#   seeds 1..20000 at 400 steps, seeds 7100001..7100200 at 2,000 steps, and every regression
#   seed of test/sim/CMakeLists.txt (sim_regression) at its own steps.
# Prints the counts compared, and the first difference (both traces of its run, diffed) if any.
# Exit status: 0 identical, 1 a trace differs, 2 a build or usage error.
#   test/sim/trace-identity.sh [BASE [NEW]]   (commits; BASE default HEAD, NEW the working tree)
# (With NEW a commit, the working tree may change while it runs: NEW is checked out apart.)
# Environment: TRACE_SEEDS (default 20000), TRACE_LONG (default 200), TRACE_WORK (scratch
# directory, default a new one under ${TMPDIR:-/tmp}, removed at the end unless given).
# Both engines run at once (two processes: parallel by 2, no more).
set -eu

base=${1:-HEAD}
new=${2:-}
seeds=${TRACE_SEEDS:-20000}
long=${TRACE_LONG:-200}
long_from=7100001
top=$(git rev-parse --show-toplevel)
cd "$top"
base_rev=$(git rev-parse --verify "$base^{commit}") || {
    echo "trace-identity: no commit $base" >&2
    exit 2
}
if [ -n "${TRACE_WORK:-}" ]; then
    work=$TRACE_WORK
    keep=1
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/trace-identity.XXXXXX")
    keep=0
fi
cleanup() {
    git -C "$top" worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
    git -C "$top" worktree remove --force "$work/new-src" >/dev/null 2>&1 || true
    [ "$keep" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT INT TERM

t0=$(date +%s)
# The base's engine with today's test/sim.
git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
rm -rf "$work/base-src"
git worktree add --detach -q "$work/base-src" "$base_rev"
rm -rf "$work/base-src/test/sim"
cp -R "$top/test/sim" "$work/base-src/test/sim"
new_src=$top
new_name="working tree"
if [ -n "$new" ]; then
    new_rev=$(git rev-parse --verify "$new^{commit}") || {
        echo "trace-identity: no commit $new" >&2
        exit 2
    }
    git worktree remove --force "$work/new-src" >/dev/null 2>&1 || true
    rm -rf "$work/new-src"
    git worktree add --detach -q "$work/new-src" "$new_rev"
    rm -rf "$work/new-src/test/sim"
    cp -R "$top/test/sim" "$work/new-src/test/sim"
    new_src=$work/new-src
    new_name=$(git rev-parse --short "$new_rev")
fi

build() { # build SRC BUILD
    cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$2.log" 2>&1 &&
        cmake --build "$2" -j1 --target sim_main >>"$2.log" 2>&1 || {
        echo "trace-identity: build of $1 failed (log: $2.log)" >&2
        tail -20 "$2.log" >&2
        return 1
    }
}
rc=0
build "$work/base-src" "$work/base-build" &
pb=$!
build "$new_src" "$work/new-build" &
pn=$!
wait $pb || rc=2
wait $pn || rc=2
[ $rc = 0 ] || {
    keep=1
    exit 2
}
t1=$(date +%s)

# The regression seeds, "seed steps" one a line, from the sim_regression foreach lists.
python3 - "$top/test/sim/CMakeLists.txt" >"$work/regs" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
for body, steps in re.findall(r'foreach\(reg(.*?)\)\s*sim_regression\(\$\{reg\}\s+(\d+)\)', text, re.S):
    for name, seed in re.findall(r'"([^":]+):(\d+)"', body):
        print(seed, steps)
EOF
nregs=$(wc -l <"$work/regs")

run_all() { # run_all SIM_MAIN OUT
    {
        # (sim_main exits 1 when a run breaks an invariant: the open seeds do; compared too)
        "$1" --from 1 --seeds "$seeds" --steps 400 --quiet --trace-hash || true
        "$1" --from "$long_from" --seeds "$long" --steps 2000 --quiet --trace-hash || true
        while read -r seed steps; do
            { "$1" --seed "$seed" --steps "$steps" --quiet --trace-hash || true; } |
                sed "s/^trace /trace $steps:/"
        done <"$work/regs"
    } | grep -v '^sim: ' >"$2" || true
}
run_all "$work/base-build/test/sim/sim_main" "$work/base.out" &
pb=$!
run_all "$work/new-build/test/sim/sim_main" "$work/new.out" &
pn=$!
wait $pb
wait $pn
t2=$(date +%s)

runs=$(grep -c '^trace ' "$work/new.out" || true)
lines=$(awk '/^trace /{n += $3} END {print n + 0}' "$work/new.out")
echo "trace-identity: base $(git rev-parse --short "$base_rev") vs $new_name; compared $runs runs" \
    "(seeds 1..$seeds x400, $long x2000 from $long_from, $nregs regression seeds), $lines trace lines;" \
    "build $((t1 - t0)) s, runs $((t2 - t1)) s"
want=$((seeds + long + nregs))
if [ "$runs" -ne "$want" ] || [ "$(grep -c '^trace ' "$work/base.out" || true)" -ne "$want" ]; then
    echo "trace-identity: expected $want runs from each engine" >&2
    keep=1
    exit 2
fi
if cmp -s "$work/base.out" "$work/new.out"; then
    echo "trace-identity: traces identical"
    exit 0
fi
keep=1
first=$(diff "$work/base.out" "$work/new.out" | grep '^[<>]' | head -1)
echo "trace-identity: TRACES DIFFER; first difference: $first (outputs in $work)"
seed=$(diff "$work/base.out" "$work/new.out" | grep '^[<>] trace ' | head -1 | awk '{print $3}')
case "$seed" in
*:*)
    steps=${seed%%:*}
    seed=${seed#*:}
    ;;
*) steps=400 ;;
esac
[ "$seed" -ge "$long_from" ] 2>/dev/null && [ "$seed" -lt $((long_from + long)) ] && steps=2000
if [ -n "$seed" ] && [ "$seed" -eq "$seed" ] 2>/dev/null; then
    "$work/base-build/test/sim/sim_main" --seed "$seed" --steps "$steps" --trace 2>&1 |
        grep -v '^sim: ' >"$work/base.trace" || true
    "$work/new-build/test/sim/sim_main" --seed "$seed" --steps "$steps" --trace 2>&1 |
        grep -v '^sim: ' >"$work/new.trace" || true
    echo "trace-identity: seed $seed ($steps steps), first differing lines (< base, > new):"
    diff "$work/base.trace" "$work/new.trace" | head -12
fi
exit 1
