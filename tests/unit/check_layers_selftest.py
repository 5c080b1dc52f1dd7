#!/usr/bin/env python3
"""check_layers_selftest.py: check_layers.py fails where it must, and
passes where it must, on tiny source trees built here.

The broken tree has: three daemon/ files calling round in a circle (a ->
b -> c -> a) that their includes do not show, one compiled into two
targets; a circle across folders (cpu/k.c, compiled into a daemon/ target
from there, and daemon/e.c); a lower file that calls upward through a
function pointer registered from above (no cycle); a function defined in
two folders, as for two binaries; a test program's object that would close
a circle if it counted, and so would an object left over from an earlier
configuration (not in build.ninja); a header whose function is defined in
another file, one whose function is defined nowhere; a header with no .c
that declares a function; one whose 'Implemented in:' line names its
files; two headers that include each other; the transport (conn.c)
calling a file above it beside the log it may use.  Each is compiled as-is, and again with
-fsanitize=address,undefined when the compiler can (tests/run.sh's ASan
build runs this check too), and the findings must be the same.  The clean
tree (the same without the faults) must pass, and a build tree with no
objects must be refused.

Usage: check_layers_selftest.py CC [NM]
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_layers.py")

# path -> text.  The lines marked FAULT are what the clean tree leaves out.
# The circles are made by declarations in the .c files, not by includes:
# the include check alone would pass them.
BROKEN = {
    "daemon/a.h": "void a_top(void);\n",
    "daemon/a.c": '#include "a.h"\n#include "b.h"\nvoid a_top(void) { b_mid(); }\n',
    "daemon/b.h": "void b_mid(void);\nvoid b_gone(void); /* FAULT: defined nowhere */\n",
    "daemon/b.c": '#include "b.h"\n#include "c.h"\nvoid b_mid(void) { c_low(); }\n',
    "daemon/c.h": "/* c.h */\nvoid c_low(void);\nint c_misplaced(int x); /* FAULT: defined in d.c */\n",
    "daemon/c.c": ('#include "c.h"\nvoid a_top(void);\nvoid c_low(void) {\n'
                   "  a_top(); /* FAULT: calls up */\n}\n"),
    "daemon/d.c": "int c_misplaced(int x) { return x; }\nint proto_fn(void) { return 1; }\n",
    "daemon/proto.h": "typedef struct { int n; } proto_t;\nint proto_fn(void); /* FAULT: no proto.c */\n",
    "daemon/types.h": ("/* types only: allowed without a .c */\ntypedef struct { int n; } types_t;\n"
                       "#define TYPES_MAX(a, b) \\\n  ((a) > (b) ? (a) : (b))\n"
                       "static inline int types_twice(int x) { return 2 * x; }\n"),
    "daemon/impl.h": ("/* impl.h: one interface, two files.\n * Implemented in: impl_one.c, impl_two.c */\n"
                      '#ifdef __cplusplus\nextern "C" {\n#endif\n'
                      "int impl_one(void);\nint impl_two(void) __attribute__((pure));\n"
                      "#ifdef __cplusplus\n}\n#endif\n"),
    "daemon/impl_one.c": '#include "impl.h"\nint impl_one(void) { return 1; }\n',
    "daemon/impl_two.c": '#include "impl.h"\nint impl_two(void) { return impl_one() + 1; }\n',
    # hook.c is below user.c: user.c registers a callback, hook.c calls it.
    # Compiled into a test with TEST_CALLS_UP, hook.c would call up: that
    # object is a test's, and must not count.
    "daemon/hook.h": "typedef void (*hook_fn)(void);\nvoid hook_set(hook_fn fn);\nvoid hook_fire(void);\n",
    "daemon/hook.c": ('#include "hook.h"\nstatic hook_fn g_fn;\nvoid hook_set(hook_fn fn) { g_fn = fn; }\n'
                      "void hook_fire(void) { if (g_fn) g_fn(); }\n"
                      "#ifdef TEST_CALLS_UP\nvoid user_start(void);\n"
                      "void hook_test(void) { user_start(); }\n#endif\n"),
    "daemon/user.h": "void user_start(void);\n",
    "daemon/user.c": ('#include "user.h"\n#include "hook.h"\nstatic void user_cb(void) {}\n'
                      "void user_start(void) { hook_set(user_cb); hook_fire(); }\n"),
    # u.c needs a stub that only a test program defines, which calls u.c.
    "daemon/u.h": "int u_fn(void);\n",
    "daemon/u.c": '#include "u.h"\nint stub_fn(void);\nint u_fn(void) { return stub_fn(); }\n',
    "tests/t.c": "int u_fn(void);\nint stub_fn(void) { return 0; }\nint main(void) { return u_fn(); }\n",
    "daemon/e.h": "int e_fn(void);\n",
    "daemon/e.c": '#include "e.h"\nint k_fn(void);\nint e_fn(void) { return k_fn(); }\n',
    "cpu/k.c": ("int e_fn(void);\nint k_fn(void) {\n  int r = 0;\n"
                "  r += e_fn(); /* FAULT: calls daemon/ back */\n  return r;\n}\n"),
    # mod_create is defined twice, once per binary (as gkcd's loader and
    # the module's entry): user2.c's need goes to its own folder's, so
    # mod.c calling user2.c back closes no circle.
    "daemon/loader.c": "int mod_create(void) { return 0; }\n",
    "cpu/mod.c": "int user2_done(void);\nint mod_create(void) { return user2_done(); }\n",
    "daemon/user2.c": ("int mod_create(void);\nint user2_done(void) { return 0; }\n"
                       "int user2_start(void) { return mod_create(); }\n"),
    # The transport (check 4) may use log.c, not b.c.
    "daemon/log.c": "void log_line(void) {}\n",
    "daemon/conn.c": ("void log_line(void);\nvoid b_mid(void);\nvoid conn_read(void) {\n"
                      "  log_line();\n  b_mid(); /* FAULT: asks the layer above */\n}\n"),
    "daemon/inc1.h": '#include "inc2.h"\n',
    "daemon/inc2.h": '#include "inc1.h" /* FAULT: includes back */\n',
}

# source -> the objects a CMake build tree would hold for it, with the
# compiler flags of each.  One STALE object is left over from an earlier
# configuration: build.ninja no longer makes it, and it must not count.
STALE = "stale:"
OBJECTS = {
    "daemon/a.c": [("daemon/CMakeFiles/core.dir/a.c.o", [])],
    "daemon/b.c": [("daemon/CMakeFiles/core.dir/b.c.o", []), ("daemon/CMakeFiles/core_shared.dir/b.c.o", [])],
    "daemon/c.c": [("daemon/CMakeFiles/core.dir/c.c.o", [])],
    "daemon/d.c": [("daemon/CMakeFiles/core.dir/d.c.o", [])],
    "daemon/impl_one.c": [("daemon/CMakeFiles/core.dir/impl_one.c.o", [])],
    "daemon/impl_two.c": [("daemon/CMakeFiles/core.dir/impl_two.c.o", [])],
    "daemon/hook.c": [("daemon/CMakeFiles/core.dir/hook.c.o", []),
                      ("tests/unit/CMakeFiles/t.dir/__/__/daemon/hook.c.o", ["-DTEST_CALLS_UP"]),
                      (STALE + "daemon/CMakeFiles/core_old.dir/hook.c.o", ["-DTEST_CALLS_UP"])],
    "daemon/user.c": [("daemon/CMakeFiles/core.dir/user.c.o", [])],
    "daemon/u.c": [("daemon/CMakeFiles/core.dir/u.c.o", [])],
    "daemon/e.c": [("daemon/CMakeFiles/core.dir/e.c.o", [])],
    "cpu/k.c": [("daemon/CMakeFiles/core.dir/__/cpu/k.c.o", [])],
    "tests/t.c": [("tests/unit/CMakeFiles/t.dir/__/t.c.o", [])],
    "daemon/loader.c": [("daemon/CMakeFiles/core.dir/loader.c.o", [])],
    "daemon/user2.c": [("daemon/CMakeFiles/core.dir/user2.c.o", [])],
    "cpu/mod.c": [("CMakeFiles/module.dir/cpu/mod.c.o", [])],
    "daemon/log.c": [("daemon/CMakeFiles/core.dir/log.c.o", [])],
    "daemon/conn.c": [("daemon/CMakeFiles/core.dir/conn.c.o", [])],
}

# What the broken tree must print (each line exactly), and must not.
EXPECT = [
    "daemon/: these modules include each other: inc1, inc2",
    '  daemon/inc1.h: #include "inc2.h"',
    '  daemon/inc2.h: #include "inc1.h"',
    "call cycle: these files reach each other through the symbols they define and use"
    " (2 files): cpu/k.c, daemon/e.c",
    "  cpu/k.c -> daemon/e.c: e_fn",
    "  daemon/e.c -> cpu/k.c: k_fn",
    "call cycle: these files reach each other through the symbols they define and use"
    " (3 files): daemon/a.c, daemon/b.c, daemon/c.c",
    "  daemon/a.c -> daemon/b.c: b_mid",
    "  daemon/b.c -> daemon/c.c: c_low",
    "  daemon/c.c -> daemon/a.c: a_top",
    "note: mod_create is defined in 2 files (cpu/mod.c, daemon/loader.c): a file's need of it goes to its"
    " own folder's, else to each",
    "daemon/b.h may define its functions only in daemon/b.c; it declares:",
    "  defined nowhere (in no object of this build, in no source): b_gone (line 2)",
    "daemon/c.h may define its functions only in daemon/c.c; it declares:",
    "  defined in daemon/d.c: c_misplaced (line 3)",
    "daemon/proto.h has no proto.c/.cu and no 'Implemented in:' line, so may declare types and"
    " macros only; it declares:",
    "  defined in daemon/d.c: proto_fn (line 2)",
    "daemon/conn.c, the transport, needs what it must reach through its hooks: b_mid (daemon/b.c)",
]
ABSENT = ["hook", "user", "types.h", "impl", "tests/", "u.c", "u.h", "mod.c", "loader", "log.c"]


def build(tree, cc, flags, faults=True):
    src = os.path.join(tree, "src")
    out = os.path.join(tree, "build")
    for path, text in BROKEN.items():
        if not faults:
            text = "\n".join(ln for ln in text.split("\n") if "FAULT" not in ln) + "\n"
        p = os.path.join(src, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    made = []
    for path, objs in OBJECTS.items():
        for obj, extra in objs:
            if obj.startswith(STALE):
                obj = obj[len(STALE):]
            else:
                made.append(f"build {obj}: C_COMPILER__x {path}\n")
            o = os.path.join(out, obj)
            os.makedirs(os.path.dirname(o), exist_ok=True)
            subprocess.run([cc, *flags, *extra, "-c", os.path.join(src, path), "-o", o], check=True)
    with open(os.path.join(out, "build.ninja"), "w") as f:
        f.writelines(made)
    return src, out


def check(src, out, nm):
    args = [sys.executable, CHECKER, "--nm", nm, src, "daemon", "cpu"]
    if out:
        args[2:2] = ["--build", out]
    res = subprocess.run(args, capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip())
        return 2
    cc, nm = argv[1], argv[2] if len(argv) > 2 else "nm"
    failures = []

    def expect(cond, what, output):
        if not cond:
            failures.append(f"{what}; check_layers.py printed:\n{output}")

    variants = [("plain", ["-O0"])]
    with tempfile.TemporaryDirectory() as probe:
        c = os.path.join(probe, "x.c")
        with open(c, "w") as f:
            f.write("int main(void) { return 0; }\n")
        san = ["-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
        if subprocess.run([cc, *san, c, "-o", os.path.join(probe, "x")], capture_output=True).returncode == 0:
            variants.append(("asan", san))
        else:
            print(f"note: {cc} cannot build -fsanitize=address,undefined here: that variant left out")

    for name, flags in variants:
        tree = tempfile.mkdtemp(prefix="gkc-layers-")
        try:
            src, out = build(tree, cc, flags)
            rc, text = check(src, out, nm)
            lines = text.split("\n")
            expect(rc == 1, f"{name}: the broken tree exits {rc}, not 1", text)
            for ln in EXPECT:
                expect(ln in lines, f"{name}: the broken tree's findings lack {ln!r}", text)
            for word in ABSENT:
                bad = [ln for ln in lines
                       if word in ln and (ln.startswith(" ") or "cycle" in ln or " it declares" in ln)]
                expect(not bad, f"{name}: a finding names {word!r}, which is fine: {bad}", text)
            expect(text.count("call cycle:") == 2, f"{name}: not exactly two call cycles", text)
            expect(text.count("include each other") == 1, f"{name}: not exactly one include cycle", text)
            expect(text.count("daemon/b.c -> ") == 1, f"{name}: b.c, in two targets, is not one node", text)
        finally:
            shutil.rmtree(tree)

        tree = tempfile.mkdtemp(prefix="gkc-layers-clean-")
        try:
            src, out = build(tree, cc, flags, faults=False)
            rc, text = check(src, out, nm)
            expect(rc == 0, f"{name}: the clean tree exits {rc}, not 0", text)
            expect("calls: " in text and "layered, no cycle" in text,
                   f"{name}: the clean tree's calls were not read", text)
            os.makedirs(os.path.join(tree, "empty"))
            rc, text = check(src, os.path.join(tree, "empty"), nm)
            expect(rc == 2, f"{name}: a build tree with no objects exits {rc}, not 2", text)
        finally:
            shutil.rmtree(tree)
        print(f"{name}: checked")

    for f in failures:
        print(f"FAIL: {f}")
    print(f"check_layers_selftest: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
