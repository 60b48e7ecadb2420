#!/usr/bin/python3
"""chart_install_test.py: `helm install` and `helm uninstall` of deploy/helm/hvupdater against a
real Kubernetes API server (etcd + kube-apiserver of test/capi/build.sh, started by
test/e2e/kubeapi.py on free loopback ports; no kubelet, so no pod runs: this is about the
objects). cert-manager's Certificate and Issuer, CAPI's ExtensionConfig and the Prometheus
Operator's ServiceMonitor are minimal CRDs (x-kubernetes-preserve-unknown-fields).

  chart_install_test.py --source DIR --tools DIR --kube-bin DIR

--tools: helm's directory (test/helm/build.sh prints it); --kube-bin: the directory
test/capi/build.sh prints. Scenarios:
  - into a namespace the user made, holding the user's Secret: every namespaced object in
    it, the ExtensionConfig pointing at it; `helm uninstall` removes every object of the
    release and leaves the namespace and the Secret;
  - `-n team-y --create-namespace`: the same; uninstall leaves team-y (Helm's own rule);
  - namespace.create: true is refused by helm install (Helm keeps its release record in the
    release namespace: it can own neither an existing namespace nor a new one); rendered with
    helm template and applied, it makes the Namespace, labelled restricted;
  - a misspelt ExtensionConfig setting: refused before anything is created;
  - clientCerts.generateCA: the client CA's Secret in exactly CAPI's two namespaces (one
    CA), its ca.crt alone in the release namespace, namespaced Issuers only (no
    ClusterIssuer CRD here: one would fail the install); helm upgrade keeps the CA (the
    chart's lookup); uninstall removes the Secrets.
Prints "ok ..." or "FAIL ..." per check; exits 1 when any failed.
"""

import argparse
import base64
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import hvdeploy as hv  # noqa: E402
import kubeapi  # noqa: E402

RELEASE = "hvupdater"
INSTANCE = "app.kubernetes.io/instance=" + RELEASE
NAMESPACED = "deployments,services,configmaps,serviceaccounts,poddisruptionbudgets," \
             "networkpolicies,certificates.cert-manager.io,issuers.cert-manager.io," \
             "servicemonitors.monitoring.coreos.com"


def crd(group, kind, plural, scope, version):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (plural, group)},
            "spec": {"group": group, "scope": scope,
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": kind + "List"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


CRDS = [crd("cert-manager.io", "Certificate", "certificates", "Namespaced", "v1"),
        crd("cert-manager.io", "Issuer", "issuers", "Namespaced", "v1"),
        crd("runtime.cluster.x-k8s.io", "ExtensionConfig", "extensionconfigs", "Cluster",
            "v1beta2"),
        crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors", "Namespaced", "v1")]


class Test:
    def __init__(self, api, helm, chart):
        self.api, self.helm, self.chart = api, helm, chart
        self.r = hv.Results()

    def helm_run(self, *args):
        return subprocess.run([self.helm, "--kubeconfig", self.api.kubeconfig, *args],
                              capture_output=True, text=True, timeout=300)

    def install(self, ns, *extra):
        return self.helm_run("install", RELEASE, self.chart, "-n", ns, *extra)

    def uninstall(self, ns):
        return self.helm_run("uninstall", RELEASE, "-n", ns)

    def names(self, ns):
        """'kind/name' of every object of the release in ns."""
        out = self.api.kubectl("get", NAMESPACED, "-n", ns, "-l", INSTANCE, "-o", "name").stdout
        return sorted(out.split())

    def namespace(self, name):
        r = self.api.kubectl("get", "namespace", name, "-o", "json", check=False)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)

    def extensionconfigs(self):
        return self.api.get("extensionconfigs.runtime.cluster.x-k8s.io")["items"]

    def installed(self, ns, what):
        got = self.names(ns)
        kinds = {n.split("/")[0].split(".")[0] for n in got}
        want = {"deployment", "service", "configmap", "serviceaccount", "poddisruptionbudget",
                "networkpolicy", "certificate", "issuer", "servicemonitor"}
        self.r.check(want <= kinds, f"{what}: every namespaced object of the release is in {ns}",
                     sorted(want - kinds))
        ecs = self.extensionconfigs()
        self.r.check(len(ecs) == 1 and ecs[0]["spec"]["clientConfig"]["service"]["namespace"] == ns
                     and ecs[0]["metadata"]["annotations"][
                         "runtime.cluster.x-k8s.io/inject-ca-from-secret"] ==
                     f"{ns}/hvupdater-serving-cert",
                     f"{what}: the ExtensionConfig calls the Service in {ns} and takes its CA "
                     f"from {ns}", [e["spec"]["clientConfig"] for e in ecs])

    def gone(self, ns, what):
        self.r.eq(self.names(ns), [], f"{what}: uninstall removed every object of the release "
                  f"from {ns}")
        self.r.eq(self.extensionconfigs(), [], f"{what}: uninstall removed the ExtensionConfig")

    def user_namespace(self):
        ns = "team-x"
        self.api.kubectl("create", "namespace", ns)
        self.api.kubectl("create", "secret", "generic", "hvupdater-vsphere-credentials", "-n", ns,
                         "--from-literal=username=u", "--from-literal=password=p")
        p = self.install(ns, "--set", "metrics.serviceMonitor.enabled=true")
        if not self.r.check(p.returncode == 0, "helm install -n team-x into the user's namespace",
                            p.stderr[-600:]):
            return
        self.installed(ns, "the user's namespace")
        p = self.uninstall(ns)
        self.r.check(p.returncode == 0, "helm uninstall -n team-x", p.stderr[-400:])
        self.gone(ns, "the user's namespace")
        n = self.namespace(ns)
        self.r.check(n and not n["metadata"].get("deletionTimestamp"),
                     "uninstall leaves the user's namespace team-x", n)
        s = self.api.kubectl("get", "secret", "hvupdater-vsphere-credentials", "-n", ns,
                             check=False)
        self.r.check(s.returncode == 0, "uninstall leaves the user's Secret", s.stderr)

    def create_namespace(self):
        ns = "team-y"
        p = self.install(ns, "--create-namespace", "--set", "metrics.serviceMonitor.enabled=true")
        if not self.r.check(p.returncode == 0, "helm install -n team-y --create-namespace",
                            p.stderr[-600:]):
            return
        n = self.namespace(ns)
        self.r.check(n and "helm.sh/chart" not in n["metadata"].get("labels", {}),
                     "--create-namespace: Helm made team-y, the chart has no Namespace object")
        self.installed(ns, "--create-namespace")
        p = self.uninstall(ns)
        self.r.check(p.returncode == 0, "helm uninstall -n team-y", p.stderr[-400:])
        self.gone(ns, "--create-namespace")
        n = self.namespace(ns)
        self.r.check(n and not n["metadata"].get("deletionTimestamp"),
                     "uninstall leaves team-y (Helm never deletes a namespace)", n)

    def owned_namespace(self):
        """namespace.create is for the renderings (kustomize, clusterctl, helm template):
        helm install keeps its release record in the release namespace, so it can own neither
        a namespace that exists (ownership check) nor one that does not (no place for the
        record)."""
        for ns, what in (("team-x", "an existing namespace"), ("team-z", "a new namespace")):
            p = self.install(ns, "--set", "namespace.create=true")
            self.r.check(p.returncode != 0 and ns in p.stderr,
                         f"helm install namespace.create into {what}: refused by Helm",
                         p.stderr[-400:])
            self.r.eq(self.names(ns) if self.namespace(ns) else [], [],
                      f"namespace.create into {what}: nothing created")
        ns = "team-z"
        p = subprocess.run([self.helm, "template", RELEASE, self.chart, "-n", ns, "--set",
                            "namespace.create=true"], capture_output=True, text=True, timeout=120)
        if not self.r.check(p.returncode == 0, "helm template -n team-z --set namespace.create=true",
                            p.stderr[-400:]):
            return
        self.api.kubectl("apply", "-f", "-", stdin=p.stdout)
        n = self.namespace(ns)
        self.r.check(n and n["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") ==
                     "restricted", "namespace.create, rendered and applied: the Namespace, "
                     "enforcing restricted", n)
        self.r.check(len(self.names(ns)) >= 8, "namespace.create, rendered and applied: the "
                     "objects in it", self.names(ns))
        self.api.kubectl("delete", "-f", "-", "--wait=false", stdin=p.stdout)
        n = self.namespace(ns)
        # no kube-controller-manager here: a deleted namespace stays Terminating
        self.r.check(n is None or n["metadata"].get("deletionTimestamp"),
                     "namespace.create, rendered: deleting the manifests deletes the namespace", n)

    def typo(self):
        ns = "team-x"
        p = self.install(ns, "--set", "extension.settings.powerCycel=Never")
        self.r.check(p.returncode != 0 and "powerCycel" in p.stderr,
                     "a misspelt setting: helm install refuses it naming it", p.stderr[-400:])
        self.r.eq(self.names(ns), [], "a misspelt setting: nothing was created")
        r = self.helm_run("list", "-n", ns, "-q")
        self.r.eq(r.stdout.split(), [], "a misspelt setting: no release recorded")

    def client_ca(self):
        ns, capi = "team-c", ("capi-system", "capi-kubeadm-control-plane-system")
        for n in capi:
            self.api.kubectl("create", "namespace", n)
        p = self.install(ns, "--create-namespace", "--set", "clientCerts.enabled=true",
                         "--set", "clientCerts.generateCA=true")
        if not self.r.check(p.returncode == 0, "helm install clientCerts.generateCA",
                            p.stderr[-600:]):
            return

        def ca():
            """{namespace: (tls.crt, tls.key)} of the CA Secrets, the ConfigMap's data."""
            pairs = {}
            for n in capi:
                s = self.api.get("secret", "hvupdater-client-ca", "-n", n)
                pairs[n] = (s.get("type"), s["data"].get("tls.crt"), s["data"].get("tls.key"))
            cm = self.api.get("configmap", "hvupdater-client-ca", "-n", ns)
            return pairs, cm.get("data", {})
        first, cm = ca()
        vals = set(first.values())
        self.r.check(len(vals) == 1 and all(next(iter(vals))) and
                     next(iter(vals))[0] == "kubernetes.io/tls",
                     "generateCA: one CA, the same kubernetes.io/tls Secret in both CAPI "
                     "namespaces", first.keys())
        crt = base64.b64decode(first[capi[0]][1]).decode()
        self.r.check(list(cm) == ["ca.crt"] and cm["ca.crt"].strip() == crt.strip(),
                     f"generateCA: {ns} gets the CA's certificate alone (ConfigMap, ca.crt)",
                     list(cm))
        secrets = self.api.get("secrets", "-n", ns, "-l", INSTANCE)["items"]
        self.r.eq([x["metadata"]["name"] for x in secrets], [],
                  f"generateCA: no Secret of the chart's in {ns}")
        for n in capi:
            iss = [(i["metadata"]["name"], i["spec"]) for i in
                   self.api.get("issuers.cert-manager.io", "-n", n)["items"]]
            self.r.eq(iss, [("hvupdater-client-ca", {"ca": {"secretName": "hvupdater-client-ca"}})],
                      f"generateCA: the CA Issuer in {n}")
        p = self.helm_run("upgrade", RELEASE, self.chart, "-n", ns, "--reuse-values")
        if self.r.check(p.returncode == 0, "helm upgrade --reuse-values (generateCA)",
                        p.stderr[-600:]):
            again, cm2 = ca()
            self.r.check(again == first and cm2 == cm,
                         "generateCA: helm upgrade keeps the CA (lookup of its Secret)")
        p = self.uninstall(ns)
        self.r.check(p.returncode == 0, "helm uninstall (generateCA)", p.stderr[-400:])
        left = [n for n in capi if self.api.kubectl("get", "secret", "hvupdater-client-ca",
                                                    "-n", n, check=False).returncode == 0]
        self.r.eq(left, [], "generateCA: uninstall removes the CA Secrets")
        self.gone(ns, "generateCA")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--kube-bin", required=True)
    a = ap.parse_args()
    helm = os.path.join(a.tools, "helm")
    for f in (helm, os.path.join(a.kube_bin, "kube-apiserver"), os.path.join(a.kube_bin, "etcd")):
        if not os.access(f, os.X_OK):
            print(f"FAIL {f} missing (test/helm/build.sh, test/capi/build.sh)")
            return 1
    api = kubeapi.ApiServer(os.path.abspath(a.kube_bin)).start()
    try:
        api.apply(CRDS)
        api.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all")
        t = Test(api, helm, os.path.join(a.source, "deploy", "helm", "hvupdater"))
        for fn in (t.user_namespace, t.create_namespace, t.owned_namespace, t.typo,
                   t.client_ca):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - one broken scenario must not hide the rest
                t.r.check(False, f"{fn.__name__} ran to the end", f"{type(e).__name__}: {e}")
        return t.r.finish()
    finally:
        api.stop()


if __name__ == "__main__":
    sys.exit(main())
