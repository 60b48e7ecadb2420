#!/usr/bin/env python3
"""gen-values-schema.py: write the Helm chart's values.schema.json from the project's schemas,
so that `helm install` refuses what the server would refuse, by the same rules.

  scripts/gen-values-schema.py [--check] [--out FILE]

  --check  compare the committed deploy/helm/hvupdater/values.schema.json with what this
           script generates (prints "FAIL ..." with a diff and exits 1 when they differ)
  --out    where to write (default: deploy/helm/hvupdater/values.schema.json)

What comes from where:
  extension.settings        schemas/common.json $defs/extensionSettings (the server's
                            settings rules: test schema.settings_diff holds it to them)
  config                    schemas/config.json without vsphere, libvirt, kubernetes and
                            kubevirt
  vsphere.servers, libvirt  schemas/config.json's vsphere.servers and libvirt (+ pkiSecret)
  kubernetes                schemas/config.json's kubernetes (server, tokenFile and caFile may
                            be "": in-cluster; events comes from events.enabled)
  kubevirt.namespaces       schemas/config.json's kubevirtCluster namespaces (the in-cluster
                            cluster's; kubevirt.enabled makes the section);
                            followInfraClusterSecretRef and secretNamespaces written here
  everything else           the chart's own values, written here
Every object refuses unknown keys (additionalProperties: false), the Kubernetes pod fields
included (their own keys only). $refs into common.json are copied into $defs (helm resolves
no external reference). Edit schemas/ or this script, never values.schema.json: test
deploy.chart fails when the committed file differs from what this writes.
"""

import argparse
import copy
import difflib
import json
import os
import sys

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(SRC, "deploy", "helm", "hvupdater", "values.schema.json")

# The values serve's flags take (src/cli/cli_serve.c: --log-format, --log-level, and
# --can-update-failure-policy for the two CanUpdate handlers).
LOG_FORMATS = ["hvupdater", "capi"]
LOG_LEVELS = ["debug", "info", "warn", "error"]
FAILURE_POLICIES = ["Fail", "Ignore"]


def load(name):
    with open(os.path.join(SRC, "schemas", name), encoding="utf-8") as f:
        return json.load(f)


def rewrite_refs(node, used):
    """config.json's refs: '#/$defs/X' stays, 'common.json#/$defs/X' becomes
    '#/$defs/common-X' (recorded in used)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("common.json#/$defs/"):
                name = v[len("common.json#/$defs/"):]
                used.add(name)
                out[k] = "#/$defs/common-" + name
            else:
                out[k] = rewrite_refs(v, used)
        return out
    if isinstance(node, list):
        return [rewrite_refs(v, used) for v in node]
    return node


def obj(props, required=None, description=None):
    o = {"type": "object", "additionalProperties": False, "properties": props}
    if required:
        o["required"] = required
    if description:
        o = {"description": description, **o}
    return o


def string_map(description=None):
    o = {"type": "object", "additionalProperties": {"type": "string"}}
    return {"description": description, **o} if description else o


BOOL = {"type": "boolean"}
DNS_LABEL = {"$ref": "#/$defs/common-dns1123Label"}
NAMESPACES = {"type": "array", "items": DNS_LABEL}


def k8s_quantity():
    return {"anyOf": [{"type": "string", "minLength": 1}, {"type": "number"}]}


def pod_values():
    """The pod fields the chart passes through, their own keys only."""
    toleration = obj({
        "key": {"type": "string"},
        "operator": {"enum": ["Exists", "Equal"]},
        "value": {"type": "string"},
        "effect": {"enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute"]},
        "tolerationSeconds": {"type": "integer"}})
    resources = obj({k: {"type": "object", "additionalProperties": k8s_quantity()}
                     for k in ("requests", "limits")})
    # Affinity: Kubernetes' three kinds; their insides are the API server's to judge.
    affinity = obj({k: {"type": "object"} for k in ("nodeAffinity", "podAffinity",
                                                     "podAntiAffinity")},
                   description="A pod affinity; empty: the replicas prefer different nodes "
                   "and zones.")
    return {
        "nodeSelector": string_map(),
        "affinity": affinity,
        "tolerations": {"type": "array", "items": toleration},
        "podLabels": string_map(),
        "podAnnotations": string_map(),
        "resources": resources,
        "imagePullSecrets": {"type": "array",
                             "items": obj({"name": {"type": "string", "minLength": 1}},
                                          required=["name"])},
    }


def generate():
    common = load("common.json")
    config = load("config.json")
    used = {"dns1123Label", "dns1123Subdomain", "extensionSettings"}
    cprops = rewrite_refs(config["properties"], used)
    cdefs = rewrite_refs(config.get("$defs", {}), used)

    chart_config = {k: v for k, v in cprops.items()
                    if k not in ("$schema", "vsphere", "libvirt", "kubernetes", "kubevirt")}
    libvirt = copy.deepcopy(cprops["libvirt"])
    libvirt["properties"] = {
        "pkiSecret": {"description": "The Secret with the libvirt TLS client files "
                      "(optional in the pod).", "type": "string", "minLength": 1},
        **libvirt["properties"]}
    vsphere = obj({
        "credentialsSecret": {"description": "The Secret with the vCenter credentials "
                              "(required in the pod).", "type": "string", "minLength": 1},
        "servers": cprops["vsphere"]["properties"]["servers"]},
        description=cprops["vsphere"].get("title"))
    kube = copy.deepcopy(cprops["kubernetes"])
    kube["properties"].pop("events", None)
    kube["properties"].pop("holdRemediation", None)  # mhc.holdRemediation
    kube["properties"].pop("checkMachines", None)  # machineCheck.enabled
    kube["properties"].pop("dryRunClaims", None)  # dryRunClaims.enabled
    for k in ("server", "tokenFile", "caFile"):
        kube["properties"][k] = {"anyOf": [{"const": ""}, kube["properties"][k]]}

    props = {
        "namespace": obj({"create": BOOL}),
        "image": obj({"repository": {"type": "string", "minLength": 1},
                      "tag": {"type": "string"},
                      "ref": {"type": "string"},
                      "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]}}),
        "replicas": {"type": "integer", "minimum": 0},
        "extension": obj({
            "namespaces": {**NAMESPACES, "minItems": 1},
            "settings": {"$ref": "#/$defs/common-extensionSettings"},
            "canUpdateFailurePolicy": {"enum": FAILURE_POLICIES}}),
        "config": {"type": "object", "additionalProperties": False, "properties": chart_config},
        "logFormat": {"enum": LOG_FORMATS},
        "logLevel": {"enum": LOG_LEVELS},
        "extraArgs": {"type": "array", "items": {"type": "string"}},
        "vsphere": vsphere,
        "libvirt": libvirt,
        "metrics": obj({
            "enabled": BOOL,
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "not": {"const": 9443}},
            "namespaces": NAMESPACES,
            "serviceMonitor": obj({
                "enabled": BOOL,
                "interval": {"type": "string", "pattern": "^([0-9]+(ms|s|m|h))+$"},
                "labels": string_map()})}),
        "capiNamespaces": NAMESPACES,
        "certManager": obj({"issuerRef": {
            **obj({"group": {"$ref": "#/$defs/common-dns1123Subdomain"},
                   "kind": {"enum": ["Issuer", "ClusterIssuer"]},
                   "name": {"type": "string", "minLength": 1}}),
            "anyOf": [{"maxProperties": 0}, {"required": ["name"]}]}}),
        "clientCerts": obj({"enabled": BOOL, "generateCA": BOOL}),
        "priorityClass": obj({"enabled": BOOL,
                              "name": {"$ref": "#/$defs/common-dns1123Subdomain"},
                              "value": {"type": "integer", "minimum": -2147483648,
                                        "maximum": 1000000000}}),
        "kubernetes": kube,
        "capvIdentity": obj({"enabled": BOOL, "secretNamespaces": NAMESPACES}),
        "events": obj({"enabled": BOOL}),
        "mhc": obj({"holdRemediation": BOOL}),
        "kubevirt": obj({"enabled": BOOL, "namespaces": {
            **cdefs["kubevirtCluster"]["properties"]["namespaces"],
            "description": "The VirtualMachines' namespaces: the VM rights through a Role in "
            "each (empty: a ClusterRole, every namespace), and where hvupdater looks for its "
            "operation records after a restart."},
            "followInfraClusterSecretRef": {
                "type": "boolean",
                "description": "A VM's infrastructure cluster from CAPK's infraClusterSecretRef "
                "kubeconfig Secret (config.json kubevirt.followInfraClusterSecretRef; needs "
                "kubevirt.enabled)."},
            "secretNamespaces": {
                **NAMESPACES,
                "description": "Where those kubeconfig Secrets live: get on Secrets through a "
                "Role in each."}},
            description="The KubeVirt backend, KubeVirt in this cluster (docs/kubevirt.md)."),
        "machineCheck": obj({"enabled": BOOL, "infraResources": {
            "type": "array", "items": obj({
                "apiGroup": {"$ref": "#/$defs/common-dns1123Subdomain"},
                "resources": {"type": "array", "minItems": 1, "items": DNS_LABEL}},
                required=["apiGroup", "resources"])}}),
        "dryRunClaims": obj({"enabled": BOOL, "resources": {
            "type": "array", "minItems": 1,
            "items": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}}}),
        "commonLabels": string_map(),
        "drainSeconds": {"type": "integer", "minimum": 0, "maximum": 3600},
        "terminationGracePeriodSeconds": {"type": "integer", "minimum": 1},
        **pod_values(),
    }
    defs = dict(cdefs)
    pending = sorted(used)
    done = set()
    while pending:  # common.json definitions, with the ones they use in turn
        name = pending.pop()
        if name in done:
            continue
        done.add(name)
        more = set()
        d = rewrite_refs(common["$defs"][name], more)
        # common.json's own '#/$defs/X' refs point at common.json
        text = json.dumps(d).replace('"#/$defs/', '"#/$defs/common-').replace(
            '"#/$defs/common-common-', '"#/$defs/common-')
        defs["common-" + name] = json.loads(text)
        pending += sorted(more | set(_local_refs(common["$defs"][name])) - done)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "hvupdater Helm chart values",
        "description": "Generated by scripts/gen-values-schema.py from schemas/config.json and "
                       "schemas/common.json: edit those or the script, not this file.",
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        "$defs": dict(sorted(defs.items())),
    }


def _local_refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/"):
                yield v[len("#/$defs/"):]
            else:
                yield from _local_refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _local_refs(v)


def text():
    return json.dumps(generate(), indent=2) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    want = text()
    if a.check:
        have = open(a.out, encoding="utf-8").read() if os.path.exists(a.out) else ""
        rel = os.path.relpath(a.out, SRC)
        if have != want:
            diff = "".join(list(difflib.unified_diff(
                have.splitlines(True), want.splitlines(True), rel, rel + " (generated)"))[:40])
            print(f"FAIL {rel} differs from what scripts/gen-values-schema.py generates "
                  f"(run it and commit):\n{diff}")
            return 1
        print(f"ok   {rel} is what scripts/gen-values-schema.py generates")
        return 0
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(want)
    print(f"wrote {os.path.relpath(a.out, SRC)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
