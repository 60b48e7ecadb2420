// The Go extension peer of test/bench/hook-bench.sh: a minimal CanUpdateMachine extension
// (net/http, crypto/tls, encoding/json; standard library only).
module hvupdater/test/bench/gopeer

go 1.26
