#!/usr/bin/env python3
"""gpu_soak.py: 10k mixed requests against a running gkcd, every reply checked.

    gpu_soak.py SOCKET [--count 10000] [--conns 8] [--window 16] [--json | --csv]

Sends sgemm, reduce and spmv requests of assorted small sizes (plus ~2%
invalid ones) over several pipelined connections, checks every result
against numpy in float64, and prints the daemon's device memory before and
after from `status` (memory in use apart from its cache of idle blocks must
come back to where it started).  A client written from PROTOCOL.md alone.
--json or --csv print the run's figures (one object, or a header and one
row) on stdout instead of the text.
"""
import argparse, csv, json, socket, struct, sys, threading, time
import msgpack
import numpy as np

def status(path):
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    s.sendall(msgpack.packb([0, 1, "status", [{}]]))
    u = msgpack.Unpacker(raw=False)
    while True:
        u.feed(s.recv(1 << 16))
        for m in u:
            s.close(); return m[3]

def make(rng, i):
    kind = i % 50
    if kind == 49:  # invalid on purpose: a bin of the wrong length
        return ("bad", [0, i, "reduce", [{"x": b"\0\0\0"}]], None)
    k = rng.integers(0, 3)
    if k == 0:
        m, n, kk = (int(v) for v in rng.integers(1, 96, 3))
        a = rng.uniform(-1, 1, (m, kk)).astype(np.float32); b = rng.uniform(-1, 1, (kk, n)).astype(np.float32)
        req = {"m": m, "n": n, "k": kk, "a": a.tobytes(), "b": b.tobytes()}
        return ("sgemm", [0, i, "sgemm", [req]], (a.astype(np.float64) @ b.astype(np.float64), np.abs(a) @ np.abs(b)))
    if k == 1:
        x = rng.uniform(-1, 1, int(rng.integers(1, 200000))).astype(np.float32)
        return ("reduce", [0, i, "reduce", [{"x": x.tobytes()}]], (x.astype(np.float64).sum(), np.abs(x).sum()))
    rows, cols = (int(v) for v in rng.integers(1, 3000, 2))
    lens = rng.integers(0, 12, rows); rp = np.zeros(rows + 1, np.int32); rp[1:] = np.cumsum(lens)
    nnz = int(rp[-1]); ci = rng.integers(0, cols, nnz).astype(np.int32)
    v = rng.uniform(-1, 1, nnz).astype(np.float32); x = rng.uniform(-1, 1, cols).astype(np.float32)
    y = np.zeros(rows); mag = np.zeros(rows)
    np.add.at(y, np.repeat(np.arange(rows), lens), v.astype(np.float64) * x[ci])
    np.add.at(mag, np.repeat(np.arange(rows), lens), np.abs(v.astype(np.float64) * x[ci]))
    req = {"rows": rows, "cols": cols, "row_ptr": rp.tobytes(), "col_idx": ci.tobytes(),
           "values": v.tobytes(), "x": x.tobytes()}
    return ("spmv", [0, i, "spmv", [req]], (y, mag))

def check(kind, want, reply):
    _, msgid, err, res = reply
    if kind == "bad":
        return err is not None and err["code"] == "invalid_argument"
    if err is not None:
        print("error", msgid, err); return False
    if kind == "reduce":
        return abs(res["value"] - want[0]) <= 1e-5 * want[1] + 1e-30
    got = np.frombuffer(res["c" if kind == "sgemm" else "y"], np.float32).reshape(want[0].shape)
    return bool(np.all(np.abs(got - want[0]) <= 1e-5 * want[1] + 1e-30))

def worker(path, ids, seed, window, out):
    rng = np.random.default_rng(seed)
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    u = msgpack.Unpacker(raw=False, max_buffer_size=1 << 30)
    pending, nxt, ok, bad = {}, 0, 0, 0
    while nxt < len(ids) or pending:
        while nxt < len(ids) and len(pending) < window:
            kind, req, want = make(rng, ids[nxt]); pending[ids[nxt]] = (kind, want)
            s.sendall(msgpack.packb(req, use_bin_type=True)); nxt += 1
        u.feed(s.recv(1 << 20))
        for rep in u:
            kind, want = pending.pop(rep[1])
            if check(kind, want, rep): ok += 1
            else: bad += 1
    s.close(); out.append((ok, bad))

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("socket"); ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--conns", type=int, default=8); ap.add_argument("--window", type=int, default=16)
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object on stdout instead of the text")
    fmt.add_argument("--csv", action="store_true", help="a CSV header and one row on stdout instead of the text")
    o = ap.parse_args()
    dev = lambda st: st["devices"][0]
    before = status(o.socket)
    t0 = time.time(); results = []
    threads = [threading.Thread(target=worker, args=(o.socket, list(range(c, o.count, o.conns)), c, o.window, results))
               for c in range(o.conns)]
    [t.start() for t in threads]; [t.join() for t in threads]
    dt = time.time() - t0
    after = status(o.socket)
    ok = sum(r[0] for r in results); bad = sum(r[1] for r in results)
    used = lambda st: dev(st)["memory_total"] - dev(st)["memory_free"] - dev(st).get("cached_bytes", 0)
    row = {"requests": ok + bad, "seconds": round(dt, 3), "requests_per_s": round((ok + bad) / dt, 1),
           "conns": o.conns, "window": o.window, "correct": ok, "wrong": bad,
           "used_before_bytes": used(before), "used_after_bytes": used(after),
           "cached_bytes": dev(after).get("cached_bytes", 0),
           "in_flight": after["in_flight"], "served": after["served"]}
    if o.json:
        print(json.dumps(row))
    elif o.csv:
        w = csv.DictWriter(sys.stdout, fieldnames=list(row)); w.writeheader(); w.writerow(row)
    else:
        text(row, dt)
    leak = used(after) - used(before)
    sys.exit(0 if bad == 0 and ok + bad == o.count and abs(leak) < 64 * 2**20 else 1)

def text(r, dt):
    ok, bad = r["correct"], r["wrong"]
    print(f"{ok + bad} requests in {dt:.1f} s ({(ok + bad) / dt:.0f}/s) over {r['conns']} connections: {ok} correct, {bad} wrong")
    print(f"device memory in use apart from the cache: before {r['used_before_bytes'] / 2**20:.0f} MiB, "
          f"after {r['used_after_bytes'] / 2**20:.0f} MiB (cache {r['cached_bytes'] / 2**20:.0f} MiB)")
    print(f"status: in_flight {r['in_flight']}, served {r['served']}")

if __name__ == "__main__":
    main()
