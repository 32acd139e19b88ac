#!/usr/bin/env python3
"""No circles between source files: the call graph of the built objects.

Each object of the given static libraries defines symbols (functions, the
drivers' tables) and leaves others undefined; an object that leaves undefined
a symbol another defines uses that file, and a file in a circle of uses
cannot be read, tested or replaced on its own.  This test takes the graph
from `nm` (so it sees calls and references to tables alike, through any
header), finds its strongly connected components, and fails on any circle
that is not in ALLOWED below, naming its files.  It also fails when an
allowed circle is gone, so that the list says what remains.

usage: file_cycles.py NM LIBRARY.a...
"""
import subprocess
import sys

# Circles that remain, each a set of source files, and why: none.  (The last two,
# an index opening its shards through tc_open and scan judging an archive's
# members as files, now go through an opener and a judge the caller hands on.)
ALLOWED = {
}


def symbols(nm, lib):
    """{object file: (defined, undefined)} for one static library."""
    out = subprocess.run([nm, "-A", "-g", lib], check=True, capture_output=True, text=True).stdout
    objs = {}
    for line in out.splitlines():
        # LIB:MEMBER.o:[ADDR] TYPE NAME
        head, _, rest = line.rpartition(":")
        member = head.split(":")[-1].rsplit("/", 1)[-1]
        parts = rest.split()
        if len(parts) < 2:
            continue
        kind, name = parts[-2], parts[-1]
        src = member[:-2] if member.endswith(".o") else member
        d, u = objs.setdefault(src, (set(), set()))
        (u if kind == "U" else d).add(name)
    return objs


def components(graph):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    nm, libs = sys.argv[1], sys.argv[2:]
    objs = {}
    for lib in libs:
        for src, du in symbols(nm, lib).items():
            if src in objs:
                print(f"file_cycles: two objects named {src}", file=sys.stderr)
                return 1
            objs[src] = du
    if len(objs) < 20:
        print(f"file_cycles: only {len(objs)} objects read from {libs}: nothing to judge", file=sys.stderr)
        return 1
    owner = {}
    for src, (defined, _) in objs.items():
        for s in defined:
            owner[s] = src
    graph = {src: set() for src in objs}
    why = {}
    for src, (_, undefined) in objs.items():
        for s in undefined:
            o = owner.get(s)
            if o and o != src:
                graph[src].add(o)
                why.setdefault((src, o), s)
    # the test must see a circle where there is one
    probe = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    if components(probe) != [frozenset({"a", "b", "c"})]:
        print("file_cycles: the component search misses a circle", file=sys.stderr)
        return 1
    bad = 0
    found = components(graph)
    for comp in found:
        if comp in ALLOWED:
            continue
        bad = 1
        print("file_cycles: a circle of uses between " + ", ".join(sorted(comp)) + ":", file=sys.stderr)
        for a in sorted(comp):
            for b in sorted(graph[a] & comp):
                print(f"  {a} -> {b} ({why[(a, b)]})", file=sys.stderr)
    for comp in ALLOWED:
        if comp not in found:
            bad = 1
            print("file_cycles: the allowed circle " + ", ".join(sorted(comp)) +
                  " is gone or changed: update ALLOWED", file=sys.stderr)
    if not bad:
        print(f"file_cycles: {len(objs)} files, {sum(len(v) for v in graph.values())} uses, "
              f"{len(found)} allowed circle(s)")
    return bad


if __name__ == "__main__":
    sys.exit(main())
