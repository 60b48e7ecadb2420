#!/usr/bin/env python3
"""deploy_test.py: the deploy/ manifests, unit and image recipe agree with the real binary.

  deploy_test.py static --source DIR --binary FILE
      Fast, no server: every YAML file parses and is listed by a kustomization; the render
      is consistent (ports, names, selectors, secrets, mounts, security settings); every
      flag in the Deployment's command line and the systemd ExecStart exists in
      `hvupdater serve --help`; the config files validate against schemas/config.json;
      the man page covers every flag; the Containerfile's runtime packages cover the
      binary's shared libraries.
  deploy_test.py serve --source DIR --binary FILE --work DIR
      Starts the binary the way the pod would (mounts laid out under a scratch root, a
      certificate made like cert-manager's, as uid 65532 when root), calls the probe
      paths, discovery and CanUpdateMachine with the ExtensionConfig's settings through
      the Service DNS names; starts it with the systemd host config too.
"""

import argparse
import copy
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvdeploy as hv  # noqa: E402

NS = "hvupdater-system"
KNOWN_SETTINGS = {"powerCycle", "onUncoverable", "powerOffMode", "guestVerification",
                  "liveTimeoutSeconds", "shutdownTimeoutSeconds", "deadlineSeconds"}
# ExtensionConfig setting -> where the config file sets its default
SETTING_IN_CONFIG = {"powerCycle": ("defaults", "powerCycle"),
                     "onUncoverable": ("defaults", "onUncoverable"),
                     "powerOffMode": ("defaults", "powerOffMode"),
                     "guestVerification": ("defaults", "guestVerification"),
                     "liveTimeoutSeconds": ("engine", "liveTimeoutSeconds"),
                     "shutdownTimeoutSeconds": ("engine", "shutdownTimeoutSeconds"),
                     "deadlineSeconds": ("engine", "deadlineSeconds")}
HOOKS = {"CanUpdateMachine", "CanUpdateMachineSet", "UpdateMachine"}
# Libraries debian:12-slim always has (libc6 is Essential, libgcc-s1 its dependency).
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1"}


class Deploy:
    """The rendered manifests and the files around them."""

    def __init__(self, source):
        self.source = source
        self.kdir = os.path.join(source, "deploy", "kubernetes")
        self.objs, self.files = hv.render(self.kdir)
        self.by_kind = {}
        for o in self.objs:
            self.by_kind.setdefault(o.get("kind"), []).append(o)

    def one(self, kind):
        objs = self.by_kind.get(kind, [])
        if len(objs) != 1:
            raise AssertionError(f"want exactly one {kind}, have {len(objs)}")
        return objs[0]

    def find(self, kind, name, ns=None):
        for o in self.by_kind.get(kind, []):
            m = o.get("metadata", {})
            if m.get("name") == name and (ns is None or m.get("namespace") == ns):
                return o
        return None

    @property
    def deployment(self):
        return self.one("Deployment")

    @property
    def pod(self):
        return self.deployment["spec"]["template"]["spec"]

    @property
    def container(self):
        return self.pod["containers"][0]

    def argv(self, entrypoint):
        c = self.container
        return list(c.get("command") or entrypoint) + list(c.get("args") or [])

    def configmap_for_volume(self, vol):
        return self.find("ConfigMap", vol["configMap"]["name"], NS)

    def mounted_file(self, path):
        """(volumeMount, volume, key) of the mount that holds an absolute path."""
        best = None
        for m in self.container.get("volumeMounts", []):
            mp = m["mountPath"].rstrip("/")
            if path.startswith(mp + "/") and (best is None or len(mp) > len(best["mountPath"])):
                best = m
        if not best:
            return None, None, None
        vol = next((v for v in self.pod.get("volumes", []) if v["name"] == best["name"]), None)
        rel = path[len(best["mountPath"].rstrip("/")) + 1:]
        return best, vol, rel


def containerfile(source):
    """Parsed deploy/container/Containerfile: stages with FROM, RUN, COPY, USER, ENTRYPOINT."""
    path = os.path.join(source, "deploy", "container", "Containerfile")
    lines, cur = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            s = raw.rstrip("\n")
            if not cur and (not s.strip() or s.lstrip().startswith("#")):
                continue
            if s.endswith("\\"):
                cur += s[:-1] + " "
                continue
            lines.append(cur + s)
            cur = ""
    stages = []
    for ln in lines:
        instr, _, rest = ln.strip().partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            parts = rest.split()
            stages.append({"from": parts[0], "as": parts[2] if len(parts) > 2 else None,
                           "RUN": [], "COPY": [], "USER": None, "ENTRYPOINT": None})
        elif stages:
            if instr in ("RUN", "COPY"):
                stages[-1][instr].append(rest.strip())
            elif instr == "USER":
                stages[-1]["USER"] = rest.strip()
            elif instr == "ENTRYPOINT":
                stages[-1]["ENTRYPOINT"] = json.loads(rest)
    return stages


def runtime_packages(stage):
    pkgs = set()
    for run in stage["RUN"]:
        m = re.search(r"apt-get install ((?:\s*-\S+)*)(.*?)(&&|$)", run)
        if m:
            pkgs |= {p for p in m.group(2).split() if not p.startswith("-")}
    return pkgs


def selector_matches(selector, labels):
    ml = (selector or {}).get("matchLabels", {}) or {}
    if not ml and not (selector or {}).get("matchExpressions"):
        return False  # an empty selector matches everything: never what we want here
    if any(labels.get(k) != v for k, v in ml.items()):
        return False
    for e in (selector or {}).get("matchExpressions", []) or []:
        v = labels.get(e["key"])
        op = e["operator"]
        if op == "In" and v not in e.get("values", []):
            return False
        if op == "NotIn" and v in e.get("values", []):
            return False
        if op == "Exists" and e["key"] not in labels:
            return False
        if op == "DoesNotExist" and e["key"] in labels:
            return False
    return True


def ns_names_selected(ns_selector):
    """Namespace names a selector on kubernetes.io/metadata.name admits (None: other)."""
    names = None
    for e in (ns_selector or {}).get("matchExpressions", []) or []:
        if e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "In":
            names = set(e.get("values", []))
    ml = (ns_selector or {}).get("matchLabels", {}) or {}
    if "kubernetes.io/metadata.name" in ml:
        names = {ml["kubernetes.io/metadata.name"]}
    return names


def port_number(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    return None


# ---- static ------------------------------------------------------------------------------

def static(args):
    r = hv.Results()
    src, binary = args.source, args.binary
    kdir = os.path.join(src, "deploy", "kubernetes")
    version = hv.source_version(src)

    # Every YAML file parses, reads the same under YAML 1.1 and 1.2, and is used.
    yaml_files = []
    for root, _, names in os.walk(kdir):
        yaml_files += [os.path.join(root, n) for n in names if n.endswith((".yaml", ".yml"))]
    for p in sorted(yaml_files):
        rel = os.path.relpath(p, src)
        try:
            docs, text = hv.load_yaml_docs(p)
        except Exception as e:  # noqa: BLE001
            r.check(False, f"{rel} parses", e)
            continue
        r.check(docs, f"{rel} parses ({len(docs)} documents)", "empty")
        amb = hv.yaml_ambiguities(text)
        r.check(not amb, f"{rel} has no YAML 1.1/1.2-ambiguous scalars", amb)
        if not os.path.basename(p).startswith("kustomization") and \
                not p.endswith("-patch.yaml"):  # a patch for kubectl patch, not an object
            for d in docs:
                ok = isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and \
                    d.get("metadata", {}).get("name")
                r.check(ok, f"{rel}: {d.get('kind') if isinstance(d, dict) else d} has "
                        "apiVersion, kind, metadata.name")

    try:
        dep = Deploy(src)
    except (hv.RenderError, OSError) as e:
        r.check(False, "deploy/kubernetes renders", e)
        return r.finish()
    r.check(True, f"deploy/kubernetes renders: {len(dep.objs)} objects")
    used = set(map(os.path.abspath, dep.files))
    optional = (os.path.join(kdir, "components") + os.sep, os.path.join(kdir, "examples") + os.sep)
    for p in yaml_files + [os.path.join(kdir, "base", "config.json")]:
        if p.startswith(optional):
            continue
        r.check(os.path.abspath(p) in used, f"{os.path.relpath(p, src)} is used by the "
                "kustomization", "listed nowhere: dead file")
    # Optional components: each lists every object file of its folder.
    for root, _, names in os.walk(os.path.join(kdir, "components")):
        if "kustomization.yaml" not in names:
            continue
        kz = hv.load_yaml_docs(os.path.join(root, "kustomization.yaml"))[0][0]
        r.eq(kz.get("kind"), "Component", f"{os.path.relpath(root, src)} is a kustomize Component")
        for n in names:
            if n.endswith(".yaml") and n != "kustomization.yaml" and not n.endswith("-patch.yaml"):
                r.check(n in kz.get("resources", []), f"{os.path.relpath(root, src)} lists {n}")
    keys = [hv.obj_key(o) for o in dep.objs]
    r.check(len(keys) == len(set(keys)), "no object is defined twice",
            [k for k in keys if keys.count(k) > 1])

    ours_vs_kubectl(r, dep)

    # The optional components render on top of the base (kubectl kustomize, when installed).
    kubectl = shutil.which("kubectl")
    if kubectl:
        with tempfile.TemporaryDirectory(prefix="hv-kz-") as tmp:
            shutil.copytree(kdir, os.path.join(tmp, "k"))
            with open(os.path.join(tmp, "k", "kustomization.yaml"), "w") as f:
                f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                        "resources: [base, extension]\n"
                        "components: [components/client-certs, components/priority-class,\n"
                        "             components/can-update-ignore]\n")
            p = subprocess.run([kubectl, "kustomize", os.path.join(tmp, "k")],
                               capture_output=True, text=True, timeout=120)
        if r.check(p.returncode == 0, "the components render with kubectl kustomize",
                   p.stderr[:400]):
            out = p.stdout
            kvols = [v for o in yaml.safe_load_all(out) if o and o.get("kind") == "Deployment"
                     for v in o["spec"]["template"]["spec"]["volumes"]
                     if v["name"] == "client-ca"]
            r.check("- --client-ca\n" in out and kvols == [{"name": "client-ca", "configMap": {
                "name": "hvupdater-client-ca", "defaultMode": 292,
                "items": [{"key": "ca.crt", "path": "ca.crt"}]}}],
                "components/client-certs passes --client-ca with the CA's ConfigMap (ca.crt "
                "only)", kvols)
            r.check("priorityClassName: hvupdater-critical" in out,
                    "components/priority-class sets the Deployment's priorityClassName")
            kdep = [o for o in yaml.safe_load_all(out) if o and o.get("kind") == "Deployment"]
            kargs = kdep[0]["spec"]["template"]["spec"]["containers"][0]["args"] if kdep else []
            r.check(kargs[-2:] == ["--can-update-failure-policy", "Ignore"] and
                    kargs.count("--can-update-failure-policy") == 1,
                    "components/can-update-ignore passes --can-update-failure-policy Ignore",
                    kargs)
            kinds = [o.get("kind") for o in yaml.safe_load_all(out) if o]
            r.check(kinds.count("Certificate") == 3 and kinds.count("Issuer") == 3 and
                    "ClusterIssuer" not in kinds,
                    "components/client-certs adds two client certificates and their two "
                    "namespaced Issuers, no ClusterIssuer")
            roles = [o["metadata"]["name"] for o in yaml.safe_load_all(out)
                     if o and o.get("kind") == "ClusterRole"]
            r.eq(sorted(roles), ["hvupdater-dry-run-claims", "hvupdater-machine-check"],
                 "without capv-identity, events or mhc the only roles are the base's: the "
                 "machine check's and the dry runs'")
            r.check("automountServiceAccountToken: true" in out,
                    "the base mounts the token (machine check, dry-run claims)")
        # The Kubernetes API components: the token mounted, exactly their roles.
        for comp, role, verbs in (("capv-identity", "hvupdater-capv-identity", "- get\n"),
                                  ("events", "hvupdater-events", "- create\n"),
                                  ("mhc", "hvupdater-mhc-hold", "- get\n- list\n- patch\n"),
                                  ("kubevirt", "hvupdater-kubevirt",
                                   "- get\n- list\n- watch\n- patch\n- update\n")):
            with tempfile.TemporaryDirectory(prefix="hv-kz-") as tmp:
                shutil.copytree(kdir, os.path.join(tmp, "k"))
                with open(os.path.join(tmp, "k", "kustomization.yaml"), "w") as f:
                    f.write("apiVersion: kustomize.config.k8s.io/v1beta1\n"
                            "kind: Kustomization\nresources: [base, extension]\n"
                            "components: [components/%s]\n" % comp)
                p = subprocess.run([kubectl, "kustomize", os.path.join(tmp, "k")],
                                   capture_output=True, text=True, timeout=120)
            out = p.stdout
            r.check(p.returncode == 0 and "automountServiceAccountToken: true" in out and
                    "name: %s\n" % role in out and "kind: ClusterRoleBinding" in out,
                    "components/%s mounts the token and binds %s" % (comp, role), p.stderr[:400])
            # the component's own role (the base's machine check and dry-run roles are
            # checked apart)
            own = [o for o in yaml.safe_load_all(out) if o and o.get("kind") == "ClusterRole"
                   and o["metadata"]["name"] == role]
            verbs_seen = {"- " + v for o in own for rule in o.get("rules", [])
                          for v in rule.get("verbs", [])}
            want = set(verbs.strip().split("\n"))
            r.check(verbs_seen == want, "components/%s grants only %s"
                    % (comp, ", ".join(sorted(want))), sorted(verbs_seen))
            if comp == "mhc":
                r.check("- --mhc-hold\n" in out, "components/mhc passes --mhc-hold")
            if comp == "kubevirt":
                want_rules = hv.kubevirt_rbac_table(src)
                r.eq(hv.rbac_grants([x for o in own for x in o.get("rules", [])]), want_rules,
                     "components/kubevirt grants exactly docs/kubevirt.md's RBAC table")
                cms = [o for o in yaml.safe_load_all(out) if o and o.get("kind") == "ConfigMap"]
                kcfg = json.loads(cms[0]["data"]["config.json"]) if len(cms) == 1 else {}
                r.eq(kcfg.get("kubevirt"), {},
                     "components/kubevirt: one ConfigMap, its config.json with kubevirt {}")

    # The lab script warns it is for test machines and names no path outside the project
    # but the system files it touches.
    with open(os.path.join(src, "test", "lab", "libvirt-up.sh"), encoding="utf-8") as f:
        lab = f.read()
    r.check("Never run it on a production" in lab and "/etc/libvirt/qemu.conf" in lab,
            "test/lab/libvirt-up.sh warns it rewrites /etc/libvirt/qemu.conf")
    r.check("/work/" not in lab, "test/lab/libvirt-up.sh names no path outside the project")

    # No qemu+ssh in Kubernetes: the image has no ssh client and the pod mounts no key.
    with open(os.path.join(kdir, "base", "config.json"), encoding="utf-8") as f:
        uris = json.load(f).get("libvirt", {}).get("uris", [])
    r.check(not [u for u in uris if "+ssh" in u.split("://")[0]],
            "the Kubernetes config uses no ssh libvirt transport", uris)
    for doc in ("docs/quickstart.md", "deploy/README.md"):
        with open(os.path.join(src, doc), encoding="utf-8") as f:
            text = f.read()
        for ln in text.splitlines():
            if "qemu+ssh://" in ln and "not" not in ln and "systemd" not in ln:
                r.check(False, f"{doc} suggests qemu+ssh:// for Kubernetes", ln.strip())

    for kind in ("Namespace", "ServiceAccount", "ConfigMap", "Deployment", "Service",
                 "PodDisruptionBudget", "NetworkPolicy", "Issuer", "Certificate",
                 "ExtensionConfig"):
        r.eq(len(dep.by_kind.get(kind, [])), 1, f"exactly one {kind}")
    try:
        ec = dep.one("ExtensionConfig")
        d = dep.deployment
        svc = dep.one("Service")
        cert = dep.one("Certificate")
    except AssertionError as e:
        r.check(False, "the manifests hold the objects the checks need", e)
        return r.finish()

    # Namespaces: everything namespaced is in hvupdater-system; the ExtensionConfig is
    # cluster-scoped; the Namespace object exists.
    r.eq(dep.one("Namespace")["metadata"]["name"], NS, "Namespace name")
    for o in dep.objs:
        k = o["kind"]
        ns = o.get("metadata", {}).get("namespace")
        if k in ("Namespace", "ExtensionConfig", "ClusterRole", "ClusterRoleBinding"):
            r.check(ns is None, f"{k} {o['metadata']['name']} has no metadata.namespace "
                    "(cluster-scoped)", ns)
        else:
            r.eq(ns, NS, f"{k} {o['metadata']['name']} namespace")

    for fn, fargs in ((check_deployment, (r, dep, binary, version)),
                      (check_service_and_policies, (r, dep)),
                      (check_certificate, (r, dep, cert, svc, d)),
                      (check_extensionconfig, (r, dep, ec, svc)),
                      (check_config_files, (r, dep, src)),
                      (check_component_configs, (r, src)),
                      (check_systemd, (r, src, binary)),
                      (check_container, (r, src, dep, binary)),
                      (check_server_flags, (r, binary)),
                      (check_manpage, (r, src, binary, version))):
        try:
            fn(*fargs)
        except Exception as e:  # noqa: BLE001 - a broken manifest must not hide the rest
            r.check(False, f"{fn.__name__} ran to the end", f"{type(e).__name__}: {e}")
    return r.finish()


def ours_vs_kubectl(r, dep):
    theirs, why = hv.kubectl_render(dep.kdir)
    if theirs is None:
        if why is None:
            print("note: kubectl not installed: render not compared with kubectl kustomize")
        else:
            r.check(False, "kubectl kustomize renders deploy/kubernetes", why)
        return
    # Generated names carry a content hash whose recipe changed between kustomize versions:
    # compare with the hash masked, and only note whether it agrees.
    gen = {o["metadata"]["name"] for o in dep.objs if o["kind"] == "ConfigMap"}
    bases = {re.sub(r"-[a-z0-9]{10}$", "", n) for n in gen}
    pat = re.compile(r"\b(" + "|".join(map(re.escape, bases)) + r")-[a-z0-9]{10}\b") if bases else None

    def masked(o):
        return json.loads(pat.sub(r"\1-HASH", json.dumps(o))) if pat else o

    their_gen = {o["metadata"]["name"] for o in theirs if o.get("kind") == "ConfigMap"}
    print(f"note: generated names {'agree' if gen == their_gen else 'differ'} with kubectl "
          f"kustomize: ours {sorted(gen)}, kubectl's {sorted(their_gen)}")
    mine = {hv.obj_key(masked(o)): masked(o) for o in dep.objs}
    other = {hv.obj_key(masked(o)): masked(o) for o in theirs}
    r.eq(sorted(mine), sorted(other), "our render names the same objects as kubectl kustomize")
    for k in sorted(set(mine) & set(other)):
        r.check(mine[k] == other[k], f"{'/'.join(k)} renders as kubectl kustomize does",
                "differs")


def check_deployment(r, dep, binary, version):
    d, pod, c = dep.deployment, dep.pod, dep.container
    labels = d["spec"]["template"]["metadata"].get("labels", {})
    r.eq(d["spec"].get("replicas"), 2, "Deployment replicas")
    # clusterctl's provider contract: the controller container is "manager"; clusterctl
    # init/upgrade --wait-providers waits only for Deployments with such a container.
    r.eq([x.get("name") for x in pod.get("containers", [])], ["manager"],
         "the one container is named manager (clusterctl's provider contract)")
    r.eq(d["spec"]["template"]["metadata"].get("annotations", {})
         .get("kubectl.kubernetes.io/default-container"), "manager",
         "kubectl's default container is manager")
    r.check(selector_matches(d["spec"].get("selector"), labels),
            "Deployment selector matches its pod labels")
    sa = pod.get("serviceAccountName")
    r.check(dep.find("ServiceAccount", sa, NS), f"serviceAccountName {sa} exists")
    # the machine check (on by default) reads Machines and infra machines: the token, and a
    # read-only role (get, list); dry-run claims (on by default) patch infra machines with
    # dryRun=All only and list Machines
    r.eq(pod.get("automountServiceAccountToken"), True,
         "service account token mounted (the machine check, dry-run claims)")
    r.check("--check-machines" in c.get("args", []), "the server runs with --check-machines",
            c.get("args"))
    r.check("--dry-run-claims" in c.get("args", []), "the server runs with --dry-run-claims",
            c.get("args"))
    for o in dep.objs:
        if o["kind"] == "ClusterRole":
            verbs = {v for rule in o.get("rules", []) for v in rule.get("verbs", [])}
            allowed = ({"patch", "list"} if o["metadata"]["name"] == "hvupdater-dry-run-claims"
                       else {"get", "list"})
            r.check(verbs <= allowed, f"ClusterRole {o['metadata']['name']} only {sorted(allowed)}",
                    sorted(verbs))
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    r.eq(psc.get("runAsNonRoot"), True, "pod runAsNonRoot")
    r.eq(psc.get("seccompProfile", {}).get("type"), "RuntimeDefault", "pod seccomp RuntimeDefault")
    r.check(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0,
            "pod runAsUser is a non-zero uid", psc.get("runAsUser"))
    r.eq(csc.get("readOnlyRootFilesystem"), True, "container readOnlyRootFilesystem")
    r.eq(csc.get("allowPrivilegeEscalation"), False, "container allowPrivilegeEscalation false")
    r.eq(csc.get("capabilities", {}).get("drop"), ["ALL"], "container drops ALL capabilities")
    r.check(not csc.get("capabilities", {}).get("add"), "container adds no capability")
    r.check(not csc.get("privileged"), "container not privileged")
    res = c.get("resources", {})
    for kind in ("requests", "limits"):
        for what in ("cpu", "memory"):
            r.check(res.get(kind, {}).get(what), f"resources.{kind}.{what} set")
    aa = pod.get("affinity", {}).get("podAntiAffinity", {})
    terms = [t.get("podAffinityTerm", t) for t in
             aa.get("preferredDuringSchedulingIgnoredDuringExecution", []) +
             aa.get("requiredDuringSchedulingIgnoredDuringExecution", [])]
    r.check(any(t.get("topologyKey") == "kubernetes.io/hostname" and
                selector_matches(t.get("labelSelector"), labels) for t in terms),
            "podAntiAffinity spreads the replicas over nodes (hostname, own labels)")
    image = c.get("image", "")
    r.check(image.endswith(":" + str(version)), f"image tag is the project version {version}",
            image)

    # The command line: ENTRYPOINT + args as the kubelet runs it, checked against --help.
    stages = containerfile(dep.source)
    entry = stages[-1]["ENTRYPOINT"] if stages else None
    argv = dep.argv(entry or [])
    r.check(argv[:1] == ["/usr/bin/hvupdater"] and argv[1:2] == ["serve"] and
            argv.count("serve") == 1,
            "effective command is /usr/bin/hvupdater serve ... (serve once)", argv)
    flags = hv.serve_flags(binary)
    r.check({"--listen", "--tls-cert", "--tls-key", "--config", "--port-file"} <= set(flags),
            "serve --help lists the flags the checks rely on", sorted(flags))
    seen, problems = hv.parse_argv(argv[2:], flags)
    r.check(not problems, "every Deployment arg is a serve flag with its value", problems)
    for f in ("--listen", "--tls-cert", "--tls-key", "--config"):
        r.check(f in seen, f"Deployment passes {f}")
    listen = (seen.get("--listen") or [None])[-1]
    port = hv.listen_port(listen)
    r.check(listen and listen.startswith("0.0.0.0:"), "listens on all pod addresses", listen)
    mlisten = (seen.get("--metrics-listen") or [None])[-1]
    mport = hv.listen_port(mlisten)
    r.check(mlisten and mlisten.startswith("0.0.0.0:"), "Deployment passes --metrics-listen "
            "on all pod addresses", mlisten)
    cports = [p["containerPort"] for p in c.get("ports", [])]
    r.eq(cports, [port, mport], "containerPorts are the --listen and --metrics-listen ports")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        hg = c.get(probe, {}).get("httpGet", {})
        r.eq(hg.get("path"), path, f"{probe} path")
        r.eq(hg.get("scheme"), "HTTP", f"{probe} scheme (the status listener is plain HTTP)")
        r.eq(port_number(c, hg.get("port")), mport, f"{probe} port is the --metrics-listen port")
    drain = (seen.get("--drain-seconds") or ["0"])[-1]
    r.check(drain.isdigit() and 0 < int(drain) < pod.get("terminationGracePeriodSeconds", 30),
            "--drain-seconds is set and shorter than terminationGracePeriodSeconds", drain)
    tols = pod.get("tolerations", [])
    r.check(any(t.get("key") == "node-role.kubernetes.io/control-plane" and
                t.get("effect") == "NoSchedule" for t in tols),
            "tolerates control-plane nodes", tols)

    # Every file the command line names lies in a mounted volume that provides it.
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        r.check(m["name"] in vols, f"volumeMount {m['name']} has a volume")
    for f in ("--tls-cert", "--tls-key", "--config"):
        for path in seen.get(f, []):
            check_file_in_volume(r, dep, path, f)
    # The TLS Secret is cert-manager's.
    cert = dep.one("Certificate")
    m, vol, _ = dep.mounted_file((seen.get("--tls-cert") or ["/"])[0])
    if vol:
        r.eq(vol.get("secret", {}).get("secretName"), cert["spec"]["secretName"],
             "the TLS volume is the Certificate's Secret")
    for v in vols.values():
        if "secret" in v:
            mode = v["secret"].get("defaultMode", 0o644)
            r.check(mode & 0o007 == 0, f"secret volume {v['name']} not world-readable "
                    f"(defaultMode {oct(mode)})")
            if mode & 0o044 == 0o040:
                r.check(pod.get("securityContext", {}).get("fsGroup") is not None,
                        f"secret volume {v['name']} group-readable needs fsGroup")
    writable = [m["mountPath"] for m in c.get("volumeMounts", []) if not m.get("readOnly")]
    for m in c.get("volumeMounts", []):
        v = vols.get(m["name"], {})
        if "secret" in v or "configMap" in v:
            r.eq(m.get("readOnly"), True, f"volumeMount {m['name']} readOnly")
    r.check(all("emptyDir" in vols[m["name"]] for m in c.get("volumeMounts", [])
                if m["mountPath"] in writable), "only emptyDir mounts are writable", writable)


def check_secret_key(r, dep, name, key, what):
    """A whole-Secret volume provides key only if something makes a Secret of that name with
    that key: a Secret in the manifests, cert-manager (a Certificate's secretName: tls.crt,
    tls.key, ca.crt), or the user, as deploy/README.md tells them (name and key both named)."""
    sec = dep.find("Secret", name)
    if sec is not None:
        keys = set(sec.get("data", {})) | set(sec.get("stringData", {}))
        r.check(key in keys, f"{what}: Secret {name} in the manifests has key {key}", sorted(keys))
        return
    certs = [c for c in dep.by_kind.get("Certificate", [])
             if c.get("spec", {}).get("secretName") == name]
    if certs:
        r.check(key in ("tls.crt", "tls.key", "ca.crt"),
                f"{what}: cert-manager's Secret {name} (Certificate "
                f"{certs[0]['metadata']['name']}) has key {key}")
        return
    readme = open(os.path.join(dep.source, "deploy", "README.md")).read()
    r.check(name in readme and key in readme,
            f"{what}: Secret {name} is the user's and deploy/README.md names it and its key {key}")


def check_file_in_volume(r, dep, path, what):
    m, vol, key = dep.mounted_file(path)
    if not r.check(m and vol, f"{what} {path} is inside a mounted volume"):
        return
    if "secret" in vol:
        items = vol["secret"].get("items")
        if items:
            r.check(any(i["path"] == key for i in items),
                    f"{what} {path}: secret {vol['secret']['secretName']} item {key} mounted")
        else:
            check_secret_key(r, dep, vol["secret"]["secretName"], key, f"{what} {path}")
    elif "configMap" in vol:
        cm = dep.configmap_for_volume(vol)
        r.check(cm is not None and key in cm.get("data", {}),
                f"{what} {path}: ConfigMap {vol['configMap']['name']} has key {key}")
    else:
        r.check(False, f"{what} {path} is in a secret or configMap volume", vol)


def check_service_and_policies(r, dep):
    c, d = dep.container, dep.deployment
    labels = d["spec"]["template"]["metadata"].get("labels", {})
    port = c["ports"][0]["containerPort"]
    mport = c["ports"][1]["containerPort"] if len(c["ports"]) > 1 else None
    svc = dep.one("Service")
    r.check(selector_matches({"matchLabels": svc["spec"].get("selector", {})}, labels),
            "Service selects the pods")
    sp = svc["spec"].get("ports", [])
    r.eq(len(sp), 2, "Service has two ports (hooks, metrics)")
    if sp:
        r.eq(sp[0].get("port"), 443, "Service port 443")
        r.eq(port_number(c, sp[0].get("targetPort")), port, "Service targetPort is the --listen port")
    if len(sp) > 1:
        r.eq(sp[1].get("name"), "metrics", "Service's second port is named metrics")
        r.eq(port_number(c, sp[1].get("targetPort")), mport,
             "Service metrics targetPort is the --metrics-listen port")
    pdb = dep.one("PodDisruptionBudget")
    r.eq((pdb["spec"].get("maxUnavailable"), pdb["spec"].get("minAvailable")), (1, None),
         "PodDisruptionBudget maxUnavailable 1 (one replica at a time; never blocks a drain "
         "of a single replica)")
    r.check(selector_matches(pdb["spec"].get("selector"), labels), "PDB selects the pods")
    r.check(d["spec"]["replicas"] > 1, "PDB only with more than one replica")

    np_ = dep.one("NetworkPolicy")
    r.check(selector_matches(np_["spec"].get("podSelector"), labels), "NetworkPolicy selects the pods")
    r.check("Ingress" in np_["spec"].get("policyTypes", []), "NetworkPolicy restricts ingress")
    admitted = set()
    by_port = {}
    for rule in np_["spec"].get("ingress", []):
        r.check(rule.get("from"), "every ingress rule names its sources (none admits all)")
        ports = [port_number(c, p.get("port")) for p in rule.get("ports", [])]
        r.check(len(ports) == 1 and ports[0] in (port, mport),
                "every ingress rule admits one port: hooks or metrics", ports)
        for peer in rule.get("from", []) or []:
            r.check("ipBlock" not in peer and "podSelector" not in peer or
                    "namespaceSelector" in peer, "peers are namespaces", peer)
            names = ns_names_selected(peer.get("namespaceSelector"))
            r.check(names, "peer namespaces named by kubernetes.io/metadata.name", peer)
            admitted |= names or set()
            for pn in ports:
                by_port.setdefault(pn, set()).update(names or set())
    r.eq(by_port.get(port), {"capi-system", "capi-kubeadm-control-plane-system"},
         "only CAPI's controllers reach the hooks port")
    r.eq(by_port.get(mport), {"monitoring"}, "only monitoring reaches the metrics port")
    for ns in ("capi-system", "capi-kubeadm-control-plane-system", "monitoring"):
        r.check(ns in admitted, f"NetworkPolicy admits namespace {ns}")
    r.check(NS not in admitted and "default" not in admitted,
            "NetworkPolicy admits no other namespace", sorted(admitted))


def check_certificate(r, dep, cert, svc, d):
    name, ns = svc["metadata"]["name"], svc["metadata"]["namespace"]
    want = {f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"}
    r.eq(set(cert["spec"].get("dnsNames", [])), want,
         "Certificate dnsNames are the Service's DNS names")
    ref = cert["spec"].get("issuerRef", {})
    iss = dep.find(ref.get("kind", "Issuer"), ref.get("name"), NS)
    r.check(iss is not None, f"issuerRef {ref.get('name')} exists")
    if iss:
        r.check("selfSigned" in iss.get("spec", {}), "Issuer is selfSigned")
    r.eq(cert["spec"].get("secretName"), "hvupdater-serving-cert", "Certificate secretName")
    usages = cert["spec"].get("usages", [])
    r.check(not usages or "server auth" in usages, "Certificate usable for server auth", usages)


def check_extensionconfig(r, dep, ec, svc):
    r.eq(ec.get("apiVersion"), "runtime.cluster.x-k8s.io/v1beta2", "ExtensionConfig apiVersion")
    ann = ec["metadata"].get("annotations", {})
    cert = dep.one("Certificate")
    r.eq(ann.get("runtime.cluster.x-k8s.io/inject-ca-from-secret"),
         f"{cert['metadata']['namespace']}/{cert['spec']['secretName']}",
         "inject-ca-from-secret names the Certificate's Secret")
    spec = ec.get("spec", {})
    r.check(set(spec) <= {"clientConfig", "namespaceSelector", "settings"},
            "ExtensionConfig spec has only v1beta2 fields", sorted(spec))
    cc = spec.get("clientConfig", {})
    r.check(set(cc) <= {"url", "service", "caBundle"}, "clientConfig fields", sorted(cc))
    r.check("url" not in cc and "caBundle" not in cc,
            "clientConfig uses service (no url) and leaves caBundle to injection")
    s = cc.get("service", {})
    r.check(set(s) <= {"name", "namespace", "path", "port"}, "clientConfig.service fields")
    r.eq((s.get("name"), s.get("namespace")),
         (svc["metadata"]["name"], svc["metadata"]["namespace"]),
         "clientConfig.service is the Service")
    r.eq(s.get("port"), svc["spec"]["ports"][0]["port"], "clientConfig.service.port is the Service port")
    r.check("path" not in s, "no path prefix (hvupdater serves the hooks at the root)")
    sel = spec.get("namespaceSelector", {})
    r.eq(sel.get("matchExpressions"),
         [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default"]}],
         "namespaceSelector")
    settings = spec.get("settings", {})
    r.eq(set(settings), KNOWN_SETTINGS, "settings are exactly the known settings")
    for k, v in settings.items():
        r.check(isinstance(v, str), f"setting {k} is a string (map[string]string)", type(v))


def check_config_files(r, dep, src):
    validate = os.path.join(src, "test", "schema", "validate.py")
    cfg_vol = next(v for v in dep.pod["volumes"] if "configMap" in v)
    cm = dep.configmap_for_volume(cfg_vol)
    if not r.check(cm and "config.json" in cm.get("data", {}), "the config ConfigMap holds config.json"):
        return
    text = cm["data"]["config.json"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(text)
        tmp = f.name
    try:
        for label, path in (("ConfigMap config.json", tmp),
                            ("deploy/systemd/config.json",
                             os.path.join(src, "deploy", "systemd", "config.json"))):
            p = subprocess.run([sys.executable, validate, "config", path], capture_output=True,
                               text=True, timeout=120)
            r.check(p.returncode == 0, f"{label} validates against schemas/config.json",
                    (p.stdout + p.stderr).strip()[-600:])
    finally:
        os.unlink(tmp)
    cfg = json.loads(text)
    # Files the config reads (vCenter credentials, CA; libvirt pkipath) are mounted.
    for i, s in enumerate(cfg.get("vsphere", {}).get("servers", [])):
        for key in ("usernameFile", "passwordFile", "caFile"):
            if key in s:
                check_file_in_volume(r, dep, s[key], f"vsphere.servers[{i}].{key}")
                m, vol, _ = dep.mounted_file(s[key])
                if vol and "secret" in vol:
                    r.check(not vol["secret"].get("optional"),
                            f"{key}'s Secret is required (not optional)")
    for u in cfg.get("libvirt", {}).get("uris", []):
        m = re.search(r"[?&]pkipath=([^&]+)", u)
        if m:
            mt, vol, _ = dep.mounted_file(m.group(1).rstrip("/") + "/cacert.pem")
            r.check(mt and vol and "secret" in vol, f"libvirt pkipath {m.group(1)} is a mounted Secret")
        r.check(not u.startswith("test:"), f"libvirt URI {u} is not libvirt's test driver")
    # The ExtensionConfig's settings (which override the config) agree with its defaults.
    settings = dep.one("ExtensionConfig")["spec"].get("settings", {})
    for k, (sec, key) in SETTING_IN_CONFIG.items():
        if k in settings and key in cfg.get(sec, {}):
            r.eq(settings[k], str(cfg[sec][key]), f"setting {k} equals config {sec}.{key}")
    listen = cfg.get("listen")
    args = dep.container.get("args", [])
    if listen and "--listen" in args:
        r.eq(listen, args[args.index("--listen") + 1], "config listen equals --listen")


def check_component_configs(r, src):
    """A component's own config.json (components/kubevirt) is base/config.json with only its
    section added, and validates against schemas/config.json."""
    kdir = os.path.join(src, "deploy", "kubernetes")
    validate = os.path.join(src, "test", "schema", "validate.py")
    with open(os.path.join(kdir, "base", "config.json"), encoding="utf-8") as f:
        base = json.load(f)
    for comp, section, want in (("kubevirt", "kubevirt", {}),):
        path = os.path.join(kdir, "components", comp, "config.json")
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        r.eq(cfg.get(section), want, f"components/{comp}/config.json: {section} {want}")
        rest = {k: v for k, v in cfg.items() if k != section}
        r.eq(rest, base, f"components/{comp}/config.json is base/config.json plus {section}")
        p = subprocess.run([sys.executable, validate, "config", path], capture_output=True,
                           text=True, timeout=120)
        r.check(p.returncode == 0, f"components/{comp}/config.json validates against "
                "schemas/config.json", (p.stdout + p.stderr).strip()[-600:])


REQUIRED_UNIT = {
    "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
    "PrivateTmp": "yes", "PrivateDevices": "yes", "StateDirectory": "hvupdater",
    "ConfigurationDirectory": "hvupdater", "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "CapabilityBoundingSet": "", "User": "hvupdater", "LimitCORE": "0",
}


def check_systemd(r, src, binary):
    path = os.path.join(src, "deploy", "systemd", "hvupdater.service")
    unit = hv.parse_unit(path)
    for k, v in REQUIRED_UNIT.items():
        r.eq(hv.unit_get(unit, "Service", k)[-1:], [v], f"unit {k}={v}")
    r.check("@system-service" in hv.unit_get(unit, "Service", "SystemCallFilter"),
            "unit SystemCallFilter=@system-service")
    r.check(not hv.unit_get(unit, "Service", "DynamicUser") or
            hv.unit_get(unit, "Service", "DynamicUser")[-1] in ("no", "false"),
            "unit uses the packaged user, not DynamicUser")
    execs = hv.unit_get(unit, "Service", "ExecStart")
    if not r.eq(len(execs), 1, "unit has one ExecStart"):
        return
    argv = execs[0].split()
    r.check(argv[:2] == ["/usr/bin/hvupdater", "serve"], "ExecStart runs /usr/bin/hvupdater serve",
            argv)
    # /etc/default/hvupdater, as Debian's libvirtd: HVUPDATER_ARGS appended, split into words
    r.eq(hv.unit_get(unit, "Service", "EnvironmentFile"), ["-/etc/default/hvupdater"],
         "unit reads /etc/default/hvupdater (optional) with EnvironmentFile=")
    r.eq(argv[-1:], ["$HVUPDATER_ARGS"], "ExecStart ends with $HVUPDATER_ARGS (word-split)")
    default = hv.parse_env_file(os.path.join(src, "deploy", "systemd", "hvupdater.default"))
    r.eq(default, {"HVUPDATER_ARGS": ""}, "hvupdater.default sets HVUPDATER_ARGS, empty")
    with open(os.path.join(src, "deploy", "systemd", "hvupdater.default"), encoding="utf-8") as f:
        example = re.search(r'^#HVUPDATER_ARGS="([^"]*)"$', f.read(), re.M)
    if r.check(example, "hvupdater.default shows an example HVUPDATER_ARGS"):
        ex_seen, problems = hv.parse_argv(example.group(1).split(), hv.serve_flags(binary))
        r.check(not problems, "the example's flags are serve flags with their values", problems)
    with open(os.path.join(src, "deploy", "debian", "conffiles"), encoding="utf-8") as f:
        r.check("/etc/default/hvupdater" in f.read().split(),
                "deploy/debian/conffiles lists /etc/default/hvupdater")
    argv = [a for a in argv if a != "$HVUPDATER_ARGS"]
    seen, problems = hv.parse_argv(argv[2:], hv.serve_flags(binary))
    r.check(not problems, "every ExecStart arg is a serve flag with its value", problems)
    r.eq(seen.get("--config"), ["/etc/hvupdater/config.json"],
         "ExecStart --config is the packaged config in ConfigurationDirectory")
    r.check("--tls-cert" not in seen and "--cert-dir" not in seen,
            "no --tls-cert/--cert-dir: the certificate goes to $STATE_DIRECTORY/tls")
    help_ = hv.help_text(binary, "serve")
    r.check("$STATE_DIRECTORY" in help_, "serve --help documents the $STATE_DIRECTORY default")
    r.eq(hv.listen_port((seen.get("--listen") or [""])[-1]), 9443, "ExecStart listens on 9443")
    with open(os.path.join(src, "deploy", "debian", "postinst"), encoding="utf-8") as f:
        post = f.read()
    r.check(re.search(r"adduser\b.*--system.*\bhvupdater\b", post, re.S) and
            "adduser --quiet hvupdater libvirt" in post,
            "postinst creates the unit's user and adds it to group libvirt")
    r.check("/run/systemd/system" in post and not re.search(r"systemctl (start|enable|restart)\b", post),
            "postinst talks to systemd only when it runs, and never starts the service")
    pkg = open(os.path.join(src, "cmake", "Packaging.cmake"), encoding="utf-8").read()
    r.check("deploy/systemd/hvupdater.service" in pkg.replace("${HV_DEPLOY_DIR}", "deploy"),
            "Packaging.cmake installs this unit")
    r.check(re.search(r"systemd/hvupdater\.default DESTINATION \$\{HV_DEFAULT_DIR\}\s+"
                      r"RENAME hvupdater", pkg) and
            'set(HV_DEFAULT_DIR "/etc/default"' in pkg,
            "Packaging.cmake installs hvupdater.default as /etc/default/hvupdater")


def check_container(r, src, dep, binary):
    stages = containerfile(src)
    if not r.eq(len(stages), 2, "Containerfile has a build and a runtime stage"):
        return
    build, run = stages
    r.eq(build["from"], "debian:12", "build stage FROM debian:12")
    r.eq(run["from"], "debian:12-slim", "runtime stage FROM debian:12-slim")
    r.check(any("deploy/container/build-steps.sh" in x for x in build["RUN"]),
            "build stage runs deploy/container/build-steps.sh")
    r.eq(run["ENTRYPOINT"], ["/usr/bin/hvupdater", "serve"], "ENTRYPOINT")
    uid = (run["USER"] or "").split(":")[0]
    r.eq(uid, "65532", "runtime USER uid 65532")
    r.eq(str(dep.pod.get("securityContext", {}).get("runAsUser")), uid,
         "Deployment runAsUser is the image's user")
    r.eq(dep.container.get("command", [None])[0], run["ENTRYPOINT"][0],
         "Deployment command is the image's binary")
    pkgs = runtime_packages(run)
    r.check("ca-certificates" in pkgs, "runtime stage installs ca-certificates")
    need = hv.needed_packages(binary)
    for so, pkg in sorted(need.items()):
        if re.match(r"^lib(asan|ubsan|lsan|tsan)\.", so):
            print(f"note: {so} is a sanitizer runtime of this build, not of the image's")
            continue
        if not r.check(pkg, f"{so} belongs to a Debian package"):
            continue
        r.check(pkg in BASE_IMAGE_PACKAGES or pkg in pkgs,
                f"runtime stage installs {pkg} (for {so})", sorted(pkgs))
    for so in ("libmicrohttpd12", "libgnutls30", "libyajl2", "libyaml-0-2", "libcurl4", "libxml2",
               "libvirt0"):
        r.check(so in pkgs, f"runtime stage installs {so}")
    for cp in run["COPY"]:
        r.check(cp.startswith("--from=build "), f"runtime COPY comes from the build stage: {cp}")
    steps = os.path.join(src, "deploy", "container", "build-steps.sh")
    r.check(os.access(steps, os.X_OK), "build-steps.sh is executable")


def check_server_flags(r, binary):
    """The flags the clusterctl components pass: --require-namespace refuses a pod outside
    the namespace the ExtensionConfig names (clusterctl --target-namespace alone), naming
    both; --can-update-failure-policy takes Fail or Ignore only."""
    def serve(env_ns, *args):
        env = {k: v for k, v in os.environ.items() if k != "POD_NAMESPACE"}
        if env_ns is not None:
            env["POD_NAMESPACE"] = env_ns
        return subprocess.run([binary, "serve", "--check-config", *args], capture_output=True,
                              text=True, timeout=60, env=env)
    p = serve("team-x", "--require-namespace", "team-x")
    r.check(p.returncode == 0, "--require-namespace NS with POD_NAMESPACE=NS starts",
            p.stderr[-300:])
    p = serve("team-x", "--require-namespace", "hvupdater-system")
    r.check(p.returncode == 1 and "runs in namespace team-x" in p.stderr and
            "sends CAPI's calls to namespace hvupdater-system" in p.stderr and
            "HVUPDATER_TARGET_NAMESPACE=team-x" in p.stderr,
            "--require-namespace refuses another POD_NAMESPACE, naming both and the variable",
            p.stderr[-400:])
    p = serve(None, "--require-namespace", "hvupdater-system")
    r.check(p.returncode == 1 and "POD_NAMESPACE is not set" in p.stderr,
            "--require-namespace without POD_NAMESPACE refuses to start", p.stderr[-300:])
    for v, rc in (("Fail", 0), ("Ignore", 0), ("ignore", 2)):
        p = serve(None, "--can-update-failure-policy", v)
        r.eq(p.returncode, rc, f"--can-update-failure-policy {v} exits {rc}")


def check_manpage(r, src, binary, version):
    path = os.path.join(src, "docs", "man", "hvupdater.1")
    with open(path, encoding="utf-8") as f:
        man = f.read()
    text = man.replace("\\-", "-").replace("\\fR", "").replace("\\fB", "").replace("\\fI", "")
    for cmd in ("serve", "plan", "apply"):
        for flag in sorted(hv.all_flags(hv.help_text(binary, cmd))):
            r.check(flag in text, f"man page describes {cmd} {flag}")
    for s in KNOWN_SETTINGS:
        r.check(s in text, f"man page describes setting {s}")
    m = re.search(r'^\.TH HVUPDATER 1 "[^"]*" "hvupdater ([0-9.]+)"', man, re.M)
    r.check(m, "man page .TH line names the version")
    groff = shutil.which("groff")
    if groff:
        p = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", path], capture_output=True,
                           text=True, timeout=60)
        r.check(p.returncode == 0 and not p.stderr.strip(), "man page renders without warnings",
                p.stderr.strip()[:400])


# ---- serve -------------------------------------------------------------------------------

def can_update_request(src, settings):
    with open(os.path.join(src, "schemas", "examples",
                           "can-update-machine-request.vsphere-memory.json")) as f:
        req = json.load(f)
    req = copy.deepcopy(req)
    if settings is None:
        req.pop("settings", None)
    else:
        req["settings"] = settings
    return req


def as_pod_user():
    return os.geteuid() == 0 and shutil.which("setpriv")


def lay_out_pod(dep, root, uid, gid):
    """Creates the container's mounts under root as the kubelet would; returns the TLS
    material made for the serving-cert Secret."""
    pod, c = dep.pod, dep.container
    vols = {v["name"]: v for v in pod["volumes"]}
    cert = dep.one("Certificate")
    pk = cert["spec"].get("privateKey", {})
    tls = hv.make_cert(os.path.join(root, "_secrets", "serving"), cert["spec"]["dnsNames"],
                       pk.get("algorithm", "RSA"), pk.get("size", 2048))
    cfg = json.loads(next(cm for cm in dep.by_kind["ConfigMap"])["data"]["config.json"])
    creds = {}
    for s in cfg.get("vsphere", {}).get("servers", []):
        for k in ("usernameFile", "passwordFile"):
            if k in s:
                creds[os.path.basename(s[k])] = b"fake-" + k.encode() + b"\n"
    secrets = {cert["spec"]["secretName"]: {k: open(v, "rb").read() for k, v in tls.items()},
               "hvupdater-vsphere-credentials": creds}
    for m in c.get("volumeMounts", []):
        d = os.path.join(root, m["mountPath"].lstrip("/"))
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        v = vols[m["name"]]
        files, mode = {}, 0o644
        if "secret" in v:
            name = v["secret"]["secretName"]
            mode = v["secret"].get("defaultMode", 0o644)
            if name not in secrets:
                if not v["secret"].get("optional"):
                    raise RuntimeError(f"required secret {name}: test cannot fake it")
                continue
            data = secrets[name]
            items = v["secret"].get("items")
            files = {i["path"]: data[i["key"]] for i in items} if items else dict(data)
        elif "configMap" in v:
            cm = dep.configmap_for_volume(v)
            mode = v["configMap"].get("defaultMode", 0o644)
            files = {k: val.encode() for k, val in cm["data"].items()}
        elif "emptyDir" in v:
            os.chmod(d, 0o1777)
        for name, data in files.items():
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.write(data)
            os.chmod(p, mode)
            if uid is not None:
                os.chown(p, 0, gid)  # fsGroup owns projected files
    return tls


def serve(args):
    r = hv.Results()
    src, binary = args.source, os.path.abspath(args.binary)
    dep = Deploy(src)
    os.makedirs(args.work, exist_ok=True)
    # Under /tmp, not the build tree: the pod's uid must reach it (a checkout may live in a
    # home directory others cannot enter).
    root = tempfile.mkdtemp(prefix="hv-pod-", dir="/tmp")
    os.chmod(root, 0o755)
    # The kubelet runs the container as runAsUser/runAsGroup with fsGroup as supplementary
    # group, and gives Secret and ConfigMap files to group fsGroup.
    psc = dep.pod.get("securityContext", {})
    uid, gid, fsgroup = None, None, None
    prefix = []
    if as_pod_user():
        uid, gid = psc.get("runAsUser"), psc.get("runAsGroup", psc.get("runAsUser"))
        fsgroup = psc.get("fsGroup")
        prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
        prefix += [f"--groups={fsgroup}"] if fsgroup is not None else ["--clear-groups"]
    print(f"note: pod root {root}; running as "
          f"{'uid %s gid %s groups %s' % (uid, gid, fsgroup) if uid else 'the current user'}")
    tls = lay_out_pod(dep, root, uid, fsgroup if fsgroup is not None else gid)
    # Every directory up to the binary must be reachable for the pod's uid.
    stages = containerfile(src)
    argv = dep.argv(stages[-1]["ENTRYPOINT"])
    mounts = [m["mountPath"] for m in dep.container.get("volumeMounts", [])]
    # The image's binary is this build's: put it where the image has it.
    image_bin = os.path.join(root, argv[0].lstrip("/"))
    os.makedirs(os.path.dirname(image_bin), exist_ok=True)
    shutil.copy2(binary, image_bin)
    os.chmod(image_bin, 0o755)
    for dirpath, dirnames, _ in os.walk(root):
        for dn in dirnames:
            os.chmod(os.path.join(dirpath, dn), os.stat(os.path.join(dirpath, dn)).st_mode | 0o755)
    cmd = [image_bin]
    args_ = argv[1:]
    i = 0
    while i < len(args_):
        a = args_[i]
        if a in ("--listen", "--metrics-listen"):
            cmd += [a, "127.0.0.1:0"]
            i += 2
            continue
        if a.startswith("/") and any(a.startswith(mp.rstrip("/") + "/") for mp in mounts):
            a = os.path.join(root, a.lstrip("/"))
        cmd.append(a)
        i += 1
    tmp_mount = next((mp for mp in mounts if mp == "/tmp"), None)
    port_dir = os.path.join(root, "tmp") if tmp_mount else root
    port_file = os.path.join(port_dir, "hvupdater.port")
    cmd += ["--port-file", port_file]
    # a pod's environment names the API server (the machine check's); nothing answers there,
    # and no call here reaches the check's reads
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": "1"}
    for e in dep.container.get("env", []) or []:
        v = e.get("value", "")
        if v.startswith("/") and any(v == mp or v.startswith(mp.rstrip("/") + "/") for mp in mounts):
            v = os.path.join(root, v.lstrip("/"))
        env[e["name"]] = v
    # readOnlyRootFilesystem: in a private mount namespace, / read-only but for the
    # emptyDir mounts (where root may do that: CI runs as root).
    empty_dirs = [os.path.join(root, m["mountPath"].lstrip("/"))
                  for m in dep.container.get("volumeMounts", [])
                  if "emptyDir" in next(v for v in dep.pod["volumes"] if v["name"] == m["name"])]
    if os.geteuid() == 0 and shutil.which("unshare") and \
            subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0:
        script = ('set -e; n=$1; shift; i=0; while [ $i -lt $n ]; do mount --bind "$1" "$1"; '
                  'shift; i=$((i+1)); done; mount -o remount,bind,ro /; exec "$@"')
        prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                  str(len(empty_dirs)), *empty_dirs] + prefix
        ro_root = True
    else:
        print("note: cannot make / read-only here (needs root and unshare -m): "
              "readOnlyRootFilesystem not emulated")
        ro_root = False
    print("note: running " + " ".join(prefix + cmd))
    srv = hv.Server(cmd, port_file, os.path.join(args.work, "pod-server.log"), env=env,
                    cwd=root, prefix=prefix)
    try:
        port = srv.start()
        r.check(True, f"the pod's command line starts the server (port {port})"
                + (" with / read-only but the emptyDir mounts" if ro_root else ""))
        if uid is not None:
            status = open(f"/proc/{srv.proc.pid}/status").read()
            r.eq(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1), str(uid),
                 "the server runs as the pod's runAsUser")
        ca = tls["ca.crt"]
        c = dep.container
        svc = dep.one("Service")
        names = dep.one("Certificate")["spec"]["dnsNames"]
        mport = 0
        for ln in srv.log_text().splitlines():
            try:
                ev = json.loads(ln)
            except ValueError:
                continue
            if ev.get("event") == "listening":
                mport = int(ev.get("metricsPort") or 0)
        r.check(mport > 0, "the status listener (--metrics-listen) is up", mport)

        def plain_get(path):
            conn = http.client.HTTPConnection("127.0.0.1", mport, timeout=10)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                return resp.status, resp.read().decode()
            finally:
                conn.close()
        for probe in ("livenessProbe", "readinessProbe"):
            path = c[probe]["httpGet"]["path"]
            st, body = plain_get(path)
            r.eq(st, 200, f"{probe} GET {path} over HTTP on the metrics port ({body.strip()})")
        st, body = plain_get("/metrics")
        r.check(st == 200 and "hvupdater_build_info" in body,
                "GET /metrics on the metrics port (the NetworkPolicy's monitoring rule)", st)
        st, _ = hv.https(port, "GET", "/metrics", ca, names[0])
        r.eq(st, 404, "no /metrics on the hooks port")
        for name in names:
            try:
                st, _ = hv.https(port, "GET", "/readyz", ca, name)
                r.eq(st, 200, f"TLS verifies as {name} with the Secret's ca.crt")
            except Exception as e:  # noqa: BLE001
                r.check(False, f"TLS verifies as {name}", e)
        want = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc"
        r.check(want in names, f"CAPI's dial name {want} is in the certificate")

        st, body = hv.https(port, "POST", hv.hook_path("Discovery"), ca, want,
                            {"apiVersion": "hooks.runtime.cluster.x-k8s.io/v1alpha1",
                             "kind": "DiscoveryRequest"})
        r.eq(st, 200, "POST discovery")
        disc = json.loads(body) if st == 200 else {}
        r.eq(disc.get("status"), "Success", "discovery status")
        hooks = {h["requestHook"]["hook"]: h for h in disc.get("handlers", [])}
        r.eq(set(hooks), HOOKS, "discovery registers the three in-place hooks")
        cfg = json.loads(dep.by_kind["ConfigMap"][0]["data"]["config.json"])
        for h in hooks.values():
            r.eq(h.get("timeoutSeconds"), cfg.get("handlerTimeoutSeconds", 10),
                 f"{h['name']} timeoutSeconds from the ConfigMap's config")
        if "CanUpdateMachine" in hooks:
            path = hv.hook_path("CanUpdateMachine", hooks["CanUpdateMachine"]["name"])
            settings = dep.one("ExtensionConfig")["spec"]["settings"]
            st, body = hv.https(port, "POST", path + "?timeout=10s", ca, want,
                                can_update_request(src, settings))
            ans = json.loads(body) if st == 200 else {}
            # The manifests' vCenter does not exist here, so since CanUpdateMachine reads the
            # VM's facts (issue 17 item 8) the answer is exactly the retryable "cannot check"
            # Failure: that is past the settings check, which is what this step proves (a
            # covered answer against a real vCenter is vsphere_e2e's and the CAPI lab's part).
            # With the machine check on (the Deployment's --check-machines) the next stop is
            # the API server's word on the Machine, which is not there either.
            r.check(st == 200 and ans.get("status") == "Failure" and ans.get(
                        "message", "").startswith("machine check: "),
                    "CanUpdateMachine with the ExtensionConfig's settings gets past them "
                    "(to the machine check's retryable Failure: no API server here)",
                    f"{st} {body[:300]}")
            r.check("setting" not in ans.get("message", ""),
                    "... and its message is about the machine, not a setting", body[:300])
            print(f"note: answer message: {ans.get('message')!r}")
            for bad, name in (({**settings, "powerCycle": "Sometimes"}, "powerCycle"),
                              ({**settings, "powercycle": "Never"}, "powercycle")):
                st, body = hv.https(port, "POST", path, ca, want, can_update_request(src, bad))
                ans = json.loads(body) if st == 200 else {}
                r.check(ans.get("status") == "Failure" and name in ans.get("message", ""),
                        f"control: a bad setting {name} answers Failure naming it", body[:300])
    except Exception as e:  # noqa: BLE001
        r.check(False, "pod emulation", e)
    finally:
        rc = srv.stop()
        r.eq(rc, 0, "SIGTERM stops the pod's server cleanly")
        if r.failed:
            print(srv.log_text()[-3000:])

    # The systemd host config is accepted by `serve --config` (cert made in a cert dir).
    host_cfg = os.path.join(src, "deploy", "systemd", "config.json")
    hdir = tempfile.mkdtemp(prefix="hv-host-", dir=args.work)
    pf = os.path.join(hdir, "port")
    srv = hv.Server([binary, "serve", "--listen", "127.0.0.1:0", "--config", host_cfg,
                     "--cert-dir", os.path.join(hdir, "tls"), "--port-file", pf], pf,
                    os.path.join(args.work, "host-server.log"))
    try:
        port = srv.start()
        st, body = hv.https(port, "GET", "/readyz", os.path.join(hdir, "tls", "ca.crt"))
        r.eq(st, 200, "serve --config deploy/systemd/config.json starts and is ready")
    except Exception as e:  # noqa: BLE001
        r.check(False, "serve --config deploy/systemd/config.json", e)
    finally:
        r.eq(srv.stop(), 0, "host-config server stops cleanly")
    if not r.failed:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(hdir, ignore_errors=True)
    else:
        print(f"note: kept {root} and {hdir} for inspection")
    return r.finish()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["static", "serve"])
    ap.add_argument("--source", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    a.source = os.path.abspath(a.source)
    if a.mode == "serve":
        a.work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="hv-deploy-"))
        return serve(a)
    return static(a)


if __name__ == "__main__":
    sys.exit(main())
