#!/usr/bin/env bash
# run.sh: set up (Debian packages, build) and run hvupdater's main job on its embedded
# default: `hvupdater serve` on https://127.0.0.1:8443 with a self-signed CA, the built-in
# infra kind profiles and libvirt's in-process test:///default driver (no daemon needed).
# It first walks through what Cluster API does (discovery, CanUpdateMachine, UpdateMachine
# until done) against the built-in `test` domain, then keeps serving until Ctrl-C.
# Usage: scripts/run.sh [--no-demo | --demo-only] [extra `hvupdater serve` flags...]
#   --no-demo    just serve;  --demo-only  walk through the hooks, then stop
# Environment: HV_LISTEN (127.0.0.1:8443), HV_BUILD_DIR (build), HV_STATE_DIR (BUILD/run).
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=1
ONLY=0
case "${1:-}" in
--no-demo) DEMO=0; shift ;;
--demo-only) ONLY=1; shift ;;
esac
BUILD=${HV_BUILD_DIR:-build}

./scripts/bootstrap.sh build
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target hvupdater

STATE=${HV_STATE_DIR:-$PWD/$BUILD/run}
mkdir -p "$STATE"
rm -f "$STATE/port" # a port file left by an earlier run is not this server's
LISTEN=${HV_LISTEN:-127.0.0.1:8443}
"$BUILD/hvupdater" serve --listen "$LISTEN" --cert-dir "$STATE/tls" --port-file "$STATE/port" "$@" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null' EXIT INT TERM
for _ in $(seq 100); do [ -s "$STATE/port" ] && break; sleep 0.1; done
[ -s "$STATE/port" ] || { echo "run.sh: server did not start" >&2; exit 1; }
BASE="https://127.0.0.1:$(cat "$STATE/port")/hooks.runtime.cluster.x-k8s.io/v1alpha1"
CA="$STATE/tls/ca.crt"

call() { # call PATH JSON
    curl -sS --cacert "$CA" -H 'Content-Type: application/json' -X POST "$BASE/$1?timeout=10s" -d "$2"
    echo
}

if [ "$DEMO" = 1 ]; then
    API=hooks.runtime.cluster.x-k8s.io/v1alpha1
    M='{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine","metadata":{"name":"test","namespace":"default"},"spec":{"clusterName":"demo","version":"v1.31.0"}}'
    infra() { echo "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1alpha1\",\"kind\":\"LibvirtMachine\",\"metadata\":{\"name\":\"test\",\"namespace\":\"default\"},\"spec\":{\"memoryMiB\":$1}}"; }
    echo
    echo "== Discovery"
    call discovery "{\"apiVersion\":\"$API\",\"kind\":\"DiscoveryRequest\"}"
    echo "== CanUpdateMachine: LibvirtMachine 'test' memoryMiB 2048 -> 4096"
    call canupdatemachine/can-update-machine "{\"apiVersion\":\"$API\",\"kind\":\"CanUpdateMachineRequest\",\"current\":{\"machine\":$M,\"infrastructureMachine\":$(infra 2048)},\"desired\":{\"machine\":$M,\"infrastructureMachine\":$(infra 4096)}}"
    echo "== UpdateMachine until done (the built-in 'test' domain of test:///default)"
    REQ="{\"apiVersion\":\"$API\",\"kind\":\"UpdateMachineRequest\",\"desired\":{\"machine\":$M,\"infrastructureMachine\":$(infra 4096)}}"
    DONE=0
    for _ in $(seq 30); do
        out=$(call updatemachine/update-machine "$REQ")
        echo "$out"
        case "$out" in
        *'"status":"Success"'*'"retryAfterSeconds":0'*) DONE=1; break ;;
        *'"retryAfterSeconds":0'*) break ;;
        esac
        sleep 1
    done
    echo
fi
if [ "$ONLY" = 1 ]; then
    [ "$DEMO" = 0 ] || [ "$DONE" = 1 ] || { echo "run.sh: UpdateMachine did not end done" >&2; exit 1; }
    exit 0
fi
echo "hvupdater is serving on https://$LISTEN (CA: $CA). Ctrl-C stops it."
wait $PID
