#!/usr/bin/python3
"""e2e_python.py: a gkcd client written only from proto/PROTOCOL.md.

Uses nothing but the standard library and the `msgpack` package (numpy is
used for a larger sgemm when present).  Starts its own gkcd ($GKCD_BIN) on a
temporary socket and checks the contract: transport, framing, every method,
pipelining with replies matched by msgid, the error codes a client can
provoke, and shutdown.  Prints "N passed, M failed"; exits 0 only when
nothing failed, 77 (skipped) when msgpack is missing.
"""
import math
import os
import random
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_wire as w  # noqa: E402  (exits 77 when msgpack is missing)
from e2e_wire import (Closed, Conn, Daemon, check, close_all, closed_ok, ctx, f32, i32,  # noqa: E402,F401
                      is_error, is_ok, msgpack, np, ping_ok, rnd, sgemm_ref, spmv_ref, unf32)




# --------------------------------------------------------------------------
# tests

def test_transport():
    ctx("transport: socket file and default mode 0660")
    d = Daemon()
    d.wait_ready()
    st = os.stat(d.sock)
    check(stat.S_ISSOCK(st.st_mode), "socket path is not a socket")
    check(stat.S_IMODE(st.st_mode) == 0o660, f"socket mode {oct(stat.S_IMODE(st.st_mode))}, expected 0660")
    check(d.stop() == 0, "exit status")

    ctx("transport: $GKC_SOCKET wins over $XDG_RUNTIME_DIR when no --socket")
    tmp = tempfile.mkdtemp(prefix="gkc-py-env-")
    path = os.path.join(tmp, "env.sock")
    d = Daemon(socket_arg=False, env={"GKC_SOCKET": path, "XDG_RUNTIME_DIR": tmp})
    try:
        d.wait_ready(path)
        check(os.path.exists(path), "no socket at $GKC_SOCKET")
    except RuntimeError as e:
        check(False, f"gkcd with GKC_SOCKET: {e}")
    check(d.stop() == 0, "exit status")
    check(not os.path.exists(path), "socket file left behind after SIGTERM")

    ctx("transport: $XDG_RUNTIME_DIR/gkcd.sock")
    d = Daemon(socket_arg=False, env={"XDG_RUNTIME_DIR": tmp})
    path = os.path.join(tmp, "gkcd.sock")
    try:
        d.wait_ready(path)
        check(os.path.exists(path), "no socket at $XDG_RUNTIME_DIR/gkcd.sock")
    except RuntimeError as e:
        check(False, f"gkcd with XDG_RUNTIME_DIR: {e}")
    check(d.stop() == 0, "exit status")
    shutil.rmtree(tmp, ignore_errors=True)


def test_example(d):
    ctx("PROTOCOL.md example bytes")
    req = msgpack.packb([0, 7, "reduce", [{"x": struct.pack("<3f", 1, 2, 3)}]], use_bin_type=True)
    doc = bytes.fromhex("94 00 07 a6 72 65 64 75 63 65 91 81 a1 78 c4 0c"
                        "0000803f 00000040 00004040".replace(" ", ""))
    check(req == doc, f"packb gives {req.hex()}, PROTOCOL.md shows {doc.hex()}")
    c = Conn(d.sock)
    c.send(doc)
    r, raw = c.recv()
    res = is_ok(r, 7)
    if res is not None:
        check(set(res) >= {"algo", "kernel_us", "value", "n"}, f"reduce result keys {sorted(res)}")
        check(res.get("value") == 6.0 and res.get("n") == 3, f"reduce result {res}")
        check(isinstance(res.get("algo"), str), "algo is a string")
        # "timings are float64": the raw reply carries kernel_us as 0xcb.
        check(b"\xa9kernel_us\xcb" in raw, "kernel_us is not encoded as float64")
        check(b"\xa5value\xcb" in raw, "value is not encoded as float64")
        t = {k: res.get(k) for k in ("kernel_us", "server_us", "queue_us", "worker_us")}
        check(all(isinstance(v, float) and v >= 0 for v in t.values()), f"timing fields {t}")
        if all(isinstance(v, float) for v in t.values()):
            check(t["queue_us"] + t["worker_us"] <= t["server_us"] + 0.01 and t["kernel_us"] <= t["worker_us"] + 1,
                  f"timing fields do not nest as PROTOCOL.md says: {t}")
    c.close()


def documented_status_keys():
    """The keys PROTOCOL.md's `status` table promises: the top-level ones
    (first column) and those it lists for `limits`."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "proto", "PROTOCOL.md")
    with open(path, encoding="utf-8") as f:
        section = f.read().split("### `status` {}", 1)[1].split("\n### ", 1)[0]
    top, limits = [], []
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or not cells[1].strip().startswith("`"):
            continue
        keys = re.findall(r"`([a-z_]+)`", cells[1])
        top += keys
        if keys == ["limits"]:
            limits = re.findall(r"`([a-z_]+)`", cells[2])
    return top, limits


def test_ping_status(d):
    ctx("ping")
    c = Conn(d.sock)
    res = is_ok(c.call("ping", {}, msgid=0), 0)
    backend = "cpu"
    if res is not None:
        check(isinstance(res.get("version"), str), f"ping version {res}")
        check(res.get("protocol") == 1, f"ping protocol {res}")
        check(res.get("backend") in ("cpu", "cuda"), f"ping backend {res}")
        backend = res.get("backend", "cpu")

    ctx("msgid range")
    is_ok(c.call("ping", {}, msgid=2**32 - 1), 2**32 - 1)

    ctx("status")
    res = is_ok(c.call("status", {}), c.next_id - 1)
    if res is not None:
        want = {"version": str, "backend": str, "uptime_s": float, "in_flight": int, "queued": int,
                "connections": int, "bad_requests": int, "devices": list, "methods": dict,
                "limits": dict}
        for k, t in want.items():
            check(isinstance(res.get(k), t), f"status[{k!r}] = {res.get(k)!r}, expected {t.__name__}")
        check(res.get("connections", 0) >= 1, "status connections counts us")
        check(res.get("backend") == backend, "status backend agrees with ping")
        for dev in res.get("devices", []):
            check(isinstance(dev.get("name"), str) and isinstance(dev.get("memory_total"), int)
                  and isinstance(dev.get("memory_free"), int) and isinstance(dev.get("threads"), int),
                  f"device entry {dev}")
        check(len(res.get("devices", [])) >= 1, "the backend lists at least one device")
        for m in ("ping", "status", "sgemm", "reduce", "spmv"):
            e = res.get("methods", {}).get(m)
            check(isinstance(e, dict) and isinstance(e.get("requests"), int)
                  and isinstance(e.get("errors"), int), f"status methods[{m!r}] = {e}")
        lim = res.get("limits", {})
        for k in ("max_request_bytes", "max_queue", "threads", "max_objects"):
            check(isinstance(lim.get(k), int), f"status limits[{k!r}] = {lim.get(k)}")
        # Every key the document's table names is there, and nothing it
        # names for limits is missing.
        top, limits = documented_status_keys()
        check(len(top) >= 15 and len(limits) >= 10, f"PROTOCOL.md status table parsed: {top} / {limits}")
        for k in top:
            check(k in res, f"PROTOCOL.md documents status key {k!r}; the daemon did not send it")
        for k in limits:
            check(k in lim, f"PROTOCOL.md documents limits key {k!r}; the daemon did not send it")
        check(lim.get("max_request_bytes") == 1 << 30, f"default max_request_bytes {lim}")
    c.close()
    return backend


def test_sgemm(d, rng):
    c = Conn(d.sock)
    m, n, k = 5, 4, 3
    cases = [(False, False, 1.0, 0.0), (True, False, 0.5, 0.0), (False, True, -2.0, 1.5),
             (True, True, 1.25, -0.75)]
    for ta, tb, alpha, beta in cases:
        ctx(f"sgemm trans_a={ta} trans_b={tb} alpha={alpha} beta={beta}")
        a, b, cin = rnd(m * k, rng), rnd(k * n, rng), rnd(m * n, rng)
        p = {"m": m, "n": n, "k": k, "a": f32(a), "b": f32(b), "alpha": alpha, "beta": beta,
             "trans_a": ta, "trans_b": tb}
        if beta != 0:
            p["c"] = f32(cin)
        res = is_ok(c.call("sgemm", p), c.next_id - 1)
        if res is not None:
            check(isinstance(res.get("c"), bytes) and len(res["c"]) == m * n * 4, "c is a bin of m*n float32")
            check(isinstance(res.get("algo"), str) and isinstance(res.get("kernel_us"), float), f"{res.keys()}")
            check(close_all(unf32(res.get("c", b"")), sgemm_ref(m, n, k, alpha, a, ta, b, tb, beta, cin)),
                  "sgemm result differs from the float64 reference")

    ctx("sgemm: c is not read when beta = 0 (NaN-filled c)")
    a, b = rnd(m * k, rng), rnd(k * n, rng)
    res = is_ok(c.call("sgemm", {"m": m, "n": n, "k": k, "a": f32(a), "b": f32(b),
                                 "c": f32([float("nan")] * (m * n))}), c.next_id - 1)
    if res is not None:
        check(close_all(unf32(res["c"]), sgemm_ref(m, n, k, 1.0, a, False, b, False, 0.0, None)),
              "c was read although beta = 0")

    ctx("sgemm: float arguments as int, float32, float64")
    for alpha in (2, 2.0):
        res = is_ok(c.call("sgemm", {"m": m, "n": n, "k": k, "a": f32(a), "b": f32(b), "alpha": alpha}),
                    c.next_id - 1)
        if res is not None:
            check(close_all(unf32(res["c"]), sgemm_ref(m, n, k, 2.0, a, False, b, False, 0.0, None)),
                  f"alpha={alpha!r}")
    msgid = c.next_id
    c.next_id += 1
    c.send(msgpack.packb([0, msgid, "sgemm", [{"m": m, "n": n, "k": k, "a": f32(a), "b": f32(b),
                                               "alpha": 2.0}]], use_bin_type=True, use_single_float=True))
    res = is_ok(c.reply(), msgid)
    if res is not None:
        check(close_all(unf32(res["c"]), sgemm_ref(m, n, k, 2.0, a, False, b, False, 0.0, None)),
              "alpha as float32")

    ctx("sgemm: integers of any width (m as int64, n as uint64)")
    body = (b"\x94\x00\xcd\x12\x34\xa5sgemm\x91\x85"
            + msgpack.packb("m") + b"\xd3" + struct.pack(">q", m)
            + msgpack.packb("n") + b"\xcf" + struct.pack(">Q", n)
            + msgpack.packb("k") + b"\xd0" + struct.pack(">b", k)
            + msgpack.packb("a") + msgpack.packb(f32(a), use_bin_type=True)
            + msgpack.packb("b") + msgpack.packb(f32(b), use_bin_type=True))
    c.send(body)
    res = is_ok(c.reply(), 0x1234)
    if res is not None:
        check(close_all(unf32(res["c"]), sgemm_ref(m, n, k, 1.0, a, False, b, False, 0.0, None)), "wide ints")

    if np is not None:
        ctx("sgemm 200x150x100 against numpy float64")
        M, N, K = 200, 150, 100
        A = np.random.default_rng(rng.randrange(1 << 30)).uniform(-1, 1, (K, M)).astype(np.float32)
        B = np.random.default_rng(rng.randrange(1 << 30)).uniform(-1, 1, (K, N)).astype(np.float32)
        res = is_ok(c.call("sgemm", {"m": M, "n": N, "k": K, "a": A.tobytes(), "b": B.tobytes(),
                                     "trans_a": True, "alpha": 0.5}), c.next_id - 1)
        if res is not None:
            got = np.frombuffer(res["c"], dtype="<f4").reshape(M, N)
            ref = 0.5 * (A.T.astype(np.float64) @ B.astype(np.float64))
            mag = 0.5 * (np.abs(A.T.astype(np.float64)) @ np.abs(B.astype(np.float64)))
            check(bool(np.all(np.abs(got - ref) <= 1e-5 * mag + 1e-6)), "differs from numpy")
    c.close()


def test_reduce(d, rng):
    c = Conn(d.sock)
    x = rnd(10007, rng)
    for op in ("sum", "min", "max"):
        ctx(f"reduce {op}")
        res = is_ok(c.call("reduce", {"x": f32(x), "op": op}), c.next_id - 1)
        if res is None:
            continue
        check(res.get("n") == len(x), f"n = {res.get('n')}")
        v = res.get("value")
        if op == "sum":
            check(abs(v - math.fsum(x)) <= 1e-5 * sum(abs(t) for t in x), f"sum {v} vs {math.fsum(x)}")
        else:
            check(v == (min(x) if op == "min" else max(x)), f"{op} {v}")
    ctx("reduce default op is sum")
    res = is_ok(c.call("reduce", {"x": f32([1.5, 2.5, -1])}), c.next_id - 1)
    check(res is not None and res["value"] == 3.0 and res["n"] == 3, f"{res}")
    ctx("reduce min/max ignore NaN")
    nan = float("nan")
    res = is_ok(c.call("reduce", {"x": f32([nan, 3, -2, nan, 7]), "op": "min"}), c.next_id - 1)
    check(res is not None and res["value"] == -2.0, f"min with NaN: {res}")
    res = is_ok(c.call("reduce", {"x": f32([nan, 3, -2, nan, 7]), "op": "max"}), c.next_id - 1)
    check(res is not None and res["value"] == 7.0, f"max with NaN: {res}")
    res = is_ok(c.call("reduce", {"x": f32([nan, nan]), "op": "max"}), c.next_id - 1)
    check(res is not None and math.isnan(res["value"]), f"max of all NaN: {res}")
    ctx("reduce of one element")
    res = is_ok(c.call("reduce", {"x": f32([-4.25]), "op": "min"}), c.next_id - 1)
    check(res is not None and res["value"] == -4.25 and res["n"] == 1, f"{res}")
    c.close()


def test_spmv(d, rng):
    c = Conn(d.sock)
    # 4x5, unsorted column indices within a row, a repeated entry (adds up),
    # and an empty row.
    rows, cols = 4, 5
    rp = [0, 3, 3, 5, 7]
    ci = [4, 0, 4, 2, 1, 3, 0]
    vals = [1.0, 2.0, 0.5, -1.0, 3.0, 4.0, -2.0]
    x = [1.0, 10.0, 100.0, 1000.0, 10000.0]
    yin = [1.0, 2.0, 3.0, 4.0]
    for alpha, beta in ((1.0, 0.0), (0.5, 2.0)):
        ctx(f"spmv alpha={alpha} beta={beta}")
        p = {"rows": rows, "cols": cols, "row_ptr": i32(rp), "col_idx": i32(ci), "values": f32(vals),
             "x": f32(x), "alpha": alpha, "beta": beta}
        if beta != 0:
            p["y"] = f32(yin)
        res = is_ok(c.call("spmv", p), c.next_id - 1)
        if res is not None:
            check(isinstance(res.get("y"), bytes) and len(res["y"]) == rows * 4, "y is rows float32")
            check(isinstance(res.get("algo"), str) and isinstance(res.get("kernel_us"), float), f"{res.keys()}")
            check(close_all(unf32(res["y"]), spmv_ref(rows, rp, ci, vals, x, alpha, beta, yin)),
                  f"spmv {unf32(res['y'])}")
    ctx("spmv with nnz = 0")
    res = is_ok(c.call("spmv", {"rows": 2, "cols": 3, "row_ptr": i32([0, 0, 0]), "col_idx": b"",
                                "values": b"", "x": f32([1, 2, 3])}), c.next_id - 1)
    check(res is not None and unf32(res["y"]) == [0.0, 0.0], f"{res}")
    ctx("spmv: y is not read when beta = 0 (NaN-filled y)")
    res = is_ok(c.call("spmv", {"rows": rows, "cols": cols, "row_ptr": i32(rp), "col_idx": i32(ci),
                                "values": f32(vals), "x": f32(x), "y": f32([float("nan")] * rows)}),
                c.next_id - 1)
    if res is not None:
        check(close_all(unf32(res["y"]), spmv_ref(rows, rp, ci, vals, x, 1.0, 0.0, None)), "y was read")
    c.close()


def test_pipelining(d, rng):
    ctx("pipelining 50 mixed requests")
    c = Conn(d.sock)
    ids = rng.sample(range(1, 2**32), 50)
    expect = {}
    out = bytearray()
    for i, msgid in enumerate(ids):
        kind = i % 7
        if kind == 0:
            out += msgpack.packb([0, msgid, "ping", [{}]])
            expect[msgid] = ("ping", None)
        elif kind == 1:
            m, n, k = rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 40)
            a, b = rnd(m * k, rng), rnd(k * n, rng)
            out += msgpack.packb([0, msgid, "sgemm", [{"m": m, "n": n, "k": k, "a": f32(a), "b": f32(b)}]],
                                 use_bin_type=True)
            expect[msgid] = ("sgemm", sgemm_ref(m, n, k, 1.0, a, False, b, False, 0.0, None))
        elif kind in (2, 3):
            x = rnd(rng.randint(1, 5000), rng)
            op = rng.choice(["sum", "min", "max"])
            out += msgpack.packb([0, msgid, "reduce", [{"x": f32(x), "op": op}]], use_bin_type=True)
            want = {"sum": math.fsum(x), "min": min(x), "max": max(x)}[op]
            expect[msgid] = ("reduce", (want, sum(abs(t) for t in x)))
        elif kind == 4:
            rows, cols = rng.randint(1, 30), rng.randint(1, 30)
            rp, ci, vals = [0], [], []
            for _ in range(rows):
                for _ in range(rng.randint(0, 5)):
                    ci.append(rng.randrange(cols))
                    vals.append(rnd(1, rng)[0])
                rp.append(len(ci))
            x = rnd(cols, rng)
            out += msgpack.packb([0, msgid, "spmv", [{"rows": rows, "cols": cols, "row_ptr": i32(rp),
                                                      "col_idx": i32(ci), "values": f32(vals), "x": f32(x)}]],
                                 use_bin_type=True)
            expect[msgid] = ("spmv", spmv_ref(rows, rp, ci, vals, x, 1.0, 0.0, None))
        elif kind == 5:
            out += msgpack.packb([0, msgid, "reduce", [{"x": f32([1.0]), "op": "median"}]], use_bin_type=True)
            expect[msgid] = ("error", "invalid_argument")
        else:
            out += msgpack.packb([0, msgid, "transpose", [{}]])
            expect[msgid] = ("error", "unknown_method")
    c.send(bytes(out))
    seen = {}
    order = []
    for _ in range(len(ids)):
        try:
            r = c.reply()
        except (Closed, socket.timeout) as e:
            check(False, f"only {len(seen)} of {len(ids)} replies: {e!r}")
            break
        msgid = r[1]
        order.append(msgid)
        seen[msgid] = seen.get(msgid, 0) + 1
        if msgid not in expect:
            check(False, f"reply with unknown msgid {msgid}")
            continue
        kind, want = expect[msgid]
        if kind == "error":
            is_error(r, want, msgid)
            continue
        res = is_ok(r, msgid)
        if res is None:
            continue
        if kind == "ping":
            check(res.get("protocol") == 1, f"ping {res}")
        elif kind == "reduce":
            v, mag = want
            check(abs(res["value"] - v) <= 1e-5 * mag + 1e-7, f"reduce {res['value']} vs {v}")
        elif kind == "sgemm":
            check(close_all(unf32(res["c"]), want), f"sgemm msgid {msgid}")
        else:
            check(close_all(unf32(res["y"]), want), f"spmv msgid {msgid}")
    check(all(seen.get(i) == 1 for i in ids), "every msgid answered exactly once")
    print(f"pipelining: replies in request order: {order == ids}", file=sys.stderr)
    ping_ok(c)
    c.close()


def test_errors(d, backend):
    # parse_error: not msgpack, nil msgid, closed.
    ctx("parse_error: 0xc1")
    c = Conn(d.sock)
    c.send(b"\xc1")
    is_error(c.reply(), "parse_error", None)
    closed_ok(c)
    c.close()
    ctx("parse_error: [0, 7, then 0xc1")
    c = Conn(d.sock)
    c.send(b"\x94\x00\x07\xc1")
    is_error(c.reply(), "parse_error", 7)
    closed_ok(c)
    c.close()

    # invalid_request: stays open.
    c = Conn(d.sock)
    cases = [("an int", msgpack.packb(42), None, "array"),
             ("a map", msgpack.packb({"a": 1}), None, "array"),
             ("array of 3", msgpack.packb([0, 5, "ping"]), 5, None),
             ("type 2 notification", msgpack.packb([2, 6, "ping", [{}]]), 6, None),
             ("negative msgid", msgpack.packb([0, -1, "ping", [{}]]), None, "msgid"),
             ("string msgid", msgpack.packb([0, "7", "ping", [{}]]), None, "msgid"),
             ("msgid 2^32", msgpack.packb([0, 2**32, "ping", [{}]]), None, "msgid"),
             ("method not a string", msgpack.packb([0, 8, 1, [{}]]), 8, "method"),
             ("params a bare map", msgpack.packb([0, 9, "ping", {}]), 9, "params"),
             ("params [1]", msgpack.packb([0, 10, "ping", [1]]), 10, "params"),
             ("params [{}, {}]", msgpack.packb([0, 11, "ping", [{}, {}]]), 11, "params")]
    for name, b, msgid, needle in cases:
        ctx(f"invalid_request: {name}")
        c.send(b)
        is_error(c.reply(), "invalid_request", msgid, *([needle] if needle else []))
        ping_ok(c)

    ctx("unknown_method")
    is_error(c.call("frobnicate", {}, msgid=12), "unknown_method", 12, "frobnicate")
    ping_ok(c)

    # invalid_argument: each names the argument; stays open.
    a4 = f32([1, 2, 3, 4])
    base = {"m": 2, "n": 2, "k": 2, "a": a4, "b": a4}
    algos = {"cpu": "openblas", "cuda": "cublas"}
    cases = [("missing m", "sgemm", {k: v for k, v in base.items() if k != "m"}, ["'m'"]),
             ("m as string", "sgemm", dict(base, m="2"), ["'m'"]),
             ("m = 0", "sgemm", dict(base, m=0), ["'m'"]),
             ("m negative", "sgemm", dict(base, m=-1), ["'m'"]),
             ("unknown key alhpa", "sgemm", dict(base, alhpa=1.0), ["alhpa"]),
             ("a of 12 bytes", "sgemm", dict(base, a=a4[:12]), ["'a'"]),
             ("beta without c", "sgemm", dict(base, beta=1.0), ["'c'"]),
             ("alpha NaN", "sgemm", dict(base, alpha=float("nan")), ["'alpha'"]),
             ("alpha inf", "sgemm", dict(base, alpha=float("inf")), ["'alpha'"]),
             ("alpha beyond float32", "sgemm", dict(base, alpha=1e39), ["'alpha'"]),
             ("trans_a as int", "sgemm", dict(base, trans_a=1), ["'trans_a'"]),
             ("unknown algo", "sgemm", dict(base, algo="nope"), ["'algo'", algos.get(backend, "")]),
             ("op avg", "reduce", {"x": a4, "op": "avg"}, ["'op'"]),
             ("x of 6 bytes", "reduce", {"x": a4[:6]}, ["'x'"]),
             ("ping with an argument", "ping", {"x": 1}, []),
             ("row_ptr[0] != 0", "spmv", {"rows": 1, "cols": 1, "row_ptr": i32([1, 1]), "col_idx": i32([0]),
                                          "values": f32([1]), "x": f32([1])}, ["row_ptr"]),
             ("row_ptr decreasing", "spmv", {"rows": 2, "cols": 1, "row_ptr": i32([0, 1, 0]),
                                             "col_idx": b"", "values": b"", "x": f32([1])}, ["row_ptr"]),
             ("row_ptr[rows] != nnz", "spmv", {"rows": 1, "cols": 1, "row_ptr": i32([0, 0]),
                                               "col_idx": i32([0]), "values": f32([1]), "x": f32([1])},
              ["row_ptr"]),
             ("col_idx == cols", "spmv", {"rows": 1, "cols": 1, "row_ptr": i32([0, 1]), "col_idx": i32([1]),
                                          "values": f32([1]), "x": f32([1])}, ["col_idx"]),
             ("col_idx negative", "spmv", {"rows": 1, "cols": 1, "row_ptr": i32([0, 1]), "col_idx": i32([-1]),
                                           "values": f32([1]), "x": f32([1])}, ["col_idx"]),
             ("values length", "spmv", {"rows": 1, "cols": 1, "row_ptr": i32([0, 1]), "col_idx": i32([0]),
                                        "values": f32([1, 2]), "x": f32([1])}, ["'values'"]),
             ("x length", "spmv", {"rows": 1, "cols": 1, "row_ptr": i32([0, 1]), "col_idx": i32([0]),
                                   "values": f32([1]), "x": f32([1, 2])}, ["'x'"])]
    for name, method, params, needles in cases:
        ctx(f"invalid_argument: {name}")
        msgid = c.send_req(method, params)
        is_error(c.reply(), "invalid_argument", msgid, *needles)
    ctx("invalid_argument: repeated key")
    body = (b"\x94\x00\x0d\xa6reduce\x91\x82" + msgpack.packb("x") + msgpack.packb(a4, use_bin_type=True)
            + msgpack.packb("x") + msgpack.packb(a4, use_bin_type=True))
    c.send(body)
    is_error(c.reply(), "invalid_argument", 13, "'x'")
    ping_ok(c)

    # too_large for a result: stays open.
    ctx("too_large: sgemm result of 16 GiB")
    big = f32([0.5] * 65536)
    msgid = c.send_req("sgemm", {"m": 65536, "n": 65536, "k": 1, "a": big, "b": big})
    is_error(c.reply(), "too_large", msgid)
    ping_ok(c)
    c.close()

    # too_large for a request: answered at once, with the msgid, then closed.
    ctx("too_large: a bin declaring 4 GiB")
    c = Conn(d.sock)
    t0 = time.monotonic()
    c.send(b"\x94\x00\x09\xa5sgemm\x91\x81\xa1a\xc6\xff\xff\xff\xff")
    is_error(c.reply(), "too_large", 9)
    check(time.monotonic() - t0 < 2, "the daemon should answer before the bytes arrive")
    closed_ok(c)
    c.close()
    ctx("too_large: a top-level bin declaring 4 GiB")
    c = Conn(d.sock)
    c.send(b"\xc6\xff\xff\xff\xff")
    is_error(c.reply(), "too_large", None)
    closed_ok(c)
    c.close()

    # Limits on objects and depth: invalid_request, then closed.
    ctx("invalid_request: array declaring 2^32-1 elements")
    c = Conn(d.sock)
    c.send(b"\xdd\xff\xff\xff\xff")
    is_error(c.reply(), "invalid_request", None)
    closed_ok(c)
    c.close()
    ctx("invalid_request: more than 4096 objects")
    c = Conn(d.sock)
    c.send(msgpack.packb([0, 20, "reduce", [{"x": list(range(5000))}]]))
    is_error(c.reply(), "invalid_request", 20)
    closed_ok(c)
    c.close()
    for depth in (16, 17):
        ctx(f"nesting {depth} deep")
        v = None
        for _ in range(depth - 3):  # the envelope itself is 3 deep: [.., [{...}]]
            v = [v]
        c = Conn(d.sock)
        c.send(msgpack.packb([0, 21, "ping", [{"x": v}]]))
        r = c.reply()
        if depth == 16:
            is_error(r, "invalid_argument", 21)  # accepted as a request; ping takes no arguments
            ping_ok(c)
        else:
            is_error(r, "invalid_request", 21)
            closed_ok(c)
        c.close()

    ctx("other connections are unaffected by all of this")
    c = Conn(d.sock)
    ping_ok(c)
    res = is_ok(c.call("status", {}), c.next_id - 1)
    check(res is not None and res.get("bad_requests", 0) >= 10, f"bad_requests {res and res.get('bad_requests')}")
    c.close()


def test_request_limit():
    ctx("too_large: a real request over --max-request-bytes 64K")
    d = Daemon(["--max-request-bytes", "64K"]).wait_ready()
    c = Conn(d.sock)
    res = is_ok(c.call("reduce", {"x": f32([1.0] * 15000)}), 1)
    check(res is not None and res["value"] == 15000.0, "a 60 KB request is fine")
    msgid = c.next_id
    try:
        c.send_req("reduce", {"x": f32([1.0] * 25000)})
    except (BrokenPipeError, ConnectionResetError):
        pass  # the daemon may close before taking it all
    is_error(c.reply(), "too_large", msgid)
    closed_ok(c)
    c.close()
    check(d.stop() == 0, "exit status")


def test_shutdown(rng):
    ctx("shutdown: SIGTERM answers requests already read, then exits 0")
    d = Daemon().wait_ready()
    busy = Conn(d.sock)
    idle = Conn(d.sock)
    n = 1024
    a = struct.pack(f"<{n * n}f", *([0.25] * (n * n)))
    busy.send_req("sgemm", {"m": n, "n": n, "k": n, "a": a, "b": a}, msgid=99)
    seen = False
    for _ in range(1000):
        st = idle.call("status", {})[3]
        if st and st.get("in_flight", 0) >= 1:
            seen = True
            break
        time.sleep(0.002)
    check(seen, "status never showed the sgemm in flight")
    d.proc.send_signal(signal.SIGTERM)
    r = busy.reply()
    res = is_ok(r, 99)
    if res is not None:
        cs = unf32(res["c"][:64])
        check(all(v == n * 0.0625 for v in cs), f"sgemm of constants: {cs[:4]}")
    check(busy.is_closed(), "the connection closes once its replies are written")
    check(idle.is_closed(), "an idle connection is closed")
    try:
        rc = d.proc.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"exit status {rc}")
    check(not os.path.exists(d.sock), "socket file removed")
    d.stop()


def main():
    seed = int(os.environ.get("GKC_TEST_SEED", str(time.time_ns())))
    print(f"seed: GKC_TEST_SEED={seed}", file=sys.stderr)
    rng = random.Random(seed)
    t0 = time.monotonic()
    test_transport()
    d = Daemon().wait_ready()
    try:
        test_example(d)
        backend = test_ping_status(d)
        test_sgemm(d, rng)
        test_reduce(d, rng)
        test_spmv(d, rng)
        test_pipelining(d, rng)
        test_errors(d, backend)
    except Exception:
        ctx("unexpected exception")
        check(False, traceback.format_exc())
    finally:
        ctx("main daemon exit")
        check(d.stop() == 0, "exit status")
    test_request_limit()
    test_shutdown(rng)
    print(f"e2e_python: {w.PASSED} passed, {w.FAILED} failed ({time.monotonic() - t0:.1f} s)")
    return 0 if w.FAILED == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
