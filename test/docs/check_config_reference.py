#!/usr/bin/env python3
"""check_config_reference.py: docs/settings.md against what it documents.

  check_config_reference.py [ROOT]

1. The config file reference (the table between `<!-- config-reference -->` and
   `<!-- /config-reference -->`, one row per key, the key in backticks in the first cell,
   dotted, `[]` for array items) lists every property of schemas/config.json, recursively
   (local $refs followed), and nothing the schema lacks. Where the schema gives a `default`,
   the row's default cell shows it.
2. The ExtensionConfig settings table (rows `| `name` | values | default | ... |` before the
   config file section) lists exactly the settings src/hooks/settings.c knows (its "unknown
   setting" message names them), with the value names of its tables and its defaults.

Prints `ok ...` / `FAIL ...` per check and `N passed, N failed`; exit 1 on any failure.
"""
import json
import os
import re
import sys

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)$")


def resolve(node, schema):
    """node with a local $ref merged in (the ref's keywords, overridden by node's own)."""
    while "$ref" in node and node["$ref"].startswith("#/"):
        target = schema
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        merged = dict(target)
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        node = merged
    return node


def schema_keys(schema):
    """{dotted key: resolved schema node} for every property, recursively."""
    out = {}

    def walk(node, prefix):
        node = resolve(node, schema)
        for name, sub in node.get("properties", {}).items():
            key = prefix + name
            sub_r = resolve(sub, schema)
            out[key] = sub_r
            walk(sub_r, key + ".")
            if "items" in sub_r:
                walk(sub_r["items"], key + "[].")

    walk(schema, "")
    return out


def table_rows(text, begin=None, end=None):
    if begin is not None:
        start = text.index(begin)
        text = text[start:text.index(end, start)]
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
            rows[m.group(1)] = cells
    return rows


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            print("ok " + what)
        else:
            self.failed += 1
            print("FAIL " + what)


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    schema = json.load(open(os.path.join(root, "schemas", "config.json")))
    doc = open(os.path.join(root, "docs", "settings.md")).read()
    r = Report()

    # 1. config reference <-> schema
    keys = schema_keys(schema)
    rows = table_rows(doc, "<!-- config-reference -->", "<!-- /config-reference -->")
    for key, node in keys.items():
        if key not in rows:
            r.check(False, "config key %s: in schemas/config.json, missing from the "
                           "reference in docs/settings.md" % key)
            continue
        cells = rows[key]
        if "default" in node:
            want = json.dumps(node["default"]).strip('"')
            r.check(len(cells) >= 2 and want in cells[1],
                    "config key %s: default %s shown (row says %r)" % (
                        key, want, cells[1] if len(cells) > 1 else ""))
        else:
            r.check(True, "config key %s documented" % key)
    for key in rows:
        r.check(key in keys, "config key %s: documented, %s" % (
            key, "in the schema" if key in keys else "but schemas/config.json has no such key"))

    # 2. ExtensionConfig settings <-> src/hooks/settings.c
    src = open(os.path.join(root, "src", "hooks", "settings.c")).read()
    flat = re.sub(r'"\s*\n\s*"', "", src)  # join adjacent string literals
    m = re.search(r"unknown setting %s \(known: ([^)]*)\)", flat)
    r.check(m is not None, "src/hooks/settings.c names its known settings")
    known = [k.strip() for k in m.group(1).split(",")] if m else []
    section = doc[doc.index("## ExtensionConfig settings"):doc.index("## The config file")]
    srows = {k: v for k, v in table_rows(section.split("\n\n")[1]).items()}
    r.check(sorted(srows) == sorted(known),
            "settings table lists exactly %s (doc: %s)" % (sorted(known), sorted(srows)))
    enums = {"powerCycle": "pc_names", "onUncoverable": "unc_names", "powerOffMode": "pom_names"}
    for setting, array in enums.items():
        am = re.search(r"%s\[\] = \{([^}]*)\}" % array, src)
        values = re.findall(r'"([^"]+)"', am.group(1)) if am else []
        cells = srows.get(setting, ["", ""])
        doc_values = re.findall(r"`([^`]+)`", cells[0])
        r.check(values and sorted(values) == sorted(doc_values),
                "setting %s values %s (doc: %s)" % (setting, values, doc_values))
        r.check(values and ("`%s`" % values[0]) in cells[1],
                "setting %s default %s (doc: %s)" % (setting, values[:1], cells[1]))
    defaults = {"liveTimeoutSeconds": "live_timeout_s", "shutdownTimeoutSeconds":
                "shutdown_timeout_s", "deadlineSeconds": "deadline_s"}
    for setting, field in defaults.items():
        dm = re.search(r"s->%s = (\d+);" % field, src)
        mx = re.search(r'"%s"\)\) \{\s*rc = seconds\(key, v->s, (\d+),' % setting, src)
        cells = srows.get(setting, ["", ""])
        r.check(dm and '"%s"' % dm.group(1) in cells[1],
                "setting %s default %s (doc: %s)" % (setting, dm and dm.group(1), cells[1]))
        r.check(mx and '"%s"' % mx.group(1) in cells[0],
                "setting %s maximum %s (doc: %s)" % (setting, mx and mx.group(1), cells[0]))

    print("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed or not r.passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
