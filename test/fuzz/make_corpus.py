#!/usr/bin/env python3
"""make_corpus.py FIXTURES_DIR OUT_DIR: write fuzz_hooks seed inputs into OUT_DIR.

Each test/fixtures/*.json becomes the requests CAPI would send with it (CanUpdateMachine or
CanUpdateMachineSet with current+desired, UpdateMachine with desired only), with and without
settings; plus a discovery request and a few JSON Patch arrays. Generated into the build
directory at build time; nothing here is committed but this script.
"""
import hashlib
import json
import os
import sys

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
SETTINGS = [None, {"powerCycle": "Never"}, {"onUncoverable": "Block", "powerOffMode": "Hard"},
            {"powerCycle": "Sometimes"}]
PATCHES = [
    [{"op": "replace", "path": "/spec/memoryMiB", "value": 8192}],
    [{"op": "add", "path": "/spec/network/devices/-", "value": {"networkName": "c"}},
     {"op": "remove", "path": "/spec/network/devices/0"},
     {"op": "test", "path": "/spec/numCPUs", "value": 2}],
    [{"op": "move", "from": "/spec/diskGiB", "path": "/spec/disk"},
     {"op": "copy", "from": "/metadata/labels", "path": "/spec/labels"},
     {"op": "replace", "path": "/metadata/annotations/x~0y", "value": "2"},
     {"op": "add", "path": "/metadata/labels/a~1b", "value": None}],
    [{"op": "add", "path": "", "value": [1, 2.0, "3"]}],
    [],
]
# Inputs that once broke an invariant (kept as seeds so a regression shows at once).
REGRESSIONS = [
    # a key holding U+0000 was cut at the NUL: printed as "" and read as "kind"
    '{"":1,"\\u0000":2}',
    '{"apiVersion":"' + API + '","kind":"DiscoveryRequest",'
    '"kind\\u0000x":"CanUpdateMachineRequest"}',
]


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    seeds = [{"apiVersion": API, "kind": "DiscoveryRequest"}] + PATCHES
    for fn in sorted(os.listdir(src)):
        if not fn.endswith(".json"):
            continue
        with open(os.path.join(src, fn), encoding="utf-8") as f:
            fx = json.load(f)
        is_set = "machineSet" in fx.get("current", {})
        kind = "CanUpdateMachineSetRequest" if is_set else "CanUpdateMachineRequest"
        for s in SETTINGS:
            req = {"apiVersion": API, "kind": kind}
            if s:
                req["settings"] = s
            req.update(fx)
            seeds.append(req)
        if not is_set:
            seeds.append({"apiVersion": API, "kind": "UpdateMachineRequest",
                          "desired": fx["desired"]})
    for text in REGRESSIONS:
        name = "regression-" + hashlib.sha1(text.encode()).hexdigest()[:16]
        with open(os.path.join(out, name), "wb") as f:
            f.write(text.encode())
    for s in seeds:
        # keep the fixtures' literal numbers (4096 vs 8192.0): json round-trips floats as floats
        text = json.dumps(s, separators=(",", ":")).encode()
        name = hashlib.sha1(text).hexdigest()
        with open(os.path.join(out, name), "wb") as f:
            f.write(text)
    print(f"{len(seeds) + len(REGRESSIONS)} seeds in {out}")


if __name__ == "__main__":
    main()
