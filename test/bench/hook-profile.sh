#!/bin/sh
# hook-profile.sh BUILD_DIR: where one CanUpdateMachine request's work goes, in instructions
# (issue 31 item 2: find where the time goes on the 1-connection path).
#
# Runs BUILD_DIR/hvupdater (the embedded default, as hook-bench.sh; a RelWithDebInfo build
# names our functions) under valgrind's callgrind with one server thread, asks the covered
# CanUpdateMachine request of hook-bench.sh until the probe has answered, then drives it with
# wrk at 1 TLS keep-alive connection for PROFILE_SECONDS (default 20), and prints the
# instructions per request of each part of the path: TLS (gnutls record receive and send),
# the HTTP server's own work (libmicrohttpd less TLS and our handler), JSON decoding (hj_parse,
# yajl inside), the hook's judgement (hv_hook_handle_who, less decoding), the answer's
# encoding (hj_dump), logging, and the whole handler (on_request). Instruction counts do not
# depend on what else runs on the machine, which wall-clock figures on a shared 2-core
# machine do; they are no substitute for hook-bench.sh's req/s and latency, only a map of
# where they go. Note: valgrind counts each iteration of `rep stos`/`rep movs` (glibc's
# memset/memcpy on large blocks) as an instruction, which overstates what large zeroing
# costs; the memset line says how much of the total that is. Nothing is asserted; the exit
# status is non-zero only if something is broken.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
seconds=${PROFILE_SECONDS:-20}
bin=$build/hvupdater
path=/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/can-update-machine?timeout=10s

for tool in valgrind callgrind_annotate wrk curl python3; do
    command -v "$tool" >/dev/null || { echo "hook-profile: $tool is not installed" >&2; exit 2; }
done
[ -x "$bin" ] || cmake --build "$build" --target hvupdater >/dev/null

tmp=$(mktemp -d /tmp/hv-profile-XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    [ -n "${PROFILE_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

python3 "$here/make_request.py" "${BENCH_BODY_BYTES:-10240}" --libvirt >"$tmp/body.json"
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$bin" serve \
    --listen 127.0.0.1:0 --port-file "$tmp/port" --cert-dir "$tmp/tls" --log-level warn \
    --threads 1 2>"$tmp/server.log" &
pid=$!
i=0
while [ ! -s "$tmp/port" ]; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "hook-profile: the server did not start" >&2
        cat "$tmp/server.log" >&2
        exit 1
    fi
    sleep 0.1
done
base=https://localhost:$(cat "$tmp/port")
i=0
while :; do
    curl -sS --cacert "$tmp/tls/ca.crt" -H 'Content-Type: application/json' \
        --data-binary @"$tmp/body.json" -o "$tmp/answer.json" "$base$path"
    grep -q 'still asking the hypervisor' "$tmp/answer.json" || break
    i=$((i + 1))
    [ $i -gt 100 ] && break
    sleep 0.3
done
grep -q '"status":"Success"' "$tmp/answer.json" ||
    { echo "hook-profile: unexpected answer: $(head -c 400 "$tmp/answer.json")" >&2; exit 1; }

cat >"$tmp/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$tmp/body.json", "rb"); wrk.body = f:read("*a"); f:close()
EOF
wrk -c1 -t1 -d"${seconds}s" -s "$tmp/post.lua" "$base$path" >"$tmp/wrk.txt"
kill -TERM "$pid"
wait "$pid" || true
pid=
requests=$(awk '/requests in/ { print $1 }' "$tmp/wrk.txt")
if grep -q 'Non-2xx' "$tmp/wrk.txt" || [ -z "$requests" ] || [ "$requests" -lt 10 ]; then
    echo "hook-profile: the load did not run as asked" >&2
    cat "$tmp/wrk.txt" >&2
    exit 1
fi

callgrind_annotate --auto=no --inclusive=yes "$tmp/cg.out" >"$tmp/incl.txt" 2>/dev/null
callgrind_annotate --auto=no --inclusive=no "$tmp/cg.out" >"$tmp/self.txt" 2>/dev/null
python3 - "$tmp/incl.txt" "$tmp/self.txt" "$requests" "$(wc -c <"$tmp/body.json")" <<'PY'
import os, re, sys
incl_path, self_path, requests, body = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def table(path):
    # the function list only (file:function lines after its header), each function once: the
    # same function may be listed under more than one file name (its source path as built and
    # as found from the current directory, or a header inlined into it): the largest count
    t = {}
    started = False
    for line in open(path):
        if 'file:function' in line:
            started = True
            continue
        m = re.match(r'\s*([\d,]+) \([^)]*\)\s+PROGRAM TOTALS', line)
        if m:
            t['PROGRAM TOTALS'] = int(m.group(1).replace(',', ''))
            continue
        if not started:
            continue
        if not line.strip():
            if t.keys() - {'PROGRAM TOTALS'}:
                break  # (the list ends at its first blank line)
            continue
        m = re.match(r'\s*([\d,]+) \([^)]*\)\s+(\S.*?)\s*(\[.*\])?$', line)
        if m:
            name = m.group(2).split(':')[-1]
            if name.startswith('0x') and m.group(3):  # (a stripped library's function)
                name = os.path.basename(m.group(3).strip('[]')) + ':' + name
            t[name] = max(t.get(name, 0), int(m.group(1).replace(',', '')))
    return t

incl, own = table(incl_path), table(self_path)
total = own.get('PROGRAM TOTALS', 0)
def get(t, *names):
    return sum(t.get(n, 0) for n in names)
handler = get(incl, 'on_request')
tls = get(incl, 'gnutls_record_recv', 'gnutls_record_send', 'gnutls_record_send2')
parse = get(incl, 'hj_parse')
hook = get(incl, 'hv_hook_handle_who')
dump = get(incl, 'hj_dump')
logs = get(incl, 'hv_log')
memset = sum(v for k, v in own.items() if 'memset' in k)
rows = [
    ('the whole process (its startup spread over the requests)', total),
    ('our handler (on_request)', handler),
    ('  JSON decoding (hj_parse, yajl inside)', parse),
    ('  the hook\'s judgement (hv_hook_handle_who)', hook),
    ('  answer encoding (hj_dump)', dump),
    ('  logging', logs),
    ('TLS records (gnutls receive + send)', tls),
    ('glibc memset (rep stos counted per iteration)', memset),
]
print('hook-profile: %d requests of %d bytes at 1 connection under callgrind' % (requests, body))
print('%-50s %14s %10s' % ('part', 'instr/request', 'of total'))
for name, v in rows:
    print('%-50s %14.0f %9.1f%%' % (name, v / requests, 100.0 * v / total if total else 0))
print('decoding: %.1f instructions per body byte' % (parse / requests / body))
print('the 10 functions with the most instructions of their own, per request:')
top = sorted(((v, k) for k, v in own.items() if k != 'PROGRAM TOTALS'), reverse=True)[:10]
for v, k in top:
    print('  %-48s %14.0f %9.1f%%' % (k[:48], v / requests, 100.0 * v / total if total else 0))
PY
