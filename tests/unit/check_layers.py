#!/usr/bin/env python3
"""check_layers.py: no two modules of a directory include each other, even
through others.

A module is a file stem: daemon/resident.c and daemon/resident.h are the
module "resident".  Module A depends on B when a file of A includes B's
header with #include "b.h" (headers of the same directory only; system and
other directories' headers are another layer's business).  Headers a
library installs (PUBLIC_HEADER in the directory's CMake files) are their
own node, below the code that implements them: gkc_async.h is the interface
every client file may use, gkc_async.c one of those files.  A .cuh that one
file alone includes is part of that file's module (a .cu split for size:
gkcu_solve_kern.cuh holds gkcu_solve.cu's kernels).

The modules of each directory must form layers: any cycle (a strongly
connected component of more than one module) is printed with the include
lines that close it, and the exit status is 1.

Usage: check_layers.py SOURCE_DIR [SUBDIR ...]   (default: the project's
C and CUDA directories)
"""
import os
import re
import sys

DEFAULT_DIRS = ["daemon", "client", "proto", "cpu", "cuda", "mpi"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+\.(?:h|cuh))"', re.M)
PUBLIC = re.compile(r'PUBLIC_HEADER\s+("[^"]*"|\S+)')


def public_headers(path):
    """The headers this directory's CMake files install as PUBLIC_HEADER."""
    out = set()
    for name in os.listdir(path):
        if name == "CMakeLists.txt" or name.endswith(".cmake"):
            with open(os.path.join(path, name)) as f:
                for m in PUBLIC.finditer(f.read()):
                    for h in m.group(1).strip('"').split(";"):
                        out.add(os.path.basename(h))
    return out


def node_of(filename, public):
    return filename if filename in public else os.path.splitext(filename)[0]


def graph(path):
    """{module: {dependency: [(file, included header), ...]}} for one directory."""
    public = public_headers(path)
    files = [n for n in os.listdir(path) if n.endswith((".c", ".h", ".cu", ".cuh"))]
    present = set(files)
    includes = {}
    for name in files:
        with open(os.path.join(path, name), errors="replace") as f:
            includes[name] = [i for i in INCLUDE.findall(f.read()) if i in present]
    includers = {}
    for name, incs in includes.items():
        for inc in incs:
            includers.setdefault(inc, set()).add(name)
    module = {n: node_of(n, public) for n in files}
    for name in files:  # a .cuh of one .cu's alone joins its module
        if name.endswith(".cuh") and len(includers.get(name, ())) == 1:
            module[name] = module[next(iter(includers[name]))]
    deps = {}
    for name in sorted(files):
        node = module[name]
        deps.setdefault(node, {})
        for inc in includes[name]:
            if module[inc] != node:
                deps[node].setdefault(module[inc], []).append((name, inc))
    return deps


def cycles(deps):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in deps.get(v, {}):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    root = argv[1]
    dirs = argv[2:] or DEFAULT_DIRS
    bad = 0
    for d in dirs:
        path = os.path.join(root, d)
        if not os.path.isdir(path):
            continue
        deps = graph(path)
        found = cycles(deps)
        for comp in found:
            bad += 1
            members = set(comp)
            print(f"{d}/: these modules include each other: {', '.join(comp)}")
            for a in comp:
                for b, lines in sorted(deps[a].items()):
                    if b in members:
                        for f, inc in lines:
                            print(f"  {d}/{f}: #include \"{inc}\"")
        print(f"{d}/: {len(deps)} modules, {'cycles above' if found else 'layered, no cycle'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
