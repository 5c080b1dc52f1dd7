#!/usr/bin/env python3
"""check_calls.py: the CUDA backend's files call each other in layers.

check_layers.py follows #includes; this follows definitions.  For the
object files given (the backend's, $<TARGET_OBJECTS:...>), a file depends
on another when it uses a symbol the other defines (nm: U here, T/D/B/R
there).  Any two files that depend on each other, or any longer cycle, is
printed with the symbols that close it, and the exit status is 1
(cuda/NOTES.md, "The backend's files, in layers").

Usage: check_calls.py OBJECT...   (an argument may hold several, ;-separated)
"""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defs, refs = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBRCGSV":
            defs.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            refs.add(p[1])
    return defs, refs


def main(objs):
    if not objs:
        print(__doc__.strip())
        return 2
    name = {o: os.path.basename(o).split(".")[0] for o in objs}
    syms = {name[o]: symbols(o) for o in objs}
    deps = {a: {b: sorted(syms[a][1] & syms[b][0]) for b in syms if b != a and syms[a][1] & syms[b][0]}
            for a in syms}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in deps[v]:
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
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(deps):
        if v not in index:
            visit(v)
    for comp in cycles:
        print("cycle: " + " <-> ".join(comp))
        for a in comp:
            for b in comp:
                if b in deps[a]:
                    print(f"  {a} uses {b}'s {', '.join(deps[a][b][:6])}")
    print(f"{len(syms)} files, {sum(len(d) for d in deps.values())} dependencies, "
          + (f"{len(cycles)} cycle(s)" if cycles else "layered, no cycle"))
    return 1 if cycles else 0


if __name__ == "__main__":
    # CMake passes each $<TARGET_OBJECTS:...> as one ;-separated argument
    sys.exit(main([o for arg in sys.argv[1:] for o in arg.split(";") if o]))
