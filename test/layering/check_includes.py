#!/usr/bin/env python3
"""check_includes.py: the shape of the source tree stays as declared in cmake/rooms.txt.

Reads every quoted #include of src/ and backends/ and fails on
- a file in src/ outside a room folder (main.c excepted);
- an include that cannot be resolved to a file there, or that names a file twice over;
- an include circle between files (a file is its .c and .h together, so engine.c including
  reconcile.h while reconcile.c includes engine.h is a circle);
- an include circle between rooms, or an include from a room into one it may not include.
Usage: check_includes.py SOURCE_DIR
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_rooms(path):
    order, allowed = [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            room, _, deps = line.partition(":")
            room = room.strip()
            if room in allowed:
                sys.exit(f"{path}:{n}: room {room} declared twice")
            for d in deps.split():
                if d not in allowed:
                    sys.exit(f"{path}:{n}: {room} may include {d}, which is not declared "
                             "below it (arrows point down the list)")
            order.append(room)
            allowed[room] = set(deps.split())
    return order, allowed


def room_of(rel):
    """The room of a path relative to the source dir, or None when it is outside them."""
    parts = rel.split("/")
    if parts[0] == "src":
        if len(parts) == 2:
            return "main" if parts[1] == "main.c" else None
        return parts[1] if len(parts) == 3 else None
    if parts[0] == "backends":
        if len(parts) == 2:
            return "backends"
        return parts[1] if len(parts) == 3 else None
    return None


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    top = os.path.abspath(top)
    order, allowed = read_rooms(os.path.join(top, "cmake", "rooms.txt"))
    files = []
    for base in ("src", "backends"):
        for d, _, names in os.walk(os.path.join(top, base)):
            for name in names:
                if name.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(d, name), top))
    files.sort()
    errors = []
    # src/ holds rooms (folders) and main.c, nothing else.
    for name in sorted(os.listdir(os.path.join(top, "src"))):
        if name != "main.c" and not os.path.isdir(os.path.join(top, "src", name)):
            errors.append(f"src/{name}: outside every room (only main.c may stand in src/)")
    by_name = {}
    for rel in files:
        by_name.setdefault(os.path.basename(rel), []).append(rel)
        room = room_of(rel)
        if room is None:
            errors.append(f"{rel}: outside every room (src/<room>/, backends/[<room>/])")
        elif room not in allowed:
            errors.append(f"{rel}: room {room} is not declared in cmake/rooms.txt")

    def resolve(src, inc):
        here = os.path.normpath(os.path.join(os.path.dirname(src), inc))
        if here in by_name.get(os.path.basename(inc), []):
            return here
        for base in ("src", "backends"):
            p = os.path.normpath(os.path.join(base, inc))
            if "/" in inc and p in files:
                return p
        hits = by_name.get(inc, [])
        if len(hits) == 1:
            return hits[0]
        return hits or None

    unit = lambda rel: rel.rsplit(".", 1)[0]
    graph = {}
    for rel in files:
        graph.setdefault(unit(rel), set())
        with open(os.path.join(top, rel), errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            dst = resolve(rel, inc)
            if dst is None:
                errors.append(f'{rel}: #include "{inc}" is not a file of src/ or backends/')
                continue
            if isinstance(dst, list):
                errors.append(f'{rel}: #include "{inc}" is ambiguous: {", ".join(dst)}')
                continue
            a, b = room_of(rel), room_of(dst)
            if a and b and a != b and b not in allowed.get(a, set()):
                why = ("against the order of rooms" if b in order and a in order
                       and order.index(b) > order.index(a) else "not an allowed arrow")
                errors.append(f'{rel}: #include "{inc}" goes from room {a} to room {b}: {why} '
                              f"({a} may include: {' '.join(sorted(allowed.get(a, ()))) or 'nothing'})")
            if unit(dst) != unit(rel):
                graph[unit(rel)].add(unit(dst))

    # Circles between files: strongly connected components (Tarjan) of more than one file.
    index, low, stack, on, sccs = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    for comp in sccs:
        members = set(comp)
        # one cycle through the component, for the message
        start = comp[0]
        path, seen, v = [start], {start}, start
        while True:
            nxt = sorted(w for w in graph[v] if w in members)
            w = next((x for x in nxt if x == start), None) or next((x for x in nxt if x not in seen), nxt[0])
            path.append(w)
            if w == start or w in seen:
                break
            seen.add(w)
            v = w
        errors.append("include circle between files: " + " -> ".join(path))

    for e in errors:
        print(e)
    if errors:
        print(f"check_includes: {len(errors)} problem(s) in {len(files)} files")
        return 1
    print(f"check_includes: {len(files)} files in {len(order)} rooms, no circle, every include "
          "follows cmake/rooms.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
