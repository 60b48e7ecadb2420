#!/usr/bin/python3
"""render.py: CAPI's own core manifests from its Go module, pointed at the lab's manager.

  render.py crds CAPI_DIR URL CA_FILE [PART]
      the CRDs of PART/config/crd/bases (PART: core, the default, or controlplane/kubeadm),
      each with more than one version converted by the manager's /convert webhook (as
      config/crd/patches does)
  render.py webhooks CAPI_DIR URL CA_FILE [PART]
      PART/config/webhook/manifests.yaml with each service reference replaced by URL + path
  render.py crds-storage CAPI_DIR PART
      the CRDs of PART/config/crd/bases with their storage version only (no conversion: for
      bootstrap/kubeadm, whose manager the lab does not run)

URL is the manager's webhook server (https://127.0.0.1:PORT), CA_FILE the CA that signed its
certificate. Prints a JSON List for `kubectl apply -f -`.
"""
import base64
import glob
import json
import os
import sys

import yaml


def contract_label(crd):
    """A provider's CRD tells CAPI which of its versions follows the v1beta2 contract (what
    config/crd/kustomization.yaml adds as a label)."""
    crd["metadata"].setdefault("labels", {})["cluster.x-k8s.io/v1beta2"] = "v1beta2"
    return crd


def main():
    what, capi = sys.argv[1:3]
    items = []
    if what == "crds-storage":
        for path in sorted(glob.glob(os.path.join(capi, sys.argv[3], "config/crd/bases/*.yaml"))):
            for doc in yaml.safe_load_all(open(path)):
                if doc:
                    doc["spec"]["versions"] = [v for v in doc["spec"]["versions"] if v["storage"]]
                    items.append(contract_label(doc))
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
        return
    url, ca_file = sys.argv[3:5]
    part = sys.argv[5] if len(sys.argv) > 5 else "core"
    ca = base64.b64encode(open(ca_file, "rb").read()).decode()
    if what == "crds":
        for path in sorted(glob.glob(os.path.join(capi, part, "config/crd/bases/*.yaml"))):
            for doc in yaml.safe_load_all(open(path)):
                if not doc:
                    continue
                if len(doc["spec"]["versions"]) > 1:
                    doc["spec"]["conversion"] = {
                        "strategy": "Webhook",
                        "webhook": {"conversionReviewVersions": ["v1"],
                                    "clientConfig": {"url": url + "/convert", "caBundle": ca}}}
                items.append(contract_label(doc) if part != "core" else doc)
    elif what == "webhooks":
        path = os.path.join(capi, part, "config/webhook/manifests.yaml")
        prefix = "capi-lab-" if part == "core" else "capi-lab-%s-" % part.replace("/", "-")
        for doc in yaml.safe_load_all(open(path)):
            if not doc:
                continue
            doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
            for hook in doc["webhooks"]:
                svc = hook["clientConfig"].pop("service")
                hook["clientConfig"]["url"] = url + svc["path"]
                hook["clientConfig"]["caBundle"] = ca
            items.append(doc)
    else:
        sys.exit("usage: render.py crds|webhooks CAPI_DIR URL CA_FILE [PART] | crds-storage CAPI_DIR PART")
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)


if __name__ == "__main__":
    main()
