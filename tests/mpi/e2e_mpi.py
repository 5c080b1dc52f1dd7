#!/usr/bin/python3
"""e2e_mpi.py: distributed CG (examples/mpi_cg on gkc-mpi) across two gkcd.

Two daemons on separate sockets stand for two nodes; mpirun starts 1, 2 or
4 ranks (MPMD: the first half on daemon A, the second on daemon B, each
told its socket the usual way, $GKC_SOCKET), all on this machine over
shared memory.  Checks:
  - the solution of 1, 2 and 4 ranks against a float64 reference (numpy's
    dense solve; scipy's sparse solve too when python3-scipy is there) and
    against each other, within the bound the solver tolerance gives
    (||x - x_ref|| / ||x_ref|| <= cond(A) ||r|| / ||b||);
  - that both daemons did the work (their spmv counters);
  - PCG-Jacobi on a Matrix Market file (read by rank 0, scattered);
  - gkcm_scatter_csr on its own (tests/mpi/mpi_scatter.c): each rank's rows,
    and a root row_ptr that does not start at 0 or decreases refused;
  - per-rank sockets through the GKC_MPI_SOCKET template;
  - usage errors, a missing daemon, and one daemon killed mid-solve: every
    rank exits non-zero naming that daemon's socket, in bounded time;
  - the single-reduction variant (Chronopoulos-Gear) and the chained
    classical iterations of one rank: iteration counts within 1% of
    classical CG's one iteration at a time (and of scipy's float64 CG when
    scipy is there), x against the float64 reference, one Allreduce per
    iteration;
  - the ghost-only exchange: per distributed product, exactly the halo's
    floats go over MPI (the sends), come down from gkcd (the sends and one
    float per ghost for the dot) and go up (the ghosts), never a vector;
  - mpi_cg --solve (gkcd's own solve, the GPU benchmarks' reference).
Every mpirun runs under a timeout.  Exit 0 passed, 1 failed, 77 skipped
(no mpirun, or no numpy).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import numpy as np
except ImportError:
    print("SKIP: python3-numpy is missing", file=sys.stderr)
    sys.exit(77)
try:
    import scipy.sparse
    import scipy.sparse.linalg
except ImportError:
    scipy = None

MPIRUN = os.environ.get("GKC_MPIRUN") or shutil.which("mpirun")
if not MPIRUN or not os.path.exists(MPIRUN):
    print("SKIP: mpirun is missing (apt-get install openmpi-bin)", file=sys.stderr)
    sys.exit(77)
GKCD = os.environ["GKCD_BIN"]
MPI_CG = os.environ["GKC_MPI_CG"]
MPI_SCATTER = os.environ.get("GKC_MPI_SCATTER")
GKC = os.environ.get("GKC_BIN")
TIMEOUT = 90  # seconds for any one mpirun

FAILED = 0


def check(cond, what):
    global FAILED
    if not cond:
        FAILED += 1
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


# Run as root in CI, without network interfaces: shared memory between the
# ranks, no binding (ranks outnumber cores), and a leak-check exemption for
# Open MPI's own allocations under AddressSanitizer.
ENV = dict(os.environ)
ENV.update({
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_hwloc_base_binding_policy": "none",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
})
if os.environ.get("GKC_SANITIZE", "").upper() in ("1", "ON", "TRUE", "YES"):
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan_mpi.supp")
    ENV["LSAN_OPTIONS"] = f"suppressions={supp}:print_suppressions=0"
    ENV["OMPI_MCA_mca_base_component_disable_dlclose"] = "1"
    # The slow unwinder walks through Open MPI's frames, which the
    # suppressions name; the fast one stops at the first.
    ENV["ASAN_OPTIONS"] = ENV.get("ASAN_OPTIONS", "") + ":fast_unwind_on_malloc=0"


class Daemon:
    def __init__(self, tmp, name):
        self.sock = os.path.join(tmp, name + ".sock")
        self.logpath = os.path.join(tmp, name + ".log")
        self.log = open(self.logpath, "wb")
        self.proc = subprocess.Popen([GKCD, "--socket", self.sock, "--threads", "1",
                                      "--log-level", "warn"], stderr=self.log)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self.sock)
                s.close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"gkcd at {self.sock} did not come up: {open(self.logpath).read()}")

    def spmv_requests(self):
        """spmv requests served so far, from `gkc status --json` (None without the CLI)."""
        if not GKC:
            return None
        out = subprocess.run([GKC, "--socket", self.sock, "status", "--json"],
                             capture_output=True, text=True, timeout=30)
        st = json.loads(out.stdout)
        methods = st.get("methods", {})
        if isinstance(methods, dict):
            m = methods.get("spmv", {})
            return m.get("requests") if isinstance(m, dict) else None
        for m in methods:
            if m.get("name") == "spmv":
                return m.get("requests")
        return None

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def mpirun_cmd(np_, daemons, args, extra_env=None, prog=None):
    """Ranks split in halves over the daemons (one daemon: all on it)."""
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe"]
    per = [np_] if len(daemons) == 1 else [np_ - np_ // 2, np_ // 2]
    first = True
    for d, k in zip(daemons, per):
        if k == 0:
            continue
        if not first:
            cmd.append(":")
        first = False
        env = [f"GKC_SOCKET={d.sock}"] if d else []
        cmd += ["-np", str(k), "env"] + env + (extra_env or []) + [prog or MPI_CG] + args
    return cmd


def run(np_, daemons, args, extra_env=None, env=None, prog=None):
    cmd = mpirun_cmd(np_, daemons, args, extra_env, prog)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env or ENV)
    return p, time.time() - t0


# --- the float64 reference -------------------------------------------------------------

def xstar(n):
    """x*[i] = splitmix64 of 1 + (i+1) * golden, to [-1, 1) (as mpi_cg.c)."""
    M = (1 << 64) - 1
    out = np.empty(n)
    for i in range(n):
        z = (1 + (i + 1) * 0x9e3779b97f4a7c15) & M
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
        z ^= z >> 31
        out[i] = np.float32((z >> 11) / 9007199254740992.0 * 2.0 - 1.0)
    return out


def poisson3(nx, ny, nz):
    n = nx * ny * nz
    A = np.zeros((n, n))
    for i in range(n):
        x, y, z = i % nx, (i // nx) % ny, i // (nx * ny)
        A[i, i] = 6
        for ok, j in ((x > 0, i - 1), (x < nx - 1, i + 1), (y > 0, i - nx), (y < ny - 1, i + nx),
                      (z > 0, i - nx * ny), (z < nz - 1, i + nx * ny)):
            if ok:
                A[i, j] = -1
    return A


def reference(A):
    """b as mpi_cg makes it (float32 of A x* in float64), the float64 solution, cond(A)."""
    b = (A @ xstar(A.shape[0])).astype(np.float32).astype(np.float64)
    x = np.linalg.solve(A, b)
    if scipy is not None:
        xs = scipy.sparse.linalg.spsolve(scipy.sparse.csr_matrix(A), b)
        check(np.linalg.norm(xs - x) <= 1e-10 * np.linalg.norm(x), "scipy and numpy disagree")
    ev = np.linalg.eigvalsh(A)
    return b, x, ev[-1] / ev[0]


def check_solution(tag, path, A, b, xref, cond, tol, residual_reported):
    x = np.load(path).astype(np.float64)
    res = np.linalg.norm(b - A @ x) / np.linalg.norm(b)
    err = np.linalg.norm(x - xref) / np.linalg.norm(xref)
    # mpi_cg stops on gkcd's float32 residual; in float64 it may sit a little above.
    check(res < 2 * tol, f"{tag}: float64 residual {res:.3g} not below 2 * tol {tol}")
    check(abs(res - residual_reported) <= 1e-3 * res + 1e-12,
          f"{tag}: mpi_cg reported residual {residual_reported:.6g}, here {res:.6g}")
    check(err <= cond * res * 1.01 + 1e-7,
          f"{tag}: error {err:.3g} over cond * residual = {cond * res:.3g}")
    return x


def write_spd_mtx(path, n, rng):
    """A random sparse SPD matrix with row scales from 1 to 1000 (Jacobi's case),
    in Matrix Market's symmetric form (lower triangle)."""
    A = np.zeros((n, n))
    for i in range(n):
        for j in rng.choice(n, size=rng.integers(0, 6), replace=False):
            if j != i:
                v = np.float32(rng.uniform(-1, 1))
                A[i, j] = A[j, i] = v
    s = 10 ** rng.uniform(0, 3, size=n)
    A = A * np.sqrt(np.outer(s, s))
    for i in range(n):
        A[i, i] = np.float32(np.abs(A[i]).sum() - abs(A[i, i]) + s[i])
    A = A.astype(np.float32).astype(np.float64)
    rows, cols = np.nonzero(np.tril(A))
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real symmetric\n")
        f.write(f"{n} {n} {len(rows)}\n")
        for i, j in zip(rows, cols):
            f.write(f"{i + 1} {j + 1} {repr(float(np.float32(A[i, j])))}\n")
    return A


# --- the tests ---------------------------------------------------------------------------

def test_poisson(tmp, da, db):
    nx, ny, nz, tol = 10, 9, 8, 1e-6
    A = poisson3(nx, ny, nz)
    b, xref, cond = reference(A)
    xs = {}
    before = (da.spmv_requests(), db.spmv_requests())
    for np_, ds in ((1, [da]), (2, [da, db]), (4, [da, db])):
        out = os.path.join(tmp, f"x{np_}.npy")
        p, _ = run(np_, ds, ["--grid", f"{nx}x{ny}x{nz}", "--tol", str(tol), "--json",
                             "--out", out])
        if not check(p.returncode == 0, f"{np_} ranks: exit {p.returncode}: {p.stderr}"):
            continue
        r = json.loads(p.stdout)
        check(r["ranks"] == np_ and r["converged"], f"{np_} ranks: {r}")
        xs[np_] = check_solution(f"{np_} ranks", out, A, b, xref, cond, tol, r["rel_residual"])
        if np_ > 1:
            check(r["halo_bytes_per_spmv"] > 0 and r["max_neighbours"] >= 1,
                  f"{np_} ranks: no halo: {r}")
            # The exchange a slab partition needs at least: one plane each way per cut.
            check(r["halo_bytes_per_spmv"] >= 2 * (np_ - 1) * nx * ny * 4 * 0.5,
                  f"{np_} ranks: halo of {r['halo_bytes_per_spmv']} bytes is too small")
    after = (da.spmv_requests(), db.spmv_requests())
    if None not in before + after:
        check(after[1] > before[1], "daemon B served no spmv: the ranks did not spread")
        check(after[0] > before[0], "daemon A served no spmv")
    if 1 in xs:
        for k in (2, 4):
            if k in xs:
                d = np.linalg.norm(xs[k] - xs[1]) / np.linalg.norm(xs[1])
                check(d <= 2 * cond * 2 * tol, f"{k} ranks vs 1 rank: {d:.3g} apart")


def test_matrix_file(tmp, da, db):
    rng = np.random.default_rng(int(time.time()))
    path = os.path.join(tmp, "spd.mtx")
    A = write_spd_mtx(path, 300, rng)
    b, xref, cond = reference(A)
    tol = 1e-5
    out = os.path.join(tmp, "xm.npy")
    p, _ = run(4, [da, db], ["--matrix", path, "--precond", "jacobi", "--tol", str(tol),
                             "--json", "--out", out])
    if check(p.returncode == 0, f"PCG-Jacobi, 4 ranks: exit {p.returncode}: {p.stderr}"):
        r = json.loads(p.stdout)
        check(r["precond"] == "jacobi" and r["converged"], f"PCG: {r}")
        check_solution("PCG-Jacobi 4 ranks", out, A, b, xref, cond, tol, r["rel_residual"])
        # Plain CG on this badly scaled matrix needs many more iterations.
        p2, _ = run(2, [da, db], ["--matrix", path, "--precond", "none", "--tol", str(tol),
                                  "--json", "--max-iter", "20000"])
        if check(p2.returncode == 0, f"CG on the file: exit {p2.returncode}: {p2.stderr}"):
            r2 = json.loads(p2.stdout)
            check(r2["iterations"] > r["iterations"],
                  f"Jacobi did not help: {r['iterations']} vs {r2['iterations']} iterations")


def scipy_cg_iterations(A, b, tol):
    """scipy's CG in float64 from x0 = 0 with ||r|| <= tol ||b||, counted."""
    if scipy is None:
        return None
    count = [0]

    def cb(_):
        count[0] += 1
    try:
        scipy.sparse.linalg.cg(scipy.sparse.csr_matrix(A), b, rtol=tol, atol=0, maxiter=100000,
                               callback=cb)
    except TypeError:  # scipy < 1.12 names it tol
        scipy.sparse.linalg.cg(scipy.sparse.csr_matrix(A), b, tol=tol, atol=0, maxiter=100000,
                               callback=cb)
    return count[0]


def within(a, b, frac, slack=1):
    """a and b agree within frac of the larger, or slack iterations on small counts."""
    return abs(a - b) <= max(slack, frac * max(a, b))


def test_variants(tmp, da, db):
    nx, ny, nz, tol = 12, 11, 10, 1e-6
    A = poisson3(nx, ny, nz)
    b, xref, cond = reference(A)
    ref_it = scipy_cg_iterations(A, b, tol)
    runs = {}
    for np_, ds in ((1, [da]), (2, [da, db]), (4, [da, db])):
        for variant, extra in (("classical", ["--chain", "1"]), ("classical", []),
                               ("single", [])):
            tag = f"{variant}{'' if extra else ' chained'} on {np_} ranks"
            out = os.path.join(tmp, f"xv{np_}{variant}{len(extra)}.npy")
            p, _ = run(np_, ds, ["--grid", f"{nx}x{ny}x{nz}", "--tol", str(tol), "--json",
                                 "--variant", variant, "--out", out] + extra)
            if not check(p.returncode == 0, f"{tag}: exit {p.returncode}: {p.stderr}"):
                continue
            r = json.loads(p.stdout)
            runs[(np_, variant, bool(extra))] = r
            check(r["variant"] == variant and r["converged"], f"{tag}: {r}")
            check_solution(tag, out, A, b, xref, cond, tol, r["rel_residual"])
            # The iteration's shape, counted (no timings).
            if variant == "single":
                check(r["allreduces_per_iteration"] <= 1.1, f"{tag}: {r['allreduces_per_iteration']} "
                      "Allreduce per iteration, not one")
                want = 1.1 if np_ == 1 else 1.3  # the halo rides in the one batch
                check(r["requests_per_iteration"] <= want,
                      f"{tag}: {r['requests_per_iteration']} requests per iteration")
            elif np_ > 1:
                check(r["requests_per_iteration"] <= 2.3 and r["allreduces_per_iteration"] <= 2.2,
                      f"{tag}: {r['requests_per_iteration']} requests, "
                      f"{r['allreduces_per_iteration']} Allreduce per iteration")
            elif not extra:
                check(r["requests_per_iteration"] < 0.6,
                      f"{tag}: {r['requests_per_iteration']} requests per iteration: not chained")
            # Ghost-only exchange: per distributed product, summed over the ranks.
            if np_ > 1:
                check(r["halo_in_region"], f"{tag}: the halo did not go through a region")
                check(r["mpi_bytes_per_spmv"] == 4 * r["sends"],
                      f"{tag}: {r['mpi_bytes_per_spmv']} bytes over MPI per spmv, the halo is "
                      f"{4 * r['sends']}")
                check(r["down_bytes_per_spmv"] == 4 * (r["sends"] + r["ghosts"]),
                      f"{tag}: {r['down_bytes_per_spmv']} bytes down per spmv, want "
                      f"{4 * (r['sends'] + r['ghosts'])} (sends + ghosts)")
                check(r["up_bytes_per_spmv"] == 4 * r["ghosts"],
                      f"{tag}: {r['up_bytes_per_spmv']} bytes up per spmv, want {4 * r['ghosts']}")
                check(r["sends"] == r["ghosts"] and r["ghosts"] <= 2 * (np_ - 1) * nx * ny,
                      f"{tag}: {r['ghosts']} ghosts, {r['sends']} sends: more than the cut planes")
            else:
                check(r["down_bytes_per_spmv"] == 0 and r["up_bytes_per_spmv"] == 0,
                      f"{tag}: vector traffic on one rank: {r}")
    base = runs.get((1, "classical", True))
    if base:
        if ref_it is not None:
            check(within(base["iterations"], ref_it, 0.01, 2),
                  f"classical CG took {base['iterations']} iterations, scipy's float64 CG {ref_it}")
        for key, r in runs.items():
            check(within(r["iterations"], base["iterations"], 0.01),
                  f"{key}: {r['iterations']} iterations, classical CG on one rank "
                  f"{base['iterations']}")
    # The Jacobi-preconditioned single variant on a badly scaled file.
    rng = np.random.default_rng(int(time.time()))
    path = os.path.join(tmp, "spdv.mtx")
    M = write_spd_mtx(path, 240, rng)
    bm, xm, condm = reference(M)
    its = {}
    for variant in ("classical", "single"):
        out = os.path.join(tmp, f"xvm{variant}.npy")
        p, _ = run(4, [da, db], ["--matrix", path, "--precond", "jacobi", "--tol", "1e-5",
                                 "--variant", variant, "--json", "--out", out])
        if check(p.returncode == 0, f"PCG {variant}: exit {p.returncode}: {p.stderr}"):
            r = json.loads(p.stdout)
            its[variant] = r["iterations"]
            check_solution(f"PCG-Jacobi {variant} 4 ranks", out, M, bm, xm, condm, 1e-5,
                           r["rel_residual"])
    if len(its) == 2:
        # An ill-conditioned float32 problem: the recurrences round apart more.
        check(within(its["single"], its["classical"], 0.05, 2),
              f"PCG: single {its['single']} vs classical {its['classical']} iterations")


def test_solve_reference(tmp, da, db):
    p, _ = run(1, [da], ["--grid", "10", "--json", "--solve"])
    if check(p.returncode == 0, f"--solve: exit {p.returncode}: {p.stderr}"):
        r = json.loads(p.stdout)
        check(r["variant"] == "solve" and r["converged"] and r["rel_residual"] < 2e-6,
              f"--solve: {r}")
        q, _ = run(1, [da], ["--grid", "10", "--json"])
        if check(q.returncode == 0, f"classical: {q.stderr}"):
            c = json.loads(q.stdout)
            check(within(c["iterations"], r["iterations"], 0.01, 2),
                  f"solve {r['iterations']} vs gkc-mpi {c['iterations']} iterations")
    p, _ = run(2, [da, db], ["--grid", "10", "--solve"])
    check(p.returncode == 2 and "one rank" in p.stderr, f"--solve on 2 ranks: {p.returncode} {p.stderr}")
    for args, want in ((["--variant", "pipelined"], "invalid --variant 'pipelined'"),
                       (["--chain", "9"], "invalid --chain '9'"),
                       (["--solve=fp16"], "invalid --solve='fp16'")):
        p, _ = run(1, [da], args)
        check(p.returncode == 2 and want in p.stderr, f"{args}: exit {p.returncode}: {p.stderr}")


def test_scatter(tmp, da, db):
    if not check(MPI_SCATTER and os.path.exists(MPI_SCATTER), "GKC_MPI_SCATTER is not built"):
        return
    for np_ in (1, 2, 3):
        p, _ = run(np_, [da, db], [], prog=MPI_SCATTER)
        check(p.returncode == 0 and f"mpi_scatter: ok on {np_} rank" in p.stdout,
              f"scatter on {np_} ranks: exit {p.returncode}: {p.stdout}{p.stderr}")


def test_socket_template(tmp, da, db):
    # Rank r reaches r<r>.sock: links to the two daemons.
    for r, d in ((0, da), (1, db)):
        os.symlink(d.sock, os.path.join(tmp, f"r{r}.sock"))
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", MPI_CG, "--grid", "8",
           "--json"]
    env = dict(ENV, GKC_MPI_SOCKET=os.path.join(tmp, "r%r.sock"))
    env.pop("GKC_SOCKET", None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    check(p.returncode == 0, f"GKC_MPI_SOCKET: exit {p.returncode}: {p.stderr}")
    env["GKC_MPI_SOCKET"] = os.path.join(tmp, "r%q.sock")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    check(p.returncode == 1 and "GKC_MPI_SOCKET=" in p.stderr,
          f"bad template: exit {p.returncode}: {p.stderr}")


def test_usage(tmp, da):
    p, _ = run(2, [da], ["--help"])
    check(p.returncode == 0 and p.stdout.count("Usage:") == 1, f"--help: {p.returncode} {p.stdout}")
    for args, want in ((["--grid", "0"], "invalid --grid '0'"),
                       (["--grid", "4x4"], "invalid --grid '4x4'"),
                       (["--tol", "2"], "invalid --tol '2'"),
                       (["--precond", "ilu"], "invalid --precond 'ilu'"),
                       (["--bogus"], "unknown option '--bogus'"),
                       (["--matrix", os.path.join(tmp, "absent.mtx")], "absent.mtx")):
        p, _ = run(2, [da], args)
        check(p.returncode != 0 and want in p.stderr, f"{args}: exit {p.returncode}: {p.stderr}")
    # More ranks than rows: refused by name, on every rank.
    p, _ = run(2, [da], ["--grid", "1"])
    check(p.returncode == 1 and p.stderr.count("fewer than the 2 ranks") == 2,
          f"1 row on 2 ranks: {p.returncode}: {p.stderr}")


def test_no_daemon(tmp, da):
    class Nowhere:
        sock = os.path.join(tmp, "nobody.sock")
    p, elapsed = run(2, [da, Nowhere], ["--grid", "8"])
    check(p.returncode == 1, f"missing daemon: exit {p.returncode}")
    for r in (0, 1):
        check(f"mpi_cg (rank {r} of 2): rank 1: gkcd at {Nowhere.sock}" in p.stderr,
              f"rank {r} does not name the missing daemon: {p.stderr}")


def test_killed_daemon(tmp):
    """Daemon B dies mid-solve: all 4 ranks must say so and exit, promptly."""
    da, db = Daemon(tmp, "ka"), Daemon(tmp, "kb")
    try:
        # Large enough to run for seconds; tol below float32's reach keeps it busy.
        cmd = mpirun_cmd(4, [da, db], ["--grid", "40", "--tol", "1e-12", "--max-iter",
                                       "100000000", "--verbose"])
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=ENV)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
        reader.start()
        deadline = time.time() + TIMEOUT
        while time.time() < deadline and p.poll() is None and \
                not any("mpi_cg: solving" in l for l in lines):
            time.sleep(0.05)
        if not check(any("mpi_cg: solving" in l for l in lines),
                     f"the solve never started: {''.join(lines)}"):
            p.kill()
            p.wait()
            return
        time.sleep(0.5)
        check(p.poll() is None, "the solve ended before the daemon was killed")
        db.proc.kill()
        t_kill = time.time()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            check(False, "mpirun still running 60 s after the daemon died: a hang")
        took = time.time() - t_kill
        reader.join(timeout=10)
        err = "".join(lines)
        took = time.time() - t_kill
        check(p.returncode != 0, f"exit {p.returncode} after a daemon died")
        check(took < 30, f"took {took:.1f} s to exit after the daemon died")
        for r in range(4):
            line = [l for l in err.splitlines() if l.startswith(f"mpi_cg (rank {r} of 4): ")]
            check(line and f"gkcd at {db.sock}" in line[0] and
                  ("rank 2:" in line[0] or "rank 3:" in line[0]),
                  f"rank {r} did not name the dead daemon {db.sock}: {err}")
    finally:
        da.stop()
        db.stop(signal.SIGKILL)


def main():
    tmp = tempfile.mkdtemp(prefix="gkc-mpi-")
    da = db = None
    try:
        da, db = Daemon(tmp, "a"), Daemon(tmp, "b")
        for name, f, args in (("poisson", test_poisson, (tmp, da, db)),
                              ("matrix_file", test_matrix_file, (tmp, da, db)),
                              ("variants", test_variants, (tmp, da, db)),
                              ("solve_reference", test_solve_reference, (tmp, da, db)),
                              ("scatter", test_scatter, (tmp, da, db)),
                              ("socket_template", test_socket_template, (tmp, da, db)),
                              ("usage", test_usage, (tmp, da)),
                              ("no_daemon", test_no_daemon, (tmp, da)),
                              ("killed_daemon", test_killed_daemon, (tmp,))):
            t0 = time.time()
            before = FAILED
            try:
                f(*args)
            except subprocess.TimeoutExpired as e:
                check(False, f"{name}: mpirun ran past {TIMEOUT} s: {e}")
            print(f"{name}: {'ok' if FAILED == before else 'FAILED'} ({time.time() - t0:.1f} s)")
    finally:
        for d in (da, db):
            if d:
                d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"e2e_mpi: {'passed' if FAILED == 0 else f'{FAILED} failed'}")
    return 0 if FAILED == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
