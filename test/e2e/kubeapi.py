"""kubeapi.py: a real Kubernetes API server for tests: etcd and kube-apiserver (the binaries
test/capi/build.sh builds from their Go modules; the directory in $HV_KUBE_BIN or --kube-bin)
on free loopback ports, with a CA, an admin client certificate, RBAC on and service account
tokens signed by a key made here. kubectl (Debian's) talks to it through a kubeconfig.

    api = ApiServer(bin_dir).start()
    api.apply(yaml_text); api.kubectl("get", "ns")
    token = api.token("hvupdater-system", "hvupdater")   # a TokenRequest for a ServiceAccount
    api.stop()
"""
import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

KEEP = bool(os.environ.get("HV_E2E_KEEP"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ossl(*args):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


class ApiServer:
    def __init__(self, bin_dir):
        self.bin = bin_dir
        for b in ("etcd", "kube-apiserver"):
            if not os.access(os.path.join(bin_dir, b), os.X_OK):
                raise RuntimeError("kubeapi: no %s in %s (test/capi/build.sh builds it)"
                                   % (b, bin_dir))
        if not shutil.which("kubectl"):
            raise RuntimeError("kubeapi: kubectl missing")
        self.dir = tempfile.mkdtemp(prefix="hv-kube-")
        self.procs = []
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.ca = os.path.join(self.dir, "ca.crt")

    def _pki(self):
        d = self.dir
        p = lambda n: os.path.join(d, n)  # noqa: E731
        _ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
              "-days", "2", "-subj", "/CN=hv-kube-ca", "-keyout", p("ca.key"), "-out", p("ca.crt"))
        for name, subj, ext in (
                ("apiserver", "/CN=kube-apiserver",
                 "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"),
                ("admin", "/O=system:masters/CN=hv-kube-admin", "extendedKeyUsage=clientAuth\n")):
            _ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-subj", subj, "-keyout", p(name + ".key"), "-out", p(name + ".csr"))
            with open(p(name + ".ext"), "w") as f:
                f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                        + ext)
            _ossl("x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.crt"), "-CAkey",
                  p("ca.key"), "-CAcreateserial", "-days", "2", "-extfile", p(name + ".ext"),
                  "-out", p(name + ".crt"))
        _ossl("genrsa", "-out", p("sa.key"), "2048")
        _ossl("rsa", "-in", p("sa.key"), "-pubout", "-out", p("sa.pub"))
        b64 = lambda n: base64.b64encode(open(p(n), "rb").read()).decode()  # noqa: E731
        self.kubeconfig = p("kubeconfig")
        with open(self.kubeconfig, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config",
                       "clusters": [{"name": "t", "cluster": {
                           "server": self.url, "certificate-authority-data": b64("ca.crt")}}],
                       "users": [{"name": "admin", "user": {
                           "client-certificate-data": b64("admin.crt"),
                           "client-key-data": b64("admin.key")}}],
                       "contexts": [{"name": "t", "context": {"cluster": "t", "user": "admin"}}],
                       "current-context": "t"}, f)

    def _start(self, name, args):
        log = open(os.path.join(self.dir, name + ".log"), "w")
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
        self.procs.append((name, proc, log))
        return proc

    def _wait(self, what, proc, check, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("%s exited: %s" % (what, self.tail(what)))
            try:
                if check():
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise RuntimeError("%s not ready in %ds: %s" % (what, timeout, self.tail(what)))

    def tail(self, name, n=20):
        try:
            return "".join(open(os.path.join(self.dir, name + ".log")).readlines()[-n:])
        except OSError:
            return ""

    def start(self):
        try:
            self._pki()
            client, peer = free_port(), free_port()
            etcd = self._start("etcd", [
                os.path.join(self.bin, "etcd"), "--name", "t", "--data-dir",
                os.path.join(self.dir, "etcd"),
                "--listen-client-urls", "http://127.0.0.1:%d" % client,
                "--advertise-client-urls", "http://127.0.0.1:%d" % client,
                "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                "--initial-cluster", "t=http://127.0.0.1:%d" % peer, "--unsafe-no-fsync",
                "--listen-metrics-urls", "", "--log-level", "warn"])
            self._wait("etcd", etcd, lambda: urllib.request.urlopen(
                "http://127.0.0.1:%d/health" % client, timeout=2).status == 200)
            d = self.dir
            api = self._start("kube-apiserver", [
                os.path.join(self.bin, "kube-apiserver"),
                "--etcd-servers", "http://127.0.0.1:%d" % client,
                "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
                "--secure-port", str(self.port),
                "--tls-cert-file", os.path.join(d, "apiserver.crt"),
                "--tls-private-key-file", os.path.join(d, "apiserver.key"),
                "--client-ca-file", self.ca, "--authorization-mode", "RBAC",
                "--service-account-issuer", "https://kubernetes.default.svc",
                "--service-account-key-file", os.path.join(d, "sa.pub"),
                "--service-account-signing-key-file", os.path.join(d, "sa.key"),
                "--service-cluster-ip-range", "10.96.0.0/24",
                "--endpoint-reconciler-type", "none", "--enable-priority-and-fairness=false",
                "--profiling=false", "--cert-dir", os.path.join(d, "apiserver-certs")])
            ctx = ssl.create_default_context(cafile=self.ca)
            ctx.load_cert_chain(os.path.join(d, "admin.crt"), os.path.join(d, "admin.key"))
            self._wait("kube-apiserver", api, lambda: urllib.request.urlopen(
                self.url + "/readyz", context=ctx, timeout=2).status == 200)
            # the default namespace and the RBAC bootstrap roles come a moment after readyz
            self._wait("kube-apiserver", api, lambda: self.kubectl(
                "get", "clusterrole", "system:basic-user", check=False).returncode == 0)
        except Exception:
            self.stop()
            raise
        return self

    def kubectl(self, *args, stdin=None, check=True):
        r = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig] + list(args),
                           input=stdin, capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise RuntimeError("kubectl %s: %s" % (" ".join(args), r.stderr.strip()))
        return r

    def apply(self, docs):
        """Create or update objects given as a list of dicts (or one dict)."""
        if isinstance(docs, dict):
            docs = [docs]
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                     stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))

    def get(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def token(self, namespace, sa, path):
        """A TokenRequest token for the ServiceAccount, written to path."""
        tok = self.kubectl("create", "token", "-n", namespace, sa, "--duration", "1h").stdout
        with open(path, "w") as f:
            f.write(tok.strip() + "\n")
        return path

    def stop(self):
        for name, proc, log in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()
        self.procs = []
        if not KEEP:
            shutil.rmtree(self.dir, ignore_errors=True)
