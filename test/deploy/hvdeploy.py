"""hvdeploy.py: shared helpers of the deploy tests (test/deploy).

- Results: one line per check ('ok ...' or 'FAIL ...') and a closing 'N passed, N failed'.
- Kubernetes manifests: strict YAML loading, and a kustomize renderer for the subset
  deploy/kubernetes uses (resources, configMapGenerator with options.labels), so the tests need no kustomize.
  When `kubectl` is installed its `kubectl kustomize` output is compared with ours.
- The binary: flags parsed from `--help`, a command line checked against them, `serve`
  started with a port file and stopped with SIGTERM, HTTPS calls that verify the server's
  certificate for a chosen DNS name while connecting to 127.0.0.1.
"""

import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time

import yaml

SKIP = 77  # ctest SKIP_RETURN_CODE


class Results:
    """Collects named checks; prints each and a closing summary line."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok {what}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL {what}{': ' + str(detail) if detail else ''}", flush=True)
        return bool(ok)

    def eq(self, got, want, what):
        return self.check(got == want, what, f"got {got!r}, want {want!r}")

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 1 if self.failed or not self.passed else 0


# ---- YAML ------------------------------------------------------------------------------

_BOOL_WORDS = re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$")


def yaml_ambiguities(text):
    """Plain scalars that YAML 1.1 (Kubernetes' parser) and YAML 1.2 (kustomize's) read
    differently: yes/no/on/off booleans and integers with a leading 0 (octal in 1.1)."""
    out = []
    for ev in yaml.parse(text):
        if isinstance(ev, yaml.ScalarEvent) and ev.style is None and ev.implicit[0]:
            v = ev.value
            if _BOOL_WORDS.match(v) or re.match(r"^[-+]?0[0-9_]+$", v):
                out.append(f"line {ev.start_mark.line + 1}: {v!r}")
    return out


def load_yaml_docs(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [d for d in yaml.safe_load_all(text) if d is not None], text


# ---- kustomize (the subset used here) ----------------------------------------------------

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "configMapGenerator"}
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


class RenderError(Exception):
    pass


def kustomization_file(d):
    for n in KUSTOMIZATION_NAMES:
        p = os.path.join(d, n)
        if os.path.isfile(p):
            return p
    return None


def configmap_hash(data):
    """kustomize's name suffix for a generated ConfigMap (api/hasher): sha256 of Go's
    json.Marshal of {"data", "kind", "name"}, first 10 hex digits with 0 1 3 a e mapped to
    g h k m t. kustomize v5 looks the name up at the path "metadata/name" as ONE key, finds
    nothing and hashes an empty name; we do the same so the names match."""
    doc = {"data": data, "kind": "ConfigMap", "name": ""}
    s = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    s = s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    s = s.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    hexd = hashlib.sha256(s.encode("utf-8")).hexdigest()[:10]
    return hexd.translate(str.maketrans("013ae", "ghkmt"))


def pod_spec(obj):
    if obj.get("kind") in POD_TEMPLATE_KINDS:
        return obj.get("spec", {}).get("template", {}).get("spec", {})
    if obj.get("kind") == "Pod":
        return obj.get("spec", {})
    return None


def _rename_configmap_refs(objs, ns, old, new):
    for o in objs:
        ps = pod_spec(o)
        if ps is None or o.get("metadata", {}).get("namespace") != ns:
            continue
        for v in ps.get("volumes", []) or []:
            if v.get("configMap", {}).get("name") == old:
                v["configMap"]["name"] = new
            for src in (v.get("projected", {}) or {}).get("sources", []) or []:
                if src.get("configMap", {}).get("name") == old:
                    src["configMap"]["name"] = new
        for c in (ps.get("containers", []) or []) + (ps.get("initContainers", []) or []):
            for ef in c.get("envFrom", []) or []:
                if ef.get("configMapRef", {}).get("name") == old:
                    ef["configMapRef"]["name"] = new
            for e in c.get("env", []) or []:
                ref = (e.get("valueFrom", {}) or {}).get("configMapKeyRef")
                if ref and ref.get("name") == old:
                    ref["name"] = new


def render(directory, seen=None):
    """Objects a kustomization directory produces, in listing order. Returns
    (objects, files) where files are all the manifest and data files used."""
    seen = set() if seen is None else seen
    directory = os.path.abspath(directory)
    if directory in seen:
        raise RenderError(f"{directory}: kustomization cycle")
    seen.add(directory)
    kfile = kustomization_file(directory)
    if not kfile:
        raise RenderError(f"{directory}: no kustomization.yaml")
    k = yaml.safe_load(open(kfile, encoding="utf-8")) or {}
    extra = set(k) - SUPPORTED_KEYS
    if extra:
        raise RenderError(f"{kfile}: fields this renderer does not implement: {sorted(extra)}")
    if k.get("kind", "Kustomization") != "Kustomization":
        raise RenderError(f"{kfile}: kind {k.get('kind')!r}")
    objs, files = [], [kfile]
    for r in k.get("resources", []) or []:
        p = os.path.normpath(os.path.join(directory, r))
        if os.path.isdir(p):
            sub, subfiles = render(p, seen)
            objs += sub
            files += subfiles
        elif os.path.isfile(p):
            docs, _ = load_yaml_docs(p)
            objs += docs
            files.append(p)
        else:
            raise RenderError(f"{kfile}: resource {r} not found")
    for g in k.get("configMapGenerator", []) or []:
        extra = set(g) - {"name", "namespace", "files", "literals", "options"}
        extra |= {f"options.{o}" for o in set(g.get("options") or {}) - {"labels"}}
        if extra:
            raise RenderError(f"{kfile}: configMapGenerator fields not implemented: {extra}")
        data = {}
        for lit in g.get("literals", []) or []:
            key, _, val = lit.partition("=")
            data[key] = val
        for f in g.get("files", []) or []:
            key, eq, path = f.partition("=")
            if not eq:
                path, key = key, os.path.basename(key)
            full = os.path.normpath(os.path.join(directory, path))
            with open(full, encoding="utf-8") as fh:
                data[key] = fh.read()
            files.append(full)
        name = g["name"]
        ns = g.get("namespace")
        hashed = f"{name}-{configmap_hash(data)}"
        meta = {"name": hashed}
        if ns:
            meta["namespace"] = ns
        if (g.get("options") or {}).get("labels"):  # not part of kustomize's hash
            meta["labels"] = dict(g["options"]["labels"])
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
        _rename_configmap_refs(objs, ns, name, hashed)
        objs.append(cm)
    return objs, files


def obj_key(o):
    m = o.get("metadata", {})
    return (o.get("kind", ""), m.get("namespace", ""), m.get("name", ""))


def kubectl_render(directory):
    """(objects of `kubectl kustomize DIR`, None) or (None, why): why is None when kubectl
    is not installed, else kubectl's complaint."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None, None
    p = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        return None, f"kubectl kustomize exited {p.returncode}: {p.stderr.strip()[:400]}"
    return [d for d in yaml.safe_load_all(p.stdout) if d is not None], None


# ---- the binary's flags ----------------------------------------------------------------

def help_text(binary, *cmd):
    p = subprocess.run([binary, *cmd, "--help"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(cmd)} --help exited {p.returncode}")
    return p.stdout + p.stderr


def serve_flags(binary):
    """{flag: takes_value} from `hvupdater serve --help` ('  --flag VALUE   text')."""
    flags = {}
    for line in help_text(binary, "serve").splitlines():
        m = re.match(r"^\s{1,4}(--[a-z0-9][a-z0-9-]*)(?:[ =]([A-Z][A-Z0-9:_.=-]*))?(\s|$)", line)
        if m:
            flags[m.group(1)] = m.group(2) is not None
    return flags


def all_flags(text):
    return set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", text))


def parse_argv(args, flags):
    """Check a `serve` argument list (without 'serve') against {flag: takes_value}.
    Returns ({flag: [values]}, [problems])."""
    seen, problems, i = {}, [], 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--"):
            problems.append(f"unexpected argument {a!r}")
            i += 1
            continue
        name, eq, val = a.partition("=")
        if name not in flags:
            problems.append(f"unknown flag {name}")
            i += 1
            continue
        if flags[name]:
            if not eq:
                if i + 1 >= len(args) or args[i + 1].startswith("--"):
                    problems.append(f"{name} needs a value")
                    i += 1
                    continue
                val = args[i + 1]
                i += 1
            seen.setdefault(name, []).append(val)
        else:
            if eq:
                problems.append(f"{name} takes no value")
            seen.setdefault(name, []).append(None)
        i += 1
    return seen, problems


def listen_port(value):
    m = re.match(r"^(\[[^\]]+\]|[^:]+):(\d+)$", value or "")
    return int(m.group(2)) if m else None


# ---- running the server ----------------------------------------------------------------

class Server:
    """`hvupdater serve ...` in the background; argv must already hold --port-file FILE."""

    def __init__(self, argv, port_file, log_path, env=None, cwd=None, prefix=()):
        self.argv, self.port_file, self.log_path = list(argv), port_file, log_path
        self.env, self.cwd, self.prefix = env, cwd, list(prefix)
        self.proc, self.port = None, None

    def start(self, timeout=20):
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.prefix + self.argv, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
                                     stdin=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode} before listening: "
                                   f"{self.log_text()[-1500:]}")
            try:
                with open(self.port_file) as f:
                    txt = f.read().strip()
                if txt:
                    self.port = int(txt)
                    return self.port
            except (FileNotFoundError, PermissionError, ValueError):
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"no port file after {timeout}s: {self.log_text()[-1500:]}")

    def log_text(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout=20):
        """SIGTERM; returns the exit code (None if it had to be killed)."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to ADDR:PORT that sends SNI and verifies the certificate for another name."""

    def __init__(self, addr, port, name, context, timeout):
        super().__init__(name, port, context=context, timeout=timeout)
        self._addr = addr

    def connect(self):
        sock = socket.create_connection((self._addr, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def https(port, method, path, cafile, name="localhost", body=None, addr="127.0.0.1",
          timeout=10):
    """(status, text) of one request, verifying the server as `name` against cafile."""
    ctx = ssl.create_default_context(cafile=cafile)
    conn = _PinnedHTTPS(addr, port, name, ctx, timeout)
    try:
        data = None
        headers = {}
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def hook_path(hook, handler=None):
    base = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/"
    return base + hook.lower() + (f"/{handler.lower()}" if handler else "")


def make_cert(directory, dns_names, algorithm="RSA", size=2048, days=90):
    """A self-signed serving certificate like cert-manager's selfSigned issuer makes:
    tls.crt, tls.key and ca.crt (= tls.crt). Returns the paths."""
    os.makedirs(directory, exist_ok=True)
    key, crt = os.path.join(directory, "tls.key"), os.path.join(directory, "tls.crt")
    if algorithm.upper() == "RSA":
        newkey = ["-newkey", f"rsa:{size}"]
    elif algorithm.upper() == "ECDSA":
        curve = {256: "prime256v1", 384: "secp384r1", 521: "secp521r1"}[size or 256]
        newkey = ["-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{curve}"]
    elif algorithm.upper() == "ED25519":
        newkey = ["-newkey", "ed25519"]
    else:
        raise ValueError(f"key algorithm {algorithm}")
    san = ",".join(f"DNS:{n}" for n in dns_names)
    subprocess.run(["openssl", "req", "-x509", "-nodes", *newkey, "-keyout", key, "-out", crt,
                    "-days", str(days), "-subj", f"/CN={dns_names[0]}",
                    "-addext", f"subjectAltName={san}",
                    "-addext", "basicConstraints=critical,CA:FALSE",
                    "-addext", "extendedKeyUsage=serverAuth"],
                   check=True, capture_output=True, timeout=60)
    shutil.copyfile(crt, os.path.join(directory, "ca.crt"))
    return {"tls.crt": crt, "tls.key": key, "ca.crt": os.path.join(directory, "ca.crt")}


# ---- packages --------------------------------------------------------------------------

def needed_packages(binary):
    """{soname: Debian package} for the binary's NEEDED libraries (via ldd + dpkg -S)."""
    out = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True,
                         check=True).stdout
    needed = re.findall(r"^\s*NEEDED\s+(\S+)", out, re.M)
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    where = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
    # The dynamic loader (NEEDED once the binary binds at start, -z now) has no "=>" line.
    for path in re.findall(r"^\s*(/\S+) \(0x", ldd, re.M):
        where.setdefault(os.path.basename(path), path)
    result = {}
    for so in needed:
        path = where.get(so)
        pkg = None
        if path:
            cands = [path, os.path.realpath(path)]
            for c in list(cands):
                if c.startswith("/usr/"):
                    cands.append(c[4:])
                else:
                    cands.append("/usr" + c)
            for c in cands:
                p = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
                if p.returncode == 0:
                    pkg = p.stdout.split(":")[0].strip()
                    break
        result[so] = pkg
    return result


def source_version(source):
    with open(os.path.join(source, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*hvupdater\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else None


def kubevirt_rbac_table(source):
    """docs/kubevirt.md's RBAC table as a set of (apiGroup, resource, verb): the first
    backticked word of a row's first cell is the resource, a `group X` in it the API group
    (else the header's "group `X` unless said"), the second cell the verbs, comma-separated.
    Raises ValueError when the section or its table is missing."""
    with open(os.path.join(source, "docs", "kubevirt.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## RBAC\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        raise ValueError("docs/kubevirt.md has no ## RBAC section")
    rows = [ln for ln in m.group(1).splitlines() if ln.startswith("|")]
    if len(rows) < 3:
        raise ValueError("docs/kubevirt.md ## RBAC has no table")
    head = re.search(r"group `([^`]*)` unless said", rows[0])
    if not head:
        raise ValueError("the RBAC table's header names no default group: %r" % rows[0])
    out = set()
    for ln in rows[2:]:
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        res = re.match(r"`([^`]+)`", cells[0])
        grp = re.search(r"group `([^`]*)`", cells[0])
        if not res or len(cells) < 2:
            raise ValueError("an RBAC table row without a resource: %r" % ln)
        for verb in cells[1].split(","):
            out.add((grp.group(1) if grp else head.group(1), res.group(1), verb.strip()))
    return out


def rbac_grants(rules):
    """RBAC rules as a set of (apiGroup, resource, verb)."""
    return {(g, res, v) for r in rules for g in r.get("apiGroups", [])
            for res in r.get("resources", []) for v in r.get("verbs", [])}


def parse_unit(path):
    """A systemd unit as {section: [(key, value)]}, continuation lines joined."""
    sections, cur, pending = {}, None, ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if pending:
                line = pending + line.lstrip()
                pending = ""
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            s = line.strip()
            if not s or s[0] in "#;":
                continue
            if s.startswith("[") and s.endswith("]"):
                cur = s[1:-1]
                sections.setdefault(cur, [])
                continue
            k, _, v = s.partition("=")
            sections.setdefault(cur, []).append((k.strip(), v.strip()))
    return sections


def parse_env_file(path):
    """KEY=VALUE lines of a systemd EnvironmentFile= (comments and blank lines skipped,
    one level of double or single quotes removed), as a dict."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for ln in f:
            ln = ln.strip()
            if not ln or ln[0] in "#;":
                continue
            k, _, v = ln.partition("=")
            v = v.strip()
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                v = v[1:-1]
            out[k.strip()] = v
    return out


def expand_exec(argv, env):
    """A systemd ExecStart= word list with $VAR (split into words) and ${VAR} (one word)
    replaced from env, as systemd does."""
    out = []
    for a in argv:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", a)
        if m:
            out += env.get(m.group(1), "").split()
        else:
            out.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                              lambda mm: env.get(mm.group(1), ""), a))
    return out


def unit_get(unit, section, key):
    vals = [v for k, v in unit.get(section, []) if k == key]
    return vals


def die(msg, code=1):
    print(f"FAIL {msg}", flush=True)
    print("0 passed, 1 failed", flush=True)
    sys.exit(code)
