#!/usr/bin/env python3
"""chart_test.py: the Helm chart deploy/helm/hvupdater is the single source of the manifests.

  chart_test.py --source DIR --tools DIR

--tools holds helm and kustomize (kustomize's own library), built from their Go modules by
test/helm/build.sh. Checks:
  - helm lint --strict passes with the default values and with every option switched;
  - the committed deploy/kubernetes and deploy/clusterctl files are what
    scripts/render-manifests.py renders from the chart now (no drift);
  - the three renderings hold the same objects: kustomize's render of deploy/kubernetes
    (with and without its components) equals `helm template` (with the matching options),
    and the clusterctl components, after clusterctl's variable substitution with the
    defaults, equal `helm template` plus clusterctl's provider label;
  - the clusterctl components follow clusterctl's provider rules: one namespace, every
    object labelled cluster.x-k8s.io/provider: runtime-extension-hvupdater, every variable
    documented, metadata.yaml maps the chart's release series to contract v1beta2;
  - the optional metrics listener really is optional (probes fall back to the hooks port);
  - Helm's conventions: every namespaced object in the release namespace (`-n`), quoted (a
    namespace "on" or "2024" stays a string), no Namespace object unless namespace.create;
    the recommended labels on every object, selectors on the stable name + instance only;
    a PodDisruptionBudget only with more than one replica; the pod values (imagePullSecrets,
    nodeSelector, affinity, tolerations, podLabels, podAnnotations, extraArgs, log format
    and level, the CanUpdate failurePolicy flag), an existing cert-manager issuer, the
    ServiceMonitor; NOTES.txt;
  - kubevirt: config.json's in-cluster kubevirt section (valid under schemas/config.json)
    and exactly docs/kubevirt.md's RBAC table, parsed from the doc: one ClusterRole, or with
    kubevirt.namespaces a Role per namespace and cluster-wide only kubevirts (no cluster-wide
    grant on virtualmachines);
  - values.schema.json is what scripts/gen-values-schema.py generates from schemas/ (no
    drift), and refuses unknown keys and bad values: a misspelt or bad ExtensionConfig
    setting fails `helm template` and `helm lint` naming the setting.
Prints "ok ..." or "FAIL ..." per check; exits 1 when any failed.
"""

import argparse
import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hvdeploy as hv  # noqa: E402


def _load_render_manifests():
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "render-manifests.py")
    spec = importlib.util.spec_from_file_location("render_manifests", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rm = _load_render_manifests()  # scripts/render-manifests.py: how the renderings run helm

PROVIDER = "runtime-extension-hvupdater"
NS = "hvupdater-system"
# Server flags the clusterctl components set from variables (scripts/render-manifests.py),
# with the variables' defaults; POD_NAMESPACE goes with --require-namespace.
CLUSTERCTL_ARGS = {"--can-update-failure-policy": ("HVUPDATER_CAN_UPDATE_FAILURE_POLICY", "Fail"),
                   "--log-format": ("HVUPDATER_LOG_FORMAT", "hvupdater"),
                   "--log-level": ("HVUPDATER_LOG_LEVEL", "info"),
                   "--require-namespace": ("HVUPDATER_TARGET_NAMESPACE", NS)}
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::=([^}]*))?\}")


def envsubst(text, env):
    """clusterctl's variable substitution (drone/envsubst): ${VAR} and ${VAR:=default}
    (the default when VAR is unset or empty). A variable without a value is an error."""
    missing = []

    def one(m):
        name, default = m.group(1), m.group(2)
        v = env.get(name) or default
        if v is None:
            missing.append(name)
            return ""
        return v
    out = VAR.sub(one, text)
    if missing:
        raise ValueError(f"variables without a value: {sorted(set(missing))}")
    return out


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def key(o):
    return (o.get("apiVersion"), o.get("kind"), o["metadata"].get("namespace", ""),
            o["metadata"]["name"])


def mask(objs):
    """Objects by key, the generated ConfigMap's name suffix masked (kustomize and the chart
    hash differently)."""
    s = json.dumps(objs)
    s = re.sub(r"\bhvupdater-config-[a-z0-9]{10}\b", "hvupdater-config-HASH", s)
    return {key(o): o for o in json.loads(s)}


class Checker:
    def __init__(self, tools, source):
        self.helm = os.path.join(tools, "helm")
        self.kustomize = os.path.join(tools, "kustomize")
        self.source = source
        self.chart = os.path.join(source, "deploy", "helm", "hvupdater")
        self.r = hv.Results()

    def run(self, cmd):
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    def helm_with(self, args, values):
        """helm ARGS... -f VALUES (written to a scratch file)."""
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(values, f)
        try:
            return self.run([self.helm, *args, "-f", f.name])
        finally:
            os.unlink(f.name)

    def helm_template(self, values):
        """The chart as scripts/render-manifests.py renders it (namespace hvupdater-system
        with its Namespace object, no Helm-only labels): what deploy/kubernetes and the
        clusterctl components are compared with."""
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(values, f)
        try:
            p = self.run(rm.template_argv(self.helm, self.chart, f.name))
        finally:
            os.unlink(f.name)
        if p.returncode != 0:
            raise RuntimeError(f"helm template {values}: {p.stderr.strip()}")
        return docs(rm.strip_helm_labels(p.stdout))

    def helm_release(self, values, namespace="team-x", release="rel", extra=()):
        """`helm template RELEASE CHART -n NAMESPACE` as a user runs it; (process, objects)."""
        p = self.helm_with(["template", release, self.chart, "-n", namespace, *extra], values)
        return p, (docs(p.stdout) if p.returncode == 0 else [])

    def kustomize_build(self, directory):
        p = self.run([self.kustomize, directory])
        if p.returncode != 0:
            raise RuntimeError(f"kustomize {directory}: {p.stderr.strip()}")
        return docs(p.stdout)

    def same(self, mine, theirs, what):
        a, b = mask(mine), mask(theirs)
        if not self.r.eq(sorted(a), sorted(b), f"{what}: the same objects"):
            return
        diff = [k for k in a if a[k] != b[k]]
        self.r.check(not diff, f"{what}: every object equal", [
            f"{'/'.join(k)}: {json.dumps(a[k], sort_keys=True)[:300]} != "
            f"{json.dumps(b[k], sort_keys=True)[:300]}" for k in diff[:3]])


def lint(c):
    variants = {"default values": {},
                "all options on": {"clientCerts": {"enabled": True},
                                   "priorityClass": {"enabled": True},
                                   "events": {"enabled": True},
                                   "capvIdentity": {"enabled": True},
                                   "kubevirt": {"enabled": True}},
                "client CA made by the chart": {"clientCerts": {"enabled": True,
                                                                "generateCA": True}},
                "kubevirt in namespaces": {"kubevirt": {"enabled": True,
                                                        "namespaces": ["capk", "team-b"]}},
                "metrics listener off": {"metrics": {"enabled": False}},
                "every new value set": {
                    "namespace": {"create": True}, "replicas": 1,
                    "imagePullSecrets": [{"name": "regcred"}], "nodeSelector": {"a": "b"},
                    "affinity": {"nodeAffinity": {}}, "tolerations": [],
                    "podLabels": {"a": "b"}, "podAnnotations": {"a": "b"},
                    "extraArgs": ["--drain-seconds", "5"], "logFormat": "capi",
                    "logLevel": "warn", "extension": {"canUpdateFailurePolicy": "Ignore"},
                    "certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "ca"}},
                    "metrics": {"serviceMonitor": {"enabled": True}}}}
    for what, vals in variants.items():
        p = c.helm_with(["lint", "--strict", c.chart], vals)
        c.r.check(p.returncode == 0 and "0 chart(s) failed" in p.stdout,
                  f"helm lint --strict ({what})", (p.stdout + p.stderr)[-800:])
    with open(os.path.join(c.chart, "Chart.yaml"), encoding="utf-8") as f:
        chart = yaml.safe_load(f)
    version = hv.source_version(c.source)
    c.r.eq(str(chart.get("appVersion")), version, "Chart appVersion is the project version")
    c.r.eq(str(chart.get("version")), version, "Chart version is the project version")


def drift(c, tools):
    p = c.run([sys.executable, os.path.join(c.source, "scripts", "render-manifests.py"),
               "--check", "--tools", tools])
    bad = [ln for ln in p.stdout.splitlines() if ln.startswith("FAIL")]
    c.r.check(p.returncode == 0 and not bad,
              "the committed deploy/kubernetes and deploy/clusterctl are what the chart "
              "renders (scripts/render-manifests.py --check)",
              (p.stdout + p.stderr)[-3000:])
    n = len([ln for ln in p.stdout.splitlines() if ln.startswith("ok")])
    c.r.check(n >= 14, f"render-manifests.py compared {n} files", p.stdout[-500:])


def kustomize_vs_helm(c):
    kdir = os.path.join(c.source, "deploy", "kubernetes")
    base = c.helm_template({})
    c.same(c.kustomize_build(kdir), base, "kustomize deploy/kubernetes vs helm template")
    # ours (test/deploy/hvdeploy.py, used by deploy.static) agrees with kustomize's
    ours, _ = hv.render(kdir)
    c.same(ours, c.kustomize_build(kdir), "hvdeploy.render vs kustomize")
    with tempfile.TemporaryDirectory(prefix="hv-chart-") as tmp:
        k = os.path.join(tmp, "k")
        shutil.copytree(kdir, k)
        with open(os.path.join(k, "kustomization.yaml"), "w") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    "resources: [base, extension]\n"
                    "components: [components/client-certs, components/priority-class, "
                    "components/events, components/capv-identity, components/kubevirt]\n")
        full = c.helm_template({"clientCerts": {"enabled": True},
                                "priorityClass": {"enabled": True}, "events": {"enabled": True},
                                "capvIdentity": {"enabled": True},
                                "kubevirt": {"enabled": True}})
        c.same(c.kustomize_build(k), full,
               "kustomize with all components vs helm template with all options")


def clusterctl(c):
    cdir = os.path.join(c.source, "deploy", "clusterctl")
    with open(os.path.join(cdir, "runtime-extension-components.yaml"), encoding="utf-8") as f:
        text = f.read()
    names = {m.group(1) for m in VAR.finditer(text)}
    required = {m.group(1) for m in VAR.finditer(text) if m.group(2) is None}
    c.r.eq(required, {"HVUPDATER_IMAGE"}, "clusterctl variables without a default")
    for n in sorted(names):
        c.r.check(re.search(r"^#\s+\$\{%s[:}]" % n, text, re.M),
                  f"variable {n} is listed in the file's head")
    for want in ("HVUPDATER_IMAGE", "HVUPDATER_NAMESPACES", "HVUPDATER_POWER_CYCLE"):
        c.r.check(want in names, f"clusterctl variable {want}")
    c.r.check("${HVUPDATER_NAMESPACES:=default}" in text and
              "${HVUPDATER_POWER_CYCLE:=IfNeeded}" in text,
              "the namespace and powerCycle variables default to default and IfNeeded")
    try:
        envsubst(text, {})
        c.r.check(False, "HVUPDATER_IMAGE is required (unset: clusterctl refuses)")
    except ValueError as e:
        c.r.check("HVUPDATER_IMAGE" in str(e), "HVUPDATER_IMAGE is required", e)

    objs = docs(envsubst(text, {"HVUPDATER_IMAGE": "hvupdater:" + hv.source_version(c.source)}))
    for o in objs:
        c.r.eq(o["metadata"].get("labels", {}).get("cluster.x-k8s.io/provider"), PROVIDER,
               f"{o['kind']} {o['metadata']['name']} carries the provider label")
    nss = [o for o in objs if o["kind"] == "Namespace"]
    c.r.eq([o["metadata"]["name"] for o in nss], [NS], "exactly one Namespace, the provider's")
    cluster_scoped = {"Namespace", "ExtensionConfig", "ClusterIssuer", "PriorityClass",
                      "ClusterRole", "ClusterRoleBinding"}
    for o in objs:
        if o["kind"] not in cluster_scoped:
            c.r.eq(o["metadata"].get("namespace"), NS,
                   f"{o['kind']} {o['metadata']['name']} is in {NS} (clusterctl: one namespace)")
    c.r.check(not [o for o in objs if o["kind"] in ("ClusterIssuer", "PriorityClass")],
              "no optional component in the provider components")

    def unlabel(os_):
        out = copy.deepcopy(os_)
        for o in out:
            o["metadata"]["labels"].pop("cluster.x-k8s.io/provider", None)
            pod = o.get("spec", {}).get("template", {}).get("metadata", {})
            pod.get("labels", {}).pop("cluster.x-k8s.io/provider", None)
        return out

    def args_env(objs_):
        cont = [o for o in objs_ if o["kind"] == "Deployment"][0]["spec"]["template"]["spec"][
            "containers"][0]
        return cont["args"], cont.get("env", [])
    # The clusterctl-only flags and POD_NAMESPACE, at their defaults; then without them
    # (where the chart does not pass them itself) the objects are helm's.
    helm_objs = c.helm_template({})
    hargs, henv = args_env(helm_objs)
    mine = unlabel(objs)
    args, env = args_env(mine)
    for flag, (name, default) in CLUSTERCTL_ARGS.items():
        at = [i for i, a in enumerate(args) if a == flag]
        c.r.check(len(at) == 1 and args[at[0] + 1] == default,
                  f"clusterctl: {flag} from ${{{name}}}, default {default}", args)
        if at and flag not in hargs:
            del args[at[0]:at[0] + 2]
    pod_ns = [e for e in env if e.get("name") == "POD_NAMESPACE"]
    c.r.eq(pod_ns, [{"name": "POD_NAMESPACE",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
           "clusterctl: POD_NAMESPACE from the downward API (for --require-namespace)")
    if not [e for e in henv if e.get("name") == "POD_NAMESPACE"]:
        env[:] = [e for e in env if e.get("name") != "POD_NAMESPACE"]
    c.same(mine, helm_objs,
           "clusterctl components (variables at their defaults, without the clusterctl-only "
           "flags) vs helm template")
    # The variables reach their places.
    env = {"HVUPDATER_IMAGE": "registry.example/hvupdater:9.9.9", "HVUPDATER_NAMESPACES":
           "team-a, team-b", "HVUPDATER_POWER_CYCLE": "Never", "HVUPDATER_REPLICAS": "3",
           "HVUPDATER_DEADLINE_SECONDS": "600"}
    objs = {o["kind"]: o for o in docs(envsubst(text, env))}
    dep, ec = objs["Deployment"], objs["ExtensionConfig"]
    c.r.eq(dep["spec"]["template"]["spec"]["containers"][0]["image"], env["HVUPDATER_IMAGE"],
           "HVUPDATER_IMAGE is the container image")
    c.r.eq(dep["spec"]["replicas"], 3, "HVUPDATER_REPLICAS is the replica count (an integer)")
    c.r.eq([x["name"] for x in dep["spec"]["template"]["spec"]["containers"]], ["manager"],
           "the provider's container is manager (clusterctl --wait-providers waits for it)")
    c.r.eq(ec["spec"]["namespaceSelector"]["matchExpressions"][0]["values"],
           ["team-a", "team-b"], "HVUPDATER_NAMESPACES (comma-separated) is the selector's list")
    c.r.eq(ec["spec"]["settings"]["powerCycle"], "Never", "HVUPDATER_POWER_CYCLE is a setting")
    c.r.eq(ec["spec"]["settings"]["deadlineSeconds"], "600",
           "HVUPDATER_DEADLINE_SECONDS is a setting (a string)")
    # The server flags and the namespace.
    env = {"HVUPDATER_IMAGE": "registry.example/hvupdater:9.9.9",
           "HVUPDATER_CAN_UPDATE_FAILURE_POLICY": "Ignore", "HVUPDATER_LOG_FORMAT": "capi",
           "HVUPDATER_LOG_LEVEL": "debug", "HVUPDATER_TARGET_NAMESPACE": "team-x"}
    objs = docs(envsubst(text, env))
    args, _ = args_env(objs)
    for flag, (name, _) in CLUSTERCTL_ARGS.items():
        at = [i for i, a in enumerate(args) if a == flag]
        c.r.check(len(at) == 1 and args[at[0] + 1] == env[name],
                  f"{name}={env[name]} is serve {flag} {env[name]}", args)
    ns = [o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"]
    c.r.eq(ns, ["team-x"], "HVUPDATER_TARGET_NAMESPACE names the Namespace (clusterctl's "
           "default target namespace)")
    ec = [o for o in objs if o["kind"] == "ExtensionConfig"][0]
    c.r.eq((ec["spec"]["clientConfig"]["service"]["namespace"],
            ec["metadata"]["annotations"]["runtime.cluster.x-k8s.io/inject-ca-from-secret"]),
           ("team-x", "team-x/hvupdater-serving-cert"),
           "HVUPDATER_TARGET_NAMESPACE reaches the ExtensionConfig (cluster-scoped: clusterctl "
           "--target-namespace does not)")
    c.r.check(all(o["metadata"].get("namespace") == "team-x" for o in objs
                  if o["kind"] not in cluster_scoped),
              "HVUPDATER_TARGET_NAMESPACE is every namespaced object's namespace")
    c.r.check(NS not in envsubst(text, env).split("\n---\n", 1)[-1],
              f"with HVUPDATER_TARGET_NAMESPACE set, {NS} is nowhere in the objects")

    # The separate client-certificate component.
    with open(os.path.join(cdir, "client-certs.yaml"), encoding="utf-8") as f:
        certs = docs(f.read())
    full = c.helm_template({"clientCerts": {"enabled": True}})
    want = [o for o in full if o["kind"] in ("Certificate", "Issuer") and
            o["metadata"].get("namespace") in CAPI_CALLERS]
    c.same(unlabel(certs), want, "client-certs.yaml vs the chart's client certificates")
    with open(os.path.join(cdir, "client-certs-patch.json"), encoding="utf-8") as f:
        ops = json.load(f)
    c.r.check(all(o.get("op") == "add" for o in ops) and
              {"op": "add", "path": "/spec/template/spec/containers/0/args/-",
               "value": "--client-ca"} in ops, "client-certs-patch.json adds --client-ca")

    with open(os.path.join(cdir, "metadata.yaml"), encoding="utf-8") as f:
        meta = yaml.safe_load(f)
    c.r.eq((meta.get("apiVersion"), meta.get("kind")),
           ("clusterctl.cluster.x-k8s.io/v1alpha3", "Metadata"), "metadata.yaml kind")
    major, minor = (int(x) for x in hv.source_version(c.source).split(".")[:2])
    series = [s for s in meta.get("releaseSeries", [])
              if s.get("major") == major and s.get("minor") == minor]
    c.r.check(len(series) == 1 and series[0].get("contract") == "v1beta2",
              f"metadata.yaml maps release series {major}.{minor} to contract v1beta2",
              meta.get("releaseSeries"))


# The CAPI controllers that call hooks: namespace -> the name (CN) their certificate carries
# (client-certs.yaml) and hvupdater lets in (--client-name).
CAPI_CALLERS = {"capi-system": "capi-controller-manager",
                "capi-kubeadm-control-plane-system":
                "capi-kubeadm-control-plane-controller-manager"}
CLIENT_CA_DIR = "/etc/hvupdater/client-ca"


def has_private_key(o):
    """o (an object) carries key material: a PEM private key, or a Secret key named *.key."""
    if "PRIVATE KEY" in json.dumps(o):
        return True
    if o.get("kind") == "Secret":
        keys = list(o.get("data") or {}) + list(o.get("stringData") or {})
        return any("key" in k.lower() for k in keys)
    return False


def json_patch_add(obj, ops):
    """The client-certs JSON patch (only "add" to an existing list's end or a new member)
    applied to a copy of obj."""
    out = copy.deepcopy(obj)
    for op in ops:
        if op.get("op") != "add":
            raise ValueError(f"not an add: {op}")
        *parents, last = op["path"].lstrip("/").split("/")
        node = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if last == "-":
            node.append(op["value"])
        else:
            node[last] = op["value"]
    return out


def client_ca(c):
    """The client-certificate component issues from namespaced Issuers only (issue 28): a
    ClusterIssuer can be used from any namespace, so any namespace's editor could get a
    certificate naming CAPI's controller. In every rendering (the chart with and without
    clientCerts.generateCA, the kustomize component, the clusterctl file): no ClusterIssuer;
    each Certificate names an Issuer (kind Issuer) rendered in its own namespace; the
    component's certificates are exactly CAPI's two callers', each in its namespace, from a
    CA Issuer there reading the Secret hvupdater-client-ca. The kustomize and clusterctl
    files hold no private key. generateCA: the CA's Secret in exactly the two CAPI
    namespaces (one CA), hvupdater's namespace gets its ca.crt alone (a ConfigMap), no key
    anywhere else. hvupdater's --client-ca reads ca.crt from a mount of that ConfigMap."""
    kdir = os.path.join(c.source, "deploy", "kubernetes")
    cdir = os.path.join(c.source, "deploy", "clusterctl")
    renderings = {}
    renderings["chart (clientCerts)"] = c.helm_template({"clientCerts": {"enabled": True}})
    try:
        gen = c.helm_template({"clientCerts": {"enabled": True, "generateCA": True}})
        renderings["chart (clientCerts.generateCA)"] = gen
    except RuntimeError as e:
        gen = None
        c.r.check(False, "the chart renders with clientCerts.generateCA", e)
    with tempfile.TemporaryDirectory(prefix="hv-cc-") as tmp:
        k = os.path.join(tmp, "k")
        shutil.copytree(kdir, k)
        with open(os.path.join(k, "kustomization.yaml"), "w") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    "resources: [base, extension]\ncomponents: [components/client-certs]\n")
        renderings["kustomize components/client-certs"] = c.kustomize_build(k)
    with open(os.path.join(cdir, "client-certs.yaml"), encoding="utf-8") as f:
        cc_objs = docs(f.read())
    with open(os.path.join(cdir, "runtime-extension-components.yaml"), encoding="utf-8") as f:
        provider = docs(envsubst(f.read(), {"HVUPDATER_IMAGE": "hvupdater:test"}))
    with open(os.path.join(cdir, "client-certs-patch.json"), encoding="utf-8") as f:
        ops = json.load(f)
    cc_dep = json_patch_add([o for o in provider if o["kind"] == "Deployment"][0], ops)
    renderings["clusterctl client-certs.yaml"] = cc_objs
    renderings["clusterctl provider + client-certs.yaml + its patch"] = (
        [o for o in provider if o["kind"] != "Deployment"] + [cc_dep] + cc_objs)

    for what, objs in renderings.items():
        c.r.eq([o["metadata"]["name"] for o in objs if o["kind"] == "ClusterIssuer"], [],
               f"{what}: no ClusterIssuer")
        issuers = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o
                   for o in objs if o["kind"] == "Issuer"}
        certs = [o for o in objs if o["kind"] == "Certificate"]
        for o in certs:
            ns, ref = o["metadata"].get("namespace"), o["spec"]["issuerRef"]
            c.r.check(ref.get("kind") == "Issuer" and ref.get("group", "cert-manager.io") ==
                      "cert-manager.io" and (ns, ref.get("name")) in issuers,
                      f"{what}: Certificate {ns}/{o['metadata']['name']} is issued by an "
                      f"Issuer rendered in its own namespace {ns}", ref)
        client = [o for o in certs if o["metadata"].get("namespace") != NS]
        c.r.eq(sorted((o["metadata"]["namespace"], o["spec"]["commonName"]) for o in client),
               sorted(CAPI_CALLERS.items()),
               f"{what}: the client certificates are exactly CAPI's two callers', each in "
               "its own namespace")
        for ns in CAPI_CALLERS:
            iss = issuers.get((ns, "hvupdater-client-ca"), {})
            c.r.eq(iss.get("spec"), {"ca": {"secretName": "hvupdater-client-ca"}},
                   f"{what}: Issuer {ns}/hvupdater-client-ca is a CA Issuer reading that "
                   "namespace's Secret hvupdater-client-ca")
        if not what.startswith("chart (clientCerts.generateCA)"):
            keyed = [f"{o['kind']} {o['metadata'].get('namespace')}/{o['metadata']['name']}"
                     for o in objs if has_private_key(o)]
            c.r.eq(keyed, [], f"{what}: no object carries a private key")
        deps = [o for o in objs if o["kind"] == "Deployment"]
        if deps:
            client_ca_mount(c, what, deps[0])

    # the committed renderings, as text: no private key in any file
    for root in (kdir, cdir):
        for dirpath, _, names in os.walk(root):
            for n in names:
                path = os.path.join(dirpath, n)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                c.r.check("PRIVATE KEY" not in text and not re.search(r"^\s*tls\.key:", text, re.M),
                          f"{os.path.relpath(path, c.source)} holds no private key")

    # generateCA: one CA, its key in exactly the two CAPI namespaces, ca.crt alone elsewhere
    p, team_x = c.helm_release({"clientCerts": {"enabled": True, "generateCA": True}})
    c.r.check(p.returncode == 0, "helm template -n team-x with clientCerts.generateCA",
              p.stderr[-300:])
    for ns_name, objs in (("hvupdater-system", gen), ("team-x", team_x)):
        what = f"generateCA, release in {ns_name}"
        if not objs:
            continue
        secrets = [o for o in objs if o["kind"] == "Secret"]
        c.r.eq(sorted((o["metadata"].get("namespace"), o["metadata"]["name"], o.get("type"))
                      for o in secrets),
               sorted((ns, "hvupdater-client-ca", "kubernetes.io/tls") for ns in CAPI_CALLERS),
               f"{what}: the CA's Secret (kubernetes.io/tls) in exactly "
               + " and ".join(CAPI_CALLERS) + ", no other Secret")
        keyed = [f"{o['kind']} {o['metadata'].get('namespace')}/{o['metadata']['name']}"
                 for o in objs if has_private_key(o)]
        c.r.eq(sorted(keyed), sorted(f"Secret {ns}/hvupdater-client-ca" for ns in CAPI_CALLERS),
               f"{what}: the private key is in those two Secrets and nowhere else")
        pairs = {(o.get("data", {}).get("tls.crt"), o.get("data", {}).get("tls.key"))
                 for o in secrets}
        if not c.r.check(len(pairs) == 1 and all(all(p) for p in pairs),
                         f"{what}: both Secrets hold the same CA (tls.crt, tls.key)", pairs):
            continue
        crt_b64, key_b64 = pairs.pop()
        crt = base64.b64decode(crt_b64).decode()
        key = base64.b64decode(key_b64).decode()
        c.r.check("-----BEGIN EC PRIVATE KEY-----" in key, f"{what}: the CA key is ECDSA")
        p = subprocess.run(["openssl", "x509", "-noout", "-text"], input=crt,
                           capture_output=True, text=True, timeout=60)
        c.r.check(p.returncode == 0 and "CA:TRUE" in p.stdout and "P-256" in p.stdout and
                  "CN = hvupdater-client-ca" in p.stdout,
                  f"{what}: tls.crt is a CA certificate (P-256, CN hvupdater-client-ca)",
                  (p.stdout + p.stderr)[-400:])
        here = [o for o in objs if o["metadata"].get("namespace") == ns_name and
                o["metadata"]["name"] == "hvupdater-client-ca"]
        c.r.check(len(here) == 1 and here[0]["kind"] == "ConfigMap" and
                  list(here[0].get("data", {})) == ["ca.crt"] and
                  here[0]["data"]["ca.crt"].strip() == crt.strip(),
                  f"{what}: {ns_name} gets the CA's certificate only (ConfigMap "
                  "hvupdater-client-ca, key ca.crt, that same certificate)",
                  [(o["kind"], list(o.get("data", {}))) for o in here])
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        client_ca_mount(c, what, dep)


def client_ca_mount(c, what, dep):
    """The Deployment passes --client-ca CLIENT_CA_DIR/ca.crt and the --client-name of CAPI's
    two callers, and mounts there the ConfigMap hvupdater-client-ca's ca.crt alone."""
    pod = dep["spec"]["template"]["spec"]
    cont = pod["containers"][0]
    args = cont["args"]
    at = [i for i, a in enumerate(args) if a == "--client-ca"]
    c.r.check(len(at) == 1 and args[at[0] + 1] == CLIENT_CA_DIR + "/ca.crt",
              f"{what}: serve --client-ca {CLIENT_CA_DIR}/ca.crt", args)
    names = [args[i + 1] for i, a in enumerate(args) if a == "--client-name"]
    c.r.eq(sorted(names), sorted(CAPI_CALLERS.values()),
           f"{what}: --client-name for exactly CAPI's two callers")
    mounts = [m for m in cont.get("volumeMounts", []) if m["mountPath"] == CLIENT_CA_DIR]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    vol = vols.get(mounts[0]["name"], {}) if len(mounts) == 1 else {}
    c.r.check(len(mounts) == 1 and mounts[0].get("readOnly") is True and
              set(vol) == {"name", "configMap"} and
              vol["configMap"].get("name") == "hvupdater-client-ca" and
              vol["configMap"].get("items") == [{"key": "ca.crt", "path": "ca.crt"}],
              f"{what}: {CLIENT_CA_DIR} mounts only ca.crt of the ConfigMap "
              "hvupdater-client-ca (no Secret, no key)", [mounts, vol])


def api_components(c):
    """events and capvIdentity: off by default (no token, no RBAC); each on mounts the token
    and binds only its own ClusterRole to hvupdater's account; events adds --kube-events (the
    config's kubernetes.events); the kubernetes values reach config.json; identityFrom capv
    without capvIdentity is refused."""
    def pod(objs):
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        return dep["spec"]["template"]["spec"]

    def config(objs):
        cm = [o for o in objs if o["kind"] == "ConfigMap"][0]
        return json.loads(cm["data"]["config.json"])
    # on by default: the machine check and dry-run claims, the token, their two roles
    dflt = c.helm_template({})
    args = pod(dflt)["containers"][0]["args"]
    c.r.eq(pod(dflt).get("automountServiceAccountToken"), True,
           "default: the token, for the machine check and dry-run claims")
    c.r.check("--check-machines" in args, "default: --check-machines")
    c.r.check("--dry-run-claims" in args, "default: --dry-run-claims")
    c.r.eq(sorted(((r["metadata"]["name"], r["rules"]) for r in dflt
                   if r["kind"] == "ClusterRole"), key=lambda t: t[0]),
           [("hvupdater-dry-run-claims", [
               {"apiGroups": ["infrastructure.cluster.x-k8s.io"],
                "resources": ["vspheremachines", "libvirtmachines", "kubevirtmachines"],
                "verbs": ["patch"]},
               {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"],
                "verbs": ["list"]}]),
            ("hvupdater-machine-check", [
               {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines", "machinesets"],
                "verbs": ["get", "list"]},
               {"apiGroups": ["infrastructure.cluster.x-k8s.io"],
                "resources": ["vspheremachines", "vspheremachinetemplates", "libvirtmachines",
                              "libvirtmachinetemplates", "kubevirtmachines",
                              "kubevirtmachinetemplates"], "verbs": ["get"]}])],
           "default: two ClusterRoles, the machine check's (read-only) and the dry runs' "
           "(patch on infra machines, list Machines)")
    mc_off = {"machineCheck": {"enabled": False}, "dryRunClaims": {"enabled": False}}
    off = c.helm_template(mc_off)
    c.r.check("--no-check-machines" in pod(off)["containers"][0]["args"],
              "machineCheck off: --no-check-machines")
    c.r.check("--dry-run-claims" not in pod(off)["containers"][0]["args"],
              "dry-run claims off: no --dry-run-claims")
    c.r.eq(pod(off).get("automountServiceAccountToken"), False, "API off: no token mounted")
    c.r.check("--kube-events" not in pod(off)["containers"][0]["args"],
              "events off: no --kube-events")
    c.r.check(not [o for o in off if o["kind"].startswith("ClusterRole")], "API off: no RBAC")
    c.r.eq(config(off).get("kubernetes"), {"capvNamespace": "capv-system", "timeoutSeconds": 5},
           "config.json kubernetes: in-cluster (no server, token or CA file), the defaults")
    rules = {
        "events": [{"apiGroups": ["events.k8s.io"], "resources": ["events"],
                    "verbs": ["create"]}],
        "capvIdentity": [
            {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters"], "verbs": ["get"]},
            {"apiGroups": ["infrastructure.cluster.x-k8s.io"],
             "resources": ["vsphereclusters", "vsphereclusteridentities"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]}
    names = {"events": "hvupdater-events", "capvIdentity": "hvupdater-capv-identity"}
    for opt in ("events", "capvIdentity"):
        on = c.helm_template({opt: {"enabled": True}, **mc_off})
        c.r.eq(pod(on).get("automountServiceAccountToken"), True, f"{opt} on: the token")
        c.r.eq("--kube-events" in pod(on)["containers"][0]["args"], opt == "events",
               f"{opt} on: --kube-events only for events")
        roles = [o for o in on if o["kind"] == "ClusterRole"]
        c.r.eq([(r["metadata"]["name"], r["rules"]) for r in roles], [(names[opt], rules[opt])],
               f"{opt} on: one ClusterRole with only its verbs")
        binds = [o for o in on if o["kind"] == "ClusterRoleBinding"]
        c.r.check(len(binds) == 1 and binds[0]["subjects"] == [
            {"kind": "ServiceAccount", "name": "hvupdater", "namespace": NS}] and
            binds[0]["roleRef"]["name"] == names[opt],
            f"{opt} on: bound to hvupdater's service account only")
    # Secrets: never cluster-wide; a Role and its binding in CAPV's namespace and in each
    # namespace listed in capvIdentity.secretNamespaces, nowhere else.
    for extra, want in (([], ["capv-system"]), (["team-a", "capv-system", "team-b"],
                                                 ["capv-system", "team-a", "team-b"])):
        on = c.helm_template({"capvIdentity": {"enabled": True, "secretNamespaces": extra}})
        roles = [o for o in on if o["kind"] == "Role"]
        c.r.eq(sorted(r["metadata"]["namespace"] for r in roles), sorted(want),
               f"capvIdentity secretNamespaces {extra}: a Role in exactly {want}")
        c.r.check(all(r["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                                      "verbs": ["get"]}] for r in roles),
                  "each Role: get on Secrets only")
        binds = [o for o in on if o["kind"] == "RoleBinding"]
        c.r.check(sorted(b["metadata"]["namespace"] for b in binds) == sorted(want) and
                  all(b["subjects"] == [{"kind": "ServiceAccount", "name": "hvupdater",
                                         "namespace": NS}] and
                      b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                       "name": "hvupdater-capv-identity-secrets"}
                      for b in binds),
                  f"capvIdentity secretNamespaces {extra}: each Role bound to hvupdater only")
    p = c.helm_with(["template", "hvupdater", c.chart],
                    {"capvIdentity": {"enabled": True, "secretNamespaces": ["Not_A_Name"]}})
    c.r.check(p.returncode != 0, "capvIdentity.secretNamespaces: a bad namespace is refused",
              p.stderr[-300:])
    srv = {"name": "vc.example.com", "url": "https://vc.example.com/sdk", "identityFrom": "capv"}
    vals = {"vsphere": {"servers": [srv]}, "kubernetes": {"capvNamespace": "capv",
                                                          "timeoutSeconds": 9}}
    p = c.helm_with(["template", "hvupdater", c.chart], vals)
    c.r.check(p.returncode != 0 and "identityFrom capv needs capvIdentity.enabled" in p.stderr,
              "identityFrom capv without capvIdentity.enabled: helm refuses", p.stderr[-300:])
    cfg = config(c.helm_template(dict(vals, capvIdentity={"enabled": True})))
    c.r.eq((cfg["vsphere"]["servers"][0].get("identityFrom"), cfg["kubernetes"]),
           ("capv", {"capvNamespace": "capv", "timeoutSeconds": 9}),
           "identityFrom and the kubernetes values reach config.json")


def metrics_off(c):
    objs = {(o["kind"], o["metadata"]["name"]): o
            for o in c.helm_template({"metrics": {"enabled": False}})}
    dep = objs[("Deployment", "hvupdater")]
    cont = dep["spec"]["template"]["spec"]["containers"][0]
    c.r.check("--metrics-listen" not in cont["args"], "metrics off: no --metrics-listen")
    c.r.eq([p["name"] for p in cont["ports"]], ["https"], "metrics off: one container port")
    for probe in ("livenessProbe", "readinessProbe"):
        hg = cont[probe]["httpGet"]
        c.r.eq((hg["port"], hg["scheme"]), ("https", "HTTPS"),
               f"metrics off: {probe} on the hooks port over HTTPS")
    c.r.eq(len(objs[("Service", "hvupdater")]["spec"]["ports"]), 1, "metrics off: one Service port")
    c.r.eq(len(objs[("NetworkPolicy", "hvupdater")]["spec"]["ingress"]), 1,
           "metrics off: one ingress rule (the hooks)")


CLUSTER_SCOPED = {"Namespace", "ExtensionConfig", "ClusterIssuer", "PriorityClass",
                  "ClusterRole", "ClusterRoleBinding"}
ALL_ON = {"clientCerts": {"enabled": True, "generateCA": True}, "priorityClass": {"enabled": True},
          "events": {"enabled": True}, "capvIdentity": {"enabled": True},
          "metrics": {"serviceMonitor": {"enabled": True}}}


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def pod_spec(objs):
    return by_kind(objs, "Deployment")[0]["spec"]["template"]["spec"]


def release_namespace(c):
    """Every namespaced object of the chart's own in the release namespace, as a string
    even where YAML 1.1 would read a boolean or a number; no Namespace object unless asked;
    the ExtensionConfig's service, CA injection and the certificate's names follow it."""
    for ns in ("team-x", "on", "2024"):
        vals = dict(ALL_ON, extension={"namespaces": [ns, "default"]}, capiNamespaces=[ns],
                    metrics={"namespaces": [ns], "serviceMonitor": {"enabled": True}})
        p, objs = c.helm_release(vals, namespace=ns)
        if not c.r.check(p.returncode == 0, f"helm template -n {ns} with every option",
                         p.stderr[-500:]):
            continue
        c.r.check(not by_kind(objs, "Namespace"),
                  f"-n {ns}: no Namespace object (namespace.create is false by default)")
        # client-certs.yaml puts the CAPI controllers' client certificates, their Issuers
        # and (generateCA) the client CA's Secret into CAPI's namespaces, by design.
        # capv-identity-rbac.yaml grants Secrets where CAPV keeps them (its namespace and
        # capvIdentity.secretNamespaces), by design (api_components checks where).
        elsewhere = {("Certificate", "capi-runtime-extension-client"),
                     ("Issuer", "hvupdater-client-ca"), ("Secret", "hvupdater-client-ca"),
                     ("Role", "hvupdater-capv-identity-secrets"),
                     ("RoleBinding", "hvupdater-capv-identity-secrets")}
        wrong = [f"{o['kind']}/{o['metadata']['name']}: {o['metadata'].get('namespace')!r}"
                 for o in objs if o["kind"] not in CLUSTER_SCOPED and
                 (o["kind"], o["metadata"]["name"]) not in elsewhere and
                 o["metadata"].get("namespace") != ns]
        c.r.check(not wrong, f"-n {ns}: every namespaced object in {ns!r} (a string)", wrong)
        ec = by_kind(objs, "ExtensionConfig")[0]
        c.r.eq(ec["spec"]["clientConfig"]["service"]["namespace"], ns,
               f"-n {ns}: the ExtensionConfig calls the Service in {ns!r}")
        c.r.eq(ec["metadata"]["annotations"]["runtime.cluster.x-k8s.io/inject-ca-from-secret"],
               f"{ns}/hvupdater-serving-cert", f"-n {ns}: CA injected from {ns}'s Secret")
        c.r.eq(ec["spec"]["namespaceSelector"]["matchExpressions"][0]["values"], [ns, "default"],
               f"-n {ns}: extension.namespaces stay strings")
        cert = [o for o in by_kind(objs, "Certificate")
                if o["metadata"]["name"] == "hvupdater-serving-cert"][0]
        c.r.eq(cert["spec"]["dnsNames"], [f"hvupdater.{ns}.svc", f"hvupdater.{ns}.svc.cluster.local"],
               f"-n {ns}: the serving certificate names hvupdater.{ns}.svc")
        subjects = [s for o in by_kind(objs, "ClusterRoleBinding") for s in o["subjects"]]
        c.r.check(subjects and all(s["namespace"] == ns for s in subjects),
                  f"-n {ns}: the ClusterRoleBindings bind the account in {ns!r}", subjects)
        np = by_kind(objs, "NetworkPolicy")[0]
        got = [e["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
               for e in np["spec"]["ingress"]]
        c.r.eq(got, [[ns], [ns]], f"-n {ns}: capiNamespaces and metrics.namespaces stay strings")
        sm = by_kind(objs, "ServiceMonitor")[0]
        c.r.eq(sm["spec"]["namespaceSelector"]["matchNames"], [ns],
               f"-n {ns}: the ServiceMonitor looks in {ns!r}")
    p, objs = c.helm_release({"namespace": {"create": True}}, namespace="2024")
    nss = by_kind(objs, "Namespace")
    c.r.check(p.returncode == 0 and [o["metadata"]["name"] for o in nss] == ["2024"] and
              nss[0]["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") ==
              "restricted", "namespace.create: one Namespace, the release's, enforcing restricted",
              p.stderr[-300:] or nss)


RECOMMENDED = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
               "app.kubernetes.io/component", "app.kubernetes.io/part-of",
               "app.kubernetes.io/managed-by", "helm.sh/chart")


def labels(c):
    p, objs = c.helm_release(dict(ALL_ON, namespace={"create": True}), release="my-rel")
    if not c.r.check(p.returncode == 0, "helm template with every option", p.stderr[-300:]):
        return
    version = hv.source_version(c.source)
    want = {"app.kubernetes.io/name": "hvupdater", "app.kubernetes.io/instance": "my-rel",
            "app.kubernetes.io/version": version, "app.kubernetes.io/part-of": "cluster-api",
            "app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": f"hvupdater-{version}"}
    for o in objs:
        got = o["metadata"].get("labels", {})
        c.r.check(all(k in got for k in RECOMMENDED) and
                  all(got[k] == v for k, v in want.items()),
                  f"{o['kind']} {o['metadata']['name']}: the recommended labels",
                  {k: got.get(k) for k in RECOMMENDED})
    sel = {"app.kubernetes.io/name": "hvupdater", "app.kubernetes.io/instance": "my-rel"}
    dep = by_kind(objs, "Deployment")[0]
    c.r.eq(dep["spec"]["selector"]["matchLabels"], sel, "the Deployment selects name + instance")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    c.r.check(all(pod_labels.get(k) == v for k, v in sel.items()) and
              all(k in pod_labels for k in RECOMMENDED), "the pods carry every recommended label")
    c.r.eq(by_kind(objs, "Service")[0]["spec"]["selector"], sel, "the Service selects name + instance")
    c.r.eq(by_kind(objs, "PodDisruptionBudget")[0]["spec"]["selector"]["matchLabels"], sel,
           "the PodDisruptionBudget selects name + instance")
    c.r.eq(by_kind(objs, "NetworkPolicy")[0]["spec"]["podSelector"]["matchLabels"], sel,
           "the NetworkPolicy selects name + instance")
    c.r.eq(by_kind(objs, "ServiceMonitor")[0]["spec"]["selector"]["matchLabels"], sel,
           "the ServiceMonitor selects name + instance")
    terms = pod_spec(objs)["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    c.r.check(all(t["podAffinityTerm"]["labelSelector"]["matchLabels"] == sel for t in terms),
              "the anti-affinity selects name + instance")
    rendered = c.helm_template({})
    c.r.check(all("helm.sh/chart" not in o["metadata"].get("labels", {}) and
                  "app.kubernetes.io/managed-by" not in o["metadata"].get("labels", {})
                  for o in rendered),
              "the kustomize/clusterctl rendering carries no Helm-only label")


def pdb(c):
    for n, want in ((0, None), (1, None), (2, {"maxUnavailable": 1}), (3, {"maxUnavailable": 1})):
        p, objs = c.helm_release({"replicas": n})
        got = [{k: v for k, v in o["spec"].items() if k != "selector"}
               for o in by_kind(objs, "PodDisruptionBudget")]
        c.r.eq(got, [want] if want else [],
               f"replicas {n}: {'a PodDisruptionBudget of maxUnavailable 1' if want else 'no PodDisruptionBudget'}")


def pod_values(c):
    p, objs = c.helm_release({})
    pod = pod_spec(objs)
    args = pod["containers"][0]["args"]
    c.r.check("imagePullSecrets" not in pod and "nodeSelector" not in pod,
              "defaults: no imagePullSecrets, no nodeSelector")
    c.r.eq([t["key"] for t in pod["tolerations"]],
           ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"],
           "defaults: control-plane tolerations")
    c.r.check("--can-update-failure-policy" not in args,
              "canUpdateFailurePolicy Fail (default): the server's default, no flag")
    c.r.check(args[args.index("--log-format") + 1] == "hvupdater" and
              args[args.index("--log-level") + 1] == "info",
              "defaults: --log-format hvupdater --log-level info", args)
    vals = {"imagePullSecrets": [{"name": "regcred"}], "nodeSelector": {"role": "mgmt"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "capi",
                             "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "podLabels": {"team": "platform"}, "podAnnotations": {"example.com/a": "1"},
            "extraArgs": ["--handler-timeout-hint", "x y"], "logFormat": "capi",
            "logLevel": "debug", "extension": {"canUpdateFailurePolicy": "Ignore"}}
    p, objs = c.helm_release(vals)
    if not c.r.check(p.returncode == 0, "helm template with the pod values", p.stderr[-300:]):
        return
    pod = pod_spec(objs)
    meta = by_kind(objs, "Deployment")[0]["spec"]["template"]["metadata"]
    args = pod["containers"][0]["args"]
    c.r.eq(pod.get("imagePullSecrets"), vals["imagePullSecrets"], "imagePullSecrets")
    c.r.eq(pod.get("nodeSelector"), vals["nodeSelector"], "nodeSelector")
    c.r.eq(pod.get("tolerations"), vals["tolerations"], "tolerations replace the defaults")
    c.r.eq(pod.get("affinity"), vals["affinity"], "affinity replaces the default spread")
    c.r.eq(meta["labels"].get("team"), "platform", "podLabels on the pods")
    c.r.eq(meta["annotations"].get("example.com/a"), "1", "podAnnotations on the pods")
    c.r.eq(args[-2:], ["--handler-timeout-hint", "x y"], "extraArgs end the command line")
    c.r.check(args[args.index("--log-format") + 1] == "capi" and
              args[args.index("--log-level") + 1] == "debug", "logFormat, logLevel", args)
    c.r.eq(args[args.index("--can-update-failure-policy") + 1] if
           "--can-update-failure-policy" in args else None, "Ignore",
           "canUpdateFailurePolicy Ignore: --can-update-failure-policy Ignore")
    # An issuer of your own: no Issuer of the chart's.
    p, objs = c.helm_release({"certManager": {"issuerRef": {"kind": "ClusterIssuer",
                                                            "name": "corp-ca"}}})
    cert = by_kind(objs, "Certificate")
    c.r.check(p.returncode == 0 and not by_kind(objs, "Issuer") and len(cert) == 1 and
              cert[0]["spec"]["issuerRef"] == {"group": "cert-manager.io",
                                               "kind": "ClusterIssuer", "name": "corp-ca"},
              "certManager.issuerRef: the Certificate uses it, no Issuer is made",
              p.stderr[-300:] or (cert and cert[0]["spec"]["issuerRef"]))
    p, objs = c.helm_release({})
    c.r.check(len(by_kind(objs, "Issuer")) == 1 and not by_kind(objs, "ServiceMonitor"),
              "defaults: the selfSigned Issuer, no ServiceMonitor")
    p, objs = c.helm_release({"metrics": {"serviceMonitor": {
        "enabled": True, "interval": "15s", "labels": {"release": "prom"}}}})
    sm = by_kind(objs, "ServiceMonitor")
    c.r.check(p.returncode == 0 and len(sm) == 1 and sm[0]["apiVersion"] ==
              "monitoring.coreos.com/v1" and sm[0]["metadata"]["labels"].get("release") == "prom"
              and sm[0]["spec"]["endpoints"] == [{"port": "metrics", "scheme": "http",
                                                  "path": "/metrics", "interval": "15s"}],
              "metrics.serviceMonitor: a ServiceMonitor on the metrics port", p.stderr[-300:] or sm)
    p, _ = c.helm_release({"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}})
    c.r.check(p.returncode != 0 and "needs metrics.enabled" in p.stderr,
              "a ServiceMonitor without the metrics listener: refused", p.stderr[-300:])


def schema(c):
    p = c.run([sys.executable, os.path.join(c.source, "scripts", "gen-values-schema.py"),
               "--check"])
    c.r.check(p.returncode == 0 and p.stdout.startswith("ok"),
              "the committed values.schema.json is what scripts/gen-values-schema.py "
              "generates from schemas/", (p.stdout + p.stderr)[-2000:])
    # refused, naming what is wrong: (--set/--set-string args, what the error must name)
    bad = [(["--set", "extension.settings.powerCycel=Never"], "powerCycel"),
           (["--set", "extension.settings.powerCycle=Sometimes"], "powerCycle"),
           (["--set-string", "extension.settings.liveTimeoutSeconds=0"], "liveTimeoutSeconds"),
           (["--set-string", "extension.settings.deadlineSeconds=604801"], "deadlineSeconds"),
           (["--set-string", "extension.settings.shutdownTimeoutSeconds=060"],
            "shutdownTimeoutSeconds"),
           (["--set", "extension.settings.liveTimeoutSeconds=60"], "liveTimeoutSeconds"),
           (["--set", "replica=3"], "replica"),
           (["--set", "logFormat=json"], "logFormat"),
           (["--set", "logLevel=trace"], "logLevel"),
           (["--set", "extension.canUpdateFailurePolicy=ignore"], "canUpdateFailurePolicy"),
           (["--set", "config.engine.worker=2"], "worker"),
           (["--set", "config.engine.workers=0"], "workers"),
           (["--set", "certManager.issuerRef.kind=Issuer"], "issuerRef"),
           (["--set", "metrics.serviceMonitor.enable=true"], "enable"),
           (["--set", "tolerations[0].efect=NoSchedule"], "efect"),
           (["--set", "kubevirt.enable=true"], "enable"),
           (["--set", "kubevirt.namespaces[0]=Team_A"], "namespaces"),
           (["--set", "config.kubevirt.timeoutSeconds=5"], "kubevirt")]
    for args, name in bad:
        for cmd in (["template", "rel", c.chart, *args], ["lint", c.chart, *args]):
            p = c.run([c.helm, *cmd])
            c.r.check(p.returncode != 0 and name in (p.stdout + p.stderr),
                      f"helm {cmd[0]} {' '.join(args)}: refused, naming {name}",
                      (p.stdout + p.stderr)[-400:])
    good = [["--set", "extension.settings.powerCycle=Never"],
            ["--set-string", "extension.settings.deadlineSeconds=604800"],
            ["--set-string", "extension.settings.liveTimeoutSeconds=1"],
            ["--set", "extension.settings=null"],
            ["--set", "kubevirt.enabled=true", "--set", "kubevirt.namespaces={capk,team-b}"]]
    for args in good:
        p = c.run([c.helm, "template", "rel", c.chart, *args])
        c.r.check(p.returncode == 0, f"helm template {' '.join(args)}: accepted", p.stderr[-300:])
    p, objs = c.helm_release({"extension": {"settings": {"powerCycle": "Never"}}})
    got = by_kind(objs, "ExtensionConfig")[0]["spec"].get("settings", {})
    c.r.check(got.get("powerCycle") == "Never" and got.get("deadlineSeconds") == "1800",
              "extension.settings.powerCycle reaches the ExtensionConfig (the other defaults "
              "stay: Helm merges values)", got)
    p, objs = c.helm_release({"extension": {"settings": {
        k: None for k in ("powerCycle", "onUncoverable", "powerOffMode", "guestVerification",
                          "liveTimeoutSeconds", "shutdownTimeoutSeconds", "deadlineSeconds")}}})
    c.r.check(p.returncode == 0 and "settings" not in by_kind(objs, "ExtensionConfig")[0]["spec"],
              "every setting set to null: no settings (the config file's defaults)",
              p.stderr[-300:])


def kubevirt(c):
    """kubevirt: off by default (no kubevirt section, no grant in KubeVirt's groups). On:
    config.json's in-cluster kubevirt section (valid under schemas/config.json), the token,
    and exactly docs/kubevirt.md's RBAC table (parsed from the doc) bound to hvupdater's
    account. Without namespaces: one ClusterRole with the table. With namespaces: the rows on
    the VM resources only through a Role and RoleBinding in each namespace, cluster-wide only
    kubevirts (the backend lists the KubeVirt CR across namespaces: GET
    /apis/kubevirt.io/v1/kubevirts), and the config's record search bounded to them."""
    try:
        table = hv.kubevirt_rbac_table(c.source)
    except (OSError, ValueError) as e:
        c.r.check(False, "docs/kubevirt.md's RBAC table parses", e)
        return
    c.r.check(len(table) >= 4, f"docs/kubevirt.md's RBAC table: {len(table)} grants", table)
    groups = {g for g, _, _ in table}
    # what must be cluster-wide even with namespaces: the CR, listed across namespaces
    cluster_wide = {t for t in table if t[1] == "kubevirts"}
    validate = os.path.join(c.source, "test", "schema", "validate.py")
    sa = [{"kind": "ServiceAccount", "name": "hvupdater", "namespace": NS}]

    def config(objs):
        cm = [o for o in objs if o["kind"] == "ConfigMap"][0]
        return json.loads(cm["data"]["config.json"])

    def valid(cfg, what):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(cfg, f)
        try:
            p = c.run([sys.executable, validate, "config", f.name])
        finally:
            os.unlink(f.name)
        c.r.check(p.returncode == 0, f"{what}: config.json validates against "
                  "schemas/config.json", (p.stdout + p.stderr)[-600:])

    def kv_grants(o):
        return {t for t in hv.rbac_grants(o.get("rules", [])) if t[0] in groups}

    def token(objs):
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        return dep["spec"]["template"]["spec"].get("automountServiceAccountToken")

    dflt = c.helm_template({})
    c.r.check("kubevirt" not in config(dflt), "kubevirt off (default): no kubevirt section")
    c.r.check(not [o for o in dflt if o["kind"] in ("ClusterRole", "Role") and kv_grants(o)],
              "kubevirt off: no grant in " + ", ".join(sorted(groups)))

    # every namespace: one ClusterRole with the table (the API off otherwise: kubevirt alone
    # mounts the token)
    api_off = {"machineCheck": {"enabled": False}, "dryRunClaims": {"enabled": False}}
    on = c.helm_template({"kubevirt": {"enabled": True}, **api_off})
    cfg = config(on)
    c.r.eq(cfg.get("kubevirt"), {}, "kubevirt on: config.json kubevirt {} (in-cluster, "
           "every namespace)")
    valid(cfg, "kubevirt on")
    c.r.eq(token(on), True, "kubevirt on (machine check, dry runs off): the token is mounted")
    roles = [o for o in on if o["kind"] in ("ClusterRole", "Role")]
    c.r.eq([(o["kind"], o["metadata"]["name"]) for o in roles],
           [("ClusterRole", "hvupdater-kubevirt")], "kubevirt on: one ClusterRole, no Role")
    if roles:
        c.r.eq(hv.rbac_grants(roles[0]["rules"]), table,
               "kubevirt on: the ClusterRole grants exactly docs/kubevirt.md's RBAC table")
    binds = [o for o in on if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    c.r.check(len(binds) == 1 and binds[0]["kind"] == "ClusterRoleBinding" and
              binds[0]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": "ClusterRole", "name": "hvupdater-kubevirt"} and
              binds[0]["subjects"] == sa,
              "kubevirt on: the ClusterRole bound to hvupdater's service account only", binds)

    # namespaces (a repeat is one): Roles there, cluster-wide only the CR
    nss = ["capk", "team-b"]
    on = c.helm_template({"kubevirt": {"enabled": True, "namespaces": nss + ["capk"]}})
    cfg = config(on)
    c.r.eq(cfg.get("kubevirt"), {"clusters": [{"namespaces": nss}]},
           "kubevirt namespaces: config.json's one in-cluster cluster bounded to them")
    valid(cfg, "kubevirt namespaces")
    wide = set()
    for o in on:
        if o["kind"] == "ClusterRole":
            wide |= kv_grants(o)
    c.r.eq(wide, cluster_wide, "kubevirt namespaces: cluster-wide only "
           + ", ".join(sorted(f"{r} {v}" for _, r, v in cluster_wide)))
    c.r.check(not [t for t in wide if t[1].startswith(("virtualmachines",
                                                       "virtualmachineinstances"))],
              "kubevirt namespaces: no cluster-wide grant on virtualmachines (or their "
              "instances, or restart)", sorted(wide))
    roles = [o for o in on if o["kind"] == "Role"]
    c.r.eq(sorted(o["metadata"]["namespace"] for o in roles), nss,
           f"kubevirt namespaces: one Role in each of {nss}, nowhere else")
    for o in roles:
        c.r.eq(kv_grants(o) | wide, table, f"kubevirt namespaces: Role in "
               f"{o['metadata']['namespace']} + the cluster-wide grant = the RBAC table")
        c.r.eq(hv.rbac_grants(o["rules"]), table - cluster_wide,
               f"kubevirt namespaces: Role in {o['metadata']['namespace']} grants only the "
               "VM rows")
    rb = [o for o in on if o["kind"] == "RoleBinding"]
    c.r.check(sorted(o["metadata"]["namespace"] for o in rb) == nss and
              all(o["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                   "name": "hvupdater-kubevirt"} and o["subjects"] == sa
                  for o in rb),
              "kubevirt namespaces: each Role bound to hvupdater's service account only", rb)
    crb = [o for o in on if o["kind"] == "ClusterRoleBinding"
           and o["roleRef"]["name"] == "hvupdater-kubevirt"]
    c.r.check(len(crb) == 1 and crb[0]["subjects"] == sa,
              "kubevirt namespaces: the kubevirts ClusterRole bound to hvupdater only", crb)
    # a release in its own namespace: the bindings name that namespace's account
    p, objs = c.helm_release({"kubevirt": {"enabled": True, "namespaces": ["capk"]}})
    subj = [s for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
            and o["roleRef"]["name"] == "hvupdater-kubevirt" for s in o["subjects"]]
    c.r.check(p.returncode == 0 and len(subj) == 2 and
              all(s["namespace"] == "team-x" for s in subj),
              "kubevirt namespaces, helm -n team-x: bound to team-x's hvupdater account",
              p.stderr[-300:] or subj)

    # followInfraClusterSecretRef: config.json's flag, get on CAPK's lookup objects
    # cluster-wide, Secrets only through a Role in each secretNamespaces
    on = c.helm_template({"kubevirt": {"enabled": True, "followInfraClusterSecretRef": True,
                                       "secretNamespaces": ["capi", "infra-secrets", "capi"]}})
    cfg = config(on)
    c.r.eq(cfg.get("kubevirt"), {"followInfraClusterSecretRef": True},
           "kubevirt followInfraClusterSecretRef: config.json's kubevirt section")
    valid(cfg, "kubevirt followInfraClusterSecretRef")
    infra = [o for o in on if o["metadata"].get("name", "").startswith("hvupdater-kubevirt-infra")]
    wide = set()
    for o in infra:
        if o["kind"] == "ClusterRole":
            wide |= hv.rbac_grants(o["rules"])
    c.r.eq(wide, {("cluster.x-k8s.io", "clusters", "get"),
                  ("infrastructure.cluster.x-k8s.io", "kubevirtmachines", "get"),
                  ("infrastructure.cluster.x-k8s.io", "kubevirtclusters", "get")},
           "kubevirt followInfraClusterSecretRef: cluster-wide only get on clusters, "
           "kubevirtmachines, kubevirtclusters (no Secrets)")
    roles = [o for o in infra if o["kind"] == "Role"]
    c.r.eq(sorted((o["metadata"]["namespace"], tuple(sorted(hv.rbac_grants(o["rules"]))))
                  for o in roles),
           [(ns, (("", "secrets", "get"),)) for ns in ("capi", "infra-secrets")],
           "kubevirt followInfraClusterSecretRef: get on secrets only in secretNamespaces")
    c.r.check(len([o for o in infra if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                   and o["subjects"] == sa]) == 3,
              "kubevirt followInfraClusterSecretRef: each grant bound to hvupdater only")
    c.r.check(not [o for o in c.helm_template({"kubevirt": {"enabled": True}})
                   if o["metadata"].get("name", "").startswith("hvupdater-kubevirt-infra")],
              "kubevirt without followInfraClusterSecretRef: no grant on CAPK's objects")
    p, _ = c.helm_release({"kubevirt": {"followInfraClusterSecretRef": True}})
    c.r.check(p.returncode != 0 and
              "kubevirt.followInfraClusterSecretRef needs kubevirt.enabled" in p.stderr,
              "followInfraClusterSecretRef without kubevirt.enabled: helm refuses",
              p.stderr[-300:])


def notes(c):
    """NOTES.txt as `helm install` prints it (rendered here through a copy of the chart
    that puts it into a ConfigMap: helm template skips NOTES.txt, and helm install
    --dry-run needs a cluster)."""
    with tempfile.TemporaryDirectory(prefix="hv-notes-") as tmp:
        chart = os.path.join(tmp, "hvupdater")
        shutil.copytree(c.chart, chart)
        shutil.copy(os.path.join(chart, "templates", "NOTES.txt"), os.path.join(chart, "notes.txt"))
        with open(os.path.join(chart, "templates", "zz-notes.yaml"), "w") as f:
            f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n"
                    "  notes: |\n{{ tpl (.Files.Get \"notes.txt\") . | indent 4 }}\n")
        p = c.run([c.helm, "template", "my-rel", chart, "-n", "team-x",
                   "--show-only", "templates/zz-notes.yaml"])
    text = docs(p.stdout)[0]["data"]["notes"] if p.returncode == 0 else ""
    c.r.check(p.returncode == 0 and text, "NOTES.txt renders", p.stderr[-300:])
    c.r.check("kubectl get extensionconfig hvupdater -o jsonpath='{range .status.handlers[*]}"
              in text, "NOTES: how to check discovery (the ExtensionConfig's status.handlers)")
    c.r.check("kubectl -n team-x logs -l app.kubernetes.io/name=hvupdater,"
              "app.kubernetes.io/instance=my-rel --prefix" in text,
              "NOTES: the logs of every replica (-l ... --prefix)")
    c.r.check("helm uninstall` leaves it" in text,
              "NOTES: a namespace not the chart's stays on uninstall")


def documented(c):
    """Every value is in deploy/README.md's values table; the chart's files name only
    scripts and tests that exist."""
    with open(os.path.join(c.chart, "values.yaml"), encoding="utf-8") as f:
        text = f.read()
    values = yaml.safe_load(text)
    with open(os.path.join(c.source, "deploy", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    i = readme.find("### Helm values")
    table = readme[i:readme.find("\n## ", i)] if i >= 0 else ""
    c.r.check(table, "deploy/README.md has a Helm values section")
    paths = list(values)
    for k in ("namespace", "extension", "metrics", "certManager"):
        paths += [f"{k}.{sub}" for sub in values[k] if sub not in ("settings", "namespaces")]
    for path in paths:
        leaf = path.split(".")[-1]
        c.r.check(re.search(r"`(%s|\S*\.%s)[`,. ]" % (re.escape(path), re.escape(leaf)), table),
                  f"deploy/README.md documents the value {path}")
    with open(os.path.join(c.source, "test", "deploy", "CMakeLists.txt"), encoding="utf-8") as f:
        tests = set(re.findall(r"add_test\(NAME (\S+)", f.read()))
    for root, _, names in os.walk(c.chart):
        for n in names:
            with open(os.path.join(root, n), encoding="utf-8") as f:
                body = f.read()
            rel = os.path.relpath(os.path.join(root, n), c.source)
            for script in re.findall(r"\bscripts/[\w.-]+", body):
                c.r.check(os.path.exists(os.path.join(c.source, script)),
                          f"{rel} names {script}, which exists")
            for t in re.findall(r"\b(deploy\.[a-z_]+) test\b|\btest (deploy\.[a-z_]+)", body):
                t = t[0] or t[1]
                c.r.check(t in tests, f"{rel} names test {t}, which exists")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--tools", required=True)
    a = ap.parse_args()
    c = Checker(a.tools, a.source)
    for name in ("helm", "kustomize"):
        if not os.access(os.path.join(a.tools, name), os.X_OK):
            print(f"FAIL {a.tools}/{name} missing: run test/helm/build.sh")
            return 1
    for fn, args in ((lint, (c,)), (drift, (c, a.tools)), (kustomize_vs_helm, (c,)),
                     (clusterctl, (c,)), (client_ca, (c,)), (api_components, (c,)),
                     (kubevirt, (c,)),
                     (metrics_off, (c,)),
                     (release_namespace, (c,)), (labels, (c,)), (pdb, (c,)),
                     (pod_values, (c,)), (schema, (c,)), (notes, (c,)),
                     (documented, (c,))):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - one broken part must not hide the rest
            c.r.check(False, f"{fn.__name__} ran to the end", f"{type(e).__name__}: {e}")
    return c.r.finish()


if __name__ == "__main__":
    sys.exit(main())
