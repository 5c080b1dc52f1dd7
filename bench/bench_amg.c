/* bench_amg.c: CG preconditioned by gkc's smoothed-aggregation AMG
 * (cpu/cpu_amg.h) against CG alone, Jacobi-PCG and hypre's BoomerAMG-PCG,
 * on the CPU, on model Laplacians (issue #27).
 *
 * Each matrix: the 2-D 5-point or 3-D 7-point Laplacian of a k^d grid
 * (Dirichlet), b uniform in [-1, 1) from a fixed seed (--rhs ones: b = 1,
 * as bench/gpu/amg_solve.py's, so that the GPU's iteration counts have
 * this anchor on the same system), x0 = 0, to
 * ||b - A x|| <= rtol ||b||.  gkc's solvers run as gkcd's CPU backend runs
 * them (cpu_solve, float64 values and vectors, OpenMP), called directly so
 * that both sides are libraries on the same arrays; hypre's PCG uses
 * BoomerAMG with its defaults (HMIS coarsening, hybrid symmetric l1
 * Gauss-Seidel, one V(1,1) cycle) and the relative two-norm residual.
 * Every x is checked by its true residual, computed here in double; a
 * solve that misses rtol is reported and makes the exit status 1.
 *
 *   bench_amg [--grids 2d:512,2d:1024,3d:64] [--rtol 1e-8] [--rhs random|ones]
 *             [--skip-none] [--amg-only] [--repeat N]
 *
 * --skip-none leaves out plain CG, --amg-only every solver but gkc's
 * AMG-PCG and BoomerAMG-PCG (Jacobi-PCG takes minutes on 2048^2 here).
 * --repeat N runs every solve N times and keeps the fastest (a shared
 * machine's other work only ever adds time).
 * Prints one line per (matrix, solver): iterations, setup and solve
 * milliseconds, their total, the true residual; with --csv, the same as CSV.
 * Needs hypre (libhypre-dev) and MPI: built only when they are found.
 */
#include <HYPRE.h>
#include <HYPRE_krylov.h>
#include <HYPRE_parcsr_ls.h>
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_solve.h"

typedef struct {
  int32_t n;
  int32_t *rp, *ci;
  double *v;
} csr;

static double now_ms(void) { return omp_get_wtime() * 1e3; }

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "bench_amg: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* The Laplacian of a k^dims grid, 2 dims on the diagonal per dimension. */
static csr laplacian(int32_t k, int dims) {
  int64_t n64 = dims == 2 ? (int64_t)k * k : (int64_t)k * k * k;
  if (n64 > INT32_MAX / 8) {
    fprintf(stderr, "bench_amg: grid %d^%d too large\n", k, dims);
    exit(2);
  }
  int32_t n = (int32_t)n64;
  size_t per = 2 * (size_t)dims + 1;
  csr A = {n, xmalloc(((size_t)n + 1) * 4), xmalloc((size_t)n * per * 4),
           xmalloc((size_t)n * per * 8)};
  int32_t stride[3] = {1, k, k * k}, t = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t c[3] = {i % k, (i / k) % k, dims == 3 ? i / (k * k) : 0};
    A.rp[i] = t;
    for (int a = dims - 1; a >= 0; a--)
      if (c[a] > 0) A.ci[t] = i - stride[a], A.v[t++] = -1;
    A.ci[t] = i, A.v[t++] = 2.0 * dims;
    for (int a = 0; a < dims; a++)
      if (c[a] < k - 1) A.ci[t] = i + stride[a], A.v[t++] = -1;
  }
  A.rp[n] = t;
  return A;
}

static double true_residual(const csr *A, const double *b, const double *x) {
  double rr = 0, bb = 0;
#pragma omp parallel for reduction(+ : rr, bb)
  for (int32_t i = 0; i < A->n; i++) {
    double s = 0;
    for (int32_t t = A->rp[i]; t < A->rp[i + 1]; t++) s += A->v[t] * x[A->ci[t]];
    rr += (b[i] - s) * (b[i] - s);
    bb += b[i] * b[i];
  }
  return sqrt(rr / bb);
}

typedef struct {
  const char *solver;
  long iterations;
  double setup_ms, solve_ms, residual;
  int levels;
} outcome;

static outcome run_gkc(const char *solver, const csr *A, const double *b, double *x, int method,
                       int precond, double rtol) {
  cpu_solve_opts o = {method, rtol, 0, 100000, NULL, NULL, NULL, 0, 0, 1, 1, precond, 0, NULL, 0};
  cpu_solve_result r;
  double t0 = now_ms();
  int rc = cpu_solve(A->n, A->rp, A->ci, A->v, b, NULL, x, &o, &r);
  double t = now_ms() - t0;
  if (rc) {
    fprintf(stderr, "bench_amg: cpu_solve failed (%d)\n", rc);
    exit(1);
  }
  outcome out = {solver, (long)r.iterations, r.amg_setup_us / 1e3, t - r.amg_setup_us / 1e3,
                 true_residual(A, b, x), r.levels};
  return out;
}

static outcome run_hypre(const csr *A, const double *b, double *x, double rtol) {
  int32_t n = A->n;
  HYPRE_IJMatrix ij;
  HYPRE_ParCSRMatrix pA;
  HYPRE_IJVector ib, ix;
  HYPRE_ParVector pb, px;
  HYPRE_Int *ncols = xmalloc((size_t)n * sizeof *ncols), *rows = xmalloc((size_t)n * sizeof *rows);
  HYPRE_BigInt *cols = xmalloc((size_t)A->rp[n] * sizeof *cols);
  for (int32_t i = 0; i < n; i++) rows[i] = i, ncols[i] = A->rp[i + 1] - A->rp[i];
  for (int32_t t = 0; t < A->rp[n]; t++) cols[t] = A->ci[t];
  double t0 = now_ms();
  HYPRE_IJMatrixCreate(MPI_COMM_WORLD, 0, n - 1, 0, n - 1, &ij);
  HYPRE_IJMatrixSetObjectType(ij, HYPRE_PARCSR);
  HYPRE_IJMatrixInitialize(ij);
  HYPRE_IJMatrixSetValues(ij, n, ncols, (HYPRE_BigInt *)rows, cols, A->v);
  HYPRE_IJMatrixAssemble(ij);
  HYPRE_IJMatrixGetObject(ij, (void **)&pA);
  HYPRE_IJVectorCreate(MPI_COMM_WORLD, 0, n - 1, &ib);
  HYPRE_IJVectorSetObjectType(ib, HYPRE_PARCSR);
  HYPRE_IJVectorInitialize(ib);
  HYPRE_IJVectorSetValues(ib, n, (HYPRE_BigInt *)rows, b);
  HYPRE_IJVectorAssemble(ib);
  HYPRE_IJVectorGetObject(ib, (void **)&pb);
  memset(x, 0, (size_t)n * sizeof *x);
  HYPRE_IJVectorCreate(MPI_COMM_WORLD, 0, n - 1, &ix);
  HYPRE_IJVectorSetObjectType(ix, HYPRE_PARCSR);
  HYPRE_IJVectorInitialize(ix);
  HYPRE_IJVectorSetValues(ix, n, (HYPRE_BigInt *)rows, x);
  HYPRE_IJVectorAssemble(ix);
  HYPRE_IJVectorGetObject(ix, (void **)&px);
  double t_build = now_ms() - t0; /* hypre's own copy of the matrix: not counted */

  HYPRE_Solver pcg, amg;
  HYPRE_ParCSRPCGCreate(MPI_COMM_WORLD, &pcg);
  HYPRE_PCGSetTol(pcg, rtol);
  HYPRE_PCGSetMaxIter(pcg, 100000);
  HYPRE_PCGSetTwoNorm(pcg, 1);
  HYPRE_PCGSetPrintLevel(pcg, 0);
  HYPRE_BoomerAMGCreate(&amg);
  HYPRE_BoomerAMGSetPrintLevel(amg, 0);
  HYPRE_BoomerAMGSetMaxIter(amg, 1);
  HYPRE_BoomerAMGSetTol(amg, 0.0);
  HYPRE_PCGSetPrecond(pcg, (HYPRE_PtrToSolverFcn)HYPRE_BoomerAMGSolve,
                      (HYPRE_PtrToSolverFcn)HYPRE_BoomerAMGSetup, amg);
  t0 = now_ms();
  HYPRE_ParCSRPCGSetup(pcg, pA, pb, px);
  double t_setup = now_ms() - t0;
  t0 = now_ms();
  HYPRE_ParCSRPCGSolve(pcg, pA, pb, px);
  double t_solve = now_ms() - t0;
  HYPRE_Int its; /* (hypre's public API does not tell its levels) */
  HYPRE_PCGGetNumIterations(pcg, &its);
  HYPRE_IJVectorGetValues(ix, n, (HYPRE_BigInt *)rows, x);
  (void)t_build;
  HYPRE_BoomerAMGDestroy(amg);
  HYPRE_ParCSRPCGDestroy(pcg);
  HYPRE_IJMatrixDestroy(ij);
  HYPRE_IJVectorDestroy(ib);
  HYPRE_IJVectorDestroy(ix);
  free(ncols), free(rows), free(cols);
  outcome out = {"hypre BoomerAMG-PCG", (long)its, t_setup, t_solve, true_residual(A, b, x), 0};
  return out;
}

int main(int argc, char **argv) {
  const char *grids = "2d:512,2d:1024,3d:64";
  double rtol = 1e-8;
  int skip_none = 0, amg_only = 0, ones = 0, csv = 0, repeat = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--grids") && i + 1 < argc) grids = argv[++i];
    else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) rtol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--skip-none")) skip_none = 1;
    else if (!strcmp(argv[i], "--amg-only")) amg_only = skip_none = 1;
    else if (!strcmp(argv[i], "--rhs") && i + 1 < argc && (!strcmp(argv[i + 1], "ones") || !strcmp(argv[i + 1], "random")))
      ones = !strcmp(argv[++i], "ones");
    else if (!strcmp(argv[i], "--csv")) csv = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: bench_amg [--grids 2d:512,3d:64] [--rtol 1e-8] [--rhs random|ones] [--skip-none]\n"
             "                 [--amg-only] [--repeat N] [--csv]\n"
             "CG with gkc's AMG (and Jacobi, none) against hypre BoomerAMG-PCG on model Laplacians.\n");
      return 0;
    }
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
    else {
      fprintf(stderr, "usage: bench_amg [--grids 2d:512,3d:64] [--rtol 1e-8] [--rhs random|ones] "
              "[--skip-none] [--amg-only] [--repeat N] [--csv]\n");
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  HYPRE_Init();
  int bad = 0;
  printf("# bench_amg: rtol %g, b %s, %d OpenMP threads, best of %d\n", rtol,
         ones ? "ones" : "random", omp_get_max_threads(), repeat);
  if (csv) printf("matrix,n,solver,iterations,levels,setup_ms,solve_ms,total_ms,true_residual\n");
  char *list = strdup(grids);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int dims = 0, k = 0;
    if (sscanf(tok, "%dd:%d", &dims, &k) != 2 || (dims != 2 && dims != 3) || k < 2) {
      fprintf(stderr, "bench_amg: bad grid '%s' (e.g. 2d:512, 3d:64)\n", tok);
      return 2;
    }
    csr A = laplacian(k, dims);
    double *b = xmalloc((size_t)A.n * 8), *x = xmalloc((size_t)A.n * 8);
    uint64_t s = 12345;
    for (int32_t i = 0; i < A.n; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      b[i] = ones ? 1.0 : (double)(s >> 11) * 0x1p-52 - 1.0;
    }
    char name[32];
    snprintf(name, sizeof name, "%dd_%d", dims, k);
    outcome res[4];
    int nres = 0;
    for (int r = 0; r < repeat; r++) {
      outcome now[4];
      int m = 0;
      if (!skip_none) now[m++] = run_gkc("gkc CG", &A, b, x, CPU_CG, CPU_PRECOND_NONE, rtol);
      if (!amg_only) now[m++] = run_gkc("gkc Jacobi-PCG", &A, b, x, CPU_CG, CPU_PRECOND_JACOBI, rtol);
      now[m++] = run_gkc("gkc AMG-PCG", &A, b, x, CPU_CG, CPU_PRECOND_AMG, rtol);
      now[m++] = run_hypre(&A, b, x, rtol);
      for (int i = 0; i < m; i++) /* the fastest setup and solve of the repeats */
        if (r == 0) {
          res[i] = now[i];
        } else {
          if (now[i].setup_ms < res[i].setup_ms) res[i].setup_ms = now[i].setup_ms;
          if (now[i].solve_ms < res[i].solve_ms) res[i].solve_ms = now[i].solve_ms;
        }
      nres = m;
    }
    for (int i = 0; i < nres; i++) {
      outcome *o = &res[i];
      if (!(o->residual <= rtol * 1.0001)) bad = 1;
      if (csv)
        printf("%s,%d,%s,%ld,%d,%.1f,%.1f,%.1f,%.2e\n", name, A.n, o->solver, o->iterations,
               o->levels, o->setup_ms, o->solve_ms, o->setup_ms + o->solve_ms, o->residual);
      else
        printf("%-8s n=%-9d %-20s %6ld it  levels %2d  setup %8.1f ms  solve %8.1f ms  total %8.1f"
               " ms  true residual %.2e%s\n", name, A.n, o->solver, o->iterations, o->levels,
               o->setup_ms, o->solve_ms, o->setup_ms + o->solve_ms, o->residual,
               o->residual <= rtol * 1.0001 ? "" : "  MISSED rtol");
    }
    fflush(stdout);
    free(A.rp), free(A.ci), free(A.v), free(b), free(x);
  }
  free(list);
  HYPRE_Finalize();
  MPI_Finalize();
  return bad;
}
