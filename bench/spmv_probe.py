#!/usr/bin/env python3
"""spmv_probe.py: per-call cost of spmv and dot on resident data, from the wire.

    spmv_probe.py SOCKET [--json | --csv] [--grids 32,512,2048]

For 2-D Laplacians of 32^2, 512^2 and 2048^2 points: csr_upload, upload x,
then 60 spmv calls with x and y resident (out into an existing handle) and 60
dot calls, printing the medians of the round trip, the daemon's server_us
(with its queue_us and worker_us parts) and kernel_us.  A client written from PROTOCOL.md alone (msgpack, numpy).
--json prints one JSON array, --csv a header row and one row per grid and
method (grid,method,calls,round_trip_us,server_us,queue_us,worker_us,
kernel_us,algo), instead of the text."""
import argparse, csv, json, msgpack, socket, sys, time, numpy as np
ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("socket")
ap.add_argument("--grids", default="32,512,2048", help="grid sizes, comma-separated (default 32,512,2048)")
fmt = ap.add_mutually_exclusive_group()
fmt.add_argument("--json", action="store_true", help="one JSON array on stdout instead of the text")
fmt.add_argument("--csv", action="store_true", help="CSV on stdout instead of the text")
opts = ap.parse_args()
path = opts.socket
s = socket.socket(socket.AF_UNIX); s.connect(path)
u = msgpack.Unpacker(raw=False, max_buffer_size=1 << 31)
mid = [0]
def call(m, p):
    mid[0] += 1
    t = time.perf_counter()
    s.sendall(msgpack.packb([0, mid[0], m, [p]], use_bin_type=True))
    while True:
        for r in u:
            dt = (time.perf_counter() - t) * 1e6
            if r[2]: raise SystemExit(f"{m}: {r[2]}")
            return r[3], dt
        u.feed(s.recv(1 << 22))
def lap(g):
    n = g * g; idx = np.arange(n).reshape(g, g)
    rows = [idx.ravel()]*1; cols = [idx.ravel()]; vals = [np.full(n, 4.0)]
    for dx, dy in ((0,1),(0,-1),(1,0),(-1,0)):
        a = idx[max(0,-dx):g-max(0,dx), max(0,-dy):g-max(0,dy)]
        b = idx[max(0,dx):g-max(0,-dx) if g-max(0,-dx)>0 else None, max(0,dy):g-max(0,-dy)]
        rows.append(a.ravel()); cols.append(b.ravel()); vals.append(np.full(a.size, -1.0))
    r = np.concatenate(rows); c = np.concatenate(cols); v = np.concatenate(vals)
    o = np.lexsort((c, r)); r, c, v = r[o], c[o], v[o]
    rp = np.zeros(n + 1, np.int32); np.add.at(rp, r + 1, 1); rp = np.cumsum(rp).astype(np.int32)
    return n, rp, c.astype(np.int32), v.astype(np.float32)
FIELDS = ["grid", "method", "calls", "round_trip_us", "server_us", "queue_us", "worker_us", "kernel_us", "algo"]
rows = []
for g in (int(v) for v in opts.grids.split(",")):
    n, rp, ci, v = lap(g)
    m, _ = call("csr_upload", {"rows": n, "cols": n, "row_ptr": rp.tobytes(), "col_idx": ci.tobytes(), "values": v.tobytes()})
    x, _ = call("upload", {"data": np.ones(n, np.float32).tobytes(), "dtype": "f32"})
    y, _ = call("spmv", {"matrix": m["matrix"], "x": {"handle": x["handle"]}, "out": {"y": "handle"}})
    rt, sv, kr, qu, wk = [], [], [], [], []
    for i in range(60):
        res, dt = call("spmv", {"matrix": m["matrix"], "x": {"handle": x["handle"]}, "out": {"y": {"handle": y["y"]["handle"]}}})
        rt.append(dt); sv.append(res["server_us"]); kr.append(res["kernel_us"])
        qu.append(res.get("queue_us", float("nan"))); wk.append(res.get("worker_us", float("nan")))
    rd, _ = call("dot", {"x": {"handle": x["handle"]}, "y": {"handle": x["handle"]}})
    dts = [call("dot", {"x": {"handle": x["handle"]}, "y": {"handle": x["handle"]}}) for i in range(60)]
    md = lambda a: round(float(np.median(a)), 3)
    nan = float("nan")
    rows.append(dict(grid=g, method="spmv", calls=len(rt), round_trip_us=md(rt), server_us=md(sv),
                     queue_us=md(qu), worker_us=md(wk), kernel_us=md(kr), algo=res["algo"]))
    rows.append(dict(grid=g, method="dot", calls=len(dts), round_trip_us=md([d[1] for d in dts]),
                     server_us=md([d[0]["server_us"] for d in dts]),
                     queue_us=md([d[0].get("queue_us", nan) for d in dts]),
                     worker_us=md([d[0].get("worker_us", nan) for d in dts]),
                     kernel_us=md([d[0]["kernel_us"] for d in dts]), algo=""))
    if opts.json or opts.csv:
        continue
    print(f"grid {g}: spmv rt {md(rt):.0f} us, server {md(sv):.0f} (waiting {md(qu):.0f}, worker {md(wk):.0f}),"
          f" kernel {md(kr):.0f}, algo {res['algo']} | "
          f"dot rt {md([d[1] for d in dts]):.0f}, server {md([d[0]['server_us'] for d in dts]):.0f}, kernel {md([d[0]['kernel_us'] for d in dts]):.0f}")
# NaN (a reply without queue_us or worker_us) is null in JSON, empty in CSV.
clean = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]
if opts.json:
    print(json.dumps(clean))
elif opts.csv:
    w = csv.DictWriter(sys.stdout, fieldnames=FIELDS)
    w.writeheader()
    w.writerows(clean)
