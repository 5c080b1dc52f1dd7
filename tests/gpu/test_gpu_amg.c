/* test_gpu_amg: gkcu_solve with precond AMG (the hierarchy set up on the
 * host by cpu_amg and uploaded by cuda_amg_build, the V-cycle on the GPU)
 * against cpu_solve with the same preconditioner, on fresh random inputs,
 * once per loop kind (GKCU_SOLVE_GRAPH = while, unrolled, stream; "while"
 * where the driver has conditional nodes, 12.4+).
 *
 * For every solve it checks:
 * - converged, like the CPU's;
 * - the residual ||b - A x|| / ||b|| recomputed here in long double from
 *   the x returned: <= rtol for a float64 x (the solver holds a float64 x
 *   to the tolerance itself), <= 1.5 rtol + what rounding x to float32
 *   costs for a float32 one; and the residual reported equals it (1e-6);
 * - the iterations near the CPU AMG's: at most max(1.5x, +2) and at least
 *   its two thirds - 1 (the V-cycle runs in float32 on the GPU, in double
 *   on the CPU: the counts may part by one or two, not more);
 * - a second solve with the same hierarchy gives the same iterations and
 *   the same x, bit for bit (the cycle's sums run in a fixed order).
 * Matrices: the 2-D 5-point and 3-D 7-point Laplacians with random edge
 * weights, random diagonally dominant SPD matrices, a nonsymmetric
 * perturbation of the 2-D one (bicgstab), and 1138_bus from the
 * SuiteSparse folder ($GKC_GPU_MATRICES, else $GKC_SHARED_MATRICES) when
 * given.  b: float64 and float32, fresh each run.  Also BiCGSTAB with
 * Jacobi (right preconditioned, new on the GPU) against the CPU's, and
 * precision fp32.
 *
 * The finest level's rho, estimated on the GPU for the host's setup
 * (gkcu_amg_rho), against cpu_amg's own estimate.
 *
 * Bad input: a zero diagonal and an empty row are refused by the setup,
 * naming the row; an indefinite matrix gives the reason breakdown; a
 * device allocation that fails gives out_of_memory with nothing left
 * allocated.
 *
 * GKC_GPU_TEST_SHORT=1 (compute-sanitizer) uses smaller matrices. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cpu_amg.h"
#include "cpu_solve.h"
#include "cuda_amg.h"
#include "gkc_errors.h"
#include "gkcu_solve.h"
#include "gpu_test.h"
#include "gpu_util.h"
#include "test.h"

static int failures;
#define CHECK(cond, ...)                                           \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);        \
      fprintf(stderr, __VA_ARGS__);                                \
      fputc('\n', stderr);                                         \
      failures++;                                                  \
    }                                                              \
  } while (0)

static const char *const reason_names[] = {"converged", "max_iter", "breakdown",
                                           "non_finite", "deadline", "cancelled"};
static gkcu_ctx *ctx;
static const char *how;
static int fp32; /* precision fp32 under test */

/* --- the hierarchy's device memory: cudaMalloc, counted ------------------- */

static int live_allocs, fail_alloc;

static int t_alloc(void *arg, size_t bytes, void **ptr, size_t *cap, char *msg, size_t msglen) {
  (void)arg;
  if (fail_alloc) {
    snprintf(msg, msglen, "out of device memory (test)");
    return GKC_EOUT_OF_MEMORY;
  }
  if (cudaMalloc(ptr, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(msg, msglen, "cudaMalloc of %zu bytes failed", bytes);
    return GKC_EOUT_OF_MEMORY;
  }
  *cap = bytes;
  live_allocs++;
  return 0;
}

static void t_release(void *arg, void *ptr, size_t cap) {
  (void)arg, (void)cap;
  cudaFree(ptr);
  live_allocs--;
}

static const cuda_amg_mem test_mem = {t_alloc, t_release, NULL, 0};

/* --- matrices ------------------------------------------------------------- */

typedef struct {
  const gpu_csr *h;
  int32_t *rp, *ci;
  float *va;
  int32_t max_row;
} dmat;

static dmat upload(const gpu_csr *m) {
  dmat d = {m, NULL, NULL, NULL, 0};
  size_t nz = (size_t)m->nnz ? (size_t)m->nnz : 1;
  CUDA_OK(cudaMalloc((void **)&d.rp, ((size_t)m->rows + 1) * 4));
  CUDA_OK(cudaMalloc((void **)&d.ci, nz * 4));
  CUDA_OK(cudaMalloc((void **)&d.va, nz * 4));
  CUDA_OK(cudaMemcpy(d.rp, m->row_ptr, ((size_t)m->rows + 1) * 4, cudaMemcpyHostToDevice));
  if (m->nnz) {
    CUDA_OK(cudaMemcpy(d.ci, m->col_idx, (size_t)m->nnz * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.va, m->values, (size_t)m->nnz * 4, cudaMemcpyHostToDevice));
  }
  for (int32_t i = 0; i < m->rows; i++)
    if (m->row_ptr[i + 1] - m->row_ptr[i] > d.max_row) d.max_row = m->row_ptr[i + 1] - m->row_ptr[i];
  return d;
}

static void dmat_free(dmat *d) { cudaFree(d->rp), cudaFree(d->ci), cudaFree(d->va); }

/* Triplets to sorted CSR (duplicates add up). */
static void from_triplets(gpu_csr *A, int32_t n, int64_t k, const int32_t *ri, const int32_t *cj,
                          const float *vv) {
  ASSERT_EQ(gpu_csr_alloc(A, n, n, k), 0);
  memset(A->row_ptr, 0, ((size_t)n + 1) * 4);
  for (int64_t e = 0; e < k; e++) A->row_ptr[ri[e] + 1]++;
  for (int32_t i = 0; i < n; i++) A->row_ptr[i + 1] += A->row_ptr[i];
  int32_t *pos = malloc((size_t)n * 4);
  ASSERT(pos);
  memcpy(pos, A->row_ptr, (size_t)n * 4);
  for (int64_t e = 0; e < k; e++) {
    int64_t p = pos[ri[e]]++;
    A->col_idx[p] = cj[e], A->values[p] = vv[e];
  }
  free(pos);
  gpu_csr_sort(A);
}

/* The graph Laplacian of a k^dims grid (5- or 7-point) with Dirichlet
 * boundaries, edge weights uniform in [lo, hi) (float32); lower: a
 * nonsymmetric term added below the diagonal (convection), 0: SPD. */
static void laplacian(gpu_csr *A, int32_t k, int dims, float lo, float hi, float lower,
                      gpu_rng *rng) {
  int32_t n = dims == 2 ? k * k : k * k * k;
  int per = 2 * dims + 1;
  int64_t cap = (int64_t)n * per;
  int32_t *ri = malloc(cap * 4), *cj = malloc(cap * 4);
  float *vv = malloc(cap * 4), *w = malloc((size_t)n * dims * 4);
  ASSERT(ri && cj && vv && w);
  for (int64_t i = 0; i < (int64_t)n * dims; i++) w[i] = gpu_rng_float(rng, lo, hi);
  int32_t stride[3] = {1, k, k * k};
  int64_t t = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t c[3] = {i % k, (i / k) % k, dims == 3 ? i / (k * k) : 0};
    double d = 0;
    for (int a = 0; a < dims; a++) {
      float wm = c[a] > 0 ? w[(size_t)(i - stride[a]) * dims + a] : w[(size_t)i * dims + a];
      float wp = w[(size_t)i * dims + a];
      d += (double)wm + wp;
      if (c[a] > 0) ri[t] = i, cj[t] = i - stride[a], vv[t++] = -wm - (a == 0 ? lower : 0);
      if (c[a] < k - 1) ri[t] = i, cj[t] = i + stride[a], vv[t++] = -wp;
    }
    ri[t] = i, cj[t] = i, vv[t++] = (float)(d + (lower > 0 ? lower : 0));
  }
  from_triplets(A, n, t, ri, cj, vv);
  free(ri), free(cj), free(vv), free(w);
}

/* Random symmetric pattern, off-diagonal values in [-1, 1), diagonal the
 * row's absolute sum plus [0.5, 1.5): SPD. */
static void random_spd(gpu_csr *A, int32_t n, int per_row, gpu_rng *rng) {
  int64_t cap = (int64_t)n * (2 * per_row + 1);
  int32_t *ri = malloc(cap * 4), *cj = malloc(cap * 4);
  float *vv = malloc(cap * 4);
  double *rowsum = calloc((size_t)n, sizeof(double));
  ASSERT(ri && cj && vv && rowsum);
  int64_t k = 0;
  for (int32_t i = 0; i < n; i++)
    for (int e = 0; e < per_row; e++) {
      int32_t j = (int32_t)gpu_rng_below(rng, (uint32_t)n);
      if (j == i) continue;
      float v = gpu_rng_float(rng, -1, 1);
      ri[k] = i, cj[k] = j, vv[k++] = v;
      ri[k] = j, cj[k] = i, vv[k++] = v;
    }
  for (int64_t e = 0; e < k; e++) rowsum[ri[e]] += fabs(vv[e]);
  for (int32_t i = 0; i < n; i++)
    ri[k] = i, cj[k] = i, vv[k++] = (float)(rowsum[i] + 0.5 + gpu_rng_unit(rng));
  from_triplets(A, n, k, ri, cj, vv);
  free(ri), free(cj), free(vv), free(rowsum);
}

/* ||b - A x|| / ||b|| (gpu_csr_residual); *floor_: what rounding x to float32 costs. */
static double residual(const gpu_csr *A, const double *b, const double *x, double *floor_) {
  double mag, r = gpu_csr_residual(A, NULL, b, x, &mag);
  if (floor_) *floor_ = mag * 0x1p-24;
  return r;
}

/* --- one solve on each side -------------------------------------------- */

typedef struct {
  int rc;
  gkcu_solve_result r;
  double *x; /* n, as doubles whatever the io type */
} gpu_out;

/* b holds n doubles; io_f64: sent (and x returned) as float64, else float32. */
static gpu_out run_gpu(const dmat *A, const cuda_amg *amg, int method, int precond,
                       const double *b, int io_f64, double rtol, int64_t max_iter) {
  int32_t n = A->h->rows;
  size_t es = io_f64 ? 8 : 4;
  gpu_out o = {0};
  o.x = malloc((size_t)n * 8);
  void *hb = malloc((size_t)n * es), *hx = malloc((size_t)n * es);
  ASSERT(o.x && hb && hx);
  for (int32_t i = 0; i < n; i++)
    if (io_f64) ((double *)hb)[i] = b[i];
    else ((float *)hb)[i] = (float)b[i];
  size_t wb = gkcu_solve_work_bytes(method, precond, n, max_iter, 0, fp32);
  ASSERT(wb > 0);
  void *work, *db, *dx;
  CUDA_OK(cudaMalloc(&work, wb));
  CUDA_OK(cudaMalloc(&db, (size_t)n * es));
  CUDA_OK(cudaMalloc(&dx, (size_t)n * es));
  CUDA_OK(cudaMemcpy(db, hb, (size_t)n * es, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dx, 0xff, (size_t)n * es)); /* poison: every element is written */
  gkcu_solve_args a = {.method = method, .n = n, .nnz = A->h->nnz, .row_ptr = A->rp,
                       .col_idx = A->ci, .values = A->va, .b = db, .x0 = NULL, .x = dx,
                       .io_f64 = io_f64, .rtol = rtol, .atol = 0, .max_iter = max_iter,
                       .poll_ms = 2, .work = work, .work_bytes = wb, .fp32 = fp32,
                       .max_row = A->max_row, .precond = precond,
                       .amg = amg ? cuda_amg_dev(amg) : NULL};
  o.rc = gkcu_solve(ctx, &a, &o.r);
  if (o.rc < 0) TEST_FAIL("gkcu_solve (%s): %s", how, gkcu_ctx_errmsg(ctx));
  if (o.rc == 0) {
    CUDA_OK(cudaMemcpy(hx, dx, (size_t)n * es, cudaMemcpyDeviceToHost));
    for (int32_t i = 0; i < n; i++) o.x[i] = io_f64 ? ((double *)hx)[i] : ((float *)hx)[i];
  }
  cudaFree(work), cudaFree(db), cudaFree(dx);
  free(hb), free(hx);
  return o;
}

static cpu_solve_result run_cpu(const gpu_csr *A, int method, int precond, const double *b,
                                int io_f64, double rtol, int64_t max_iter) {
  int32_t n = A->rows;
  size_t es = io_f64 ? 8 : 4;
  void *hb = malloc((size_t)n * es), *hx = malloc((size_t)n * es);
  ASSERT(hb && hx);
  for (int32_t i = 0; i < n; i++)
    if (io_f64) ((double *)hb)[i] = b[i];
    else ((float *)hb)[i] = (float)b[i];
  cpu_solve_opts o = {.method = method, .rtol = rtol, .max_iter = max_iter, .fp32 = fp32,
                      .vec_f64 = io_f64, .precond = precond};
  cpu_solve_result r;
  ASSERT_EQ(cpu_solve(n, A->row_ptr, A->col_idx, A->values, hb, NULL, hx, &o, &r), 0);
  free(hb), free(hx);
  return r;
}

/* The pinned ring the backend's slots copy through; the error cases
 * below build without one (the driver's pageable path). */
static cuda_ring test_ring;

static cuda_amg *build(const dmat *d) {
  cuda_amg *h = NULL;
  int32_t bad = -1;
  char msg[256];
  int rc = cuda_amg_build(ctx, &test_mem, d->h->rows, d->h->nnz, d->rp, d->ci, d->va, 0, 0, &test_ring, &h,
                          &bad, msg, sizeof msg);
  if (rc) TEST_FAIL("cuda_amg_build: %d %s", rc, msg);
  return h;
}

static double *random_b(int32_t n, gpu_rng *rng) {
  double *b = malloc((size_t)n * 8);
  ASSERT(b);
  for (int32_t i = 0; i < n; i++) b[i] = gpu_rng_float(rng, -1, 1) + 1e-9 * gpu_rng_float(rng, -1, 1);
  return b;
}

/* The solve on the GPU against the CPU's, and again with the same hierarchy. */
static void compare(const char *name, const gpu_csr *A, const dmat *d, const cuda_amg *h,
                    int method, int precond, const double *b, int io_f64, double rtol) {
  const int64_t max_iter = 5000;
  const char *m = method == GKCU_SOLVE_BICGSTAB ? "bicgstab" : "cg";
  const char *pc = precond == GKCU_PRECOND_AMG ? "amg" : "jacobi";
  cpu_solve_result c = run_cpu(A, method == GKCU_SOLVE_BICGSTAB ? CPU_BICGSTAB : CPU_CG,
                               precond == GKCU_PRECOND_AMG ? CPU_PRECOND_AMG : CPU_PRECOND_JACOBI,
                               b, io_f64, rtol, max_iter);
  gpu_out g = run_gpu(d, h, method, precond, b, io_f64, rtol, max_iter);
  const char *io = io_f64 ? "f64" : "f32";
  CHECK(g.rc == 0, "%s %s+%s %s: rc %d", name, m, pc, io, g.rc);
  if (g.rc) goto out;
  CHECK(!strcmp(g.r.how, how), "%s: ran '%s', asked for '%s'", name, g.r.how, how);
  CHECK(c.reason == CPU_SOLVE_CONVERGED, "%s %s+%s %s: the cpu did not converge (%s)", name, m, pc,
        io, reason_names[c.reason]);
  CHECK(g.r.reason == GKCU_SOLVE_CONVERGED, "%s %s+%s %s: %s after %lld iterations", name, m, pc,
        io, reason_names[g.r.reason], (long long)g.r.iterations);
  /* a float32 b: the system solved is the rounded b's */
  double *bs = malloc((size_t)A->rows * 8);
  ASSERT(bs);
  for (int32_t i = 0; i < A->rows; i++) bs[i] = io_f64 ? b[i] : (double)(float)b[i];
  double fl, res = residual(A, bs, g.x, &fl);
  free(bs);
  double bound = io_f64 && !fp32 ? rtol : fmax(1.5 * rtol, 2 * c.residual) + 1.01 * fl;
  CHECK(res <= bound, "%s %s+%s %s: true residual %.3e above %.3e", name, m, pc, io, res, bound);
  /* both in double, summed in other orders: they agree to 1e-6 relative,
   * or to what double sums of |A| |x| can resolve (fl at 2^-53 rather than
   * 2^-24, with room for the rows' lengths) near the float64 floor, where
   * a converged float64 solve at rtol 1e-14 ends (seen: 1.137e-15 reported,
   * 1.131e-15 recomputed) */
  double fl64 = fl * 0x1p-29 * 64;
  CHECK(fabs(g.r.residual - res) <= 1e-6 * res + fl64, "%s %s+%s %s: residual %.9e reported,"
        " %.9e recomputed", name, m, pc, io, g.r.residual, res);
  /* the iterations: near the CPU's (see the top) */
  int64_t ci = c.iterations, hi = (int64_t)ceil(1.5 * ci), lo = (int64_t)floor(ci / 1.5) - 1;
  if (hi < ci + 2) hi = ci + 2;
  if (precond == GKCU_PRECOND_JACOBI && method == GKCU_SOLVE_BICGSTAB) /* test_gpu_solve's 25% */
    hi = ci + (int64_t)ceil(0.25 * ci) + 1, lo = ci - (int64_t)ceil(0.25 * ci) - 1;
  CHECK(g.r.iterations <= hi && g.r.iterations >= lo, "%s %s+%s %s: %lld iterations, cpu %lld"
        " (allowed %lld..%lld)", name, m, pc, io, (long long)g.r.iterations, (long long)ci,
        (long long)lo, (long long)hi);
  /* the same hierarchy again: the same numbers */
  gpu_out g2 = run_gpu(d, h, method, precond, b, io_f64, rtol, max_iter);
  CHECK(g2.rc == 0 && g2.r.iterations == g.r.iterations &&
            !memcmp(g2.x, g.x, (size_t)A->rows * sizeof *g.x),
        "%s %s+%s %s: again: %lld iterations (first %lld), x %s", name, m, pc, io,
        (long long)g2.r.iterations, (long long)g.r.iterations,
        memcmp(g2.x, g.x, (size_t)A->rows * sizeof *g.x) ? "differs" : "the same");
  free(g2.x);
  printf("  %-26s %-8s %-6s %s%s n=%-8d %4lld iterations (cpu %4lld), residual %.2e, %.0f us\n",
         name, m, pc, io, fp32 ? " fp32" : "", A->rows, (long long)g.r.iterations, (long long)ci,
         res, g.r.loop_us);
out:
  free(g.x);
}

/* Every case on one matrix: cg and bicgstab with amg, float64 and float32 b. */
static void cases(const char *name, const gpu_csr *A, int spd, gpu_rng *rng) {
  dmat d = upload(A);
  cuda_amg *h = build(&d);
  double *b = random_b(A->rows, rng);
  if (spd) {
    compare(name, A, &d, h, GKCU_SOLVE_CG, GKCU_PRECOND_AMG, b, 1, 1e-8);
    compare(name, A, &d, h, GKCU_SOLVE_CG, GKCU_PRECOND_AMG, b, 0, 1e-6);
  }
  compare(name, A, &d, h, GKCU_SOLVE_BICGSTAB, GKCU_PRECOND_AMG, b, 1, 1e-8);
  compare(name, A, &d, h, GKCU_SOLVE_BICGSTAB, GKCU_PRECOND_AMG, b, 0, 1e-6);
  free(b);
  cuda_amg_free(h);
  dmat_free(&d);
}

static void test_matrices(gpu_rng *rng, int short_run) {
  gpu_csr A = {0};
  laplacian(&A, short_run ? 64 : 256, 2, 0.5f, 1.5f, 0, rng);
  cases("laplacian 2-D", &A, 1, rng);
  gpu_csr_free(&A);
  laplacian(&A, short_run ? 16 : 48, 3, 0.5f, 1.5f, 0, rng);
  cases("laplacian 3-D", &A, 1, rng);
  gpu_csr_free(&A);
  random_spd(&A, short_run ? 3000 : 40000, 4, rng);
  cases("random spd", &A, 1, rng);
  gpu_csr_free(&A);
  /* small enough for one level: the dense inverse alone */
  random_spd(&A, 300, 4, rng);
  cases("random spd, one level", &A, 1, rng);
  gpu_csr_free(&A);
  laplacian(&A, short_run ? 48 : 128, 2, 0.5f, 1.5f, 0.3f, rng);
  cases("convection 2-D", &A, 0, rng);
  {
    /* BiCGSTAB with Jacobi, right preconditioned like the CPU's */
    dmat d = upload(&A);
    double *b = random_b(A.rows, rng);
    compare("convection 2-D", &A, &d, NULL, GKCU_SOLVE_BICGSTAB, GKCU_PRECOND_JACOBI, b, 1, 1e-8);
    free(b);
    dmat_free(&d);
  }
  gpu_csr_free(&A);
}

/* gkcu_amg_rho (the finest level's power iterations, on the GPU) against
 * cpu_amg's own estimate of the same matrix: the same iterations from the
 * same start, the sums in another order, so the same value to ~1e-12. */
static void test_rho(gpu_rng *rng) {
  for (int k = 0; k < 2; k++) {
    gpu_csr A = {0};
    if (k) random_spd(&A, 20000, 4, rng);
    else laplacian(&A, 200, 2, 0.5f, 1.5f, 0, rng);
    cpu_amg_opts o = CPU_AMG_OPTS_INIT;
    cpu_amg *h = NULL;
    int32_t bad;
    ASSERT_EQ(cpu_amg_setup(A.rows, A.row_ptr, A.col_idx, A.values, 0, &o, &h, &bad), 0);
    cpu_amg_level_info li;
    cpu_amg_level(h, 0, &li);
    dmat d = upload(&A);
    size_t wb = gkcu_amg_rho_work_bytes(A.rows);
    void *w;
    CUDA_OK(cudaMalloc(&w, wb));
    double rho = 0;
    ASSERT_EQ(gkcu_amg_rho(ctx, A.rows, d.rp, d.ci, d.va, CPU_AMG_POWER_ITERS, w, wb, &rho), 0);
    CHECK(li.rho > 0 && fabs(rho - li.rho) <= 1e-9 * li.rho, "rho on the GPU %.15g, cpu_amg %.15g",
          rho, li.rho);
    printf("  rho(D^-1 A) of %s: GPU %.12f, CPU %.12f\n", k ? "random spd" : "laplacian 2-D", rho,
           li.rho);
    cudaFree(w);
    dmat_free(&d);
    cpu_amg_free(h);
    gpu_csr_free(&A);
  }
}

/* Precision fp32 (float32 Krylov vectors) with AMG: converged, near the
 * CPU's fp32. */
static void test_fp32(gpu_rng *rng, int short_run) {
  gpu_csr A = {0};
  laplacian(&A, short_run ? 64 : 256, 2, 0.5f, 1.5f, 0, rng);
  dmat d = upload(&A);
  cuda_amg *h = build(&d);
  double *b = random_b(A.rows, rng);
  fp32 = 1;
  compare("laplacian 2-D", &A, &d, h, GKCU_SOLVE_CG, GKCU_PRECOND_AMG, b, 0, 1e-6);
  fp32 = 0;
  free(b);
  cuda_amg_free(h);
  dmat_free(&d);
  gpu_csr_free(&A);
}

/* A float64 matrix, its values off float32 (gpu_csr_values64_near): the
 * hierarchy is built from them (cpu_amg in double) and keeps level 0
 * rounded to float32 for the cycle, while the solve's own
 * product reads the float64 values: CG + AMG reaches rtol 1e-10 of the
 * float64 system (read as float32 it would stop ~1e-8 away from it) in the
 * iterations the float32 matrix takes, give or take one. */
static void test_f64_matrix(gpu_rng *rng, int short_run) {
  gpu_csr A = {0};
  laplacian(&A, short_run ? 96 : 384, 2, 0.5f, 1.5f, 0, rng);
  int32_t n = A.rows;
  double *hv = gpu_csr_values64_near(&A);
  ASSERT(hv);
  dmat d = upload(&A);
  double *dv;
  CUDA_OK(cudaMalloc((void **)&dv, (size_t)A.nnz * 8));
  CUDA_OK(cudaMemcpy(dv, hv, (size_t)A.nnz * 8, cudaMemcpyHostToDevice));
  cuda_amg *h32 = build(&d), *h64 = NULL;
  int32_t bad = -1;
  char msg[256];
  int rc = cuda_amg_build(ctx, &test_mem, n, A.nnz, d.rp, d.ci, dv, 1, 0, &test_ring, &h64, &bad, msg,
                          sizeof msg);
  if (rc) TEST_FAIL("cuda_amg_build (float64 values): %d %s", rc, msg);
  CHECK(gkcu_amg_level0_values(cuda_amg_dev(h64)) != NULL && gkcu_amg_level0_values(cuda_amg_dev(h32)) == NULL,
        "float64 matrix: level 0 kept by the hierarchy only when the values are float64");
  double *b = random_b(n, rng);
  int64_t its[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    const int64_t max_iter = 500;
    size_t wb = gkcu_solve_work_bytes(GKCU_SOLVE_CG, GKCU_PRECOND_AMG, n, max_iter, 0, 0);
    void *work;
    double *db, *dx;
    CUDA_OK(cudaMalloc(&work, wb));
    CUDA_OK(cudaMalloc((void **)&db, (size_t)n * 8));
    CUDA_OK(cudaMalloc((void **)&dx, (size_t)n * 8));
    CUDA_OK(cudaMemcpy(db, b, (size_t)n * 8, cudaMemcpyHostToDevice));
    gkcu_solve_args a = {.method = GKCU_SOLVE_CG, .n = n, .nnz = A.nnz, .row_ptr = d.rp, .col_idx = d.ci,
                         .values = k ? (const void *)dv : (const void *)d.va, .values_f64 = k,
                         .b = db, .x = dx, .io_f64 = 1, .rtol = 1e-10, .max_iter = max_iter,
                         .work = work, .work_bytes = wb, .max_row = d.max_row,
                         .precond = GKCU_PRECOND_AMG, .amg = cuda_amg_dev(k ? h64 : h32)};
    gkcu_solve_result r;
    rc = gkcu_solve(ctx, &a, &r);
    if (rc < 0) TEST_FAIL("gkcu_solve amg (%s values): %s", k ? "float64" : "float32", gkcu_ctx_errmsg(ctx));
    double *x = malloc((size_t)n * 8);
    ASSERT(x);
    CUDA_OK(cudaMemcpy(x, dx, (size_t)n * 8, cudaMemcpyDeviceToHost));
    double res = gpu_csr_residual(&A, k ? hv : NULL, b, x, NULL);
    its[k] = r.iterations;
    CHECK(rc == 0 && r.reason == GKCU_SOLVE_CONVERGED && res <= 1e-10,
          "amg, %s values: %s after %lld iterations, true residual %.3g", k ? "float64" : "float32",
          reason_names[r.reason], (long long)r.iterations, res);
    printf("  amg, %s matrix: %lld iterations, true residual %.3g\n", k ? "float64" : "float32",
           (long long)r.iterations, res);
    free(x);
    cudaFree(work), cudaFree(db), cudaFree(dx);
  }
  CHECK(llabs(its[1] - its[0]) <= 1, "amg: %lld iterations with float64 values, %lld with float32",
        (long long)its[1], (long long)its[0]);
  free(b), free(hv);
  cuda_amg_free(h32), cuda_amg_free(h64);
  cudaFree(dv);
  dmat_free(&d);
  gpu_csr_free(&A);
}

/* The SPD matrices of the SuiteSparse folder. */
static void test_suitesparse(gpu_rng *rng) {
  const char *dir = getenv("GKC_GPU_MATRICES");
  if (!dir || !*dir) dir = getenv("GKC_SHARED_MATRICES");
  if (!dir || !*dir) {
    printf("no matrix folder given (GKC_GPU_MATRICES): SuiteSparse matrices skipped\n");
    return;
  }
  /* The SPD ones: 1138_bus (CPU, rtol 1e-8: AMG 15-16 iterations against
   * Jacobi's ~1,040) and bcsstk13 (AMG ~440 against ~1,510; elasticity, not
   * what scalar aggregation fits best, but it converges).  bcsstk33 here is
   * a pattern (all ones): not SPD.  Both stalled near 1e-7 until the
   * coarsest LU's solve applied its row exchanges in the right order. */
  static const char *const spd[] = {"1138_bus.mtx", "bcsstk13.mtx"};
  int found = 0;
  for (size_t i = 0; i < sizeof spd / sizeof *spd; i++) {
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, spd[i]);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    fclose(f);
    gpu_csr A = {0};
    if (gpu_mtx_read(path, &A, err, sizeof err)) {
      CHECK(0, "%s: %s", path, err);
      continue;
    }
    found++;
    dmat d = upload(&A);
    cuda_amg *h = build(&d);
    double *b = random_b(A.rows, rng);
    compare(spd[i], &A, &d, h, GKCU_SOLVE_CG, GKCU_PRECOND_AMG, b, 1, 1e-8);
    free(b);
    cuda_amg_free(h);
    dmat_free(&d);
    gpu_csr_free(&A);
  }
  printf("SuiteSparse: %d SPD matrices from %s\n", found, dir);
}

/* Bad input and failures. */
static void test_errors(gpu_rng *rng) {
  gpu_csr A = {0};
  laplacian(&A, 40, 2, 0.5f, 1.5f, 0, rng);
  int32_t row = 1 + (int32_t)gpu_rng_below(rng, (uint32_t)A.rows - 2);
  char msg[256], want[64];
  snprintf(want, sizeof want, "row %d", row);
  /* a zero diagonal */
  for (int32_t j = A.row_ptr[row]; j < A.row_ptr[row + 1]; j++)
    if (A.col_idx[j] == row) A.values[j] = 0;
  dmat d = upload(&A);
  cuda_amg *h = NULL;
  int32_t bad = -1;
  int rc = cuda_amg_build(ctx, &test_mem, A.rows, A.nnz, d.rp, d.ci, d.va, 0, 0, NULL, &h, &bad, msg, sizeof msg);
  CHECK(rc == GKC_EINVALID_ARGUMENT && bad == row && strstr(msg, want) && strstr(msg, "diagonal") &&
            strstr(msg, "'precond'") && !h,
        "zero diagonal: rc %d, row %d (want %d), '%s'", rc, bad, row, msg);
  dmat_free(&d);
  /* an empty row: its entries dropped */
  gpu_csr E = {0};
  {
    int64_t k = A.nnz - (A.row_ptr[row + 1] - A.row_ptr[row]);
    ASSERT_EQ(gpu_csr_alloc(&E, A.rows, A.rows, k), 0);
    int64_t t = 0;
    for (int32_t i = 0; i < A.rows; i++) {
      E.row_ptr[i] = (int32_t)t;
      if (i == row) continue;
      for (int32_t j = A.row_ptr[i]; j < A.row_ptr[i + 1]; j++)
        E.col_idx[t] = A.col_idx[j], E.values[t++] = A.col_idx[j] == row ? 0.5f : A.values[j];
    }
    E.row_ptr[A.rows] = (int32_t)t;
  }
  d = upload(&E);
  rc = cuda_amg_build(ctx, &test_mem, E.rows, E.nnz, d.rp, d.ci, d.va, 0, 0, NULL, &h, &bad, msg, sizeof msg);
  CHECK(rc == GKC_EINVALID_ARGUMENT && bad == row && strstr(msg, want) && strstr(msg, "empty") && !h,
        "empty row: rc %d, row %d (want %d), '%s'", rc, bad, row, msg);
  dmat_free(&d);
  gpu_csr_free(&E);
  gpu_csr_free(&A);
  CHECK(live_allocs == 0, "refused setups left %d device allocations", live_allocs);

  /* out of device memory: refused, nothing kept, the matrix still solves */
  laplacian(&A, 64, 2, 0.5f, 1.5f, 0, rng);
  d = upload(&A);
  fail_alloc = 1;
  rc = cuda_amg_build(ctx, &test_mem, A.rows, A.nnz, d.rp, d.ci, d.va, 0, 0, NULL, &h, &bad, msg, sizeof msg);
  fail_alloc = 0;
  CHECK(rc == GKC_EOUT_OF_MEMORY && !h && live_allocs == 0 && strstr(msg, "AMG"),
        "device out of memory: rc %d, %d allocations left, '%s'", rc, live_allocs, msg);
  h = build(&d);
  double *b = random_b(A.rows, rng);
  gpu_out g = run_gpu(&d, h, GKCU_SOLVE_CG, GKCU_PRECOND_AMG, b, 1, 1e-8, 1000);
  CHECK(g.rc == 0 && g.r.reason == GKCU_SOLVE_CONVERGED, "after out of memory: %s",
        reason_names[g.r.reason]);
  /* a hierarchy of another matrix size is refused */
  gkcu_solve_args bad_args = {.method = GKCU_SOLVE_CG, .n = A.rows - 1, .nnz = A.nnz,
                              .row_ptr = d.rp, .col_idx = d.ci, .values = d.va, .b = d.va,
                              .x = d.va, .rtol = 1e-6, .max_iter = 10, .work = NULL,
                              .precond = GKCU_PRECOND_AMG, .amg = cuda_amg_dev(h)};
  gkcu_solve_result res;
  size_t wb = gkcu_solve_work_bytes(GKCU_SOLVE_CG, GKCU_PRECOND_AMG, A.rows - 1, 10, 0, 0);
  CUDA_OK(cudaMalloc(&bad_args.work, wb));
  bad_args.work_bytes = wb;
  CHECK(gkcu_solve(ctx, &bad_args, &res) == GKC_EINVALID_ARGUMENT, "a hierarchy of %d rows for a"
        " matrix of %d was taken", A.rows, A.rows - 1);
  cudaFree(bad_args.work);
  free(g.x), free(b);
  cuda_amg_free(h);
  dmat_free(&d);
  gpu_csr_free(&A);
  CHECK(live_allocs == 0, "cuda_amg_free left %d device allocations", live_allocs);

  /* indefinite: [[1, 2], [2, 1]] blocks, b along the -1 eigenvector */
  {
    int32_t n = 100;
    int32_t *ri = malloc(4 * n * 4), *cj = malloc(4 * n * 4);
    float *vv = malloc(4 * n * 4);
    ASSERT(ri && cj && vv);
    int64_t k = 0;
    for (int32_t i = 0; i < n; i += 2) {
      int32_t e[4][2] = {{i, i}, {i, i + 1}, {i + 1, i}, {i + 1, i + 1}};
      for (int q = 0; q < 4; q++) ri[k] = e[q][0], cj[k] = e[q][1], vv[k++] = q == 0 || q == 3 ? 1 : 2;
    }
    from_triplets(&A, n, k, ri, cj, vv);
    free(ri), free(cj), free(vv);
    d = upload(&A);
    h = build(&d);
    b = malloc((size_t)n * 8);
    ASSERT(b);
    for (int32_t i = 0; i < n; i++) b[i] = i % 2 ? -1 : 1;
    g = run_gpu(&d, h, GKCU_SOLVE_CG, GKCU_PRECOND_AMG, b, 1, 1e-8, 100);
    CHECK(g.rc == 0 && g.r.reason == GKCU_SOLVE_BREAKDOWN, "indefinite: rc %d, %s", g.rc,
          reason_names[g.r.reason]);
    free(g.x), free(b);
    cuda_amg_free(h);
    dmat_free(&d);
    gpu_csr_free(&A);
  }
  printf("  errors: zero diagonal and empty row named, out of memory, indefinite -> breakdown\n");
}

int main(void) {
  gpu_require_device();
  gpu_rng rng = {gpu_seed("test_gpu_amg")};
  const char *sh = getenv("GKC_GPU_TEST_SHORT");
  int short_run = sh && *sh && strcmp(sh, "0");
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  ASSERT_EQ(gkcu_ctx_create(&ctx, st), 0);
  int drv = 0;
  CUDA_OK(cudaDriverGetVersion(&drv));
  const char *kinds[3] = {"while", "unrolled", "stream"};
  for (int k = 0; k < 3; k++) {
    how = kinds[k];
    if (k == 0 && drv < 12040) {
      printf("while: driver %d has no conditional graph nodes (12.4+): not tested\n", drv);
      continue;
    }
    setenv("GKCU_SOLVE_GRAPH", how, 1);
    printf("%s:\n", how);
    test_matrices(&rng, short_run);
    if (k == 1) {
      test_rho(&rng);
      test_fp32(&rng, short_run);
      test_f64_matrix(&rng, short_run);
      test_suitesparse(&rng);
      test_errors(&rng);
    }
  }
  cuda_ring_destroy(&test_ring);
  gkcu_ctx_destroy(ctx);
  cudaStreamDestroy(st);
  if (failures) fprintf(stderr, "test_gpu_amg: %d failures\n", failures);
  return failures ? 1 : 0;
}
