"""capijudge.py: judge a CanUpdateMachine(Set) answer the way Cluster API v1.12 does.

Each patch present is applied (RFC 6902 or RFC 7386) to a copy of the request's current
object and only the spec (spec.template.spec for a MachineSet request) is copied back; then
the Machine (spec without the fields CAPI ignores) and the other objects (whole spec) are
compared with desired. Numbers compare with Kubernetes typing: 4096 and 4096.0 differ.
judge() returns the JSON pointers that still differ ([] = covered).
"""
import base64
import copy
import json
import os
import sys

if sys.flags.optimize:  # python -O / PYTHONOPTIMIZE strips assert, and these checks are asserts
    raise SystemExit("%s: run without -O or PYTHONOPTIMIZE: its checks are assert statements"
                     % os.path.basename(__file__))


def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def _tokens(p):
    if p == "":
        return []
    assert p[0] == "/", p
    return [t.replace("~1", "/").replace("~0", "~") for t in p[1:].split("/")]


def _parent(doc, toks):
    cur = doc
    for t in toks[:-1]:
        cur = cur[int(t)] if isinstance(cur, list) else cur[t]
    return cur


def apply_json_patch(doc, ops):
    for op in ops:
        toks = _tokens(op["path"])
        kind = op["op"]
        if kind in ("add", "replace"):
            par = _parent(doc, toks)
            if isinstance(par, list):
                i = len(par) if toks[-1] == "-" else int(toks[-1])
                if kind == "add":
                    par.insert(i, copy.deepcopy(op["value"]))
                else:
                    par[i] = copy.deepcopy(op["value"])
            else:
                if kind == "replace" and toks[-1] not in par:
                    raise ValueError("replace of a missing member " + op["path"])
                par[toks[-1]] = copy.deepcopy(op["value"])
        elif kind == "remove":
            par = _parent(doc, toks)
            if isinstance(par, list):
                del par[int(toks[-1])]
            else:
                del par[toks[-1]]
        elif kind == "test":
            par = _parent(doc, toks)
            v = par[int(toks[-1])] if isinstance(par, list) else par[toks[-1]]
            if not same(v, op["value"]):
                raise ValueError("test failed at " + op["path"])
        else:
            raise ValueError("unsupported op " + kind)
    return doc


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


def apply_field(obj, field, spec_path):
    if not field.get("patchType"):
        raise ValueError("patchType is not set")
    raw = base64.b64decode(field.get("patch", ""))
    if field["patchType"] == "JSONPatch":
        ops = json.loads(raw)
        if not ops:
            return obj
        patched = apply_json_patch(copy.deepcopy(obj), ops)
    elif field["patchType"] == "JSONMergePatch":
        if raw in (b"", b"{}"):
            return obj
        patched = merge_patch(copy.deepcopy(obj), json.loads(raw))
    else:
        raise ValueError("unknown patchType")
    cur = patched
    for t in spec_path:
        if not isinstance(cur, dict) or t not in cur:
            return obj
        cur = cur[t]
    dst = obj
    for t in spec_path[:-1]:
        dst = dst.setdefault(t, {})
    dst[spec_path[-1]] = cur
    return obj


def clean_machine_spec(spec):
    if not isinstance(spec, dict):
        return spec
    m = copy.deepcopy(spec)
    for k in ("clusterName", "bootstrap", "infrastructureRef", "providerID", "minReadySeconds",
              "readinessGates", "taints"):
        m.pop(k, None)
    d = m.get("deletion")
    if isinstance(d, dict):
        for k in ("nodeDrainTimeoutSeconds", "nodeVolumeDetachTimeoutSeconds",
                  "nodeDeletionTimeoutSeconds"):
            d.pop(k, None)
        if not d:
            del m["deletion"]
    return m


def diff(prefix, a, b, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            diff(prefix + "/" + k, a.get(k), b.get(k), out)
    elif not same(a, b):
        out.append(prefix)


def judge(req, resp, machine_set=False):
    """The pointers that still differ after applying resp's patches to req (CAPI's view)."""
    if machine_set:
        targets = [("machineSet", "machineSetPatch"),
                   ("bootstrapConfigTemplate", "bootstrapConfigTemplatePatch"),
                   ("infrastructureMachineTemplate", "infrastructureMachineTemplatePatch")]
        spec_path = ["spec", "template", "spec"]
    else:
        targets = [("machine", "machinePatch"), ("bootstrapConfig", "bootstrapConfigPatch"),
                   ("infrastructureMachine", "infrastructureMachinePatch")]
        spec_path = ["spec"]
    current = copy.deepcopy(req["current"])
    for name, field in targets:
        f = resp.get(field)
        if f and (f.get("patchType") or f.get("patch")):
            if name not in current:
                raise ValueError("patch for an object the request does not hold: " + name)
            current[name] = apply_field(current[name], f, spec_path)
    out = []
    for name, _ in targets:
        cur, des = current.get(name), req["desired"].get(name)
        if cur is None and des is None:
            continue
        if name == "machine":
            a, b = clean_machine_spec(cur.get("spec")), clean_machine_spec(des.get("spec"))
        elif name == "machineSet":
            a = clean_machine_spec(cur["spec"]["template"]["spec"])
            b = clean_machine_spec(des["spec"]["template"]["spec"])
        else:
            a, b = cur.get("spec"), des.get("spec")
        diff("/%s/spec" % name, a, b, out)
    return out
