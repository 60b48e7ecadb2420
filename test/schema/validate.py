#!/usr/bin/env python3
"""validate.py: check JSON documents against hvupdater's JSON Schemas (schemas/*.json).

  validate.py SCHEMA FILE...      validate FILEs ('-' = stdin) against schemas/SCHEMA.json
  validate.py --dir DIR...        validate DIR/<schema>.json and DIR/<schema>.<anything>.json
  validate.py --self-test         schemas are valid, schemas/examples/ validate (and the
                                  example responses cover the example requests), and every
                                  case in test/schema/cases.json is accepted or rejected as it says

Prints one line per file ('ok FILE' or 'FAIL FILE: PATH: MESSAGE') and a last line
'N passed, N failed'; exits 1 when anything failed, 2 on a usage error.

Validation is jsonschema's Draft202012Validator, extended so that it judges a document the
way hvupdater's peers (Go's encoding/json in CAPI, hvupdater's own config loader) would:
- $refs resolve among the files in schemas/ only (never over the network);
- 'format' is asserted (uri and json-pointer have local checkers when the installed
  jsonschema lacks them, so results do not depend on optional packages);
- numbers keep their literal form: 5.0 is not an 'integer' (Go's int32 refuses it); duplicate
  object keys, NaN and Infinity are load errors;
- a string with contentEncoding base64 + contentMediaType application/json + contentSchema is
  decoded and its JSON checked against contentSchema (a Runtime SDK patch's content);
- 'pattern' anchors with ECMA-262 semantics: '$' does not match before a trailing newline.
Works with Debian's python3-jsonschema 4.10 (RefResolver) and with jsonschema >= 4.18
(referencing registry).
"""

import argparse
import base64
import binascii
import copy
import decimal
import json
import os
import re
import sys
import urllib.parse

import jsonschema
from jsonschema.exceptions import ValidationError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA_DIR = os.path.join(ROOT, "schemas")
EXAMPLES_DIR = os.path.join(SCHEMA_DIR, "examples")
CASES_FILE = os.path.join(HERE, "cases.json")
LIBRARIES = {"common"}  # schemas holding only shared $defs: nothing validates against them
ID_BASE = "https://hvupdater.dev/schemas/"
MAX_MESSAGE = 300


# ---- loading JSON strictly ------------------------------------------------------------------

class LoadError(Exception):
    """A document that is not acceptable JSON."""


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise LoadError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _no_constant(name):
    raise LoadError(f"{name} is not JSON")


def loads(text):
    """Parse JSON text keeping float literals as Decimal (so 5.0 is not an integer)."""
    try:
        return json.loads(text, parse_float=decimal.Decimal, parse_constant=_no_constant,
                          object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise LoadError(f"invalid JSON: {e}") from None


def load_file(path):
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise LoadError(f"cannot read: {e}") from None
    return loads(text)


# ---- schemas --------------------------------------------------------------------------------

def load_schemas():
    """{name: schema} for every schemas/*.json, name being the file name without .json."""
    schemas = {}
    for fn in sorted(os.listdir(SCHEMA_DIR)):
        if fn.endswith(".json") and os.path.isfile(os.path.join(SCHEMA_DIR, fn)):
            try:
                schemas[fn[:-5]] = load_file(os.path.join(SCHEMA_DIR, fn))
            except LoadError as e:
                raise SystemExit(f"validate.py: schemas/{fn}: {e}")
    return schemas


def schema_id(name):
    return ID_BASE + name + ".json"


def _ecma_pattern(p):
    # ECMA-262 '$' (no multiline flag) matches only at the very end; Python's also before a
    # final newline. Rewrite a trailing unescaped '$' to '\Z'.
    if p.endswith("$") and not p.endswith("\\$"):
        return p[:-1] + r"\Z"
    return p


_pattern_cache = {}


def _search(pattern, s):
    rx = _pattern_cache.get(pattern)
    if rx is None:
        rx = _pattern_cache[pattern] = re.compile(_ecma_pattern(pattern))
    return rx.search(s)


def _kw_pattern(validator, pattern, instance, schema):
    if isinstance(instance, str) and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _kw_content_schema(validator, content_schema, instance, schema):
    if not isinstance(instance, str):
        return
    data = instance.encode("utf-8")
    if schema.get("contentEncoding") == "base64":
        try:
            data = base64.b64decode(instance, validate=True)
        except (binascii.Error, ValueError) as e:
            yield ValidationError(f"not valid base64: {e}")
            return
    if schema.get("contentMediaType") != "application/json":
        return
    try:
        value = loads(data.decode("utf-8"))
    except (LoadError, UnicodeDecodeError) as e:
        yield ValidationError(f"decoded content: {e}")
        return
    for err in validator.descend(value, content_schema):
        err.message = "decoded content: " + err.message
        yield err


URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*\Z")
POINTER_RE = re.compile(r"^(/([^/~]|~[01])*)*\Z")


def _check_uri(s):
    """RFC 3986 absolute URI: scheme ':' then only URI characters, one '#' at most."""
    if not isinstance(s, str):
        return True
    if not URI_RE.match(s) or s.count("#") > 1:
        return False
    try:
        urllib.parse.urlsplit(s).port  # a non-numeric or out-of-range port raises
    except ValueError:
        return False
    return True


def _check_json_pointer(s):
    return not isinstance(s, str) or bool(POINTER_RE.match(s))


def _format_checker():
    base = getattr(jsonschema.Draft202012Validator, "FORMAT_CHECKER", None)
    if base is None:
        base = jsonschema.draft202012_format_checker
    fc = jsonschema.FormatChecker(formats=())
    fc.checkers = dict(base.checkers)
    if "uri" not in fc.checkers:
        fc.checks("uri")(_check_uri)
    if "json-pointer" not in fc.checkers:
        fc.checks("json-pointer")(_check_json_pointer)
    return fc


Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _kw_pattern, "contentSchema": _kw_content_schema},
)
FORMAT_CHECKER = _format_checker()


def _no_network(uri):
    raise LookupError(f"{uri} is not one of the files in schemas/ (no network lookups)")


def make_validator(schemas, name):
    """A validator for schemas[name], resolving $refs among schemas only."""
    schema = schemas[name]
    store = {schema_id(n): s for n, s in schemas.items()}
    try:
        import referencing
        import referencing.exceptions
        from referencing.jsonschema import DRAFT202012
    except ImportError:
        resolver = jsonschema.RefResolver(base_uri=schema_id(name), referrer=schema, store=store,
                                          handlers={"http": _no_network, "https": _no_network})
        return Validator(schema, resolver=resolver, format_checker=FORMAT_CHECKER)

    def retrieve(uri):
        raise referencing.exceptions.NoSuchResource(ref=uri)

    registry = referencing.Registry(retrieve=retrieve).with_resources(
        (uri, DRAFT202012.create_resource(s)) for uri, s in store.items())
    return Validator(schema, registry=registry, format_checker=FORMAT_CHECKER)


# ---- reporting ------------------------------------------------------------------------------

def pointer(path):
    if not path:
        return "(root)"
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _clean(msg):
    msg = re.sub(r"Decimal\('([^']*)'\)", r"\1", msg)
    msg = " ".join(msg.split())
    if len(msg) > MAX_MESSAGE:
        msg = msg[:MAX_MESSAGE] + "..."
    return msg


# Keywords whose errors say less than an error found deeper by another keyword.
VAGUE = {"contains", "minContains", "maxContains", "anyOf", "oneOf", "not", "if", "then", "else"}


def _message(err):
    """jsonschema's message, with a long instance shown by its shape and the failing
    schema's description added where the keyword alone says little (contains, ...)."""
    msg = err.message
    if err.validator == "const":
        msg = f"{err.instance!r} is not {err.validator_value!r}"
    shown = repr(err.instance)
    if isinstance(err.instance, (dict, list)) and len(shown) > 60 and msg.startswith(shown):
        kind = "array" if isinstance(err.instance, list) else "object"
        msg = f"<{kind} of {len(err.instance)}>" + msg[len(shown):]
    if err.validator in VAGUE and isinstance(err.schema, dict) and err.schema.get("description"):
        msg += f" [{err.schema['description']}]"
    return _clean(msg)


def check(validator, doc):
    """All errors as (path, keyword, message), the most telling first: a specific keyword
    before a vague one, then the deepest."""
    try:
        errors = list(validator.iter_errors(doc))
    except Exception as e:  # an unresolvable $ref or a broken schema
        why = str(e).split(" within ", 1)[0]  # referencing quotes the whole target schema
        return [("(schema)", "schema", _clean(f"schema cannot be used: {why}"))]
    errors.sort(key=lambda e: (e.validator in VAGUE, -len(e.absolute_path)))
    return [(pointer(e.absolute_path), e.validator, _message(e)) for e in errors]


def describe(errors):
    path, _, msg = errors[0]
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{path}: {msg}{more}"


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, what):
        self.passed += 1
        print(f"ok {what}")

    def fail(self, what, why):
        self.failed += 1
        print(f"FAIL {what}: {why}")

    def close(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def validate_file(schemas, validators, name, path, tally, shown=None):
    shown = shown or path
    if name not in schemas or name in LIBRARIES:
        tally.fail(shown, f"(root): no document schema named {name!r} in schemas/")
        return
    if name not in validators:
        validators[name] = make_validator(schemas, name)
    try:
        doc = load_file(path)
    except LoadError as e:
        tally.fail(shown, f"(root): {e}")
        return
    errors = check(validators[name], doc)
    if errors:
        tally.fail(shown, describe(errors))
    else:
        tally.ok(shown)


def schema_name_of(filename):
    """'config.json' and 'config.anything.json' -> 'config'."""
    return filename[:-5].split(".", 1)[0]


def dir_files(d):
    return [(schema_name_of(fn), os.path.join(d, fn)) for fn in sorted(os.listdir(d))
            if fn.endswith(".json") and os.path.isfile(os.path.join(d, fn))]


# ---- self-test ------------------------------------------------------------------------------

def walk_refs(node, at=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield at, v
            yield from walk_refs(v, f"{at}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk_refs(v, f"{at}/{i}")


def resolve_ref(schemas, name, ref):
    """Follow ref from schemas[name]; raise LookupError when it leads nowhere."""
    url, _, frag = urllib.parse.urljoin(schema_id(name), ref).partition("#")
    target = {schema_id(n): s for n, s in schemas.items()}.get(url)
    if target is None:
        raise LookupError(f"{url} is not a file in schemas/")
    node = target
    for tok in _split(urllib.parse.unquote(frag)):
        if isinstance(node, dict) and tok in node:
            node = node[tok]
        elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
            node = node[int(tok)]
        else:
            raise LookupError(f"{ref}: no {tok!r}")
    return node


def _split(p):
    return [t.replace("~1", "/").replace("~0", "~") for t in p.split("/")[1:]] if p else []


def apply_json_patch(doc, ops):
    """A small RFC 6902 subset (add, remove, replace) for the cases and the coverage check."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _split(op["path"])
        if not parts:
            if op["op"] == "remove":
                raise ValueError("cannot remove the whole document")
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for tok in parts[:-1]:
            parent = parent[int(tok)] if isinstance(parent, list) else parent[tok]
        last = parts[-1]
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(idx, copy.deepcopy(op["value"]))
            elif op["op"] == "remove":
                del parent[idx]
            elif op["op"] == "replace":
                parent[idx] = copy.deepcopy(op["value"])
            else:
                raise ValueError(f"unsupported op {op['op']}")
        else:
            if op["op"] in ("remove", "replace") and last not in parent:
                raise KeyError(f"{op['path']} not found")
            if op["op"] == "remove":
                del parent[last]
            elif op["op"] in ("add", "replace"):
                parent[last] = copy.deepcopy(op["value"])
            else:
                raise ValueError(f"unsupported op {op['op']}")
    return doc


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    target = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


def _typed(v):
    """Kubernetes unstructured comparison: an int and a float literal never compare equal."""
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_typed(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    return (type(v).__name__, v)


MACHINE_IGNORED = ("clusterName", "bootstrap", "infrastructureRef", "providerID", "minReadySeconds",
                   "readinessGates", "taints")


def _clean_machine_spec(spec):
    spec = copy.deepcopy(spec or {})
    for k in MACHINE_IGNORED:
        spec.pop(k, None)
    deletion = spec.get("deletion")
    if isinstance(deletion, dict):
        for k in ("nodeDrainTimeoutSeconds", "nodeVolumeDetachTimeoutSeconds", "nodeDeletionTimeoutSeconds"):
            deletion.pop(k, None)
        if not deletion:
            spec.pop("deletion")
    return spec


def uncovered(request, response, machine_set):
    """What CAPI would still find different after applying response's patches to request."""
    if machine_set:
        names = {"machineSet": "machineSetPatch",
                 "infrastructureMachineTemplate": "infrastructureMachineTemplatePatch",
                 "bootstrapConfigTemplate": "bootstrapConfigTemplatePatch"}
    else:
        names = {"machine": "machinePatch", "infrastructureMachine": "infrastructureMachinePatch",
                 "bootstrapConfig": "bootstrapConfigPatch"}
    current = copy.deepcopy(request["current"])
    for obj, field in names.items():
        p = response.get(field)
        if p is None:
            continue
        text = loads(base64.b64decode(p["patch"]).decode("utf-8"))
        patched = (apply_json_patch(current[obj], text) if p["patchType"] == "JSONPatch"
                   else merge_patch(current[obj], text))
        if machine_set:
            current[obj]["spec"]["template"]["spec"] = patched["spec"]["template"]["spec"]
        else:
            current[obj]["spec"] = patched["spec"]
    diffs = []
    for obj in names:
        cur, des = current.get(obj), request["desired"].get(obj)
        if cur is None and des is None:
            continue
        if obj == "machine":
            a, b = _clean_machine_spec(cur["spec"]), _clean_machine_spec(des["spec"])
        elif obj == "machineSet":
            a = _clean_machine_spec(cur["spec"]["template"]["spec"])
            b = _clean_machine_spec(des["spec"]["template"]["spec"])
        else:
            a, b = cur["spec"], des["spec"]
        diff_paths(f"/{obj}/spec", _typed(a), _typed(b), diffs)
    return diffs


def diff_paths(at, a, b, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            diff_paths(f"{at}/{k}", a.get(k), b.get(k), out)
    elif a != b:
        out.append(at)


def self_test():
    tally = Tally()
    schemas = load_schemas()
    validators = {}

    # 1. Every schema is a valid 2020-12 schema, well named, documented, and its $refs resolve.
    for name, schema in schemas.items():
        what = f"schema schemas/{name}.json"
        problems = []
        try:
            Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as e:
            problems.append(f"{pointer(e.absolute_path)}: {_clean(e.message)}")
        if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
            problems.append("$schema is not draft 2020-12")
        if schema.get("$id") != schema_id(name):
            problems.append(f"$id is not {schema_id(name)}")
        for key in ("title", "description"):
            if not schema.get(key):
                problems.append(f"no {key}")
        for at, ref in walk_refs(schema):
            try:
                resolve_ref(schemas, name, ref)
            except LookupError as e:
                problems.append(f"{at or '(root)'}: $ref {e}")
        for at, pat in walk_patterns(schema):
            try:
                re.compile(_ecma_pattern(pat))
            except re.error as e:
                problems.append(f"{at}: pattern {pat!r}: {e}")
        if problems:
            tally.fail(what, "; ".join(problems))
        else:
            tally.ok(what)

    # 2. Every example validates, and every document schema has at least one example.
    examples = dir_files(EXAMPLES_DIR)
    for name, path in examples:
        validate_file(schemas, validators, name, path, tally, shown=os.path.relpath(path, ROOT))
    have = {n for n, _ in examples}
    for name in schemas:
        if name not in LIBRARIES and name not in have:
            tally.fail(f"examples for {name}", f"no schemas/examples/{name}[.*].json")
    if not os.path.exists(os.path.join(EXAMPLES_DIR, "config.json")):
        tally.fail("examples", "schemas/examples/config.json is missing")

    # The example config shows every key the config schema defines.
    try:
        missing = sorted(schema_keys(schemas, "config", schemas["config"]) -
                         document_keys(load_file(os.path.join(EXAMPLES_DIR, "config.json"))))
    except (LoadError, LookupError) as e:
        missing = [f"cannot compare: {e}"]
    if missing:
        tally.fail("example config uses every key", "missing " + ", ".join(missing))
    else:
        tally.ok("example config uses every key")

    # 3. Example responses cover their example requests the way CAPI judges coverage.
    for hook, ms in (("can-update-machine", False), ("can-update-machine-set", True)):
        for name, path in examples:
            if name != hook + "-response":
                continue
            tag = os.path.basename(path)[len(name):]
            req_path = os.path.join(EXAMPLES_DIR, hook + "-request" + tag)
            what = f"coverage {os.path.basename(path)}"
            if not os.path.exists(req_path):
                tally.fail(what, f"no matching request {os.path.basename(req_path)}")
                continue
            try:
                diffs = uncovered(load_file(req_path), load_file(path), ms)
            except (LoadError, KeyError, ValueError, TypeError, IndexError) as e:
                tally.fail(what, f"cannot apply: {e}")
                continue
            if diffs:
                tally.fail(what, "still differs after patching: " + ", ".join(diffs))
            else:
                tally.ok(what)

    # 4. Cases: variants of the examples that must be accepted or rejected (test/schema/cases.json).
    try:
        cases = load_file(CASES_FILE)
    except LoadError as e:
        tally.fail(CASES_FILE, str(e))
        cases = []
    for case in cases:
        run_case(schemas, validators, case, tally)
    return tally.close()


def schema_keys(schemas, name, node, at="", depth=0):
    """Dotted key paths a schema defines ('a.b', 'list[].c'), following $refs."""
    keys = set()
    if not isinstance(node, dict) or depth > 20:
        return keys
    if "$ref" in node:
        keys |= schema_keys(schemas, name, resolve_ref(schemas, name, node["$ref"]), at, depth + 1)
    for k, sub in node.get("properties", {}).items():
        path = f"{at}.{k}" if at else k
        keys.add(path)
        keys |= schema_keys(schemas, name, sub, path, depth + 1)
    if isinstance(node.get("items"), dict):
        keys |= schema_keys(schemas, name, node["items"], at + "[]", depth + 1)
    for group in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(group, []):
            keys |= schema_keys(schemas, name, sub, at, depth + 1)
    return keys


def document_keys(doc, at=""):
    keys = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            path = f"{at}.{k}" if at else k
            keys.add(path)
            keys |= document_keys(v, path)
    elif isinstance(doc, list):
        for v in doc:
            keys |= document_keys(v, at + "[]")
    return keys


def walk_patterns(node, at=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "pattern" and isinstance(v, str):
                yield at or "(root)", v
            yield from walk_patterns(v, f"{at}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk_patterns(v, f"{at}/{i}")


def run_case(schemas, validators, case, tally):
    """A case: {name, schema, base (an example file) + patch (RFC 6902 ops) or text,
    expect: valid|invalid, at: JSON pointer the error must be reported at, keyword}."""
    what = f"case {case.get('name', '?')}"
    name = case.get("schema")
    if name not in schemas or name in LIBRARIES:
        tally.fail(what, f"no document schema named {name!r}")
        return
    if name not in validators:
        validators[name] = make_validator(schemas, name)
    want_valid = case.get("expect") == "valid"
    try:
        if "text" in case:
            doc = loads(case["text"])
        else:
            doc = apply_json_patch(load_file(os.path.join(EXAMPLES_DIR, case["base"])), case.get("patch", []))
    except LoadError as e:
        errors = [("(root)", "load", str(e))]
    except (KeyError, IndexError, ValueError, TypeError) as e:
        tally.fail(what, f"bad case: {e!r}")
        return
    else:
        errors = check(validators[name], doc)
    if want_valid:
        if errors:
            tally.fail(what, "rejected: " + describe(errors))
        else:
            tally.ok(what)
        return
    if not errors:
        tally.fail(what, "accepted, but must be rejected")
        return
    at, kw = case.get("at"), case.get("keyword")
    if any((at is None or p == at) and (kw is None or k == kw) for p, k, _ in errors):
        tally.ok(what + " (rejected: " + describe(errors) + ")")
    else:
        tally.fail(what, f"rejected, but not at {at} by {kw}: " + describe(errors))


# ---- command line ---------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(
        prog="validate.py", description="Validate JSON documents against hvupdater's schemas/.",
        epilog="Schema names: the files in schemas/ without .json (e.g. config, update-machine-response).")
    ap.add_argument("--dir", action="append", default=[], metavar="DIR",
                    help="validate DIR/<schema>.json and DIR/<schema>.<anything>.json (repeatable)")
    ap.add_argument("--self-test", action="store_true", help="check the schemas, examples and cases")
    ap.add_argument("args", nargs="*", metavar="SCHEMA FILE", help="schema name, then files ('-' = stdin)")
    opts = ap.parse_args(argv)
    if opts.self_test:
        if opts.dir or opts.args:
            ap.error("--self-test takes no other arguments")
        return self_test()
    if opts.dir and opts.args:
        ap.error("give either --dir DIR or SCHEMA FILE..., not both")
    schemas = load_schemas()
    work = []
    if opts.dir:
        for d in opts.dir:
            if not os.path.isdir(d):
                ap.error(f"{d} is not a directory")
            work += dir_files(d)
    else:
        if len(opts.args) < 2:
            ap.error("need SCHEMA and at least one FILE (or --dir DIR, or --self-test)")
        name = opts.args[0]
        name = name[:-5] if name.endswith(".json") else name
        if name not in schemas or name in LIBRARIES:
            ap.error(f"no document schema named {name!r}; have: {', '.join(sorted(set(schemas) - LIBRARIES))}")
        work = [(name, f) for f in opts.args[1:]]
    tally = Tally()
    validators = {}
    for name, path in work:
        validate_file(schemas, validators, name, path, tally)
    return tally.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
