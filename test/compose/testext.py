#!/usr/bin/python3
"""testext.py: a second, independent in-place update extension for hvupdater's compose tests.

It covers what Cluster API's own test extension covers (test/extension/handlers/inplaceupdate
in sigs.k8s.io/cluster-api): the Machine's spec.version and spec.failureDomain, and a
KubeadmConfig's spec.files and spec.clusterConfiguration.etcd.local.imageTag (the same under
spec.template.spec for a MachineSet and a KubeadmConfigTemplate). Its UpdateMachine reports
progress over several calls before it is done. Standard library only; HTTPS with the given
certificate, optionally demanding a client certificate.

  testext.py --cert C --key K --port-file F [--port N] [--client-ca CA] [--name N]
             [--log FILE] [--calls N] [--retry S] [--covers version,failureDomain,files,imageTag]
             [--patch-type JSONPatch|JSONMergePatch]

POST /control {"mode": "ok"|"fail"|"http500"|"garbage"|"badpatch"|"stringpatch", "delay": seconds, "prefix": "...",
               "affects": true|false|null (CanUpdate* affectsAvailability; null: not sent)}
changes its behaviour at run time (a test's fault injection). Every hook request is appended
to --log as one JSON line {"ext": name, "hook": ..., "body": ...}.
"""
import argparse
import base64
import copy
import hashlib
import http.server
import json
import os
import socketserver
import ssl
import sys
import threading
import time

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
HOOKS = ["CanUpdateMachine", "CanUpdateMachineSet", "UpdateMachine"]


def json_diff(a, b, path, ops):
    """RFC 6902 ops turning a into b (objects member by member, the rest replaced whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = path + "/" + k.replace("~", "~0").replace("/", "~1")
            if k not in b:
                ops.append({"op": "remove", "path": p})
            elif k not in a:
                ops.append({"op": "add", "path": p, "value": b[k]})
            else:
                json_diff(a[k], b[k], p, ops)
    elif type(a) is not type(b) or a != b:
        ops.append({"op": "replace", "path": path, "value": b})
    return ops


def merge_diff(a, b):
    """An RFC 7386 merge patch turning object a into object b."""
    out = {}
    for k in set(a) | set(b):
        if k not in b:
            out[k] = None
        elif k not in a:
            out[k] = b[k]
        elif isinstance(a[k], dict) and isinstance(b[k], dict):
            sub = merge_diff(a[k], b[k])
            if sub:
                out[k] = sub
        elif type(a[k]) is not type(b[k]) or a[k] != b[k]:
            out[k] = b[k]
    return out


def dig(obj, *keys):
    for k in keys:
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def put(obj, keys, value):
    for k in keys[:-1]:
        obj = obj.setdefault(k, {})
    if value is None:
        obj.pop(keys[-1], None)
    else:
        obj[keys[-1]] = value


class State:
    def __init__(self, args):
        self.args = args
        self.mode = "ok"
        self.delay = 0.0
        self.prefix = args.prefix
        self.affects = None
        self.progress = {}  # machine key -> (desired hash, calls for it so far)
        self.lock = threading.Lock()

    def handler_names(self):
        return {h: "%s-%s" % (self.prefix, h.lower()) for h in HOOKS}


def can_update(st, hook, req):
    a = st.args
    set_ = hook == "CanUpdateMachineSet"
    names = (("machineSet", "bootstrapConfigTemplate", "infrastructureMachineTemplate") if set_
             else ("machine", "bootstrapConfig", "infrastructureMachine"))
    fields = ("machineSetPatch", "bootstrapConfigTemplatePatch",
              "infrastructureMachineTemplatePatch") if set_ else (
        "machinePatch", "bootstrapConfigPatch", "infrastructureMachinePatch")
    spec = ["spec", "template", "spec"] if set_ else ["spec"]
    cur, des = req.get("current") or {}, req.get("desired") or {}
    resp = {"apiVersion": API, "kind": hook + "Response", "status": "Success"}
    covered = []
    for name, field in zip(names, fields):
        c, d = cur.get(name), des.get(name)
        if not isinstance(c, dict) or not isinstance(d, dict):
            continue
        new = copy.deepcopy(c)
        if name in ("machine", "machineSet"):
            for f in ("version", "failureDomain"):
                if f in a.covers and dig(c, *spec, f) != dig(d, *spec, f):
                    put(new, spec + [f], copy.deepcopy(dig(d, *spec, f)))
                    covered.append("%s.%s" % (name, f))
        elif d.get("kind", "").startswith("KubeadmConfig") and c.get("kind") == d.get("kind"):
            bspec = spec if set_ else ["spec"]
            if "files" in a.covers and dig(c, *bspec, "files") != dig(d, *bspec, "files"):
                put(new, bspec + ["files"], copy.deepcopy(dig(d, *bspec, "files")))
                covered.append("%s.files" % name)
            tag = bspec + ["clusterConfiguration", "etcd", "local", "imageTag"]
            if "imageTag" in a.covers and dig(c, *tag) != dig(d, *tag):
                put(new, tag, copy.deepcopy(dig(d, *tag)))
                covered.append("%s.imageTag" % name)
        if a.patch_type == "JSONMergePatch":
            patch = merge_diff(c, new)
        else:
            patch = json_diff(c, new, "", [])
        # Like CAPI's test extension: a patch for every object, empty when nothing changes.
        resp[field] = {"patchType": a.patch_type,
                       "patch": base64.b64encode(json.dumps(patch).encode()).decode()}
    resp["message"] = ("%s covers %s" % (a.name, ", ".join(covered)) if covered
                       else "%s: nothing to cover" % a.name)
    if st.affects is not None:
        resp["affectsAvailability"] = st.affects
    return resp


def update_machine(st, req):
    """Like a real updater, the work is about the Machine's state, not the request: a desired
    state other than the last one seen for this Machine starts the work over (A -> B -> A
    takes the node back from B to A), the same one goes on or stays done."""
    a = st.args
    des = req.get("desired") or {}
    m = des.get("machine") or {}
    key = "%s/%s" % (dig(m, "metadata", "namespace"), dig(m, "metadata", "name"))
    want = hashlib.sha256(json.dumps(des, sort_keys=True).encode()).hexdigest()
    with st.lock:
        seen, n = st.progress.get(key, (None, 0))
        n = n + 1 if seen == want else 1
        st.progress[key] = (want, n)
    resp = {"apiVersion": API, "kind": "UpdateMachineResponse", "status": "Success"}
    if n >= a.calls:
        resp.update(message="Extension completed updating Machine", retryAfterSeconds=0)
    else:
        resp.update(message="Extension is updating Machine (step %d of %d)" % (n, a.calls),
                    retryAfterSeconds=a.retry)
    return resp


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes

    def log_message(self, fmt, *args):
        pass

    def send(self, code, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        st = self.server.state
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        path = self.path.split("?")[0]
        if path == "/control":
            c = json.loads(raw or b"{}")
            with st.lock:
                st.mode = c.get("mode", st.mode)
                st.delay = float(c.get("delay", st.delay))
                st.prefix = c.get("prefix", st.prefix)
                if "affects" in c:
                    st.affects = c["affects"]
            return self.send(200, {"ok": True})
        base = "/" + API + "/"
        if not path.startswith(base):
            return self.send(404, b"no such path\n", "text/plain")
        rest = path[len(base):]
        try:
            req = json.loads(raw)
        except ValueError:
            return self.send(400, b"not JSON\n", "text/plain")
        if rest == "discovery":
            hs = [{"name": name, "requestHook": {"apiVersion": API, "hook": h},
                   "timeoutSeconds": 10, "failurePolicy": "Fail"}
                  for h, name in st.handler_names().items()]
            return self.send(200, {"apiVersion": API, "kind": "DiscoveryResponse",
                                   "status": "Success", "handlers": hs})
        hook = next((h for h, name in st.handler_names().items()
                     if rest == "%s/%s" % (h.lower(), name)), None)
        if hook is None:
            return self.send(404, b"no such handler\n", "text/plain")
        with st.lock:
            mode, delay = st.mode, st.delay
            if st.args.log:
                with open(st.args.log, "a") as f:
                    f.write(json.dumps({"ext": st.args.name, "hook": hook, "t": time.time(),
                                        "body": req}) + "\n")
        if delay:
            time.sleep(delay)
        if mode == "http500":
            return self.send(500, b"internal error\n", "text/plain")
        if mode == "garbage":
            return self.send(200, b"[1, 2", "application/json")
        if mode == "badpatch" and hook != "UpdateMachine":
            field = "machineSetPatch" if hook == "CanUpdateMachineSet" else "machinePatch"
            bad = {"patchType": "JSONPatch", "patch": base64.b64encode(
                b'[{"op":"replace","path":"/spec/nope/deeper","value":1}]').decode()}
            return self.send(200, {"apiVersion": API, "kind": hook + "Response",
                                   "status": "Success", field: bad})
        if mode == "stringpatch" and hook != "UpdateMachine":
            return self.send(200, {"apiVersion": API, "kind": hook + "Response",
                                   "status": "Success", "bootstrapConfigPatch": "AAAA"})
        if mode == "fail":
            return self.send(200, {"apiVersion": API, "kind": hook + "Response",
                                   "status": "Failure",
                                   "message": "%s refuses: etcd is unhealthy" % st.args.name,
                                   **({"retryAfterSeconds": 0} if hook == "UpdateMachine"
                                      else {})})
        if req.get("kind") != hook + "Request":
            return self.send(200, {"apiVersion": API, "kind": hook + "Response",
                                   "status": "Failure", "message": "wrong request kind"})
        if hook == "UpdateMachine":
            return self.send(200, update_machine(st, req))
        return self.send(200, can_update(st, hook, req))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--client-ca")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--name", default="testext")
    ap.add_argument("--prefix", default="testext")
    ap.add_argument("--log")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--retry", type=int, default=2)
    ap.add_argument("--covers", default="version,failureDomain,files,imageTag")
    ap.add_argument("--patch-type", default="JSONPatch")
    a = ap.parse_args()
    a.covers = set(a.covers.split(",")) if a.covers else set()
    srv = Server(("127.0.0.1", a.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(a.cert, a.key)
    if a.client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(a.client_ca)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.state = State(a)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
