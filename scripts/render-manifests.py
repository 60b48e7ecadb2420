#!/usr/bin/env python3
"""render-manifests.py: render deploy/kubernetes (kustomize) and deploy/clusterctl (the
clusterctl provider components) from the Helm chart deploy/helm/hvupdater, their single
source. Edit the chart, then run this and commit its output; test deploy.chart fails when
the committed files differ from what the chart renders.

  scripts/render-manifests.py [--check] [--tools DIR] [--version V] [--out DIR]

  --check    render into a scratch directory and compare with the committed files
             (prints "FAIL <file> ..." for each difference, exits 1)
  --tools    directory with helm (test/helm/build.sh builds and prints it; the default
             runs that script)
  --version  release version: the clusterctl components' default image tag and the
             chart's version (default: the chart's appVersion); used by scripts/release.sh
  --out      where to write (default: the source tree); files go to OUT/deploy/...

The kustomize tree keeps its kustomization.yaml files (hand-written: they only list the
files and hold the components' patches); every object file, base/config.json and a
component's own config.json (components/kubevirt: the base's with the kubevirt section) is
rendered. The clusterctl components take clusterctl variables (CLUSTERCTL_VARIABLES).
Both are rendered into namespace hvupdater-system with the chart's Namespace object
(namespace.create) and without the labels that say Helm manages them (HELM_ONLY_LABELS).
"""

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHART = os.path.join("deploy", "helm", "hvupdater")
PROVIDER_LABEL = "runtime-extension-hvupdater"
NAMESPACE = "hvupdater-system"
RELEASE = "hvupdater"
# Labels only true of a Helm release: dropped from the kustomize and clusterctl renderings.
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")

# template -> file in deploy/kubernetes (from the default values, or with the option on)
KUSTOMIZE_FILES = {
    "namespace.yaml": "base/namespace.yaml",
    "serviceaccount.yaml": "base/serviceaccount.yaml",
    "dryrun-rbac.yaml": "base/dryrun-rbac.yaml",
    "certificate.yaml": "base/certificate.yaml",
    "deployment.yaml": "base/deployment.yaml",
    "service.yaml": "base/service.yaml",
    "poddisruptionbudget.yaml": "base/poddisruptionbudget.yaml",
    "networkpolicy.yaml": "base/networkpolicy.yaml",
    "machinecheck-rbac.yaml": "base/machinecheck-rbac.yaml",
    "extensionconfig.yaml": "extension/extensionconfig.yaml",
}
KUSTOMIZE_COMPONENT_FILES = {
    "client-certs.yaml": ("components/client-certs/certificates.yaml",
                          {"clientCerts": {"enabled": True}}),
    "priorityclass.yaml": ("components/priority-class/priorityclass.yaml",
                           {"priorityClass": {"enabled": True}}),
    "events-rbac.yaml": ("components/events/rbac.yaml", {"events": {"enabled": True}}),
    "capv-identity-rbac.yaml": ("components/capv-identity/rbac.yaml",
                                {"capvIdentity": {"enabled": True}}),
    "mhc-rbac.yaml": ("components/mhc/rbac.yaml", {"mhc": {"holdRemediation": True}}),
    "kubevirt-rbac.yaml": ("components/kubevirt/rbac.yaml", {"kubevirt": {"enabled": True}}),
}
# components whose config.json replaces base/config.json (their configMapGenerator merges it):
# the chart's config with the component's values
KUSTOMIZE_COMPONENT_CONFIGS = {
    "components/kubevirt/config.json": {"kubevirt": {"enabled": True}},
}

# clusterctl variables: (variable, default or None for required, values path)
CLUSTERCTL_VARIABLES = [
    ("HVUPDATER_IMAGE", None, ("image", "ref")),
    ("HVUPDATER_REPLICAS", "2", ("replicas",)),
    ("HVUPDATER_POWER_CYCLE", "IfNeeded", ("extension", "settings", "powerCycle")),
    ("HVUPDATER_ON_UNCOVERABLE", "Fallback", ("extension", "settings", "onUncoverable")),
    ("HVUPDATER_POWER_OFF_MODE", "TrySoft", ("extension", "settings", "powerOffMode")),
    ("HVUPDATER_GUEST_VERIFICATION", "IfAvailable",
     ("extension", "settings", "guestVerification")),
    ("HVUPDATER_LIVE_TIMEOUT_SECONDS", "120", ("extension", "settings", "liveTimeoutSeconds")),
    ("HVUPDATER_SHUTDOWN_TIMEOUT_SECONDS", "300",
     ("extension", "settings", "shutdownTimeoutSeconds")),
    ("HVUPDATER_DEADLINE_SECONDS", "1800", ("extension", "settings", "deadlineSeconds")),
]
# (the log format and level are CLUSTERCTL_ARGS below: the chart's --log-format and
# --log-level values are replaced by their variables)
# HVUPDATER_NAMESPACES is a comma-separated list: it fills a flow sequence, which YAML
# cannot hold before substitution (helm parses what it renders), so the chart renders a
# placeholder that is replaced afterwards.
NAMESPACES_VARIABLE = ("HVUPDATER_NAMESPACES", "default")
NAMESPACES_PLACEHOLDER = "hvupdater-namespaces-placeholder"
# Server flags set from clusterctl variables: (flag, variable, default). The chart may pass a
# flag itself (then its value is replaced by the variable) or not (then it is appended).
CLUSTERCTL_ARGS = [
    ("--can-update-failure-policy", "HVUPDATER_CAN_UPDATE_FAILURE_POLICY", "Fail"),
    ("--log-format", "HVUPDATER_LOG_FORMAT", "hvupdater"),
    ("--log-level", "HVUPDATER_LOG_LEVEL", "info"),
]
# clusterctl --target-namespace moves every namespaced object, but variables are substituted
# before and it never touches the ExtensionConfig (cluster-scoped): its service namespace and
# CA annotation would keep pointing at the old namespace. So the namespace is a variable
# (the Namespace object's name is clusterctl's default target namespace), and the server is
# started with --require-namespace VALUE and POD_NAMESPACE from the downward API: a
# --target-namespace without the same HVUPDATER_TARGET_NAMESPACE makes the pod refuse to
# start, naming both (docs/quickstart.md#clusterctl).
TARGET_NAMESPACE_VARIABLE = ("HVUPDATER_TARGET_NAMESPACE", "hvupdater-system")

GENERATED = ("# Generated from the Helm chart deploy/helm/hvupdater by "
             "scripts/render-manifests.py:\n# edit the chart and re-run it, not this file.\n")


def template_argv(helm, chart, vfile, skip_schema=False):
    """`helm template` as the renderings run it: release hvupdater in hvupdater-system,
    with the Namespace object. skip_schema: values holding clusterctl variables, which
    values.schema.json (rightly) refuses."""
    cmd = [helm, "template", RELEASE, chart, "--namespace", NAMESPACE,
           "--set", "namespace.create=true", "-f", vfile]
    return cmd + (["--skip-schema-validation"] if skip_schema else [])


def strip_helm_labels(text):
    """text without the HELM_ONLY_LABELS lines (helm template's YAML: one label a line)."""
    pat = r"^ *(%s): .*\n" % "|".join(re.escape(k) for k in HELM_ONLY_LABELS)
    return re.sub(pat, "", text, flags=re.M)


def run_helm(helm, values, version=None, chart=None, skip_schema=False):
    """`helm template` of the chart with extra values; returns {template: text}."""
    chart = chart or os.path.join(SRC, CHART)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(values, f)
        vfile = f.name
    try:
        cmd = template_argv(helm, chart, vfile, skip_schema)
        if version:
            cmd += ["--set", f"image.tag={version}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(vfile)
    if p.returncode != 0:
        sys.exit(f"FAIL helm template: {p.stderr.strip()}")
    return split_sources(strip_helm_labels(p.stdout))


def split_sources(text):
    """helm template's output, split by its '# Source: CHART/templates/NAME' lines."""
    out, cur = {}, None
    for chunk in re.split(r"^---\n", text, flags=re.M):
        m = re.match(r"# Source: [^/]+/templates/(\S+)\n", chunk)
        if m:
            cur = m.group(1)
            body = chunk[m.end():]
            out[cur] = out[cur] + "---\n" + body if cur in out else body
        elif chunk.strip() and cur:
            out[cur] += "---\n" + chunk
    return {k: tidy(v) for k, v in out.items()}


def tidy(text):
    lines = [ln.rstrip() for ln in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines) + "\n"


def set_path(d, path, value):
    for k in path[:-1]:
        d = d.setdefault(k, {})
    d[path[-1]] = value


def clusterctl_values():
    v = {"commonLabels": {"cluster.x-k8s.io/provider": PROVIDER_LABEL}}
    for name, default, path in CLUSTERCTL_VARIABLES:
        set_path(v, path, "${%s}" % name if default is None else "${%s:=%s}" % (name, default))
    set_path(v, ("extension", "namespaces"), [NAMESPACES_PLACEHOLDER])
    return v


def clusterctl_text(text):
    n = text.count('["%s"]' % NAMESPACES_PLACEHOLDER)
    if n != text.count(NAMESPACES_PLACEHOLDER):
        sys.exit("FAIL the namespaces placeholder is not alone in a flow sequence")
    return text.replace('["%s"]' % NAMESPACES_PLACEHOLDER, "[${%s:=%s}]" % NAMESPACES_VARIABLE)


def var(name, default):
    return "${%s:=%s}" % (name, default)


def clusterctl_deployment(text):
    """The clusterctl Deployment: CLUSTERCTL_ARGS from variables, --require-namespace and
    POD_NAMESPACE (TARGET_NAMESPACE_VARIABLE)."""
    lines = text.split("\n")
    ai = lines.index("          args:")
    item = "            - "
    end = ai + 1
    while end < len(lines) and lines[end].startswith("            "):
        end += 1
    last = max(i for i in range(ai + 1, end) if lines[i].startswith(item))
    add = ["            # clusterctl variables (scripts/render-manifests.py)"]
    # --require-namespace: the chart's namespace, which render_all then makes the variable
    flags = CLUSTERCTL_ARGS + [("--require-namespace", None, TARGET_NAMESPACE_VARIABLE[1])]
    for flag, name, default in flags:
        at = [i for i in range(ai + 1, end) if lines[i] == item + flag]
        if len(at) > 1:
            sys.exit(f"FAIL the chart passes {flag} twice")
        if at:
            lines[at[0] + 1] = item + (var(name, default) if name else default)
        else:
            add += [item + flag, item + (var(name, default) if name else default)]
    lines[last + 1:last + 1] = add
    ei = lines.index("          env:")
    lines[ei + 1:ei + 1] = [
        "            - name: POD_NAMESPACE  # checked against --require-namespace",
        "              valueFrom:",
        "                fieldRef:",
        "                  fieldPath: metadata.namespace"]
    return "\n".join(lines)


def render_all(helm, version=None):
    """{relative path: content} of every rendered file."""
    files = {}
    base = run_helm(helm, {}, version)
    for tpl, rel in KUSTOMIZE_FILES.items():
        text = base[tpl]
        if tpl == "deployment.yaml":  # the configMapGenerator adds its own hash
            text = re.sub(r"\bhvupdater-config-[0-9a-f]{10}\b", "hvupdater-config", text)
        files["deploy/kubernetes/" + rel] = GENERATED + text
    files["deploy/kubernetes/base/config.json"] = config_json(base)
    for tpl, (rel, vals) in KUSTOMIZE_COMPONENT_FILES.items():
        files["deploy/kubernetes/" + rel] = GENERATED + run_helm(helm, vals, version)[tpl]
    for rel, vals in KUSTOMIZE_COMPONENT_CONFIGS.items():
        files["deploy/kubernetes/" + rel] = config_json(run_helm(helm, vals, version))

    sm = run_helm(helm, {"metrics": {"serviceMonitor": {"enabled": True}}}, version)
    files["deploy/kubernetes/examples/servicemonitor.yaml"] = (
        GENERATED + "# An example: not part of the kustomization.\n" + sm["servicemonitor.yaml"])

    cc = run_helm(helm, clusterctl_values(), version, skip_schema=True)
    order = ["namespace.yaml", "serviceaccount.yaml", "dryrun-rbac.yaml", "certificate.yaml", "configmap.yaml",
             "deployment.yaml", "service.yaml", "poddisruptionbudget.yaml",
             "networkpolicy.yaml", "machinecheck-rbac.yaml", "extensionconfig.yaml"]
    missing = set(cc) - set(order) - {"mhc-rbac.yaml"}
    if missing:
        sys.exit(f"FAIL templates not placed in the clusterctl components: {sorted(missing)}")
    head = ("# hvupdater as a clusterctl provider: clusterctl init --runtime-extension hvupdater\n"
            + "".join("#   %s\n" % ("${%s}  (required)" % n if d is None else "${%s:=%s}" % (n, d))
                      for n, d, _ in CLUSTERCTL_VARIABLES)
            + "#   ${%s:=%s}  (comma-separated namespaces)\n" % NAMESPACES_VARIABLE
            + "".join("#   %s  (serve %s)\n" % (var(n, d), f) for f, n, d in CLUSTERCTL_ARGS)
            + "#   %s  (the namespace; clusterctl\n"
            "#     --target-namespace needs the same value here, else the pod refuses to\n"
            "#     start: docs/quickstart.md#clusterctl)\n"
            % var(*TARGET_NAMESPACE_VARIABLE)
            + "# The client-certificate component is separate (client-certs.yaml): it makes\n"
            + "# objects in other namespaces, which clusterctl does not allow in one provider.\n")
    cc["deployment.yaml"] = clusterctl_deployment(cc["deployment.yaml"])
    body = clusterctl_text("---\n".join(cc[t] for t in order))
    # hvupdater-system is the chart's namespace (values namespace); as a variable here
    body = re.sub(r"\bhvupdater-system\b", var(*TARGET_NAMESPACE_VARIABLE), body)
    files["deploy/clusterctl/runtime-extension-components.yaml"] = GENERATED + head + body
    # the optional components applied with kubectl after clusterctl init (clusterctl allows one
    # namespace per provider), each with its Deployment patch
    optional = [
        ("client-certs", "client-certs", {"clientCerts": {"enabled": True}}, "client-certs.yaml",
         "# Optional, applied with kubectl after clusterctl init (clusterctl allows one\n"
         "# namespace per provider): cert-manager client certificates for CAPI's controllers,\n"
         "# from a namespaced Issuer in each CAPI namespace. First bring the client CA\n"
         "# (docs/quickstart.md#client-certificates): the Secret hvupdater-client-ca in\n"
         "# capi-system and capi-kubeadm-control-plane-system, the ConfigMap\n"
         "# hvupdater-client-ca (ca.crt only) in hvupdater-system. No private key is here.\n"
         "# Then add --client-ca to the hvupdater Deployment with client-certs-patch.json:\n"),
        ("mhc-hold", "mhc", {"mhc": {"holdRemediation": True}}, "mhc-rbac.yaml",
         "# Optional, applied with kubectl after clusterctl init: the MachineHealthCheck\n"
         "# hold (docs/operations.md, MachineHealthChecks) may get, list and patch Machines.\n"
         "# Then turn it on in the hvupdater Deployment with mhc-hold-patch.json:\n"),
    ]
    for name, component, on, tpl, intro in optional:
        ccv = clusterctl_values()
        ccv.update(on)
        out = run_helm(helm, ccv, version, skip_schema=True)
        files[f"deploy/clusterctl/{name}.yaml"] = (
            GENERATED + intro
            + "#   kubectl -n hvupdater-system patch deployment hvupdater --type json \\\n"
            + f"#     --patch-file {name}-patch.json\n" + out[tpl])
        files[f"deploy/clusterctl/{name}-patch.json"] = component_patch(component)
    return files


def config_json(rendered):
    """config.json of a rendering's ConfigMap, as a file."""
    cm = yaml.safe_load(rendered["configmap.yaml"])
    return json.dumps(json.loads(cm["data"]["config.json"]), indent=2) + "\n"


def component_patch(component):
    """The JSON patch of deploy/kubernetes/components/<component>, as a file."""
    p = os.path.join(SRC, "deploy", "kubernetes", "components", component,
                     "kustomization.yaml")
    with open(p, encoding="utf-8") as f:
        kz = yaml.safe_load(f)
    ops = yaml.safe_load(kz["patches"][0]["patch"])
    return json.dumps(ops, indent=2) + "\n"


def tools_dir(arg):
    if arg:
        return arg
    p = subprocess.run([os.path.join(SRC, "test", "helm", "build.sh")], stdout=subprocess.PIPE,
                       text=True)
    if p.returncode != 0:
        sys.exit("FAIL test/helm/build.sh failed")
    return p.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--tools")
    ap.add_argument("--version")
    ap.add_argument("--out", default=SRC)
    a = ap.parse_args()
    helm = os.path.join(tools_dir(a.tools), "helm")
    files = render_all(helm, a.version)
    if a.check:
        bad = 0
        for rel, text in sorted(files.items()):
            path = os.path.join(SRC, rel)
            have = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
            if have != text:
                bad += 1
                diff = "".join(list(difflib.unified_diff(
                    have.splitlines(True), text.splitlines(True), rel, rel + " (rendered)"))[:40])
                print(f"FAIL {rel} differs from what the chart renders "
                      f"(run scripts/render-manifests.py):\n{diff}")
            else:
                print(f"ok   {rel} is what the chart renders")
        return 1 if bad else 0
    for rel, text in files.items():
        path = os.path.join(a.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
