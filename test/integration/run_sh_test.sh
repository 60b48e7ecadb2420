#!/bin/sh
# run_sh_test.sh SOURCE_DIR EXPECTED_LAST_ANSWER: the README's main-job command as a newcomer
# runs it (scripts/run.sh --demo-only). Passes only when run.sh exits 0 and its last
# UpdateMachine answer is exactly EXPECTED_LAST_ANSWER (the whole JSON object); prints why not.
src=$1
want=$2
out=$("$src/scripts/run.sh" --demo-only 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: run.sh exited $rc"
    exit 1
fi
last=$(printf '%s\n' "$out" | grep '"kind":"UpdateMachineResponse"' | tail -n 1)
if [ "$last" != "$want" ]; then
    echo "FAIL: the last UpdateMachine answer was"
    echo "  $last"
    echo "expected"
    echo "  $want"
    exit 1
fi
echo "PASS: run.sh exited 0 and ended with the expected done"
