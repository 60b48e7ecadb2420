// The CAPI stand-in of test/bench/vsphere-bench.sh (net/http, crypto/tls, encoding/json;
// standard library only).
module hvupdater/test/bench/capiclient

go 1.26
