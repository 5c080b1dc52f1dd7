#!/usr/bin/env python3
"""Read a trace of gkcd (tests/tools/trace_path.c) and print the files one
request ran through: trace_path.sh's second half.

    trace_path.py GKCD TRACE

Two counts, both printed:

* entries: every function entered, by file, all threads in one sequence;
  "back" is any entry into a file already seen (a helper's return to its
  caller counts, and so does every call of log.c or args.c).  This is the
  count daemon/README.md gave before 2026-11-29.

* hand-offs: the request's path as calls.  Per thread, entries and exits
  give each call's caller, so a hand-off is a call from a function of one
  file into a function of another, or a thread's callback entered from the
  event loop or a worker's queue (a root).  A return is not a hand-off.
  Files whose functions called no other file of gkcd while traced are
  helpers (log.c, args.c, ...): they count among the files, and calls into
  them are listed, but re-entering one is not "back"; so are files that
  call only helpers (args.c, which calls proto_rpc.c's map lookup).  "Back" is a hand-off
  into a file of the path (not a helper) that the request had already left:
  the circles issue #24 asked to remove.  A thread's first traced call
  whose call site lies in a file of gkcd (a worker that was already
  waiting in pool.c's loop when tracing began) is called from that file,
  not a root: only calls from outside gkcd (libuv's loop, a thread's
  start) are roots.

* stages: the hand-offs again, but the files that move a request from one
  step of daemon/README.md's path to the next (STAGES: the transport, the
  method table, the scheduler, the pool, the worker, the backends'
  dispatch, the completion) are never helpers, even where what they called
  while traced was only helpers: once the path stopped coming back, the
  rule above made helpers of the pool, the worker and the backend (files
  that call only helpers), and its count flattered the path.  "Back" is a
  hand-off into a stage (or a non-helper) the request had already left.
  This is the count issue #24's targets are measured by.
"""
import collections
import os
import subprocess
import sys


def load(exe, trace):
    rows = [line.split() for line in open(trace)]
    offs = sorted({r[2] for r in rows} | {r[4] for r in rows if len(r) > 4 and int(r[4], 16)})
    out = subprocess.run(["addr2line", "-f", "-e", exe] + offs, capture_output=True, text=True).stdout.split("\n")
    where = {}
    for i, o in enumerate(offs):
        fn, loc = out[2 * i], out[2 * i + 1].split(":")[0]
        loc = os.path.relpath(loc) if loc.startswith("/") else loc
        # inline helpers of headers: part of their caller's file
        where[o] = (fn, "/".join(loc.split("/")[-2:]) if loc.endswith(".c") else None)
    site = lambda r: where.get(r[4], (None, None))[1] if len(r) > 4 else None
    return [(int(r[1]), where[r[2]], r[3] if len(r) > 3 else "e", site(r)) for r in rows]


def entries(events):
    seq, fns = [], []
    for _, (fn, f), kind, _ in events:
        if kind != "e" or f is None:
            continue
        if not seq or seq[-1] != f:
            seq.append(f)
            fns.append([fn])
        else:
            fns[-1].append(fn)
    seen, back = set(), 0
    for f in seq:
        back += f in seen
        seen.add(f)
    return seq, fns, len(seen), back


def handoffs(events):
    """(caller file or None for a root, callee file, callee function) for
    every call that crosses a file, in time order."""
    stacks = collections.defaultdict(list)  # thread -> [file of each open frame]
    calls, callers_of = [], collections.defaultdict(set)
    for th, (fn, f), kind, site in events:
        st = stacks[th]
        if kind == "x":
            if st:
                st.pop()
            continue
        # the innermost open frame that has a file (header inlines do not);
        # with none open, the file the call came from, when it is gkcd's
        caller = next((g for g in reversed(st) if g is not None), None)
        if caller is None and not st:
            caller = site
        st.append(f if f is not None else caller)
        if f is None or f == caller:
            continue
        calls.append((caller, f, fn, th))
        if caller is not None:
            callers_of[caller].add(f)
    return calls, callers_of


# The files that hand a request from one step of the path to the next
# (daemon/README.md, "A request's path": each step's own file, not the ones
# it works "with", which compute for it: sched_place.c, split.c, cost.c,
# move.c, ...).
STAGES = {
    "daemon/conn.c", "daemon/conn_admit.c", "daemon/conn_ring.c", "daemon/reader.c", "daemon/listen.c",
    "daemon/rpc.c", "daemon/server.c", "daemon/scheduler.c",
    "daemon/pool.c", "daemon/work.c", "daemon/job_finish.c",
    "cpu/cpu_backend.c", "cuda/cuda_backend.c", "cuda/cuda_run.c",
}


def count(calls, helpers, title):
    print(f"\n== {title}")
    seen, nback, n = set(), 0, 0
    threads = {}
    for caller, f, fn, th in calls:
        t = threads.setdefault(th, len(threads))
        if f in helpers:
            continue
        n += 1
        is_back = f in seen
        nback += is_back
        seen.add(f)
        src = caller or "(root)"
        print(f"{n:3d} t{t} {'back ' if is_back else '     '}{src:24s} -> {f:24s} {fn}")
    return n, nback


def main():
    exe, trace = sys.argv[1], sys.argv[2]
    events = load(exe, trace)

    seq, fns, nfiles, back = entries(events)
    print("== entries (every function entered, by file)")
    for i, f in enumerate(seq):
        first = list(dict.fromkeys(fns[i]))
        print(f"{i:3d} {f:28s} {', '.join(first[:6])}{' ...' if len(first) > 6 else ''}")
    print(f"entries: files {nfiles}, changes of file {len(seq) - 1}, back into a file already seen {back}")

    calls, callers_of = handoffs(events)
    files = list(dict.fromkeys(f for _, f, _, _ in calls))
    # Helpers: files that call no other file, then files that call only
    # helpers (args.c calls proto_rpc.c's proto_map_get and nothing else).
    helpers = set()
    while True:
        more = {f for f in files if f not in helpers and callers_of.get(f, set()) <= helpers}
        if not more:
            break
        helpers |= more
    path = [f for f in files if f not in helpers]
    helpers = [f for f in files if f in helpers]
    n, nback = count(calls, helpers, "hand-offs (calls between files and thread roots; returns are not hand-offs)")
    print(f"helpers (call no file but helpers): {', '.join(helpers)}")
    print(f"hand-offs: files {len(files)} ({len(path)} on the path, {len(helpers)} helpers), "
          f"hand-offs {n}, back into a file already left {nback}")

    helpers = [f for f in helpers if f not in STAGES]
    stages = [f for f in files if f not in helpers]
    n, nback = count(calls, helpers, "stages (hand-offs; the files of STAGES are never helpers)")
    print(f"stages: {', '.join(stages)}")
    print(f"stages: files {len(files)} ({len(stages)} on the path, {len(helpers)} helpers), "
          f"hand-offs {n}, back into a file already left {nback}")


if __name__ == "__main__":
    main()
