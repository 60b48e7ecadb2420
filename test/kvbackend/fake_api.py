#!/usr/bin/python3
"""fake_api.py: a tiny HTTPS Kubernetes API for test_kv_api (the KubeVirt backend's HTTP
side without a cluster): serves VirtualMachine lists in pages, one VM, and answers PATCHes,
the first one with the 422 a failed resourceVersion test gets from kube-apiserver (the VM's
resourceVersion moves on with every PATCH, as when another writer won the race).

    fake_api.py TEST_BINARY
Makes a self-signed certificate (openssl), starts the server on 127.0.0.1:0, runs
TEST_BINARY with KV_TEST_SERVER, KV_TEST_CA and KV_TEST_TOKEN set, then checks what the
server saw (bearer token on every request, the PATCH's content type and its test op).
Exit status: the binary's, or 1 when the server's checks fail.
"""
import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading

TOKEN = "kv-test-token"
SEEN = {"patches": [], "unauth": 0, "paths": [], "frozen": 0, "contended": 0}


def vm(ns, name, rv, record=None):
    meta = {"name": name, "namespace": ns, "resourceVersion": rv}
    if record is not None:
        meta["annotations"] = {"hvupdater.io/operation": record}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta,
            "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {
                "memory": {"guest": "1Gi"}, "cpu": {"sockets": 1}}}}},
            "status": {"printableStatus": "Stopped"}}


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def authed(self):
        SEEN["paths"].append(self.command + " " + self.path)
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            SEEN["unauth"] += 1
            self.send(401, {"kind": "Status", "code": 401, "message": "Unauthorized"})
            return False
        return True

    def do_GET(self):
        if not self.authed():
            return
        p = self.path
        if p == "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines?limit=200":
            self.send(200, {"kind": "VirtualMachineList", "metadata": {"continue": "c 1/x"},
                            "items": [vm("ns1", "a", "10", '{"v":1,"a":1}'), vm("ns1", "b", "11")]})
        elif p == "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines?limit=200&continue=c%201%2Fx":
            self.send(200, {"kind": "VirtualMachineList", "metadata": {},
                            "items": [vm("ns1", "c", "12", '{"v":1,"c":1}')]})
        elif p.startswith("/apis/kubevirt.io/v1/namespaces/ns2/virtualmachines?"):
            self.send(403, {"kind": "Status", "code": 403, "message": "forbidden"})
        elif p == "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines/a":
            self.send(200, vm("ns1", "a", str(20 + len(SEEN["patches"])), '{"v":1,"a":1}'))
        elif p == "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines/frozen":
            self.send(200, vm("ns1", "frozen", "30"))  # nobody else writes it
        elif p == "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines/contended":
            # another writer wins every race: a new resourceVersion after each refused patch
            self.send(200, vm("ns1", "contended", str(40 + SEEN["contended"])))
        elif p in ("/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/frozen",
                   "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/contended"):
            self.send(404, {"kind": "Status", "code": 404, "message": "not found"})
        elif p == "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/a":
            self.send(404, {"kind": "Status", "code": 404, "message": "not found"})
        else:
            self.send(404, {"kind": "Status", "code": 404, "message": "no " + p})

    def do_PATCH(self):
        if not self.authed():
            return
        n = int(self.headers.get("Content-Length", "0"))
        patch = json.loads(self.rfile.read(n))
        if self.path.endswith("/virtualmachines/frozen"):
            # a patch the API server refuses itself (its object never changes): the same bare 422
            SEEN["frozen"] += 1
            self.send(422, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure",
                            "message": "the server rejected our request due to an error in our request",
                            "reason": "Invalid", "details": {}, "code": 422})
            return
        if self.path.endswith("/virtualmachines/contended"):
            SEEN["contended"] += 1
            self.send(422, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure",
                            "message": "the server rejected our request due to an error in our request",
                            "reason": "Invalid", "details": {}, "code": 422})
            return
        SEEN["patches"].append({"ctype": self.headers.get("Content-Type"), "patch": patch})
        if len(SEEN["patches"]) == 1:
            # byte for byte what kube-apiserver (k8s.io/apiserver v0.37) answers a JSON patch
            # whose test op failed: NewGenericServerResponse(422, ..., isUnexpectedResponse
            # false) keeps no cause, so nothing in it says which op failed or why
            self.send(422, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure",
                            "message": "the server rejected our request due to an error in our request",
                            "reason": "Invalid", "details": {}, "code": 422})
        else:
            self.send(200, vm("ns1", "a", "99"))


def main():
    d = tempfile.mkdtemp(prefix="kv-fake-api-")
    crt, key, tok = (os.path.join(d, n) for n in ("tls.crt", "tls.key", "token"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = dict(os.environ, KV_TEST_SERVER="https://127.0.0.1:%d" % srv.server_address[1],
               KV_TEST_CA=crt, KV_TEST_TOKEN=tok)
    rc = subprocess.run([sys.argv[1]], env=env).returncode
    srv.shutdown()
    shutil.rmtree(d)
    bad = []
    if SEEN["unauth"]:
        bad.append("%d requests without the bearer token" % SEEN["unauth"])
    if len(SEEN["patches"]) != 2:
        bad.append("%d PATCHes, want 2 (a refused test, then the retry)" % len(SEEN["patches"]))
    for i, p in enumerate(SEEN["patches"]):
        if p["ctype"] != "application/json-patch+json":
            bad.append("PATCH %d content type %s" % (i, p["ctype"]))
        if p["patch"][0] != {"op": "test", "path": "/metadata/resourceVersion",
                             "value": str(20 + i)}:
            bad.append("PATCH %d does not test the resourceVersion it read: %s" % (i, p["patch"][0]))
    if SEEN["frozen"] != 1:
        bad.append("%d PATCHes of the VM nobody else writes, want 1 (a refusal is no race)"
                   % SEEN["frozen"])
    if SEEN["contended"] != 3:
        bad.append("%d PATCHes of the VM another writer always changes first, want 3 (three "
                   "rounds, then BUSY)" % SEEN["contended"])
    for b in bad:
        print("FAIL " + b)
    print("fake API saw: " + "; ".join(SEEN["paths"]))
    return rc or (1 if bad else 0)


if __name__ == "__main__":
    sys.exit(main())
