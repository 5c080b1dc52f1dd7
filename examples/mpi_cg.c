/* mpi_cg.c: conjugate gradients over MPI, each rank's rows resident on its node's gkcd.
 *
 *   mpirun -np 4 examples/mpi_cg --grid 64                 # 3-D Poisson, 64^3 unknowns
 *   mpirun -np 4 examples/mpi_cg --matrix A.mtx --precond jacobi
 *
 * Rank 0 reads the Matrix Market file and sends each rank its rows; a
 * generated grid is built by every rank for its own rows.  b = A x* with x*
 * uniform in [-1, 1] (seed 1, by global index: the same for any number of
 * ranks, and the same as examples/cg.c's), so x* is the solution.  Rank 0
 * prints the iterations, the residual (recomputed here in float64 from the
 * final x), time per iteration and the share of it spent in MPI.  On any
 * failure every rank prints the agreed message (which names the rank, the
 * host and the gkcd socket where it happened) and exits 1.
 */
#include <errno.h>
#include <getopt.h>
#include <gkc_mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtx.h"
#include "npy.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: mpirun -np P mpi_cg [--grid N | --matrix A.mtx] [OPTIONS]\n"
          "Solves A x = b by distributed conjugate gradients: A's rows split across the\n"
          "P ranks (balanced by nonzeros), each rank's block and vectors resident in its\n"
          "node's gkcd, the halo of x exchanged by MPI, dot products by MPI_Allreduce.\n"
          "b = A x* with x* uniform in [-1, 1] (seed 1), so x* is the solution.\n\n"
          "Options:\n"
          "  --grid N|NXxNYxNZ  A = the 7-point Laplacian of an N^3 (or NX x NY x NZ)\n"
          "                     grid (default 32)\n"
          "  --matrix F         A from a symmetric positive definite Matrix Market file\n"
          "                     (read by rank 0)\n"
          "  --precond P        none or jacobi (default: jacobi with --matrix, else none)\n"
          "  --tol T            stop when ||b - A x|| / ||b|| < T (default 1e-6)\n"
          "  --max-iter N       at most N iterations (default 10000)\n"
          "  --variant V        classical (two Allreduce per iteration; default) or\n"
          "                     single (Chronopoulos-Gear: one Allreduce per iteration)\n"
          "  --chain K          classical on one rank: up to K iterations per request\n"
          "                     (1 to 8; default 8)\n"
          "  --solve[=fp32]     one rank only: instead, gkcd's own single-device solve\n"
          "                     (method cg or pcg, float64 vectors or, with =fp32,\n"
          "                     float32) on the same problem: the reference\n"
          "  --socket PATH      every rank's gkcd socket (default: $GKC_MPI_SOCKET with\n"
          "                     %%r rank, %%l rank on the node, %%h host; else\n"
          "                     $GKC_SOCKET, $XDG_RUNTIME_DIR/gkcd.sock, /run/gkcd/gkcd.sock)\n"
          "  --out F.npy        write the solution (rank 0 gathers it)\n"
          "  --json             print one JSON object (rank 0)\n"
          "  --verbose          say on stderr when each stage starts (rank 0)\n"
          "  -h, --help         show this help\n"
          "Exit status: 0 converged, 1 not converged or an error, 2 a usage error.\n");
}

typedef struct {
  const char *matrix, *socket, *out;
  int32_t g[3];
  gkcm_cg_params prm;
  int precond_set, json, verbose;
  int solve;        /* 0, or gkcd's solve: 1 fp64, 2 fp32 */
} options;

/* 0, or 2 with the message printed (by rank 0 only: every rank parses). */
static int parse(int argc, char **argv, options *o, int rank) {
  static const struct option opts[] = {
      {"grid", required_argument, 0, 'g'},     {"matrix", required_argument, 0, 'm'},
      {"precond", required_argument, 0, 'p'},  {"tol", required_argument, 0, 't'},
      {"max-iter", required_argument, 0, 'i'}, {"socket", required_argument, 0, 's'},
      {"out", required_argument, 0, 'o'},      {"json", no_argument, 0, 'j'},
      {"verbose", no_argument, 0, 'v'},        {"help", no_argument, 0, 'h'},
      {"variant", required_argument, 0, 'V'},  {"chain", required_argument, 0, 'c'},
      {"solve", optional_argument, 0, 'S'},
      {0, 0, 0, 0}};
  char why[300] = "";
  int c;
  char *end;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1 && !why[0]) {
    switch (c) {
      case 'g': {
        long v[3];
        int k = 0, ok = 1;
        const char *s = optarg;
        for (;;) {
          errno = 0;
          long d = strtol(s, &end, 10);
          if (errno || end == s || d < 1 || d > 4096 || k == 3) { ok = 0; break; }
          v[k++] = d;
          if (*end == '\0') break;
          if (*end != 'x') { ok = 0; break; }
          s = end + 1;
        }
        if (!ok || (k != 1 && k != 3))
          snprintf(why, sizeof why, "invalid --grid '%s': expected N or NXxNYxNZ, each 1 to 4096",
                   optarg);
        else
          for (int d = 0; d < 3; d++) o->g[d] = (int32_t)(k == 1 ? v[0] : v[d]);
        break;
      }
      case 'm': o->matrix = optarg; break;
      case 'p':
        o->precond_set = 1;
        if (!strcmp(optarg, "none")) o->prm.precond = GKCM_PRECOND_NONE;
        else if (!strcmp(optarg, "jacobi")) o->prm.precond = GKCM_PRECOND_JACOBI;
        else snprintf(why, sizeof why, "invalid --precond '%s': expected none or jacobi", optarg);
        break;
      case 't':
        o->prm.tol = strtod(optarg, &end);
        if (*end || end == optarg || !(o->prm.tol > 0) || o->prm.tol >= 1)
          snprintf(why, sizeof why, "invalid --tol '%s': expected a number in (0, 1)", optarg);
        break;
      case 'i': {
        errno = 0;
        long v = strtol(optarg, &end, 10);
        if (errno || *end || end == optarg || v < 1 || v > 100000000)
          snprintf(why, sizeof why, "invalid --max-iter '%s': expected 1 to 100000000", optarg);
        o->prm.max_iter = (int)v;
        break;
      }
      case 'V':
        if (!strcmp(optarg, "classical")) o->prm.variant = GKCM_CG_CLASSICAL;
        else if (!strcmp(optarg, "single")) o->prm.variant = GKCM_CG_SINGLE;
        else snprintf(why, sizeof why, "invalid --variant '%s': expected classical or single", optarg);
        break;
      case 'c': {
        errno = 0;
        long v = strtol(optarg, &end, 10);
        if (errno || *end || end == optarg || v < 1 || v > GKCM_CG_MAX_CHAIN)
          snprintf(why, sizeof why, "invalid --chain '%s': expected 1 to %d", optarg,
                   GKCM_CG_MAX_CHAIN);
        else o->prm.chain = (int)v;
        break;
      }
      case 'S':
        if (!optarg || !strcmp(optarg, "fp64")) o->solve = 1;
        else if (!strcmp(optarg, "fp32")) o->solve = 2;
        else snprintf(why, sizeof why, "invalid --solve='%s': expected fp64 or fp32", optarg);
        break;
      case 's': o->socket = optarg; break;
      case 'o': o->out = optarg; break;
      case 'j': o->json = 1; break;
      case 'v': o->verbose = 1; break;
      case 'h':
        if (rank == 0) usage(stdout);
        return 1;
      default:
        snprintf(why, sizeof why, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (!why[0] && optind < argc) snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
  if (!why[0] && o->matrix && o->g[0])
    snprintf(why, sizeof why, "--grid and --matrix exclude each other");
  if (why[0]) {
    if (rank == 0) fprintf(stderr, "mpi_cg: %s\nTry 'mpi_cg --help'.\n", why);
    return 2;
  }
  if (!o->precond_set) o->prm.precond = o->matrix ? GKCM_PRECOND_JACOBI : GKCM_PRECOND_NONE;
  if (!o->matrix && !o->g[0]) o->g[0] = o->g[1] = o->g[2] = 32;
  return 0;
}

/* x*[i] for global row i: splitmix64 of the sequence seeded with 1. */
static float xstar(int64_t i) {
  uint64_t z = 1 + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The rows of the problem on this rank: rank 0 reads the file. */
static int load(gkcm_ctx *ctx, const options *o, gkcm_rows *rows, int *usage_err) {
  if (!o->matrix) return gkcm_poisson3d(ctx, o->g[0], o->g[1], o->g[2], rows);
  mtx_csr M = {0};
  char msg[512] = "";
  int ok = 1;
  if (gkcm_rank(ctx) == 0) {
    if (mtx_read_csr(o->matrix, &M, msg, sizeof msg) != 0) ok = 0;
    else if (M.rows != M.cols)
      snprintf(msg, sizeof msg, "%s is %d x %d, not square", o->matrix, M.rows, M.cols), ok = 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, gkcm_comm(ctx));
  MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, gkcm_comm(ctx));
  if (!ok) {
    fprintf(stderr, "mpi_cg (rank %d): %s\n", gkcm_rank(ctx), msg);
    *usage_err = 1;
    return -1;
  }
  int rc = gkcm_scatter_csr(ctx, 0, M.rows, M.row_ptr, M.col_idx, M.values, rows);
  mtx_free(&M);
  return rc;
}

/* --solve: gkcd's own solve of the same rows on one rank, timed as
 * gkcm_cg's iterations are (b and x resident around the call, so that
 * only the solve is timed).  Fills the stats gkcm_cg would. */
static int reference_solve(gkcm_ctx *ctx, const gkcm_rows *rows, const float *b, float *x,
                           const options *o, gkcm_cg_stats *st) {
  memset(st, 0, sizeof *st);
  gkc_conn *c = gkcm_conn(ctx);
  size_t n = (size_t)rows->rows;
  int64_t nnz = rows->row_ptr[rows->rows];
  int32_t *ci = malloc(((size_t)nnz + 1) * sizeof *ci);
  uint32_t m = 0, hb = 0, hx = 0;
  int rc = GKC_EOUT_OF_MEMORY;
  const char *step = "out of memory";
  if (!ci) goto done;
  for (int64_t k = 0; k < nnz; k++) ci[k] = (int32_t)rows->col_idx[k]; /* one rank: n < 2^31 */
  gkc_csr A = {rows->rows, rows->rows, nnz, rows->row_ptr, ci, rows->values};
  if ((rc = gkc_csr_upload(c, &A, 0, &m, NULL))) { step = "csr_upload"; m = 0; goto done; }
  if ((rc = gkc_upload(c, gkc_ref_mem(b, n * 4), GKC_F32, 0, &hb))) { step = "upload (b)"; hb = 0; goto done; }
  if ((rc = gkc_upload(c, gkc_ref_handle(hb, n * 4), GKC_F32, 0, &hx))) { step = "upload (x)"; hx = 0; goto done; }
  gkc_solve_args a = GKC_SOLVE_ARGS_INIT;
  a.matrix = m, a.b = gkc_ref_handle(hb, n * 4);
  a.method = o->prm.precond == GKCM_PRECOND_JACOBI ? GKC_SOLVE_PCG : GKC_SOLVE_CG;
  a.rtol = o->prm.tol, a.max_iter = o->prm.max_iter, a.fp32 = o->solve == 2;
  gkc_out out = gkc_out_handle(hx);
  gkc_solve_result res;
  gkc_info info;
  double t = MPI_Wtime();
  if ((rc = gkc_solve(c, &a, &out, &res, &info))) { step = "solve"; goto done; }
  st->solve_s = st->local_s = MPI_Wtime() - t;
  st->server_s = info.server_us * 1e-6, st->kernel_s = info.kernel_us * 1e-6;
  st->iterations = (int)res.iterations, st->converged = res.converged;
  st->residual = st->rec_residual = res.residual;
  st->requests = 1, st->spmvs = (int)res.iterations;
  if ((rc = gkc_download(c, hx, x, n * 4))) step = "download (x)";
done:
  if (rc) fprintf(stderr, "mpi_cg: --solve: %s: %s: %s\n", step, gkc_errname(rc), gkc_errmsg(c));
  if (m) gkc_release_matrix(c, m);
  if (hb) gkc_release(c, hb);
  if (hx) gkc_release(c, hx);
  free(ci);
  return rc;
}

static void say(const options *o, int rank, const char *what) {
  if (o->verbose && rank == 0) fprintf(stderr, "mpi_cg: %s\n", what);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  options o = {0};
  o.prm = (gkcm_cg_params)GKCM_CG_PARAMS_INIT;
  int ret = parse(argc, argv, &o, rank);
  if (ret) {
    MPI_Finalize();
    return ret == 1 ? 0 : 2;
  }
  gkcm_ctx *ctx = NULL;
  gkcm_matrix *A = NULL;
  gkcm_rows rows = {0};
  float *b = NULL, *x = NULL, *xs = NULL, *all = NULL;
  double *ax = NULL;
  int usage_err = 0;
  ret = 1;
  say(&o, rank, "connecting to gkcd");
  if (gkcm_init(MPI_COMM_WORLD, o.socket, &ctx) != 0) goto fail;
  say(&o, rank, "distributing the matrix");
  if (load(ctx, &o, &rows, &usage_err) != 0) goto fail;
  if (gkcm_matrix_create(ctx, &rows, &A) != 0) goto fail;
  gkcm_matrix_info mi;
  gkcm_matrix_info_get(A, &mi);
  size_t n = (size_t)mi.rows;
  b = malloc(n * 4), x = malloc(n * 4), xs = malloc(n * 4), ax = malloc(n * sizeof *ax);
  if (!b || !x || !xs || !ax) {
    fprintf(stderr, "mpi_cg (rank %d): out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < n; i++) xs[i] = xstar(mi.row0 + (int64_t)i);
  gkcm_host_spmv(A, xs, ax);
  for (size_t i = 0; i < n; i++) b[i] = (float)ax[i];

  say(&o, rank, "solving");
  gkcm_cg_stats st;
  int rc;
  if (o.solve && size != 1) {
    if (rank == 0) fprintf(stderr, "mpi_cg: --solve runs on one rank, not %d\n", size);
    ret = 2;
    goto out;
  }
  if (o.solve) {
    if (reference_solve(ctx, &rows, b, x, &o, &st) != 0) goto out; /* it said why */
    rc = 0;
  } else {
    rc = gkcm_cg(A, b, x, &o.prm, &st);
  }
  if (rc == GKCM_EBREAKDOWN) {
    if (rank == 0) fprintf(stderr, "mpi_cg: %s\n", gkcm_errmsg(ctx));
    goto out;
  }
  if (rc != 0) goto fail;
  say(&o, rank, "checking");
  /* The residual and the error against x*, in float64 here. */
  gkcm_host_spmv(A, x, ax);
  double loc[4] = {0, 0, 0, 0}, glob[4];
  for (size_t i = 0; i < n; i++) {
    double r = (double)b[i] - ax[i], e = (double)x[i] - xs[i];
    loc[0] += r * r, loc[1] += (double)b[i] * b[i], loc[2] += e * e, loc[3] += (double)xs[i] * xs[i];
  }
  MPI_Reduce(loc, glob, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  /* Time: the slowest rank's; communication: averaged over ranks. */
  double tl[3] = {st.solve_s, st.comm_s, st.local_s}, tmax[3], tsum[3];
  MPI_Reduce(tl, tmax, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(tl, tsum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  /* Per-rank traffic and counts, summed and the largest. */
  int64_t cnt[9] = {st.halo_bytes, mi.ghosts, mi.neighbours, mi.sends, st.down_bytes,
                    st.up_bytes, st.requests, st.allreduces, st.spmvs};
  int64_t csum[9], cmax[9];
  MPI_Reduce(cnt, csum, 9, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(cnt, cmax, 9, MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
  double tx[3] = {st.server_s, st.kernel_s, st.host_s}, txs[3];
  MPI_Reduce(tx, txs, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (o.out) {
    if (rank == 0 && !(all = malloc((size_t)mi.n * 4))) MPI_Abort(MPI_COMM_WORLD, 1);
    if (gkcm_gather(A, 0, x, all) != 0) goto fail;
    char msg[512];
    int64_t shape[1] = {mi.n};
    if (rank == 0 && npy_write(o.out, 1, shape, all, msg, sizeof msg) != 0) {
      fprintf(stderr, "mpi_cg: %s\n", msg);
      st.converged = 0;
    }
  }
  if (rank == 0) {
    double res = sqrt(glob[0] / (glob[1] > 0 ? glob[1] : 1));
    double err = sqrt(glob[2] / (glob[3] > 0 ? glob[3] : 1));
    int it = st.iterations > 0 ? st.iterations : 1;
    double per_it = tmax[0] / it, comm_share = tsum[0] > 0 ? tsum[1] / tsum[0] : 0;
    double local_share = tsum[0] > 0 ? tsum[2] / tsum[0] : 0;
    char what[600];
    if (o.matrix) snprintf(what, sizeof what, "%s", o.matrix);
    else snprintf(what, sizeof what, "3-D Poisson, %d x %d x %d grid (7-point)", o.g[0], o.g[1], o.g[2]);
    const char *pc = o.prm.precond == GKCM_PRECOND_JACOBI ? "jacobi" : "none";
    const char *variant = o.solve == 1 ? "solve" : o.solve == 2 ? "solve_fp32"
                          : o.prm.variant == GKCM_CG_SINGLE ? "single" : "classical";
    double spmvs = cmax[8] > 0 ? (double)cmax[8] : 1; /* every rank takes part in each */
    double server_share = tsum[0] > 0 ? txs[0] / tsum[0] : 0;
    double kernel_share = tsum[0] > 0 ? txs[1] / tsum[0] : 0;
    double host_share = tsum[0] > 0 ? txs[2] / tsum[0] : 0;
    if (o.json) {
      printf("{\"matrix\": \"");
      for (const char *p = what; *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        putchar(*p);
      }
      printf("\", \"ranks\": %d, \"rows\": %lld, \"precond\": \"%s\", \"variant\": \"%s\", "
             "\"tol\": %g, \"iterations\": %d, \"converged\": %s, \"restarts\": %d, "
             "\"rel_residual\": %.6g, \"gkcd_residual\": %.6g, \"rel_error\": %.6g, "
             "\"solve_s\": %.6f, \"s_per_iteration\": %.9f, \"comm_share\": %.4f, "
             "\"local_share\": %.4f, \"server_share\": %.4f, \"kernel_share\": %.4f, "
             "\"host_share\": %.4f, \"halo_bytes_per_spmv\": %lld, \"max_ghosts\": %lld, "
             "\"max_neighbours\": %lld, \"sends\": %lld, \"ghosts\": %lld, \"spmvs\": %d, "
             "\"requests_per_iteration\": %.2f, \"allreduces_per_iteration\": %.2f, "
             "\"mpi_bytes_per_spmv\": %.1f, \"down_bytes_per_spmv\": %.1f, "
             "\"up_bytes_per_spmv\": %.1f, \"halo_in_region\": %s, \"spmv_algo\": \"%s\"}\n",
             size, (long long)mi.n, pc, variant, o.prm.tol, st.iterations,
             st.converged ? "true" : "false", st.restarts, res, st.residual, err, tmax[0],
             per_it, comm_share, local_share, server_share, kernel_share, host_share,
             (long long)csum[1] * 4, (long long)cmax[1], (long long)cmax[2],
             (long long)csum[3], (long long)csum[1], (int)cmax[8],
             (double)cmax[6] / it, (double)cmax[7] / it, (double)csum[0] / spmvs,
             (double)csum[4] / spmvs, (double)csum[5] / spmvs,
             mi.halo_in_region ? "true" : "false", mi.spmv_algo);
    } else {
      printf("matrix:           %s: %lld rows\n", what, (long long)mi.n);
      printf("ranks:            %d (halo: %lld bytes per spmv in all, at most %lld "
             "neighbours)\n", size, (long long)csum[1] * 4, (long long)cmax[2]);
      printf("preconditioner:   %s\n", pc);
      printf("variant:          %s\n", variant);
      printf("iterations:       %d (%s, tol %g)\n", st.iterations,
             st.converged ? "converged" : "NOT converged", o.prm.tol);
      printf("rel residual:     %.3g  (||b - A x|| / ||b||, float64 here; gkcd said %.3g)\n",
             res, st.residual);
      printf("rel error:        %.3g  (||x - x*|| / ||x*||)\n", err);
      printf("time/iteration:   %.3f ms (%.3f s in all, slowest rank)\n", per_it * 1e3, tmax[0]);
      printf("time split:       MPI %.0f%%, gkcd calls %.0f%% (inside gkcd %.0f%%, computing "
             "%.0f%%), ghost dots here %.0f%% (mean over ranks)\n", comm_share * 100,
             local_share * 100, server_share * 100, kernel_share * 100, host_share * 100);
      printf("requests:         %.2f to gkcd per iteration per rank (the busiest), "
             "%.2f Allreduce\n", (double)cmax[6] / it, (double)cmax[7] / it);
      printf("halo per spmv:    %.0f bytes over MPI, %.0f down from and %.0f up to gkcd "
             "(all ranks; %s)\n", (double)csum[0] / spmvs, (double)csum[4] / spmvs,
             (double)csum[5] / spmvs, mi.halo_in_region ? "shared-memory region" : "inline");
      printf("spmv algo:        %s\n", mi.spmv_algo);
    }
  }
  ret = st.converged ? 0 : 1;
  goto out;
fail:
  if (!usage_err)
    fprintf(stderr, "mpi_cg (rank %d of %d): %s\n", rank, size,
            ctx ? gkcm_errmsg(ctx) : "out of memory");
  ret = usage_err ? 2 : 1;
out:
  gkcm_matrix_free(A);
  gkcm_rows_free(&rows);
  gkcm_free(ctx);
  free(b), free(x), free(xs), free(ax), free(all);
  MPI_Finalize();
  return ret;
}
