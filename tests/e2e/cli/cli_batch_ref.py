#!/usr/bin/env python3
"""cli_batch_ref.py: float64 references for e2e_cli_batch.sh, from the same
float32 inputs gkc batch was given, with python3's standard library alone
(numpy is not needed).

  cli_batch_ref.py DIR make N SEED NAME...   writes DIR/NAME.npy, N values
                                             uniform in [-1, 1]
  cli_batch_ref.py DIR CHECK [MTX]           checks the last run (DIR/out, its
                                             --json) and its saved arrays

Exits non-zero with the first value that differs.
"""
import ast, json, math, random, struct, sys
def load(p):
    b = open(p, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0]
    h = ast.literal_eval(b[10:10 + hl].decode("latin1"))
    n = 1
    for s in h["shape"]:
        n *= s
    assert h["descr"] == "<f4", h["descr"]
    return list(struct.unpack("<%df" % n, b[10 + hl:10 + hl + 4 * n])), h["shape"]
def save(p, v):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(v)
    hdr += " " * (117 - len(hdr)) + "\n"
    with open(p, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00\x76\x00" + hdr.encode() + struct.pack("<%df" % len(v), *v))
def mtx(p):
    lines = [l for l in open(p) if not l.startswith("%")]
    r, c, _ = map(int, lines[0].split())
    sym = "symmetric" in open(p).readline()
    rows = [[] for _ in range(r)]
    for l in lines[1:]:
        i, j, v = l.split()[:3]
        i, j, v = int(i) - 1, int(j) - 1, float(v)
        rows[i].append((j, v))
        if sym and i != j:
            rows[j].append((i, v))
    return r, c, rows
def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]
def spmv(rows, x):  # A x and sum |A||x|, per row
    return ([sum(v * x[j] for j, v in r) for r in rows], [sum(abs(v * x[j]) for j, v in r) for r in rows])
def close(name, got, ref, scale, tol=1e-5):
    bad = [i for i in range(len(ref)) if not abs(got[i] - ref[i]) <= tol * max(scale[i], 1e-30)]
    assert len(got) == len(ref), "%s: %d values, expected %d" % (name, len(got), len(ref))
    assert not bad, "%s[%d] = %r, reference %r (scale %r)" % (name, bad[0], got[bad[0]], ref[bad[0]], scale[bad[0]])
def vclose(name, got, ref, scale, tol=1e-5):
    assert abs(got - ref) <= tol * scale, "%s = %r, reference %r" % (name, got, ref)
d, cmd = sys.argv[1], sys.argv[2]
if cmd == "make":  # make N SEED NAME...: NAME.npy, N values uniform in [-1, 1]
    r = random.Random(int(sys.argv[4]))
    for name in sys.argv[5:]:
        save("%s/%s.npy" % (d, name), [f32(r.uniform(-1, 1)) for _ in range(int(sys.argv[3]))])
    sys.exit(0)
out = json.load(open(d + "/out"))
st = out["steps"]
if cmd == "dot_axpby":  # steps: dot x y; axpby $0 x 1 y; y saved to by.npy
    x, y, (y2, shape) = load(d + "/bx.npy")[0], load(d + "/by.npy")[0], load(d + "/by2.npy")
    dot = sum(a * b for a, b in zip(x, y))
    vclose("dot", st[0]["value"], dot, sum(abs(a * b) for a, b in zip(x, y)))
    assert st[1] == {"op": "axpby", "array": "y", "text": "axpby $0 x 1 y"}, st[1]
    assert list(shape) == [len(x)], shape
    close("y", y2, [dot * a + b for a, b in zip(x, y)], [abs(dot * a) + abs(b) for a, b in zip(x, y)])
elif cmd == "minmax":  # steps: reduce x min, reduce x max, reduce x (sum)
    x = load(d + "/bx.npy")[0]
    assert [s["value"] for s in st[:2]] == [min(x), max(x)], (st, min(x), max(x))
    vclose("sum", st[2]["value"], sum(x), sum(map(abs, x)))
elif cmd == "spmv":  # MTX: y = 1.5 A x - 0.5 y0 saved; step 1 is dot y y
    r, c, rows = mtx(sys.argv[3])
    x, y0, y = load(d + "/sx.npy")[0], load(d + "/sy.npy")[0], load(d + "/sy2.npy")[0]
    ax, sc = spmv(rows, x)
    ref = [1.5 * a - 0.5 * b for a, b in zip(ax, y0)]
    close("y", y, ref, [1.5 * s + 0.5 * abs(b) for s, b in zip(sc, y0)])
    vclose("y.y", st[1]["value"], sum(v * v for v in ref), sum(v * v for v in ref), 1e-4)
elif cmd == "cg":  # MTX: one CG iteration from x = 0, r = p = b
    r_, c, rows = mtx(sys.argv[3])
    b = load(d + "/cb.npy")[0]
    got = {k: load("%s/c%s2.npy" % (d, k))[0] for k in ("x", "r", "p")}
    rho = sum(v * v for v in b)
    q = spmv(rows, b)[0]
    pq = sum(u * v for u, v in zip(b, q))
    alpha = rho / pq
    x = [alpha * v for v in b]
    r = [u - alpha * v for u, v in zip(b, q)]
    rho2 = sum(v * v for v in r)
    p = [u + rho2 / rho * v for u, v in zip(r, b)]
    vclose("rho", st[0]["value"], rho, rho)
    vclose("p.q", st[2]["value"], pq, sum(abs(u * v) for u, v in zip(b, q)))
    vclose("rho'", st[5]["value"], rho2, rho2, 1e-4)
    big = max(map(abs, b)) * (1 + abs(alpha) * max(map(abs, q)))
    for k, ref in (("x", x), ("r", r), ("p", p)):
        close(k, got[k], ref, [big] * len(ref))
elif cmd == "sgemm":  # c = -2 a (2x3) b^T (b 4x3) + 0.5 c0, the same --seed gave c0
    a, b, c, c0 = (load("%s/g%s.npy" % (d, k))[0] for k in ("a", "b", "c", "c0"))
    ref = [-2 * sum(a[i * 3 + l] * b[j * 3 + l] for l in range(3)) + 0.5 * c0[i * 4 + j] for i in range(2) for j in range(4)]
    sc = [2 * sum(abs(a[i * 3 + l] * b[j * 3 + l]) for l in range(3)) + 0.5 * abs(c0[i * 4 + j]) for i in range(2) for j in range(4)]
    close("c", c, ref, sc)
else:
    sys.exit("unknown check " + cmd)
