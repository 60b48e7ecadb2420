#!/usr/bin/env bash
# run.sh start DIR [launcher flags...] | run.sh stop DIR: start the vcsim launcher in the
# background (built by build.sh; binary from $HV_VCSIM_BIN), wait for its ready line and
# print DIR/info.json; stop sends SIGTERM to the pid kept in DIR/pid and waits.
set -euo pipefail

cmd=${1:-}; dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: run.sh start|stop DIR [flags...]" >&2
  exit 2
fi
shift 2
case "$cmd" in
start)
  bin=${HV_VCSIM_BIN:?set HV_VCSIM_BIN to the launcher built by test/vcsim/build.sh}
  [ -x "$bin" ] || { echo "run.sh: $bin is missing; run test/vcsim/build.sh $bin" >&2; exit 1; }
  mkdir -p "$dir"
  "$bin" -dir "$dir" "$@" >"$dir/stdout" 2>"$dir/stderr" </dev/null &
  echo $! >"$dir/pid"
  for _ in $(seq 1 300); do
    if grep -q '^VCSIM_READY' "$dir/stdout" 2>/dev/null; then
      cat "$dir/info.json"
      exit 0
    fi
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "run.sh: launcher did not start:" >&2
  cat "$dir/stderr" >&2
  exit 1
  ;;
stop)
  pid=$(cat "$dir/pid")
  kill -TERM "$pid" 2>/dev/null || exit 0
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  ;;
*) echo "usage: run.sh start|stop DIR [flags...]" >&2; exit 2 ;;
esac
