#!/usr/bin/env python3
"""check_layers.py: the product code forms layers, by its includes and by
its calls.

Three checks, over the product folders (daemon, client, proto, cpu, cuda,
mpi):

1. Includes.  A module is a file stem: daemon/resident.c and
   daemon/resident.h are the module "resident".  Module A depends on B when
   a file of A includes B's header with #include "b.h" (headers of the same
   folder only; system and other folders' headers are another layer's
   business).  Headers a library installs (PUBLIC_HEADER in the folder's
   CMake files) are their own node, below the code that implements them:
   gkc_async.h is the interface every client file may use, gkc_async.c one
   of those files.  A .cuh that one file alone includes is part of that
   file's module (gkcu_solve_kern.cuh holds gkcu_solve.cu's kernels).  No two
   modules of a folder may include each other, directly or through others.

2. Definitions and calls (needs --build).  x.c depends on y.c when x.c's
   object file needs (nm: undefined) a symbol that y.c's object defines.
   The objects are those of the build tree's product targets
   (BUILD/<folder>/CMakeFiles/<target>.dir/<source>.o, C and CUDA; with
   Ninja, only those build.ninja still makes); tests, bench and examples
   are not product code.  A source compiled into two targets is one node.
   A symbol that two files define (one per binary, such as gkcd and its
   CUDA module) is taken from the needing file's own folder when one of
   them is there.  No two source files, in one folder or across folders,
   may reach each other this way.  A lower file that
   must call upward takes a function pointer registered from above: that
   is no symbol reference, so no edge.

3. Headers.  A function that x.h declares (a prototype at file scope; not
   static inline, not macros) must be defined in x.c or x.cu, or in a file
   that x.h names in a comment line "Implemented in: a.c, b.c" (paths
   relative to the header's folder or to the source tree).  A header with
   neither a .c/.cu of its stem nor such a line may declare types and
   macros only.  Where a function is defined comes from the objects' nm
   (--build), else from the sources (a definition at file scope).

4. The transport is a floor (needs --build).  daemon/conn.c, conn_admit.c,
   conn_ring.c and reader.c (the socket or ring, frames and replies) may
   need symbols defined only in themselves, the pieces below them
   (budget.c, bufpool.c, log.c, threads.c) and proto/: everything else goes up through the hooks its
   owner installs (conn.h), and back-pressure comes down as the owner's
   word (conn_hold, conn_set_full), never asked for.  A call from them
   into the scheduler or rpc.c closes no cycle (nothing calls back by
   name), so check 2 alone would pass it.

Each cycle is printed with the include lines or the symbols that make each
of its edges, each misplaced definition with header, symbol and the file
that defines it; the exit status is 1 when there is any, 2 on a usage
error or a build tree with no product objects.

Usage: check_layers.py [--build BUILD_DIR] [--nm NM] SOURCE_DIR [FOLDER ...]
"""
import argparse
import os
import re
import subprocess
import sys

DEFAULT_DIRS = ["daemon", "client", "proto", "cpu", "cuda", "mpi"]
# Build-tree folders whose targets are not product code, even when they
# compile a product source in (unit tests compile daemon/place.c).
NOT_PRODUCT = ("tests", "bench", "examples")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+\.(?:h|cuh))"', re.M)
PUBLIC = re.compile(r'PUBLIC_HEADER\s+("[^"]*"|\S+)')
IMPLEMENTED_IN = re.compile(r"Implemented in:\s*([^\n]*)")
SOURCE_EXT = (".c", ".cu")
# nm's letters for a global definition; weak ones (V, W) are counted only
# where no strong one exists (an inline function or template instantiated
# in many objects belongs to its header, to none of them).
STRONG = set("TDBRGSCiu")
WEAK = set("VW")
UNDEFINED = set("Uwv")


# --- 1. includes ------------------------------------------------------------

def public_headers(path):
    """The headers this folder's CMake files install as PUBLIC_HEADER."""
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


def include_graph(path):
    """{module: {dependency: [(file, included header), ...]}} for one folder."""
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
    """Strongly connected components of more than one node (Tarjan), each
    sorted, in a stable order."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, {})):
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
    return sorted(out)


def check_includes(root, dirs):
    bad = 0
    for d in dirs:
        path = os.path.join(root, d)
        if not os.path.isdir(path):
            continue
        deps = include_graph(path)
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
        print(f"{d}/: {len(deps)} modules, {'include cycles above' if found else 'includes layered'}")
    return bad


# --- C at file scope, read well enough for prototypes and definitions --------

def strip_c(text):
    """text with comments, string and character literals' contents and
    preprocessor lines blanked; newlines kept, so offsets keep their line."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while j < n and text[j] != "\n":
                if text.startswith("/*", j):  # a comment may run on past the line
                    k = text.find("*/", j + 2)
                    k = n if k < 0 else k + 2
                    out.append("".join(ch if ch == "\n" else " " for ch in text[j:k]))
                    j = k
                    continue
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    out.append(" \n")
                    j += 2
                    continue
                out.append(" ")
                j += 1
            i = j
            continue
        if text.startswith("/*", i):
            k = text.find("*/", i + 2)
            k = n if k < 0 else k + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:k]))
            i = k
            continue
        if text.startswith("//", i):
            k = text.find("\n", i)
            k = n if k < 0 else k
            out.append(" " * (k - i))
            i = k
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def _match(text, i, open_, close):
    """Index of the bracket that closes text[i] (an open_), or len(text)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j
    return len(text)


ATTRIBUTE = re.compile(r"\b(?:__attribute__|__declspec|__asm__|asm)\s*\(")
MACRO_CALL = re.compile(r"[A-Z_][A-Z0-9_]*\s*\(.*\)", re.S)


def _no_attributes(s):
    while True:
        m = ATTRIBUTE.search(s)
        if not m:
            return s
        j = _match(s, m.end() - 1, "(", ")")
        s = s[:m.start()] + " " + s[j + 1:]


def _function(head):
    """(name, is_static) when head reads as a function's declarator, else None."""
    s = " ".join(_no_attributes(head).split())
    if not s.endswith(")"):
        return None
    depth, k = 0, len(s) - 1
    for k in range(len(s) - 1, -1, -1):  # the '(' of the last parameter list
        depth += {")": 1, "(": -1}.get(s[k], 0)
        if depth == 0:
            break
    before = s[:k].rstrip()
    if "=" in before:
        return None  # a variable's initializer (a default argument is no reason)
    m = re.search(r"([A-Za-z_]\w*)$", before)
    if not m:
        return None  # a function pointer: (*name)(...)
    name, ret = m.group(1), before[:m.start()].split()
    if not ret or ret[0] == "typedef" or name.isupper():
        return None  # a macro's call, a type, a macro's name
    if name in ("if", "while", "for", "switch", "return", "sizeof"):
        return None
    return name, "static" in ret


def file_scope(text):
    """[(kind, name, line, is_static)] for the functions text declares
    ('decl', a prototype) or defines ('def') at file scope.  Bodies of
    structs and initializers are skipped; extern "C" { } and namespaces
    are see-through (an anonymous one makes its functions static); a line
    that is only a macro's call (an X-macro expanding to declarations) is
    dropped."""
    s = strip_c(text)
    out = []
    i, n = 0, len(s)
    start, body = 0, False  # the statement's start; whether it had a { } of its own
    blocks = []  # the see-through blocks we are in: True for an anonymous namespace

    def line(pos):  # of the statement's first word
        while pos < n and s[pos].isspace():
            pos += 1
        return s.count("\n", 0, pos) + 1

    while i < n:
        c = s[i]
        if c == "(":
            i = _match(s, i, "(", ")") + 1
            continue
        if c == ";":
            f = None if body else _function(s[start:i])
            if f:
                out.append(("decl", f[0], line(start), f[1] or any(blocks)))
            start, body = i + 1, False
        elif c == "{":
            head = s[start:i]
            m = re.fullmatch(r'\s*(?:extern\s*"\s*"|namespace\s*([\w:]*))\s*', head)
            if m:  # extern "C" {, namespace x {
                blocks.append(m.group(1) == "")
                start, body = i + 1, False
            else:
                j = _match(s, i, "{", "}")
                f = None if body else _function(head)
                if f:
                    out.append(("def", f[0], line(start), f[1] or any(blocks)))
                    start, body = j + 1, False
                else:
                    body = True  # struct, enum, initializer: its ';' comes after
                i = j + 1
                continue
        elif c == "}":  # the end of extern "C" { } or a namespace
            if blocks:
                blocks.pop()
            start, body = i + 1, False
        elif c == "\n" and not body and MACRO_CALL.fullmatch(s[start:i].strip()):
            start = i + 1
        i += 1
    return out


# --- 2. the objects' symbols --------------------------------------------------

def object_source(build, root, obj):
    """The source file (relative to root) that obj was compiled from, or
    None: obj is BUILD/<folder>/CMakeFiles/<target>.dir/<path>.o where
    <path> is relative to root/<folder>, '..' written '__'."""
    rel = os.path.relpath(obj, build)
    parts = rel.split(os.sep)
    if "CMakeFiles" not in parts:
        return None
    k = parts.index("CMakeFiles")
    if k + 2 >= len(parts) or not parts[k + 1].endswith(".dir"):
        return None
    folder, path = parts[:k], parts[k + 2:]
    if folder and folder[0] in NOT_PRODUCT:
        return None
    if not path[-1].endswith(".o"):
        return None
    path[-1] = path[-1][:-2]
    path = [".." if p == "__" else p for p in path]
    src = os.path.normpath(os.path.join(root, *folder, *path))
    if not os.path.isfile(src) or not src.endswith(SOURCE_EXT):
        return None
    return os.path.relpath(src, root)


def ninja_objects(build):
    """The objects build.ninja makes (relative to build), or None for a
    build tree of another generator.  An object left over from an earlier
    configuration (a source since taken out of its target) is not in it."""
    path = os.path.join(build, "build.ninja")
    if not os.path.isfile(path):
        return None
    with open(path, errors="replace") as f:
        return {m.group(1).replace("$ ", " ").replace("$:", ":")
                for m in re.finditer(r"^build ((?:[^:$\n]|\$.)+?\.o)(?=[ :|])", f.read(), re.M)}


def product_objects(build, root, dirs):
    """{source: [object, ...]} for the product sources the build compiled."""
    made = ninja_objects(build)
    out = {}
    for top, subdirs, files in os.walk(build):
        rel = os.path.relpath(top, build).split(os.sep)
        if rel[0] in NOT_PRODUCT:
            subdirs[:] = []
            continue
        if "CMakeFiles" not in rel:
            continue
        for f in files:
            if f.endswith(".o"):
                obj = os.path.join(top, f)
                if made is not None and os.path.relpath(obj, build) not in made:
                    continue
                src = object_source(build, root, obj)
                if src and src.split(os.sep)[0] in dirs:
                    out.setdefault(src, []).append(obj)
    return out


def nm_symbols(nm, obj):
    """(defined strong, defined weak, undefined) global symbols of obj."""
    res = subprocess.run([nm, "-P", obj], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"check_layers: {nm} -P {obj} failed: {res.stderr.strip()}")
    strong, weak, undef = set(), set(), set()
    for ln in res.stdout.splitlines():
        f = ln.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in STRONG:
            strong.add(name)
        elif kind in WEAK:
            weak.add(name)
        elif kind in UNDEFINED:
            undef.add(name)
    return strong, weak, undef


def symbol_table(build, root, dirs, nm):
    """({source: set of symbols it needs}, {symbol: set of defining sources})."""
    objects = product_objects(build, root, dirs)
    needs, strong_by, weak_by = {}, {}, {}
    for src, objs in sorted(objects.items()):
        defined = set()
        for obj in objs:
            strong, weak, undef = nm_symbols(nm, obj)
            defined |= strong | weak
            needs.setdefault(src, set()).update(undef)
            for name in strong:
                strong_by.setdefault(name, set()).add(src)
            for name in weak:
                weak_by.setdefault(name, set()).add(src)
        needs[src] -= defined  # one object of src may need what another of src defines
    defs = dict(strong_by)
    for name, srcs in weak_by.items():
        if name not in defs and len(srcs) == 1:
            defs[name] = srcs
    return needs, defs


def providers(src, name, defs):
    """The sources src's need of name goes to.  A symbol defined in several
    files is usually one per binary: daemon/cuda_module.c's
    cuda_backends_create (gkcd's loader of gkcd-cuda.so) and cuda/'s (the
    module's own); the file's own folder's definition is the one its binary
    links, else each counts."""
    where = defs.get(name, set())
    if len(where) > 1:
        folder = src.split(os.sep)[0]
        mine = {d for d in where if d.split(os.sep)[0] == folder}
        if mine:
            return mine
    return where


def call_graph(needs, defs):
    """{source: {source it needs: [symbols]}}."""
    deps = {}
    for src, names in needs.items():
        deps.setdefault(src, {})
        for name in sorted(names):
            for d in sorted(providers(src, name, defs)):
                if d != src:
                    deps[src].setdefault(d, []).append(name)
    return deps


def check_calls(deps, defs, needs):
    bad = 0
    needed = set().union(*needs.values())
    cxx = demangle(needed)
    for comp in cycles(deps):
        bad += 1
        members = set(comp)
        print(f"call cycle: these files reach each other through the symbols they define and use"
              f" ({len(comp)} files): {', '.join(comp)}")
        for a in comp:
            for b, names in sorted(deps[a].items()):
                if b in members:
                    print(f"  {a} -> {b}: {', '.join(readable(n, cxx) for n in names)}")
    shared = sorted((n, s) for n, s in defs.items() if len(s) > 1 and n in needed)
    for name, srcs in shared:
        print(f"note: {readable(name, cxx)} is defined in {len(srcs)} files ({', '.join(sorted(srcs))}):"
              " a file's need of it goes to its own folder's, else to each")
    print(f"calls: {len(deps)} files, {'cycles above' if bad else 'layered, no cycle'}")
    return bad


# --- 4. the transport --------------------------------------------------------

TRANSPORT = ("daemon/conn.c", "daemon/conn_admit.c", "daemon/conn_ring.c", "daemon/reader.c")
TRANSPORT_MAY_USE = TRANSPORT + ("daemon/budget.c", "daemon/bufpool.c", "daemon/log.c",
                                 "daemon/threads.c", "proto/")


def check_transport(deps):
    bad = 0
    for src in TRANSPORT:
        for d, names in sorted(deps.get(src, {}).items()):
            if not d.startswith(TRANSPORT_MAY_USE):
                bad += 1
                print(f"{src}, the transport, needs what it must reach through its hooks:"
                      f" {', '.join(names)} ({d})")
    return bad


# --- 3. headers and their definitions ----------------------------------------

def implemented_in(root, header, text):
    """The files a header's 'Implemented in:' lines name, relative to root."""
    hdir = os.path.dirname(header)
    out = []
    for m in IMPLEMENTED_IN.finditer(text):
        for tok in re.split(r"[,\s]+", m.group(1).replace("*/", " ")):
            tok = tok.strip("`'\"().;")
            if not tok.endswith(SOURCE_EXT + (".cc", ".cpp")):
                continue
            for base in (hdir, ""):
                p = os.path.normpath(os.path.join(base, tok))
                if os.path.isfile(os.path.join(root, p)):
                    out.append(p)
                    break
            else:
                out.append(os.path.normpath(os.path.join(hdir, tok)))  # named, absent: reported
    return out


def source_definitions(root, dirs):
    """{function: set of sources that define it at file scope, not static}."""
    out = {}
    for d in dirs:
        path = os.path.join(root, d)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith(SOURCE_EXT):
                rel = os.path.join(d, name)
                with open(os.path.join(root, rel), errors="replace") as f:
                    for kind, fn, _, static in file_scope(f.read()):
                        if kind == "def" and not static:
                            out.setdefault(fn, set()).add(rel)
    return out


def demangle(names):
    """{C++ symbol: its demangled text} for the mangled ones among names,
    through c++filt when it is there (else none)."""
    mangled = sorted(n for n in names if n.startswith("_Z"))
    if not mangled:
        return {}
    try:
        res = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True)
    except OSError:
        return {}
    plain = res.stdout.splitlines()
    return dict(zip(mangled, plain)) if len(plain) == len(mangled) else {}


def readable(name, cxx):
    """name as a person reads it: a C++ function's qualified name, without
    its parameters."""
    plain = cxx.get(name)
    return plain.split("(", 1)[0] if plain else name


def demangled_names(defs):
    """{plain function name: sources} for the C++ symbols among defs (their
    name without scope and parameters)."""
    out = {}
    for raw, plain in demangle(defs).items():
        m = re.match(r"(?:[\w:<>, ]*::)?(\w+)\(", plain)
        if m:
            out.setdefault(m.group(1), set()).update(defs[raw])
    return out


def check_headers(root, dirs, defs):
    """Prints each header's functions defined outside its own files."""
    src_defs = source_definitions(root, dirs)
    cxx_defs = demangled_names(defs) if defs else {}
    bad = 0
    headers = 0
    for d in dirs:
        path = os.path.join(root, d)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith(".h"):
                continue
            headers += 1
            rel = os.path.join(d, name)
            with open(os.path.join(root, rel), errors="replace") as f:
                text = f.read()
            stem = os.path.splitext(rel)[0]
            own = [stem + e for e in SOURCE_EXT if os.path.isfile(os.path.join(root, stem + e))]
            listed = implemented_in(root, rel, text)
            allowed = set(own) | set(listed)
            wrong = {}  # defining file (or a reason) -> [(symbol, line)]
            for kind, fn, line, static in file_scope(text):
                if kind != "decl" or static:
                    continue
                where = defs.get(fn) or cxx_defs.get(fn) or src_defs.get(fn)
                if not where:
                    wrong.setdefault(None, []).append((fn, line))
                elif not (where & allowed):
                    wrong.setdefault(", ".join(sorted(where)), []).append((fn, line))
            if not wrong:
                continue
            bad += sum(len(v) for v in wrong.values())
            if allowed:
                says = "may define its functions only in " + ", ".join(sorted(allowed))
            else:
                says = (f"has no {os.path.basename(stem)}.c/.cu and no 'Implemented in:' line,"
                        " so may declare types and macros only")
            print(f"{rel} {says}; it declares:")
            for where, items in sorted(wrong.items(), key=lambda kv: kv[0] or ""):
                syms = ", ".join(f"{fn} (line {line})" for fn, line in items)
                if where:
                    print(f"  defined in {where}: {syms}")
                else:
                    print(f"  defined nowhere (in no object of this build, in no source): {syms}")
            for p in listed:
                if not os.path.isfile(os.path.join(root, p)):
                    print(f"  its 'Implemented in:' names {p}, which does not exist")
    verdict = "misplaced definitions above" if bad else "each function defined where its header says"
    print(f"headers: {headers} read, {verdict}")
    return bad


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="check_layers.py [--build BUILD_DIR] [--nm NM] SOURCE_DIR [FOLDER ...]")
    ap.add_argument("--build", help="a build tree of SOURCE_DIR: its product objects' symbols (checks 2 and 3)")
    ap.add_argument("--nm", default="nm", help="the nm to read objects with (default: nm)")
    ap.add_argument("root", metavar="SOURCE_DIR")
    ap.add_argument("dirs", metavar="FOLDER", nargs="*", help=f"default: {' '.join(DEFAULT_DIRS)}")
    a = ap.parse_args(argv[1:])
    root = os.path.abspath(a.root)
    dirs = a.dirs or DEFAULT_DIRS
    bad = check_includes(root, dirs)
    defs = {}
    if a.build:
        needs, defs = symbol_table(os.path.abspath(a.build), root, dirs, a.nm)
        if not needs:
            print(f"check_layers: no object of a product source under {a.build}: build it first",
                  file=sys.stderr)
            return 2
        deps = call_graph(needs, defs)
        bad += check_calls(deps, defs, needs)
        bad += check_transport(deps)
    bad += check_headers(root, dirs, defs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
