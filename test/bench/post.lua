-- post.lua: wrk script for hook-bench.sh. POSTs the body in $HV_BENCH_BODY (a file) as JSON
-- on every request, and at the end prints one machine-readable line:
--   BENCH requests=N duration_us=N p50_us=N p99_us=N max_us=N errors_connect=N ...
local f = assert(io.open(os.getenv("HV_BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCH requests=%d duration_us=%d bytes=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d " ..
        "errors_connect=%d errors_read=%d errors_write=%d errors_status=%d errors_timeout=%d " ..
        "body_bytes=%d\n",
        summary.requests, summary.duration, summary.bytes, latency:percentile(50),
        latency:percentile(90), latency:percentile(99), latency.max, e.connect, e.read, e.write,
        e.status, e.timeout, #wrk.body))
end
