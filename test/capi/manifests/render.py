#!/usr/bin/python3
"""render.py: CAPI's own core manifests from its Go module, pointed at the lab's manager.

  render.py crds CAPI_DIR URL CA_FILE      the CRDs of core/config/crd/bases, each with more
                                           than one version converted by the manager's
                                           /convert webhook (as config/crd/patches does)
  render.py webhooks CAPI_DIR URL CA_FILE  core/config/webhook/manifests.yaml with each
                                           service reference replaced by URL + path

URL is the manager's webhook server (https://127.0.0.1:PORT), CA_FILE the CA that signed its
certificate. Prints a JSON List for `kubectl apply -f -`.
"""
import base64
import glob
import json
import os
import sys

import yaml


def main():
    what, capi, url, ca_file = sys.argv[1:5]
    ca = base64.b64encode(open(ca_file, "rb").read()).decode()
    items = []
    if what == "crds":
        for path in sorted(glob.glob(os.path.join(capi, "core/config/crd/bases/*.yaml"))):
            for doc in yaml.safe_load_all(open(path)):
                if not doc:
                    continue
                if len(doc["spec"]["versions"]) > 1:
                    doc["spec"]["conversion"] = {
                        "strategy": "Webhook",
                        "webhook": {"conversionReviewVersions": ["v1"],
                                    "clientConfig": {"url": url + "/convert", "caBundle": ca}}}
                items.append(doc)
    elif what == "webhooks":
        path = os.path.join(capi, "core/config/webhook/manifests.yaml")
        for doc in yaml.safe_load_all(open(path)):
            if not doc:
                continue
            doc["metadata"]["name"] = "capi-lab-" + doc["metadata"]["name"]
            for hook in doc["webhooks"]:
                svc = hook["clientConfig"].pop("service")
                hook["clientConfig"]["url"] = url + svc["path"]
                hook["clientConfig"]["caBundle"] = ca
            items.append(doc)
    else:
        sys.exit("usage: render.py crds|webhooks CAPI_DIR URL CA_FILE")
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)


if __name__ == "__main__":
    main()
