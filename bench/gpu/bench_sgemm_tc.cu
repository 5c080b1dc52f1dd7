/* bench_sgemm_tc: tf32x3 (float32-accurate sgemm on the tensor cores)
 * against cuBLAS FP32 and cuBLAS TF32 in one run: an accuracy table, then
 * times on the issue-17 shapes (large squares, small squares, skinny and
 * odd), with every wgmma configuration (gkcu_sgemm_wg.h) where the device
 * runs them (cc 9.0), then (with --lab) every mma.sync configuration and
 * K split.
 *
 * Accuracy: 1024 x 1024 x 4096 products (and --acc-shape M,N,K) of inputs
 * drawn from several distributions, every element compared with a float64
 * product of the same float32 inputs computed on the GPU.  Two figures:
 *   max_scaled  max over elements of |c - ref| / sum_p |a_ip b_pj|, the
 *               componentwise error relative to the size of the terms (a
 *               plain |ref| denominator is unbounded where ref ~ 0);
 *   rel_fro     ||c - ref||_F / ||ref||_F.
 *
 * Timing as in bench_gpu: each algo validated first (516 sampled elements
 * against float64 dot products, C NaN-poisoned), 2 warm-up calls, then
 * --reps timed calls between CUDA events with twice the L2 written just
 * before each; median (and min) reported; x cublas = cuBLAS FP32 median /
 * this median.
 *
 *   bench_sgemm_tc [--reps N] [--lab] [--no-acc] [--no-time] [--shapes MxNxK,...]
 *                  [--no-flush] [--floor] [--cfg CFG,SPLITS] [--json FILE]
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

extern "C" {
#include "bench_util.h" /* C, no extern "C" of its own */
}
#include "gkcu.h"
#include "gkcu_sgemm.h"
#include "gkcu_sgemm_tc.h"
#include "gkcu_sgemm_wg.h"

static gkcu_ctx *ctx;
static cudaStream_t st;
static void *flush_buf;
static size_t flush_bytes;
static int reps = 20;
/* --no-flush: L2 left warm between calls; then nothing is queued ahead of
 * the first event, so the host's launch latency is in every time (an
 * empty kernel measured 5.8-7.3 us that way against 3.1 us with the
 * flush, H100, 2026-11-25) */
static int no_flush;
static int force_cfg = -1, force_splits = 0; /* --cfg C,S: the tf32x3 row runs this */
static int floor_rows;            /* --floor: the fixed costs beside each shape */
static FILE *json;
static int json_first = 1;
static int failures;
static int wg_ok; /* the wgmma kernels can run here (cc 9.0) */

/* --- device helpers ----------------------------------------------------------------- */

/* ref[q] = sum_p A[i,p] B[p,j] in float64, mag[q] = sum |A B|, for
 * (i, j) = (idx[q] / n, idx[q] % n), or q itself when idx is NULL. */
__global__ void ref_kernel(int m, int n, int k, const float *a, const float *b, const long long *idx,
                           long long count, double *ref, double *mag) {
  long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= count) return;
  long long e = idx ? idx[q] : q;
  int i = (int)(e / n), j = (int)(e % n);
  double s = 0.0, s_abs = 0.0;
  for (int p = 0; p < k; p++) {
    double x = (double)a[(size_t)i * k + p] * (double)b[(size_t)p * n + j];
    s += x;
    s_abs += fabs(x);
  }
  ref[q] = s;
  mag[q] = s_abs;
}

/* Input distributions for the accuracy table. */
enum { D_UNIFORM, D_SMALL, D_LARGE, D_POSITIVE, D_MIXED, D_CANCEL, D_COUNT };
static const char *const kDistNames[D_COUNT] = {"U(-1,1)", "1e-3 U(-1,1)", "1e3 U(-1,1)", "U(0,1)",
                                                "mixed rows 1e-3..1e3", "cancellation"};

/* Hash-based uniform in [0, 1) for (seed, i): the transforms below need
 * extra random numbers beside gkcu_fill_uniform's. */
__device__ float unit_at(unsigned long long seed, unsigned long long i) {
  unsigned long long z = seed * 0x9e3779b97f4a7c15ull + i + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* x[r, c] (rows x cols) transformed in place for distribution d; is_b
 * says which operand (cancellation pairs A's halves and negates B's). */
__global__ void shape_kernel(int d, int is_b, int rows, int cols, float *x, unsigned long long seed) {
  long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= (long long)rows * cols) return;
  int r = (int)(q / cols), c = (int)(q % cols);
  float v = x[q];
  switch (d) {
    case D_SMALL: x[q] = v * 1e-3f; break;
    case D_LARGE: x[q] = v * 1e3f; break;
    case D_POSITIVE: x[q] = fabsf(v); break;
    case D_MIXED: {
      /* A: each row its own scale 10^[-3,3); B: each element 10^[-1,1) */
      float e = is_b ? 2.0f * unit_at(seed, q) - 1.0f : 6.0f * unit_at(seed, r) - 3.0f;
      x[q] = v * exp10f(e);
      break;
    }
    case D_CANCEL: {
      /* k = 2h: A[i, p+h] = A[i, p] and B[p+h, j] = -B[p, j] (1 + 2^-10 w),
       * so each dot product is ~2^-10 of its terms' size */
      int h = (is_b ? rows : cols) / 2;
      if (!is_b && c >= h) x[q] = x[(size_t)r * cols + (c - h)];
      if (is_b && r >= h) {
        float w = 2.0f * unit_at(seed, q) - 1.0f;
        x[q] = -x[(size_t)(r - h) * cols + c] * (1.0f + w * (1.0f / 1024.0f));
      }
      break;
    }
    default: break;
  }
}

/* --- plumbing ----------------------------------------------------------------------- */

typedef struct {
  int algo; /* gkcu_sgemm algo, or -1: tf32x3 lab (cfg, splits), -2: wgmma (cfg) */
  int cfg, splits;
  int m, n, k;
  const float *a, *b;
  float *c;
} run_arg;

/* The floor rows (--floor): what any kernel of a shape pays under this
 * method (an empty launch), and its memory traffic alone (A and B read
 * once, C written once, 16-byte accesses where the sizes allow). */
__global__ void floor_empty_kernel(void) {}

__global__ void floor_copy_kernel(const float *a, size_t na, const float *b, size_t nb, float *c, size_t nc) {
  const size_t stride = (size_t)gridDim.x * blockDim.x, t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  const float4 *a4 = (const float4 *)a, *b4 = (const float4 *)b;
  for (size_t i = t0; i < na / 4; i += stride) s += a4[i].x;
  for (size_t i = t0; i < nb / 4; i += stride) s += b4[i].y;
  float4 *c4 = (float4 *)c;
  for (size_t i = t0; i < nc / 4; i += stride) c4[i] = make_float4(s, s, s, s);
  for (size_t i = nc / 4 * 4 + t0; i < nc; i += stride) c[i] = s;
}

/* run_arg.algo below 0: not a gkcu_sgemm algo but one of these (-1: the
 * mma.sync tf32x3 with a forced configuration and split). */
enum { RUN_TC_LAB = -1, RUN_WG = -2, RUN_FLOOR_EMPTY = -3, RUN_FLOOR_COPY = -4 };

static int run_one(const run_arg *r) {
  if (r->algo == RUN_WG)
    return gkcu_wg_sgemm(ctx, r->cfg, r->m, r->n, r->k, 1.0f, r->a, 0, r->b, 0, 0.0f, r->c);
  if (r->algo == RUN_FLOOR_EMPTY) { /* floor: an empty kernel */
    floor_empty_kernel<<<1, 32, 0, st>>>();
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
  }
  if (r->algo == RUN_FLOOR_COPY) { /* floor: read A and B once, write C */
    floor_copy_kernel<<<gkcu_ctx_sm_count(ctx) * 8, 256, 0, st>>>(r->a, (size_t)r->m * r->k, r->b,
                                                                   (size_t)r->k * r->n, r->c, (size_t)r->m * r->n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
  }
  if (r->algo < 0)
    return gkcu_lab_sgemm_tf32x3(ctx, r->cfg, r->splits, r->m, r->n, r->k, 1.0f, r->a, 0, r->b, 0, 0.0f, r->c);
  return gkcu_sgemm(ctx, r->algo, r->m, r->n, r->k, 1.0f, r->a, 0, r->b, 0, 0.0f, r->c);
}

typedef struct {
  double median_ms, min_ms;
  int ok;
} timing;

static int run_one_fn(void *r) { return run_one((const run_arg *)r); }

static timing time_it(const run_arg *r) {
  bench_timing b = bench_time_events(st, flush_buf, no_flush ? 0 : flush_bytes, reps, run_one_fn, (void *)r);
  if (b.failed) fprintf(stderr, "%s failed: %s\n", b.failed == 1 ? "warm-up" : "run", gkcu_ctx_errmsg(ctx));
  timing t = {b.median_ms, b.min_ms, b.ok};
  return t;
}

static void json_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void json_row(const char *fmt, ...) {
  if (!json) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(json, "%s\n  ", json_first ? "" : ",");
  vfprintf(json, fmt, ap);
  va_end(ap);
  json_first = 0;
}

/* Runs r once into a NaN-poisoned C and compares count elements (idx)
 * with the float64 reference; returns the max scaled error (inf on NaN). */
static double sampled_error(const run_arg *r, const long long *d_idx, const double *h_ref, const double *h_mag,
                            const long long *h_idx, int count) {
  CUDA_OK(cudaMemsetAsync(r->c, 0xff, (size_t)r->m * r->n * sizeof(float), st));
  if (run_one(r) != 0) {
    fprintf(stderr, "run failed: %s\n", gkcu_ctx_errmsg(ctx));
    return INFINITY;
  }
  CUDA_OK(cudaStreamSynchronize(st));
  (void)d_idx;
  double worst = 0.0;
  for (int q = 0; q < count; q++) {
    float got;
    CUDA_OK(cudaMemcpy(&got, r->c + h_idx[q], sizeof got, cudaMemcpyDeviceToHost));
    double e = fabs((double)got - h_ref[q]) / (h_mag[q] + 1e-300);
    if (!(e <= 1e300)) e = INFINITY;
    if (e > worst) worst = e;
  }
  return worst;
}

/* --- accuracy --------------------------------------------------------------------------- */

typedef struct {
  double max_scaled, rel_fro;
} acc_err;

static acc_err full_error(const float *d_c, size_t mn, const double *ref, const double *mag, float *h_c) {
  CUDA_OK(cudaMemcpy(h_c, d_c, mn * sizeof(float), cudaMemcpyDeviceToHost));
  acc_err e = {0, 0};
  double num = 0, den = 0;
  for (size_t i = 0; i < mn; i++) {
    double d = fabs((double)h_c[i] - ref[i]);
    double s = d / (mag[i] + 1e-300);
    if (!(s <= 1e300)) s = INFINITY;
    if (s > e.max_scaled) e.max_scaled = s;
    num += d * d;
    den += ref[i] * ref[i];
  }
  e.rel_fro = sqrt(num / (den + 1e-300));
  if (!(e.rel_fro <= 1e300)) e.rel_fro = INFINITY;
  return e;
}

static void accuracy(int m, int n, int k) {
  size_t mn = (size_t)m * n;
  float *a, *b, *c;
  double *ref, *mag;
  CUDA_OK(cudaMalloc((void **)&a, (size_t)m * k * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&b, (size_t)k * n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&c, mn * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&ref, mn * sizeof(double)));
  CUDA_OK(cudaMalloc((void **)&mag, mn * sizeof(double)));
  double *h_ref = (double *)malloc(mn * sizeof(double)), *h_mag = (double *)malloc(mn * sizeof(double));
  float *h_c = (float *)malloc(mn * sizeof(float));
  if (!h_ref || !h_mag || !h_c) exit(2);

  printf("\n== accuracy, %dx%dx%d, every element against float64 (max_scaled = max |c-ref| / sum|a b|) ==\n", m,
         n, k);
  printf("%-22s %-34s %12s %12s %10s\n", "inputs", "algo", "max_scaled", "rel_fro", "x cublas");
  for (int d = 0; d < D_COUNT; d++) {
    unsigned long long seed = 0x5eed0000ull + (unsigned long long)d * 77 + (unsigned long long)time(NULL);
    if (gkcu_fill_uniform(ctx, a, (size_t)m * k, seed, -1.0f, 1.0f) ||
        gkcu_fill_uniform(ctx, b, (size_t)k * n, seed + 1, -1.0f, 1.0f)) {
      fprintf(stderr, "fill: %s\n", gkcu_ctx_errmsg(ctx));
      exit(2);
    }
    long long na = (long long)m * k, nb = (long long)k * n;
    shape_kernel<<<(unsigned)((na + 255) / 256), 256, 0, st>>>(d, 0, m, k, a, seed + 2);
    CUDA_OK(cudaGetLastError());
    shape_kernel<<<(unsigned)((nb + 255) / 256), 256, 0, st>>>(d, 1, k, n, b, seed + 3);
    CUDA_OK(cudaGetLastError());
    ref_kernel<<<(unsigned)((mn + 127) / 128), 128, 0, st>>>(m, n, k, a, b, NULL, (long long)mn, ref, mag);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(st));
    CUDA_OK(cudaMemcpy(h_ref, ref, mn * sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(h_mag, mag, mn * sizeof(double), cudaMemcpyDeviceToHost));

    /* cuBLAS FP32 first: the others are compared with it */
    run_arg rs[3 + GKCU_TC_CFGS + GKCU_WG_CFGS];
    char names[3 + GKCU_TC_CFGS + GKCU_WG_CFGS][48];
    int nr = 0;
    rs[nr] = (run_arg){GKCU_SGEMM_CUBLAS, 0, 0, m, n, k, a, b, c};
    snprintf(names[nr++], 48, "cublas (FP32)");
    rs[nr] = (run_arg){GKCU_SGEMM_CUBLAS_TF32, 0, 0, m, n, k, a, b, c};
    snprintf(names[nr++], 48, "cublas_tf32");
    rs[nr] = (run_arg){GKCU_SGEMM_TF32X3, 0, 0, m, n, k, a, b, c};
    snprintf(names[nr++], 48, "tf32x3");
    for (int cfg = 0; cfg < GKCU_TC_CFGS; cfg++) {
      rs[nr] = (run_arg){-1, cfg, 1, m, n, k, a, b, c};
      snprintf(names[nr++], 48, "tf32x3/%s k1", gkcu_tc_cfg_name(cfg));
    }
    for (int cfg = 0; wg_ok && cfg < GKCU_WG_CFGS; cfg++) {
      rs[nr] = (run_arg){RUN_WG, cfg, 1, m, n, k, a, b, c};
      snprintf(names[nr++], 48, "wg/%s", gkcu_wg_cfg_name(cfg));
    }
    double base = 0;
    for (int i = 0; i < nr; i++) {
      CUDA_OK(cudaMemsetAsync(c, 0xff, mn * sizeof(float), st));
      if (run_one(&rs[i]) != 0) {
        printf("%-22s %-34s failed: %s\n", kDistNames[d], names[i], gkcu_ctx_errmsg(ctx));
        failures++;
        continue;
      }
      CUDA_OK(cudaStreamSynchronize(st));
      acc_err e = full_error(c, mn, h_ref, h_mag, h_c);
      if (i == 0) base = e.max_scaled;
      double ratio = base > 0 ? e.max_scaled / base : 0;
      printf("%-22s %-34s %12.3e %12.3e %10.2f\n", kDistNames[d], names[i], e.max_scaled, e.rel_fro, ratio);
      json_row("{\"table\": \"accuracy\", \"shape\": \"%dx%dx%d\", \"inputs\": \"%s\", \"algo\": \"%s\", "
               "\"max_scaled\": %.4e, \"rel_fro\": %.4e, \"vs_cublas\": %.3f}",
               m, n, k, kDistNames[d], names[i], e.max_scaled, e.rel_fro, ratio);
    }
  }
  fflush(stdout);
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(ref), cudaFree(mag);
  free(h_ref), free(h_mag), free(h_c);
}

/* --- timing --------------------------------------------------------------------------- */

typedef struct {
  int m, n, k;
} shape;

static void report(const char *cas, const char *algo, timing t, double flops, double vendor, const char *note) {
  if (!t.ok) {
    printf("%-16s %-34s %10s  (failed or skipped) %s\n", cas, algo, "-", note);
    return;
  }
  double rate = flops / (t.median_ms * 1e-3) / 1e12;
  double x = vendor > 0 ? vendor / t.median_ms : 0;
  printf("%-16s %-34s %10.4f %10.4f %9.2f %8.3f  %s\n", cas, algo, t.median_ms, t.min_ms, rate, x, note);
  fflush(stdout);
  json_row("{\"table\": \"time\", \"case\": \"%s\", \"algo\": \"%s\", \"median_ms\": %.6f, \"min_ms\": %.6f, "
           "\"tflops\": %.3f, \"vs_cublas\": %.4f, \"note\": \"%s\"}",
           cas, algo, t.median_ms, t.min_ms, rate, x, note);
}

/* K splits the lab tries (3 and 6: cluster sizes between the powers of 2;
 * negative: added through scratch and a second kernel, not a cluster) */
/* The sampled reference of a shape, for sampled_error. */
typedef struct {
  const long long *d_idx, *h_idx;
  const double *h_ref, *h_mag;
  int count;
} sample_ref;

/* r checked on the sampled elements (max scaled error within tol), then
 * timed, and its row `name` reported with "err E" as the note; a failed
 * check is reported ("VALIDATION FAILED"), counted and not timed.  The
 * timing (ok 0 when not timed). */
static timing validated_row(const run_arg *r, const sample_ref *sr, double tol, const char *cas, const char *name,
                            double flops, double vendor) {
  double err = sampled_error(r, sr->d_idx, sr->h_ref, sr->h_mag, sr->h_idx, sr->count);
  timing t = {0, 0, 0};
  char note[96];
  if (!(err <= tol)) {
    snprintf(note, sizeof note, "VALIDATION FAILED: max scaled err %.3g > %.3g", err, tol);
    failures++;
  } else {
    t = time_it(r);
    snprintf(note, sizeof note, "err %.2g", err);
  }
  report(cas, name, t, flops, vendor, note);
  return t;
}

static const int kLabSplits[] = {1, 2, 3, 4, 6, 8, 16, -2, -3, -4};

static void time_shape(shape s, int lab, double *out_vendor, double *out_tc, double *out_auto, double *out_tf32,
                       double *out_best_lab, char *best_name, double *out_wg, char *wg_name) {
  int m = s.m, n = s.n, k = s.k;
  float *a, *b, *c;
  CUDA_OK(cudaMalloc((void **)&a, (size_t)m * k * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&b, (size_t)k * n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&c, (size_t)m * n * sizeof(float)));
  if (gkcu_fill_uniform(ctx, a, (size_t)m * k, 0xa11ce + m, -1.0f, 1.0f) ||
      gkcu_fill_uniform(ctx, b, (size_t)k * n, 0xb0b + n, -1.0f, 1.0f)) {
    fprintf(stderr, "fill: %s\n", gkcu_ctx_errmsg(ctx));
    exit(2);
  }
  /* 516 sampled elements (the corners first) and their float64 values */
  enum { NS = 516 };
  long long h_idx[NS];
  unsigned long long rng = 0x9e3779b97f4a7c15ull ^ ((unsigned long long)m * n * k);
  for (int q = 0; q < NS; q++) {
    long long i, j;
    if (q < 4) {
      i = (q & 1) ? m - 1 : 0;
      j = (q & 2) ? n - 1 : 0;
    } else {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      i = (long long)((rng >> 33) % (unsigned long long)m);
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      j = (long long)((rng >> 33) % (unsigned long long)n);
    }
    h_idx[q] = i * n + j;
  }
  long long *d_idx;
  double *d_ref, *d_mag, h_ref[NS], h_mag[NS];
  CUDA_OK(cudaMalloc((void **)&d_idx, sizeof h_idx));
  CUDA_OK(cudaMalloc((void **)&d_ref, sizeof h_ref));
  CUDA_OK(cudaMalloc((void **)&d_mag, sizeof h_mag));
  CUDA_OK(cudaMemcpy(d_idx, h_idx, sizeof h_idx, cudaMemcpyHostToDevice));
  ref_kernel<<<(NS + 127) / 128, 128, 0, st>>>(m, n, k, a, b, d_idx, NS, d_ref, d_mag);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaStreamSynchronize(st));
  CUDA_OK(cudaMemcpy(h_ref, d_ref, sizeof h_ref, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(h_mag, d_mag, sizeof h_mag, cudaMemcpyDeviceToHost));

  char cas[48];
  snprintf(cas, sizeof cas, "%dx%dx%d", m, n, k);
  double flops = 2.0 * m * n * k;
  double tol = 1e-5 * (1.0 + sqrt((double)k));

  int cfg, splits;
  gkcu_tc_choice(gkcu_ctx_sm_count(ctx), m, n, k, &cfg, &splits);
  int pick = gkcu_sgemm_pick(ctx, m, n, k);

  struct {
    int algo;
    const char *name;
    int tf32;
  } pub[] = {{GKCU_SGEMM_CUBLAS, "cublas", 0},
             {GKCU_SGEMM_CUBLAS_TF32, "cublas_tf32", 1},
             {GKCU_SGEMM_TF32X3, "tf32x3", 0},
             {GKCU_SGEMM_AUTO, "auto", 0}};
  const sample_ref sr = {d_idx, h_idx, h_ref, h_mag, NS};
  double vendor = 0;
  for (int i = 0; i < 4; i++) {
    run_arg r = {pub[i].algo, 0, 0, m, n, k, a, b, c};
    if (pub[i].algo == GKCU_SGEMM_TF32X3 && force_cfg >= 0) {
      r = (run_arg){-1, force_cfg, force_splits, m, n, k, a, b, c};
      cfg = force_cfg, splits = force_splits;
    }
    double err = sampled_error(&r, d_idx, h_ref, h_mag, h_idx, NS);
    double t_tol = pub[i].tf32 ? 4e-3 : tol;
    timing t = {0, 0, 0};
    char note[96];
    if (!(err <= t_tol)) {
      snprintf(note, sizeof note, "VALIDATION FAILED: max scaled err %.3g > %.3g", err, t_tol);
      failures++;
    } else {
      t = time_it(&r);
      int wcfg = wg_ok ? gkcu_wg_choice(gkcu_ctx_sm_count(ctx), m, n, k) : -1;
      if (pub[i].algo == GKCU_SGEMM_TF32X3 && wcfg >= 0)
        snprintf(note, sizeof note, "wg %s; err %.2g", gkcu_wg_cfg_name(wcfg), err);
      else if (pub[i].algo == GKCU_SGEMM_TF32X3)
        snprintf(note, sizeof note, "%s, k split %d; err %.2g", gkcu_tc_cfg_name(cfg), splits, err);
      else if (pub[i].algo == GKCU_SGEMM_AUTO)
        snprintf(note, sizeof note, "-> %s; err %.2g", gkcu_sgemm_algo_name(pick), err);
      else
        snprintf(note, sizeof note, "err %.2g", err);
    }
    if (i == 0 && t.ok) vendor = t.median_ms;
    report(cas, pub[i].name, t, flops, i == 0 ? 0 : vendor, note);
    double v = t.ok ? t.median_ms : 0;
    if (i == 0) *out_vendor = v;
    if (i == 1) *out_tf32 = v;
    if (i == 2) *out_tc = v;
    if (i == 3) *out_auto = v;
  }

  if (floor_rows) {
    run_arg fe = {RUN_FLOOR_EMPTY, 0, 0, m, n, k, a, b, c}, fc = {RUN_FLOOR_COPY, 0, 0, m, n, k, a, b, c};
    report(cas, "floor: empty kernel", time_it(&fe), flops, vendor, "launch + events under this method");
    report(cas, "floor: read A,B + write C", time_it(&fc), flops, vendor, "memory traffic alone");
  }
  *out_best_lab = 0;
  best_name[0] = '\0';
  *out_wg = 0;
  wg_name[0] = '\0';
  for (int cf = 0; wg_ok && cf < GKCU_WG_CFGS; cf++) {
    run_arg r = {RUN_WG, cf, 1, m, n, k, a, b, c};
    char name[64];
    snprintf(name, sizeof name, "wg %s", gkcu_wg_cfg_name(cf));
    timing t = validated_row(&r, &sr, tol, cas, name, flops, vendor);
    if (t.ok && (*out_wg == 0 || t.median_ms < *out_wg)) {
      *out_wg = t.median_ms;
      snprintf(wg_name, 64, "%s", gkcu_wg_cfg_name(cf));
    }
  }
  if (lab) {
    int sms = gkcu_ctx_sm_count(ctx);
    for (int cf = 0; cf < GKCU_TC_CFGS; cf++)
      for (int si = 0; si < (int)(sizeof kLabSplits / sizeof kLabSplits[0]); si++) {
        const int spv = kLabSplits[si], sp = spv < 0 ? -spv : spv;
        size_t tiles = 0;
        {
          /* tile count from the name's BMxBN */
          int bm = 0, bn = 0;
          sscanf(gkcu_tc_cfg_name(cf), "%dx%d", &bm, &bn);
          tiles = (size_t)((m + bm - 1) / bm) * ((n + bn - 1) / bn);
        }
        if (sp > 1 && (tiles >= 2 * (size_t)sms || k < 32 * sp)) continue;
        if ((double)m * n * k > 3e10 && tiles < (size_t)sms / 2) continue; /* slow, uninformative */
        run_arg r = {-1, cf, spv, m, n, k, a, b, c};
        char name[64];
        snprintf(name, sizeof name, "lab %s k%d%s", gkcu_tc_cfg_name(cf), sp, spv < 0 ? "s" : "");
        timing t = validated_row(&r, &sr, tol, cas, name, flops, vendor);
        if (t.ok && (*out_best_lab == 0 || t.median_ms < *out_best_lab)) {
          *out_best_lab = t.median_ms;
          snprintf(best_name, 64, "%s k%d%s", gkcu_tc_cfg_name(cf), sp, spv < 0 ? "s" : "");
        }
      }
  }
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(d_idx), cudaFree(d_ref), cudaFree(d_mag);
}

/* Whether s is in the comma-separated MxNxK list (NULL: every shape). */
static int shape_wanted(const char *list, shape s) {
  if (!list) return 1;
  char want[48];
  snprintf(want, sizeof want, "%dx%dx%d", s.m, s.n, s.k);
  size_t len = strlen(want);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == len && !strncmp(p, want, len)) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *json_path = NULL, *only = NULL;
  int lab = 0, do_acc = 1, do_time = 1;
  int am = 1024, an = 1024, ak = 4096;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--lab")) lab = 1;
    else if (!strcmp(argv[i], "--no-acc")) do_acc = 0;
    else if (!strcmp(argv[i], "--no-time")) do_time = 0;
    else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--no-flush")) no_flush = 1;
    else if (!strcmp(argv[i], "--floor")) floor_rows = 1;
    else if (!strcmp(argv[i], "--cfg") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d", &force_cfg, &force_splits) != 2 || force_cfg < 0 || force_cfg >= GKCU_TC_CFGS) {
        fprintf(stderr, "--cfg: expected CFG,SPLITS with CFG in 0..%d\n", GKCU_TC_CFGS - 1);
        return 2;
      }
    }
    else if (!strcmp(argv[i], "--acc-shape") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d,%d", &am, &an, &ak) != 3 || am < 1 || an < 1 || ak < 2 || am > 16384 || an > 16384 || ak > 65536) {
        fprintf(stderr, "--acc-shape: expected M,N,K (M, N <= 16384, 2 <= K <= 65536)\n");
        return 2;
      }
    } else {
      fprintf(stderr,
              "usage: %s [--reps N] [--lab] [--no-acc] [--no-time] [--acc-shape M,N,K]\n"
              "          [--shapes MxNxK,...] [--no-flush] [--floor] [--cfg CFG,SPLITS] [--json FILE]\n"
              "  tf32x3 vs cuBLAS FP32/TF32: accuracy table, times on the issue-17 shapes,\n"
              "  --lab: every tf32x3 configuration and K split too;\n"
              "  --shapes: time only these of the issue-17 shapes (e.g. 512x512x512,64x8192x64);\n"
              "  --no-flush: leave L2 warm between timed calls; --floor: time an empty kernel and\n"
              "  the shape's memory traffic alone; --cfg: the tf32x3 row runs this configuration.\n",
              argv[0]);
      return !strcmp(argv[i], "--help") ? 0 : 2;
    }
  }
  if (reps < 5) reps = 5;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    fprintf(stderr, "bench_sgemm_tc: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  time_t now = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  printf("device: %s, %d SMs, %.0f MB L2, cc %d.%d; %s\n", prop.name, prop.multiProcessorCount,
         prop.l2CacheSize / 1e6, prop.major, prop.minor, date);
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  if (gkcu_ctx_create(&ctx, st) != 0) {
    fprintf(stderr, "gkcu_ctx_create failed\n");
    return 2;
  }
  wg_ok = gkcu_wg_supported(ctx);
  printf("wgmma kernels: %s\n", wg_ok ? "yes" : "no (not cc 9.0)");
  flush_bytes = 2 * gkcu_ctx_l2_bytes(ctx);
  if (flush_bytes < ((size_t)64 << 20)) flush_bytes = (size_t)64 << 20;
  CUDA_OK(cudaMalloc(&flush_buf, flush_bytes));
  if (json_path && (json = fopen(json_path, "w")))
    fprintf(json, "{\"device\": \"%s\", \"date\": \"%s\", \"rows\": [", prop.name, date);

  if (do_acc) accuracy(am, an, ak);

  static const shape shapes[] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048}, {1024, 1024, 1024},
                                 {512, 512, 512},    {256, 256, 256},    {64, 8192, 64},     {8192, 64, 8192},
                                 {127, 257, 511},    {4095, 4097, 4099}, {2048, 8192, 1024}};
  enum { NSH = sizeof shapes / sizeof shapes[0] };
  double vt[NSH], tc[NSH], au[NSH], tf[NSH], bl[NSH], wt[NSH];
  char bn[NSH][64], wn[NSH][64];
  if (do_time) {
    printf("\n== time: median of %d, %.0f MB written before each; x cublas = cuBLAS FP32 / this ==\n", reps,
           flush_bytes / 1e6);
    printf("%-16s %-34s %10s %10s %9s %8s  %s\n", "shape", "algo", "median_ms", "min_ms", "TFLOP/s", "x cublas",
           "note");
    for (int i = 0; i < NSH; i++) {
      vt[i] = tc[i] = au[i] = tf[i] = bl[i] = wt[i] = 0;
      bn[i][0] = wn[i][0] = '\0';
      if (!shape_wanted(only, shapes[i])) continue;
      time_shape(shapes[i], lab, &vt[i], &tc[i], &au[i], &tf[i], &bl[i], bn[i], &wt[i], wn[i]);
    }
    printf("\n== summary (x = cuBLAS FP32 median / median) ==\n");
    printf("%-16s %10s %9s %9s %9s %9s %9s  %s\n", "shape", "cublas_ms", "tf32x3", "auto", "tf32", "best wg",
           "best lab", "best wg / best lab config");
    for (int i = 0; i < NSH; i++) {
      if (!shape_wanted(only, shapes[i])) continue;
      char cas[48];
      snprintf(cas, sizeof cas, "%dx%dx%d", shapes[i].m, shapes[i].n, shapes[i].k);
      printf("%-16s %10.4f %9.3f %9.3f %9.3f %9.3f %9.3f  %s / %s\n", cas, vt[i], tc[i] > 0 ? vt[i] / tc[i] : 0,
             au[i] > 0 ? vt[i] / au[i] : 0, tf[i] > 0 ? vt[i] / tf[i] : 0, wt[i] > 0 ? vt[i] / wt[i] : 0,
             bl[i] > 0 ? vt[i] / bl[i] : 0, wn[i], bn[i]);
    }
  }
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  printf("\nbench_sgemm_tc: %d failures\n", failures);
  cudaFree(flush_buf);
  gkcu_ctx_destroy(ctx);
  return failures ? 1 : 0;
}
