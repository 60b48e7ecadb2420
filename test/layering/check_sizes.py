#!/usr/bin/env python3
"""check_sizes.py: the engine stays small enough to hold in one's head (issue 27, "done when").

Fails when a .c file of src/engine has more than 600 lines, or a function in one has a body of
more than 100 lines. A function body is what clang-format (.clang-format: Linux braces) puts
between a "{" alone at the start of a line and the next "}" alone at the start of a line, both
counted; its name is that of the last line before it that starts a definition.
Usage: check_sizes.py SOURCE_DIR
       check_sizes.py --self-test   (the limits bite: a file and a function one line over fail)
"""
import os
import re
import sys
import tempfile

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100
NAME = re.compile(r"^[A-Za-z_].*?([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def check_file(path, rel):
    with open(path) as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    bad = []
    if len(lines) > MAX_FILE_LINES:
        bad.append(f"{rel}: {len(lines)} lines (at most {MAX_FILE_LINES})")
    name, start = "?", None
    for n, line in enumerate(lines, 1):
        m = NAME.match(line)
        if m and start is None:
            name = m.group(1)
        if line == "{" and start is None:
            start = n
        elif line == "}" and start is not None:
            length = n - start + 1
            if length > MAX_FUNCTION_LINES:
                bad.append(f"{rel}:{start}: {name} has a body of {length} lines "
                           f"(at most {MAX_FUNCTION_LINES})")
            start = None
    if start is not None:
        bad.append(f"{rel}:{start}: {name}: no closing brace at the start of a line")
    return bad


def check_tree(src):
    engine = os.path.join(src, "src", "engine")
    names = sorted(n for n in os.listdir(engine) if n.endswith(".c"))
    if not names:
        return [f"{engine}: no .c files"]
    bad = []
    for n in names:
        bad += check_file(os.path.join(engine, n), os.path.join("src/engine", n))
    return bad


def self_test():
    def tree(file_lines, body_lines):
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "src", "engine"))
        fn = ["static int f(int a)", "{"] + ["    a++;"] * (body_lines - 3) + ["    return a;", "}"]
        pad = ["/* pad */"] * (file_lines - len(fn))
        with open(os.path.join(d, "src", "engine", "x.c"), "w") as f:
            f.write("\n".join(fn + pad) + "\n")
        return d

    cases = [
        (MAX_FILE_LINES, MAX_FUNCTION_LINES, 0),
        (MAX_FILE_LINES + 1, MAX_FUNCTION_LINES, 1),
        (MAX_FILE_LINES, MAX_FUNCTION_LINES + 1, 1),
    ]
    ok = True
    for file_lines, body_lines, want in cases:
        got = check_tree(tree(file_lines, body_lines))
        if len(got) != want or (want and "f has a body" not in "".join(got) and
                                body_lines > MAX_FUNCTION_LINES):
            print(f"self-test: {file_lines} lines, a body of {body_lines}: {got}")
            ok = False
    print("self-test: the limits bite" if ok else "self-test: FAILED")
    return 0 if ok else 1


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = check_tree(sys.argv[1])
    for b in bad:
        print(b)
    print(f"check_sizes: {len(bad)} over the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
