#!/usr/bin/env python3
"""check_links.py: the relative links of README.md and docs/*.md lead somewhere.

  check_links.py [ROOT]

Every Markdown link or image whose target is not an absolute URL must name an existing
file or directory (relative to the linking file); a `#fragment` pointing into a Markdown
file must match one of its headings as GitHub derives anchors from them (lower case,
punctuation dropped, spaces to hyphens, -1, -2... for repeats). Links inside code blocks
and code spans are ignored. Prints `FAIL` per broken link and `N passed, N failed`.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]`]|`[^`]*`)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, raw line, line with code spans blanked) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = re.match(r"(`{3,}|~{3,})", s)
        if fence:
            if m and s.startswith(fence) and s.strip(fence[0]) == "":
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line, re.sub(r"`[^`]*`", lambda c: "`" + "x" * (len(c.group(0)) - 2) + "`",
                              line)


def slug(heading):
    h = re.sub(r"`([^`]*)`", r"\1", heading)
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = h.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        for _, line, _ in prose_lines(open(path).read()):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            if s in seen:
                seen[s] += 1
                s = "%s-%d" % (s, seen[s])
            else:
                seen[s] = 0
            out.add(s)
        cache[path] = out
    return cache[path]


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs",
                                                                              "*.md")))
    passed = failed = 0
    for path in files:
        for n, raw, line in prose_lines(open(path).read()):
            for m in LINK.finditer(line):
                target = raw[m.start(1):m.end(1)]
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:, ...
                file_part, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                where = "%s:%d: %s" % (os.path.relpath(path, root), n, target)
                if not os.path.exists(dest):
                    print("FAIL %s: no such file" % where)
                    failed += 1
                elif frag and dest.endswith(".md") and frag not in anchors(dest):
                    print("FAIL %s: no heading with anchor #%s in %s" % (
                        where, frag, os.path.relpath(dest, root)))
                    failed += 1
                else:
                    passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
