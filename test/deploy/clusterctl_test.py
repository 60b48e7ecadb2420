#!/usr/bin/env python3
"""clusterctl_test.py: hvupdater as a clusterctl provider, with clusterctl itself against the
real API server of the test/capi lab (issue 20, item 1):

  clusterctl init --runtime-extension hvupdater   from a local provider repository named
                                                  by a `providers:` entry with a file URL
    --wait-providers                              waits for hvupdater's Deployment (its
                                                  container is manager): with no
                                                  controller here it is never Available, so
                                                  a short --wait-provider-timeout fails
                                                  naming it; marked Available (its status),
                                                  init returns
  HVUPDATER_TARGET_NAMESPACE                      moves everything, the ExtensionConfig's
                                                  service and CA annotation included
  --target-namespace alone                        cannot reach the ExtensionConfig: the pod's
                                                  command line (--require-namespace with
                                                  POD_NAMESPACE) refuses to start, naming both
  clusterctl upgrade plan                         offers the next release of the series
  clusterctl delete --runtime-extension hvupdater removes what init made

usage: clusterctl_test.py --source DIR [--binary BUILD/hvupdater]
Needs the lab's environment (test/capi/up.sh prints it): KUBECONFIG, HV_CAPI_BIN (kubectl,
clusterctl). A missing one is a failure, never a skip.

The lab starts CAPI's manager from its binary, not with clusterctl, so clusterctl's
inventory has no core provider: the test adopts the running CAPI into it (clusterctl's
Provider CRD and a Provider "cluster-api" of the version the lab's clusterctl was built
from, whose metadata.yaml comes from that CAPI module), and gives cert-manager's three CRDs
when the lab has none (clusterctl's cert-manager check only creates an Issuer and a
Certificate; no pod runs here). The lab's own ExtensionConfig "hvupdater" has the name the
provider's has: it is set aside during the test and put back (and rediscovered by CAPI)
after. Everything the test adds is removed again, except the namespaces hvupdater-system,
hv-clusterctl-var and hv-clusterctl-moved (clusterctl delete keeps namespaces; the lab runs
no namespace controller to finalize one). The lab runs no kube-controller-manager either:
the test writes the Deployment's Available condition itself where it plays that part.
Prints "ok ..." or "FAIL ..." per check; exits 1 when any failed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvdeploy as hv  # noqa: E402

PROVIDER = "runtime-extension-hvupdater"
NS = "hvupdater-system"
LABEL = f"cluster.x-k8s.io/provider={PROVIDER}"
GO = os.environ.get("HV_GO", "/usr/local/go/bin/go")
WAIT_S = 120
OTHER_NS = "hv-clusterctl-var"   # HVUPDATER_TARGET_NAMESPACE
MOVED_NS = "hv-clusterctl-moved"  # --target-namespace alone

CERT_MANAGER_CRDS = [("certificates", "Certificate", "Namespaced"),
                     ("issuers", "Issuer", "Namespaced"),
                     ("clusterissuers", "ClusterIssuer", "Cluster")]


class Lab:
    def __init__(self, bindir, work):
        self.kubectl = os.path.join(bindir, "kubectl")
        self.clusterctl = os.path.join(bindir, "clusterctl")
        self.work = work
        self.env = dict(os.environ, HOME=work, XDG_CONFIG_HOME=os.path.join(work, "xdg"),
                        CLUSTERCTL_DISABLE_VERSIONCHECK="true")
        self.env.pop("HVUPDATER_IMAGE", None)

    def k(self, *args, stdin=None, check=False):
        p = subprocess.run([self.kubectl, *args], input=stdin, capture_output=True, text=True,
                           timeout=120, env=self.env)
        if check and p.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
        return p

    def get(self, *args):
        p = self.k("get", *args, "-o", "json")
        return json.loads(p.stdout) if p.returncode == 0 else None

    def cc(self, *args, env=None):
        e = dict(self.env, **(env or {}))
        return subprocess.run([self.clusterctl, *args, "--config",
                               os.path.join(self.work, "clusterctl.yaml"), "-v", "1"],
                              capture_output=True, text=True, timeout=600, env=e)


def capi_version(clusterctl):
    """The cluster-api module version the lab's clusterctl was built from."""
    p = subprocess.run([GO, "version", "-m", clusterctl], capture_output=True, text=True,
                       timeout=60)
    for ln in p.stdout.splitlines():
        f = ln.split()
        if len(f) >= 3 and f[0] in ("dep", "mod") and f[1] == "sigs.k8s.io/cluster-api":
            return f[2]
    raise RuntimeError(f"{clusterctl}: no sigs.k8s.io/cluster-api in its build info "
                       f"({p.stderr.strip()[:200]})")


def capi_module_dir(version):
    p = subprocess.run([GO, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60)
    d = os.path.join(p.stdout.strip(), "sigs.k8s.io", f"cluster-api@{version}")
    if not os.path.isfile(os.path.join(d, "metadata.yaml")):
        raise RuntimeError(f"{d}/metadata.yaml missing: the lab's build (test/capi/build.sh) "
                           "downloads that module")
    return d


def next_patch(v):
    major, minor, patch = (int(x) for x in v.split("."))
    return f"{major}.{minor}.{patch + 1}"


def make_repository(src, work, capi_ver, capi_dir):
    """A clusterctl local repository ({base}/{provider-label}/{version}/{file}) and the
    config naming it with file URLs."""
    repo = os.path.join(work, "repo")
    version = "v" + hv.source_version(src)
    hvdir = os.path.join(repo, PROVIDER, version)
    os.makedirs(hvdir)
    for f in ("runtime-extension-components.yaml", "metadata.yaml"):
        shutil.copy(os.path.join(src, "deploy", "clusterctl", f), hvdir)
    core = os.path.join(repo, "cluster-api", capi_ver)
    os.makedirs(core)
    shutil.copy(os.path.join(capi_dir, "metadata.yaml"), core)
    with open(os.path.join(core, "core-components.yaml"), "w") as f:
        f.write("# the lab runs CAPI's manager itself: never installed from here\n")
    cfg = {"providers": [
        {"name": "cluster-api", "type": "CoreProvider",
         "url": f"file://{core}/core-components.yaml"},
        {"name": "hvupdater", "type": "RuntimeExtensionProvider",
         "url": f"file://{hvdir}/runtime-extension-components.yaml"}],
        "overridesFolder": os.path.join(work, "overrides"),
        # the lab's stand-in CRDs are cert-manager here: never download one
        "cert-manager": {"externallyProvisioned": "true", "timeout": "60s"}}
    with open(os.path.join(work, "clusterctl.yaml"), "w") as f:
        yaml.safe_dump(cfg, f)
    return repo, version


def cert_manager_crd(plural, kind, scope):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.cert-manager.io"},
            "spec": {"group": "cert-manager.io", "scope": scope,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                               "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def finalize_namespace(lab, name):
    """What the namespace controller (kube-controller-manager, which the lab does not run)
    does for a deleted namespace whose objects are gone: clear its finalizers. clusterctl's
    cert-manager check deletes its namespace cert-manager-test each time and needs it gone
    before the next run."""
    ns = lab.get("namespace", name)
    if not ns or not ns["metadata"].get("deletionTimestamp"):
        return
    ns["spec"]["finalizers"] = []
    lab.k("replace", "--raw", f"/api/v1/namespaces/{name}/finalize", "-f", "-",
          stdin=json.dumps(ns), check=True)
    deadline = time.monotonic() + WAIT_S
    while lab.get("namespace", name) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the API server, bounded by WAIT_S


def clean_for_apply(o):
    o = json.loads(json.dumps(o))
    o.pop("status", None)
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        o["metadata"].pop(k, None)
    return o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--binary", help="hvupdater (default SOURCE/build/hvupdater)")
    a = ap.parse_args()
    binary = a.binary or os.path.join(a.source, "build", "hvupdater")
    r = hv.Results()
    for var in ("KUBECONFIG", "HV_CAPI_BIN"):
        if not os.environ.get(var):
            r.check(False, f"{var} is set (start the lab: eval \"$(test/capi/up.sh)\")")
            return r.finish()
    work = tempfile.mkdtemp(prefix="hv-clusterctl-")
    lab = Lab(os.environ["HV_CAPI_BIN"], work)
    undo = []  # cleanup steps, run in reverse order
    try:
        run(r, lab, a.source, work, undo, binary)
    except Exception as e:  # noqa: BLE001 - a crash of the test is a failure
        r.check(False, "the clusterctl test ran to its end", f"{type(e).__name__}: {e}")
    finally:
        for what, fn in reversed(undo):
            try:
                fn()
                r.check(True, f"cleanup: {what}")
            except Exception as e:  # noqa: BLE001
                r.check(False, f"cleanup: {what}", e)
        shutil.rmtree(work, ignore_errors=True)
    return r.finish()


def set_available(lab, ns):
    """What the Deployment controller (kube-controller-manager, which the lab does not run)
    would write once the pods are up: the Available condition clusterctl waits for."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cond = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "message": "set by clusterctl_test.py", "lastUpdateTime": now,
            "lastTransitionTime": now}
    lab.k("-n", ns, "patch", "deployment", "hvupdater", "--subresource=status", "--type=merge",
          "-p", json.dumps({"status": {"conditions": [cond]}}), check=True)


def init_waiting(r, lab, env, ns):
    """clusterctl init --wait-providers while the test plays the Deployment controller: once
    hvupdater's Deployment exists, mark it Available; init must then return 0."""
    p = subprocess.Popen([lab.clusterctl, "init", "--runtime-extension", "hvupdater",
                          "--wait-providers", "--wait-provider-timeout", str(WAIT_S),
                          "--config", os.path.join(lab.work, "clusterctl.yaml"), "-v", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(lab.env, **env))
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and p.poll() is None and \
            lab.k("-n", ns, "get", "deployment", "hvupdater").returncode != 0:
        time.sleep(0.2)  # polling the API server, bounded by WAIT_S
    ok = lab.k("-n", ns, "get", "deployment", "hvupdater").returncode == 0
    if ok:
        set_available(lab, ns)
    try:
        out, _ = p.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return r.check(ok and p.returncode == 0 and "Waiting for providers to be available" in out,
                   f"clusterctl init --wait-providers (namespace {ns}) returns once the "
                   "Deployment is Available", out[-1500:])


def run(r, lab, src, work, undo, binary):
    capi_ver = capi_version(lab.clusterctl)
    repo, version = make_repository(src, work, capi_ver, capi_module_dir(capi_ver))
    print(f"note: CAPI {capi_ver} (the lab's clusterctl), hvupdater {version}")
    if not r.check(lab.k("get", "crd", "clusters.cluster.x-k8s.io").returncode == 0,
                   "the lab's API server has CAPI's CRDs"):
        return

    # --- the lab as clusterctl expects a management cluster ---
    saved = lab.get("extensionconfig", "hvupdater")
    if saved is not None and PROVIDER not in json.dumps(saved["metadata"].get("labels", {})):
        lab.k("delete", "extensionconfig", "hvupdater", "--wait=true", check=True)
        undo.append(("the lab's ExtensionConfig hvupdater is back and discovered",
                     lambda: restore_extensionconfig(lab, saved)))
    for plural, kind, scope in CERT_MANAGER_CRDS:
        name = f"{plural}.cert-manager.io"
        if lab.k("get", "crd", name).returncode != 0:
            lab.k("apply", "-f", "-", stdin=json.dumps(cert_manager_crd(plural, kind, scope)),
                  check=True)
            undo.append((f"CRD {name} removed",
                         lambda n=name: lab.k("delete", "crd", n, check=True)))
    for plural, _, _ in CERT_MANAGER_CRDS:
        lab.k("wait", "--for=condition=Established", f"crd/{plural}.cert-manager.io",
              "--timeout=60s", check=True)
    if lab.get("providers.clusterctl.cluster.x-k8s.io", "-A") is None:
        crd = os.path.join(capi_module_dir(capi_ver), "cmd", "clusterctl", "config", "crd",
                           "bases", "clusterctl.cluster.x-k8s.io_providers.yaml")
        lab.k("apply", "-f", crd, check=True)
        lab.k("wait", "--for=condition=Established",
              "crd/providers.clusterctl.cluster.x-k8s.io", "--timeout=60s", check=True)
    cores = [p for p in (lab.get("providers.clusterctl.cluster.x-k8s.io", "-A") or {}).get(
        "items", []) if p.get("type") == "CoreProvider"]
    if not cores:
        if lab.k("get", "namespace", "capi-system").returncode != 0:
            lab.k("create", "namespace", "capi-system", check=True)
        core = {"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
                "metadata": {"name": "cluster-api", "namespace": "capi-system",
                             "labels": {"cluster.x-k8s.io/provider": "cluster-api",
                                        "clusterctl.cluster.x-k8s.io": "",
                                        "clusterctl.cluster.x-k8s.io/core": "inventory"}},
                "providerName": "cluster-api", "type": "CoreProvider", "version": capi_ver}
        lab.k("apply", "-f", "-", stdin=json.dumps(core), check=True)
        undo.append(("the adopted core Provider removed from clusterctl's inventory",
                     lambda: lab.k("-n", "capi-system", "delete",
                                   "providers.clusterctl.cluster.x-k8s.io", "cluster-api",
                                   check=True)))
    before = lab.get("providers.clusterctl.cluster.x-k8s.io", "-A")
    r.check(not [p for p in before["items"] if p["metadata"]["name"] == PROVIDER],
            "hvupdater is not installed before init")

    # --- clusterctl init ---
    finalize_namespace(lab, "cert-manager-test")
    undo.append(("clusterctl's cert-manager-test namespace gone",
                 lambda: finalize_namespace(lab, "cert-manager-test")))
    p = lab.cc("init", "--runtime-extension", "hvupdater")
    r.check(p.returncode != 0 and "HVUPDATER_IMAGE" in p.stdout + p.stderr,
            "init without HVUPDATER_IMAGE fails naming the variable",
            (p.stdout + p.stderr)[-600:])
    r.check(not lab.get("providers.clusterctl.cluster.x-k8s.io", "-n", NS, PROVIDER),
            "... and installs nothing")
    image = "registry.example/hvupdater:" + version.lstrip("v")
    undo.append(("clusterctl delete after a failed check",
                 lambda: [lab.cc("delete", "--runtime-extension", "hvupdater")
                          for ns in (NS, OTHER_NS, MOVED_NS)
                          if lab.get("providers.clusterctl.cluster.x-k8s.io", "-n", ns,
                                     PROVIDER)]))

    # --wait-providers waits for hvupdater: nothing here makes a Deployment Available, so
    # init fails at the timeout naming it (before the container was named manager,
    # clusterctl did not wait for it and init returned 0).
    finalize_namespace(lab, "cert-manager-test")
    p = lab.cc("init", "--runtime-extension", "hvupdater", "--wait-providers",
               "--wait-provider-timeout", "5", env={"HVUPDATER_IMAGE": image})
    out = p.stdout + p.stderr
    r.check(p.returncode != 0 and 'deployment "hvupdater" is not ready after 5s' in out,
            "clusterctl init --wait-providers waits for hvupdater's Deployment (fails at "
            "--wait-provider-timeout 5 naming it: nothing here makes it Available)", out[-1500:])
    dep = lab.get("-n", NS, "deployment", "hvupdater") or {}
    r.eq([c.get("name") for c in dep.get("spec", {}).get("template", {}).get("spec", {})
          .get("containers", [])], ["manager"], "the provider's container is manager")
    p = lab.cc("delete", "--runtime-extension", "hvupdater")
    r.check(p.returncode == 0, "clusterctl delete after the timed-out init",
            (p.stdout + p.stderr)[-800:])

    # HVUPDATER_TARGET_NAMESPACE moves everything, the ExtensionConfig's references too.
    finalize_namespace(lab, "cert-manager-test")
    if init_waiting(r, lab, {"HVUPDATER_IMAGE": image,
                             "HVUPDATER_TARGET_NAMESPACE": OTHER_NS}, OTHER_NS):
        check_namespace(r, lab, OTHER_NS, OTHER_NS, binary)
        p = lab.cc("delete", "--runtime-extension", "hvupdater")
        r.check(p.returncode == 0, f"clusterctl delete from {OTHER_NS}",
                (p.stdout + p.stderr)[-800:])
    # --target-namespace alone: clusterctl moves the namespaced objects but not the
    # ExtensionConfig; the pod's command line refuses to start there, naming both.
    finalize_namespace(lab, "cert-manager-test")
    p = lab.cc("init", "--runtime-extension", "hvupdater", "--target-namespace", MOVED_NS,
               env={"HVUPDATER_IMAGE": image})
    if r.check(p.returncode == 0, f"clusterctl init --target-namespace {MOVED_NS}",
               (p.stdout + p.stderr)[-1500:]):
        check_namespace(r, lab, MOVED_NS, NS, binary)
        p = lab.cc("delete", "--runtime-extension", "hvupdater")
        r.check(p.returncode == 0, f"clusterctl delete from {MOVED_NS}",
                (p.stdout + p.stderr)[-800:])

    finalize_namespace(lab, "cert-manager-test")
    if not init_waiting(r, lab, {"HVUPDATER_IMAGE": image,
                                 "HVUPDATER_NAMESPACES": "default, team-a"}, NS):
        return
    inv = lab.get("providers.clusterctl.cluster.x-k8s.io", "-n", NS, PROVIDER) or {}
    r.eq((inv.get("providerName"), inv.get("type"), inv.get("version")),
         ("hvupdater", "RuntimeExtensionProvider", version),
         "clusterctl's inventory holds the provider in hvupdater-system")
    with open(os.path.join(src, "deploy", "clusterctl", "runtime-extension-components.yaml"),
              encoding="utf-8") as f:
        text = re.sub(r"\$\{([A-Z_]+)(?::=([^}]*))?\}",
                      lambda m: {"HVUPDATER_IMAGE": image}.get(m.group(1), m.group(2) or ""),
                      f.read())
    wanted = [o for o in yaml.safe_load_all(text) if o]
    for o in wanted:
        args = [o["kind"].lower() + "." + o["apiVersion"].split("/")[0]
                if "/" in o["apiVersion"] else o["kind"].lower(), o["metadata"]["name"]]
        if o["metadata"].get("namespace"):
            args = ["-n", o["metadata"]["namespace"]] + args
        got = lab.get(*args)
        r.check(got and got["metadata"].get("labels", {}).get("cluster.x-k8s.io/provider") ==
                PROVIDER, f"init made {o['kind']} {o['metadata']['name']} with the provider label")
    dep = lab.get("-n", NS, "deployment", "hvupdater") or {}
    r.eq(dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [{}])[0]
         .get("image"), image, "the Deployment runs HVUPDATER_IMAGE")
    ec = lab.get("extensionconfig", "hvupdater") or {}
    r.eq(ec.get("spec", {}).get("namespaceSelector", {}).get("matchExpressions", [{}])[0]
         .get("values"), ["default", "team-a"], "HVUPDATER_NAMESPACES is the selector's list")
    r.eq(ec.get("spec", {}).get("settings", {}).get("powerCycle"), "IfNeeded",
         "HVUPDATER_POWER_CYCLE defaults to IfNeeded")
    cores = [p for p in lab.get("providers.clusterctl.cluster.x-k8s.io", "-A")["items"]
             if p.get("type") == "CoreProvider"]
    r.check(len(cores) == 1 and cores[0]["version"] == capi_ver,
            "the core provider is left as it was", cores)

    # --- clusterctl upgrade plan: the next patch release of the series is offered ---
    nxt = "v" + next_patch(version.lstrip("v"))
    shutil.copytree(os.path.join(repo, PROVIDER, version), os.path.join(repo, PROVIDER, nxt))
    p = lab.cc("upgrade", "plan")
    rows = [ln.split() for ln in p.stdout.splitlines() if ln.split()[:1] == [PROVIDER]]
    r.check(p.returncode == 0 and rows and rows[0][1:5] == [NS, "RuntimeExtensionProvider",
                                                             version, nxt],
            f"clusterctl upgrade plan: hvupdater {version} -> {nxt}",
            (p.stdout + p.stderr)[-1500:])
    r.check("v1beta2" in p.stdout, "upgrade plan names the v1beta2 contract", p.stdout[-800:])

    # --- clusterctl delete ---
    p = lab.cc("delete", "--runtime-extension", "hvupdater")
    if not r.check(p.returncode == 0, "clusterctl delete --runtime-extension hvupdater",
                   (p.stdout + p.stderr)[-1500:]):
        return
    r.check(not lab.get("providers.clusterctl.cluster.x-k8s.io", "-n", NS, PROVIDER),
            "delete removed the provider from clusterctl's inventory")
    left = []
    for kind in ("deployments", "services", "serviceaccounts", "configmaps",
                 "poddisruptionbudgets", "networkpolicies", "issuers.cert-manager.io",
                 "certificates.cert-manager.io"):
        items = (lab.get("-n", NS, kind, "-l", LABEL) or {}).get("items", [])
        left += [f"{kind}/{i['metadata']['name']}" for i in items]
    if lab.get("extensionconfig", "hvupdater"):
        left.append("extensionconfig/hvupdater")
    r.check(not left, "delete removed every object init made (the namespace is kept)", left)
    cores = [p for p in lab.get("providers.clusterctl.cluster.x-k8s.io", "-A")["items"]
             if p.get("type") == "CoreProvider"]
    r.check(len(cores) == 1, "delete left the core provider alone", cores)


def check_namespace(r, lab, pod_ns, ec_ns, binary):
    """Objects in pod_ns, the ExtensionConfig pointing at ec_ns, and what the pod would do
    there: hvupdater serve with the Deployment's --require-namespace and POD_NAMESPACE as
    the downward API sets it (the lab runs no kubelet; --check-config stands in for the
    start)."""
    dep = lab.get("-n", pod_ns, "deployment", "hvupdater") or {}
    r.check(dep, f"the Deployment is in {pod_ns}")
    ec = lab.get("extensionconfig", "hvupdater") or {}
    svc = ec.get("spec", {}).get("clientConfig", {}).get("service", {})
    ca = ec.get("metadata", {}).get("annotations", {}).get(
        "runtime.cluster.x-k8s.io/inject-ca-from-secret")
    r.eq((svc.get("namespace"), ca), (ec_ns, f"{ec_ns}/hvupdater-serving-cert"),
         f"the ExtensionConfig's service and CA annotation name {ec_ns}")
    cert = lab.get("-n", pod_ns, "certificates.cert-manager.io", "hvupdater-serving-cert") or {}
    r.check(f"hvupdater.{pod_ns}.svc" in cert.get("spec", {}).get("dnsNames", []),
            f"the serving Certificate names hvupdater.{pod_ns}.svc", cert.get("spec"))
    cont = (dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}])[0]
    args = cont.get("args", [])
    env = [e for e in cont.get("env", []) if e.get("name") == "POD_NAMESPACE"]
    r.check(env and env[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") ==
            "metadata.namespace", "POD_NAMESPACE comes from the downward API", env)
    req = args[args.index("--require-namespace") + 1] if "--require-namespace" in args else None
    r.eq(req, ec_ns, f"serve --require-namespace names the ExtensionConfig's {ec_ns}")
    p = subprocess.run([binary, "serve", "--check-config", "--require-namespace", str(req)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, POD_NAMESPACE=pod_ns))
    if pod_ns == ec_ns:
        r.check(p.returncode == 0, f"the pod starts in {pod_ns}", p.stderr[-400:])
    else:
        r.check(p.returncode == 1 and f"this pod runs in namespace {pod_ns} but the "
                f"ExtensionConfig sends CAPI's calls to namespace {ec_ns}" in p.stderr and
                f"HVUPDATER_TARGET_NAMESPACE={pod_ns}" in p.stderr,
                f"--target-namespace {pod_ns} alone: the pod refuses to start, naming both "
                "namespaces and the variable", p.stderr[-400:])


def restore_extensionconfig(lab, saved):
    lab.k("apply", "--server-side", "--force-conflicts", "-f", "-",
          stdin=json.dumps(clean_for_apply(saved)), check=True)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        ec = lab.get("extensionconfig", "hvupdater") or {}
        if len(ec.get("status", {}).get("handlers", []) or []) >= 3:
            return
        time.sleep(0.2)  # polling CAPI's discovery, bounded by WAIT_S
    raise RuntimeError(f"CAPI did not rediscover the lab's hvupdater within {WAIT_S} s")


if __name__ == "__main__":
    sys.exit(main())
