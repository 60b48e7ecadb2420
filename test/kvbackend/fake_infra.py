#!/usr/bin/python3
"""fake_infra.py: two tiny HTTPS Kubernetes APIs for test_kv_infra (the KubeVirt backend with
kubevirt.followInfraClusterSecretRef, no cluster): a MANAGEMENT API serving CAPK's objects
(KubevirtMachines, Clusters, KubevirtClusters, Secrets whose data.kubeconfig names the other
server) and an INFRA API serving the VirtualMachines that live only there, reachable only with
the kubeconfig's credentials (a bearer token, or a client certificate).

    fake_infra.py TEST_BINARY
Makes the certificates (openssl), starts both servers on 127.0.0.1:0, runs TEST_BINARY with
KV_MGMT_SERVER, KV_MGMT_TOKEN (a file), KV_CA set, then checks what the servers saw.
Exit status: the binary's, or 1 when the servers' checks fail.
"""
import base64
import http.server
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading

MGMT_TOKEN = "mgmt-token"
INFRA_TOKEN = "infra-token-from-the-kubeconfig"
SEEN = {"mgmt": [], "infra": [], "infra_unauth": 0, "mgmt_unauth": 0, "patches": []}
OBJ = {}  # path -> (status, object), filled by main once the ports are known


def b64(s):
    return base64.b64encode(s.encode()).decode()


def kubeconfig(server, ca_pem, user, ns=None):
    ctx = {"cluster": "infra", "user": "hv"}
    if ns:
        ctx["namespace"] = ns
    return json.dumps({  # JSON is YAML: the reader takes either
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
        "clusters": [{"name": "infra", "cluster": {
            "server": server, "certificate-authority-data": b64(ca_pem)}}],
        "contexts": [{"name": "ctx", "context": ctx}],
        "users": [{"name": "hv", "user": user}]})


def secret(ns, name, rv, data):
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": ns, "name": name, "resourceVersion": rv},
            "data": {k: b64(v) for k, v in data.items()}}


def vm(ns, name, rv="5"):
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
            "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {
                "memory": {"guest": "2Gi"}, "cpu": {"sockets": 2}}}}},
            "status": {"printableStatus": "Stopped"}}


class H(http.server.BaseHTTPRequestHandler):
    side = "mgmt"

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
        SEEN[self.side].append(self.command + " " + self.path)
        auth = self.headers.get("Authorization")
        if self.side == "mgmt":
            ok = auth == "Bearer " + MGMT_TOKEN
        else:
            cert = self.connection.getpeercert()
            cn = [v for rdn in (cert or {}).get("subject", ()) for k, v in rdn if k == "commonName"]
            ok = auth == "Bearer " + INFRA_TOKEN or (auth is None and cn == ["hv-client"])
        if not ok:
            SEEN[self.side + "_unauth"] += 1
            self.send(401, {"kind": "Status", "code": 401, "message": "Unauthorized"})
        return ok

    def do_GET(self):
        if not self.authed():
            return
        st, obj = OBJ.get((self.side, self.path),
                          (404, {"kind": "Status", "code": 404, "message": "not found"}))
        self.send(st, obj)

    def do_PATCH(self):
        if not self.authed():
            return
        n = int(self.headers.get("Content-Length", "0"))
        SEEN["patches"].append((self.side, self.path, json.loads(self.rfile.read(n))))
        self.send(200, vm("vms", "m1", "6"))


class Mgmt(H):
    side = "mgmt"


class Infra(H):
    side = "infra"


def serve(handler, crt, key, client_ca=None):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    if client_ca:
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(client_ca)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "https://127.0.0.1:%d" % srv.server_address[1]


def openssl_cert(d, name, cn, san=None):
    crt, key = os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")
    cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-days", "1", "-subj", "/CN=" + cn, "-keyout", key, "-out", crt]
    if san:
        cmd += ["-addext", "subjectAltName=" + san]
    subprocess.run(cmd, check=True, capture_output=True)
    return crt, key


def main():
    d = tempfile.mkdtemp(prefix="kv-fake-infra-")
    crt, key = openssl_cert(d, "server", "127.0.0.1", "IP:127.0.0.1")
    ccrt, ckey = openssl_cert(d, "client", "hv-client")
    tok = os.path.join(d, "token")
    with open(tok, "w") as f:
        f.write(MGMT_TOKEN + "\n")
    msrv, murl = serve(Mgmt, crt, key)
    isrv, iurl = serve(Infra, crt, key, client_ca=ccrt)
    ca = open(crt).read()
    A = "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/capi"
    C = "/apis/cluster.x-k8s.io/v1beta2/namespaces/capi/clusters/"
    S = "/api/v1/namespaces/%s/secrets/%s"

    def kvm(name, ref=None, tns=None):
        spec = {"virtualMachineTemplate": {"spec": {}}}
        if tns:
            spec["virtualMachineTemplate"]["metadata"] = {"namespace": tns}
        if ref:
            spec["infraClusterSecretRef"] = ref
        return (200, {"kind": "KubevirtMachine", "metadata": {"namespace": "capi", "name": name},
                      "spec": spec})

    def cluster(name, kc):
        return (200, {"kind": "Cluster", "metadata": {"namespace": "capi", "name": name},
                      "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                     "kind": "KubevirtCluster", "name": kc}}})

    def kvc(name, ref=None):
        spec = {"infraClusterSecretRef": ref} if ref else {}
        return (200, {"kind": "KubevirtCluster", "metadata": {"namespace": "capi", "name": name},
                      "spec": spec})

    tokuser = {"token": INFRA_TOKEN}
    certuser = {"client-certificate-data": b64(open(ccrt).read()),
                "client-key-data": b64(open(ckey).read())}
    OBJ.update({
        # m1: the chain through the Cluster's KubevirtCluster; VMs in the context's namespace
        ("mgmt", A + "/kubevirtmachines/m1"): kvm("m1"),
        ("mgmt", C + "c1"): cluster("c1", "kc1"),
        ("mgmt", A + "/kubevirtclusters/kc1"): kvc("kc1", {"name": "infra-kubeconfig"}),
        ("mgmt", S % ("capi", "infra-kubeconfig")): (200, secret(
            "capi", "infra-kubeconfig", "100", {"kubeconfig": kubeconfig(iurl, ca, tokuser, "vms")})),
        ("infra", "/apis/kubevirt.io/v1/namespaces/vms/virtualmachines/m1"): (200, vm("vms", "m1")),
        # m2: the KubevirtMachine's own ref, a client certificate, data.namespace over the
        # context's, the Secret in another namespace
        ("mgmt", A + "/kubevirtmachines/m2"): kvm("m2", {"name": "cert-kc", "namespace": "sec"}),
        ("mgmt", S % ("sec", "cert-kc")): (200, secret(
            "sec", "cert-kc", "7", {"kubeconfig": kubeconfig(iurl, ca, certuser, "ignored"),
                                    "namespace": "  vms2\n"})),
        ("infra", "/apis/kubevirt.io/v1/namespaces/vms2/virtualmachines/m2"): (200, vm("vms2", "m2")),
        # m3: no ref anywhere: the configured cluster (the management API here)
        ("mgmt", A + "/kubevirtmachines/m3"): kvm("m3"),
        ("mgmt", C + "c3"): cluster("c3", "kc3"),
        ("mgmt", A + "/kubevirtclusters/kc3"): kvc("kc3"),
        ("mgmt", "/apis/kubevirt.io/v1/namespaces/capi/virtualmachines/m3"): (200, vm("capi", "m3")),
        # m4: a Secret that is not there; m5: one hvupdater may not read; m6: an exec plugin;
        # m7: no data.kubeconfig; m8: the template's namespace over everything
        ("mgmt", A + "/kubevirtmachines/m4"): kvm("m4", {"name": "gone"}),
        ("mgmt", A + "/kubevirtmachines/m5"): kvm("m5", {"name": "forbidden"}),
        ("mgmt", S % ("capi", "forbidden")): (403, {"kind": "Status", "code": 403,
                                                    "message": "secrets is forbidden"}),
        ("mgmt", A + "/kubevirtmachines/m6"): kvm("m6", {"name": "exec"}),
        ("mgmt", S % ("capi", "exec")): (200, secret("capi", "exec", "1", {"kubeconfig": kubeconfig(
            iurl, ca, {"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}})})),
        ("mgmt", A + "/kubevirtmachines/m7"): kvm("m7", {"name": "empty"}),
        ("mgmt", S % ("capi", "empty")): (200, secret("capi", "empty", "1", {"token": "x"})),
        ("mgmt", A + "/kubevirtmachines/m8"): kvm("m8", {"name": "infra-kubeconfig"}, tns="tns"),
        ("infra", "/apis/kubevirt.io/v1/namespaces/tns/virtualmachines/m8"): (200, vm("tns", "m8")),
    })
    env = dict(os.environ, KV_MGMT_SERVER=murl, KV_MGMT_TOKEN=tok, KV_CA=crt)
    rc = subprocess.run([sys.argv[1]], env=env).returncode
    msrv.shutdown()
    isrv.shutdown()
    bad = []
    if SEEN["mgmt_unauth"] or SEEN["infra_unauth"]:
        bad.append("requests without the right credentials: management %d, infra %d"
                   % (SEEN["mgmt_unauth"], SEEN["infra_unauth"]))
    sec_reads = SEEN["mgmt"].count("GET " + S % ("capi", "infra-kubeconfig"))
    # m1 observed twice and its record written: one lookup (cached); m8 its own lookup
    if sec_reads != 2:
        bad.append("the infra-kubeconfig Secret was read %d times, want 2 (cached per machine)"
                   % sec_reads)
    if any(p.startswith("GET /apis/kubevirt.io/v1/namespaces/vms") for p in SEEN["mgmt"]):
        bad.append("the management API was asked for an infra cluster's VM")
    if [(s, p) for s, p, _ in SEEN["patches"]] != [
            ("infra", "/apis/kubevirt.io/v1/namespaces/vms/virtualmachines/m1")]:
        bad.append("patches: %s" % [(s, p) for s, p, _ in SEEN["patches"]])
    for b in bad:
        print("FAIL " + b)
    print("management API saw: " + "; ".join(SEEN["mgmt"]))
    print("infra API saw: " + "; ".join(SEEN["infra"]))
    return rc or (1 if bad else 0)


if __name__ == "__main__":
    sys.exit(main())
