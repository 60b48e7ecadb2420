#!/bin/sh
# hook-bench.sh BUILD_DIR: throughput and latency of CanUpdateMachine over TLS.
#
# Starts BUILD_DIR/hvupdater (the embedded default: libvirt's test:///default driver; log
# level warn, self-signed certificate in a temporary directory), builds a realistic ~10 KB
# CanUpdateMachine request (a LibvirtMachine "test" 2048 -> 4096 MiB: the covered path a real
# call takes, the driver's domain probed and the answer then served from the probe's cache;
# see make_request.py), asks it until the probe has answered (CAPI retries the "still asking"
# Failure the same way) and checks that answer by hand, then drives it with wrk: 64 TLS
# keep-alive connections over 2 threads for BENCH_SECONDS (default 10). Prints p50/p99
# latency, requests/s, errors, the server's RSS idle, peak (VmHWM) and after the load, and the
# CPU each HTTP worker thread used (a worker idle through the run held no connection).
# The server's own counters must show exactly one Success per request wrk completed and no
# other answer, which proves the bodies were sent whole and answered 200.
# Then, in the same run, the peers: a minimal Go extension (test/bench/gopeer: net/http,
# crypto/tls, encoding/json, built with /usr/local/go; it decodes the request, compares the
# objects and answers the same bytes, without asking any hypervisor), and the anchor: nginx
# (nginx-light) with the same certificate and TLS
# versions answering every POST with the same answer bytes (`return 200`), and both servers
# again at one connection. Prints req/s, p50, p99 side by side and the ratios against the
# targets (req/s at BENCH_CONNECTIONS >= 0.5x nginx's, p99 <= 1.5x; p50 at 1 connection
# <= 3x), with the CPU each server used per request (user + system from /proc, nginx's
# master and workers together). Last, BUILD_DIR/test/bench/bench_json on the same body:
# what decoding it costs by itself (yajl alone, hj_parse on the heap and in the request
# arena the server uses, hj_dump). BENCH_NGINX=0 skips the anchor.
# Nothing here asserts timings; the exit status is non-zero only if something is broken
# (a non-200, an error answer, a crash). Environment: BENCH_SECONDS, BENCH_CONNECTIONS,
# BENCH_THREADS, BENCH_SERVER_THREADS, BENCH_BODY_BYTES, BENCH_NGINX, BENCH_NGINX_WORKERS
# (default: BENCH_SERVER_THREADS), BENCH_SERVER_ARGS (more `serve` flags, e.g. --config FILE:
# hook-bench-checked.py runs it so with the machine check on), BENCH_METRICS (counters of
# /metrics whose growth over the hvupdater run is printed).
set -eu

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
seconds=${BENCH_SECONDS:-10}
conns=${BENCH_CONNECTIONS:-64}
wthreads=${BENCH_THREADS:-2}
sthreads=${BENCH_SERVER_THREADS:-4}
bin=$build/hvupdater
path=/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/can-update-machine?timeout=10s

for tool in wrk curl python3; do
    command -v "$tool" >/dev/null || { echo "hook-bench: $tool is not installed" >&2; exit 2; }
done
if [ ! -x "$bin" ]; then
    cmake --build "$build" --target hvupdater >/dev/null
fi

tmp=$(mktemp -d /tmp/hv-bench-XXXXXX)
pid=
npid=
gpid=
cleanup() {
    for p in $pid $npid $gpid; do
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# shellcheck disable=SC2086 # BENCH_SERVER_ARGS are words
"$bin" serve --listen 127.0.0.1:0 --port-file "$tmp/port" --cert-dir "$tmp/tls" \
    --log-level warn --threads "$sthreads" ${BENCH_SERVER_ARGS:-} 2>"$tmp/server.log" &
pid=$!
i=0
while [ ! -s "$tmp/port" ]; do
    i=$((i + 1))
    if [ $i -gt 200 ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "hook-bench: the server did not start" >&2
        cat "$tmp/server.log" >&2
        exit 1
    fi
    sleep 0.05
done
sleep 0.1
port=$(cat "$tmp/port")
base=https://localhost:$port

rss() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
# cpu PID...: user+system CPU of these processes so far, in clock ticks
cpu() {
    t=0
    for p in "$@"; do
        v=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)
        t=$((t + v))
    done
    echo "$t"
}
hz=$(getconf CLK_TCK)
metric() { # name with labels -> value (0 if absent)
    curl -sS --cacert "$tmp/tls/ca.crt" "$base/metrics" |
        awk -v m="$1" 'index($0, m " ") == 1 { v = $2 } END { print v + 0 }'
}

rss_idle=$(rss VmRSS)

python3 "$here/make_request.py" "${BENCH_BODY_BYTES:-10240}" --libvirt >"$tmp/body.json"
body_bytes=$(wc -c <"$tmp/body.json")

# One request by hand: 200, Success, and the memory patch. The first calls may answer the
# retryable "still asking the hypervisor" Failure while the probe runs (with the machine check
# on, "reading ... from the API server; retry" until its reads are cached): ask again, as CAPI.
i=0
while :; do
    curl -sS --cacert "$tmp/tls/ca.crt" -H 'Content-Type: application/json' \
        --data-binary @"$tmp/body.json" -o "$tmp/answer.json" -w '%{http_code}' "$base$path" \
        >"$tmp/code"
    grep -Eq 'still asking the hypervisor|from the API server; retry' "$tmp/answer.json" || break
    i=$((i + 1))
    [ $i -gt 100 ] && break
    sleep 0.1
done
python3 - "$tmp/answer.json" "$(cat "$tmp/code")" <<'PY'
import base64, json, sys
code = sys.argv[2]
text = open(sys.argv[1]).read()
try:
    a = json.loads(text)
    patch = json.loads(base64.b64decode(a["infrastructureMachinePatch"]["patch"]))
except (ValueError, KeyError, TypeError):
    sys.exit(f"hook-bench: unexpected answer {code} {text[:600]}")
want = [{"op": "replace", "path": "/spec/memoryMiB", "value": 4096}]
if code != "200" or a["status"] != "Success" or patch != want:
    sys.exit(f"hook-bench: unexpected answer {code} {text[:600]}")
PY

ok_m='hvupdater_hook_calls_total{hook="CanUpdateMachine",status="Success"}'
bad_m='hvupdater_hook_calls_total{hook="CanUpdateMachine",status="Failure"}'
err_m='hvupdater_hook_calls_total{hook="CanUpdateMachine",status="Error"}'
ok0=$(metric "$ok_m")
# BENCH_METRICS: more counters whose growth over the run is printed (e.g. the machine check's)
for m in ${BENCH_METRICS:-}; do
    echo "$m $(metric "$m")"
done >"$tmp/extra0"
bad0=$(metric "$bad_m")
err0=$(metric "$err_m")

# RSS while the load runs (VmHWM is the kernel's own peak; the samples show the plateau)
(
    peak=0
    while kill -0 "$pid" 2>/dev/null && [ ! -e "$tmp/stop-sampling" ]; do
        v=$(rss VmRSS || echo 0)
        [ "${v:-0}" -gt "$peak" ] && peak=$v
        echo "$peak" >"$tmp/rss-peak-sampled"
        sleep 0.2
    done
) &
sampler=$!

# workers PID: each HTTP worker thread's CPU so far (clock ticks), one per line
workers() {
    for t in /proc/"$1"/task/*; do
        if [ "$(cat "$t/comm" 2>/dev/null)" = MHD-worker ]; then
            awk '{ print $14 + $15 }' "$t/stat"
        fi
    done
}
workers "$pid" >"$tmp/workers0"
cpu0=$(cpu "$pid")
HV_BENCH_BODY=$tmp/body.json wrk -t"$wthreads" -c"$conns" -d"${seconds}s" --latency \
    --timeout 10s -s "$here/post.lua" "$base$path" >"$tmp/wrk.out" 2>&1 || {
    cat "$tmp/wrk.out" >&2
    exit 1
}
cpu1=$(cpu "$pid")
workers "$pid" >"$tmp/workers1"
touch "$tmp/stop-sampling"
wait "$sampler" 2>/dev/null || true

rss_hwm=$(rss VmHWM)
rss_after=$(rss VmRSS)
rss_sampled=$(cat "$tmp/rss-peak-sampled" 2>/dev/null || echo 0)
ok1=$(metric "$ok_m")
bad1=$(metric "$bad_m")
err1=$(metric "$err_m")
inflight=$(metric hvupdater_hook_calls_in_flight)
while read -r m v0; do
    echo "counter       $m +$(awk -v a="$(metric "$m")" -v b="$v0" 'BEGIN { print a - b }') during the run"
done <"$tmp/extra0" >"$tmp/extra1"
hsum=$(metric 'hvupdater_hook_duration_seconds_sum{hook="CanUpdateMachine"}')
hcnt=$(metric 'hvupdater_hook_duration_seconds_count{hook="CanUpdateMachine"}')

sed -n '/Thread Stats/,/Latency Distribution/p' "$tmp/wrk.out" | sed '$d'
line=$(grep '^BENCH ' "$tmp/wrk.out" || true)
if [ -z "$line" ]; then
    cat "$tmp/wrk.out" >&2
    echo "hook-bench: wrk printed no summary" >&2
    exit 1
fi
get() { echo "$line" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }
requests=$(get requests)
duration=$(get duration_us)
non2xx=$(get errors_status)
sock_errors=$(($(get errors_connect) + $(get errors_read) + $(get errors_write) + $(get errors_timeout)))
served=$(awk -v a="$ok1" -v b="$ok0" 'BEGIN { printf "%d", a - b }')
failures=$(awk -v a="$bad1" -v b="$bad0" -v c="$err1" -v d="$err0" 'BEGIN { printf "%d", a - b + c - d }')

# wrk counts the requests it completed; the server may have answered a few more that were
# still in flight when wrk stopped (at most one per connection).
status=0
verdict=ok
if [ "$non2xx" -ne 0 ] || [ "$failures" -ne 0 ] || [ "$served" -lt "$requests" ] ||
    [ "$served" -gt $((requests + conns)) ] || [ "$requests" -eq 0 ]; then
    verdict="BROKEN (non-2xx $non2xx, server Failure/Error answers $failures, server Success $served vs wrk $requests)"
    status=1
fi

wk=$(paste -d' ' "$tmp/workers0" "$tmp/workers1" | awk -v hz="$hz" '{ printf "%s%d", sep, ($2 - $1) * 1000 / hz; sep = " " }')
awk -v r="$requests" -v d="$duration" -v p50="$(get p50_us)" -v p90="$(get p90_us)" \
    -v p99="$(get p99_us)" -v mx="$(get max_us)" -v n2="$non2xx" -v se="$sock_errors" \
    -v served="$served" -v bb="$body_bytes" -v idle="$rss_idle" -v hwm="$rss_hwm" \
    -v after="$rss_after" -v sampled="$rss_sampled" -v c="$conns" -v t="$wthreads" \
    -v st="$sthreads" -v s="$seconds" -v hs="$hsum" -v hc="$hcnt" -v infl="$inflight" \
    -v verdict="$verdict" -v wk="$wk" 'BEGIN {
    printf "\n==== hvupdater hook-bench: CanUpdateMachine, %d B body, TLS keep-alive ====\n", bb
    printf "load          wrk -t%d -c%d -d%ds, server --threads %d\n", t, c, s, st
    printf "requests      %d in %.2f s = %.0f req/s\n", r, d / 1e6, r / (d / 1e6)
    printf "latency       p50 %.3f ms   p90 %.3f ms   p99 %.3f ms   max %.3f ms\n", p50 / 1e3, p90 / 1e3, p99 / 1e3, mx / 1e3
    printf "handler       mean %.3f ms server-side (hook duration sum/count)\n", hc ? hs / hc * 1e3 : 0
    printf "workers       CPU of each HTTP worker thread during the run: %s ms (an idle one holds no connection)\n", wk
    printf "errors        non-2xx %d, socket %d; server Success answers %d (in flight now %d)\n", n2, se, served, infl
    printf "server RSS    idle %.1f MiB, peak (VmHWM) %.1f MiB, sampled peak %.1f MiB, after %.1f MiB\n", idle / 1024, hwm / 1024, sampled / 1024, after / 1024
    printf "verdict       %s\n", verdict
}'
cat "$tmp/extra1"
[ "$status" -ne 0 ] && exit $status
[ "${BENCH_NGINX:-1}" = 0 ] && exit 0

# ---- the anchor: nginx with the same certificate, same answer bytes ----
command -v nginx >/dev/null || { echo "hook-bench: nginx is not installed" >&2; exit 2; }
nport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$tmp/nginx/logs"
python3 - "$tmp/answer.json" "$tmp/nginx/answer.conf" <<'PY'
import sys
body = open(sys.argv[1]).read()
assert "'" not in body and "\\" not in body
open(sys.argv[2], "w").write("return 200 '%s';\n" % body)
PY
cat >"$tmp/nginx/nginx.conf" <<NGINX
worker_processes ${BENCH_NGINX_WORKERS:-$sthreads};
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    keepalive_requests 100000000;
    client_body_buffer_size 64k;
    server {
        listen 127.0.0.1:$nport ssl;
        ssl_certificate $tmp/tls/tls.crt;
        ssl_certificate_key $tmp/tls/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            default_type application/json;
            include $tmp/nginx/answer.conf;
        }
    }
}
NGINX
nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' 2>"$tmp/nginx/stderr" &
npid=$!
i=0
until curl -sS --cacert "$tmp/tls/ca.crt" -o "$tmp/nginx/answer.json" -H 'Content-Type: application/json' \
    --data-binary @"$tmp/body.json" "https://localhost:$nport$path" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$npid" 2>/dev/null; then
        echo "hook-bench: nginx did not start" >&2
        cat "$tmp/nginx/stderr" "$tmp/nginx/logs/error.log" >&2
        exit 1
    fi
    sleep 0.05
done
cmp -s "$tmp/nginx/answer.json" "$tmp/answer.json" || { echo "hook-bench: nginx answers differently" >&2; exit 1; }

# run NAME URL CONNECTIONS PID...: one wrk run; prints "req_s p50_ms p99_ms errors cpu_us_per_req"
# (the CPU the PIDs used during the run, user + system, divided by the requests completed)
run() {
    c=$3
    t=$wthreads
    [ "$c" -lt "$t" ] && t=$c
    name=$1
    url=$2
    shift 3
    c0=$(cpu "$@")
    HV_BENCH_BODY=$tmp/body.json wrk -t"$t" -c"$c" -d"${seconds}s" --latency --timeout 10s \
        -s "$here/post.lua" "$url" >"$tmp/wrk-$name-$c.out" 2>&1 || { cat "$tmp/wrk-$name-$c.out" >&2; exit 1; }
    c1=$(cpu "$@")
    grep '^BENCH ' "$tmp/wrk-$name-$c.out" | tr ' ' '\n' | awk -F= -v ticks=$((c1 - c0)) -v hz="$hz" '
        { v[$1] = $2 }
        END { e = v["errors_status"] + v["errors_read"] + v["errors_connect"]
              e += v["errors_write"] + v["errors_timeout"]
              printf "%.0f %.3f %.3f %d %.1f\n", v["requests"] / (v["duration_us"] / 1e6),
                  v["p50_us"] / 1e3, v["p99_us"] / 1e3, e,
                  v["requests"] ? ticks / hz * 1e6 / v["requests"] : 0 }'
}
# ---- the Go peer: same certificate, same request, same answer bytes ----
gobin=${GO:-/usr/local/go/bin/go}
[ -x "$gobin" ] || { echo "hook-bench: $gobin is not installed" >&2; exit 2; }
(cd "$here/gopeer" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$gobin" build -o "$tmp/gopeer" .) ||
    { echo "hook-bench: the Go peer does not build" >&2; exit 1; }
"$tmp/gopeer" -listen 127.0.0.1:0 -cert "$tmp/tls/tls.crt" -key "$tmp/tls/tls.key" \
    -port-file "$tmp/gopeer.port" 2>"$tmp/gopeer.log" &
gpid=$!
i=0
while [ ! -s "$tmp/gopeer.port" ]; do
    i=$((i + 1))
    if [ $i -gt 200 ] || ! kill -0 "$gpid" 2>/dev/null; then
        echo "hook-bench: the Go peer did not start" >&2
        cat "$tmp/gopeer.log" >&2
        exit 1
    fi
    sleep 0.05
done
gurl="https://localhost:$(cat "$tmp/gopeer.port")$path"
curl -sS --cacert "$tmp/tls/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$tmp/body.json" -o "$tmp/gopeer.answer" "$gurl"
cmp -s "$tmp/gopeer.answer" "$tmp/answer.json" ||
    { echo "hook-bench: the Go peer answers differently:" >&2; cat "$tmp/gopeer.answer" >&2; exit 1; }

npids="$npid $(pgrep -P "$npid" | tr '\n' ' ')"
# shellcheck disable=SC2086 # the PIDs are words
nginx_n=$(run nginx "https://localhost:$nport$path" "$conns" $npids)
go_n=$(run go "$gurl" "$conns" "$gpid")
hv_1=$(run hv "$base$path" 1 "$pid")
# shellcheck disable=SC2086
nginx_1=$(run nginx "https://localhost:$nport$path" 1 $npids)
go_1=$(run go "$gurl" 1 "$gpid")
hv_n=$(awk -v r="$requests" -v d="$duration" -v p50="$(get p50_us)" -v p99="$(get p99_us)" \
    -v e="$((non2xx + sock_errors))" -v ticks=$((cpu1 - cpu0)) -v hz="$hz" \
    'BEGIN { printf "%.0f %.3f %.3f %d %.1f\n", r / (d / 1e6), p50 / 1e3, p99 / 1e3, e, ticks / hz * 1e6 / r }')
echo "$hv_n $nginx_n $hv_1 $nginx_1 $go_n $go_1" | awk -v c="$conns" '{
    printf "\n==== against nginx (same certificate, same answer bytes, %s) ====\n", "return 200"
    printf "%-26s %12s %12s %12s %14s\n", "", "req/s", "p50 ms", "p99 ms", "CPU us/req"
    printf "%-26s %12d %12.3f %12.3f %14.1f\n", "hvupdater, " c " connections", $1, $2, $3, $5
    printf "%-26s %12d %12.3f %12.3f %14.1f\n", "nginx, " c " connections", $6, $7, $8, $10
    printf "%-26s %12d %12.3f %12.3f %14.1f\n", "hvupdater, 1 connection", $11, $12, $13, $15
    printf "%-26s %12d %12.3f %12.3f %14.1f\n", "nginx, 1 connection", $16, $17, $18, $20
    printf "%-26s %12d %12.3f %12.3f %14.1f\n", "Go peer, " c " connections", $21, $22, $23, $25
    printf "%-26s %12d %12.3f %12.3f %14.1f\n", "Go peer, 1 connection", $26, $27, $28, $30
    printf "req/s at %d   %.2fx nginx (target >= 0.5x)\n", c, $1 / $6
    printf "p99 at %d     %.2fx nginx (target <= 1.5x)\n", c, $3 / $8
    printf "p50 at 1      %.2fx nginx (target <= 3x)\n", $12 / $17
    printf "req/s at %d   %.2fx the Go peer (target >= 2x)\n", c, $1 / $21
    printf "req/s at 1    %.2fx the Go peer (target >= 1x)\n", $11 / $26
    if ($4 + $9 + $14 + $19 + $24 + $29)
        printf "errors        %d %d %d %d %d %d (hvupdater/nginx/Go, n/1)\n", $4, $9, $14, $19, $24, $29
}'

# Where a request's CPU goes that nginx does not spend: decoding the body (same build).
if [ -x "$build/test/bench/bench_json" ]; then
    echo
    "$build/test/bench/bench_json" "$tmp/body.json" 3000
fi
