/* bench_gpu: times every rung of the sgemm, reduce and spmv ladders beside
 * the vendor library (cuBLAS, CUB, cuSPARSE) in the same run.
 *
 * Method: each algo is validated on the case before it is timed (sampled
 * double-precision dot products for sgemm, a full double reference for
 * reduce and spmv; outputs poisoned with NaN first).  Then two warm-up
 * calls, then >= 20 timed calls, each bracketed by CUDA events on the
 * context's stream, with a buffer of twice the L2 size written just before
 * each (so no run starts with its inputs in L2, and the flush keeps the GPU
 * busy while the host enqueues the call).  The median is reported, with the
 * minimum, a rate from napkin math (GFLOP/s, or GB/s counting each input
 * byte read once and each output byte written once) and the ratio
 * vendor_time / algo_time (> 1: faster than the vendor).
 *
 *   bench_gpu [--ops sgemm,reduce,spmv] [--reps N] [--matrices DIR]
 *             [--sgemm-sizes 256,512,...] [--no-synth] [--synth LIST] [--lab]
 *             [--validate-only] [--json FILE] [--csv FILE]
 *
 * --synth picks among the generated spmv matrices (stencil2d, stencil3d,
 * powerlaw; default all); --validate-only runs each case once, checked,
 * untimed (for a profiler: one launch per kernel variant).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench_csv.h"
#include "bench_util.h"
#include "gkcu.h"
#include "gkcu_lab.h"
#include "gkcu_reduce.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"
#include "gpu_util.h"

/* --- plumbing -------------------------------------------------------------------- */

static gkcu_ctx *ctx;
static cudaStream_t st;
static void *flush_buf;
static size_t flush_bytes;
static int reps = 20;
static FILE *json;
/* --csv: op,case,algo,median_ms,min_ms,rate,unit,vs_vendor,note,device; one
 * row per timed run (bench/results_csv.py --bench-gpu reads it for the charts). */
static bench_csv csv;
static char csv_device[256];
static int json_first = 1;
static int validation_failures;
static int validate_only;

typedef int (*run_fn)(void *arg);
static int has_op(const char *ops, const char *op);

typedef struct {
  double median_ms, min_ms;
  int ok;
} timing;

static timing time_it(run_fn f, void *arg, int n) {
  if (validate_only) return (timing){0, 0, 0};
  bench_timing b = bench_time_events(st, flush_buf, flush_bytes, n, f, arg);
  if (b.failed) fprintf(stderr, "%s failed: %s\n", b.failed == 1 ? "warm-up" : "run", gkcu_ctx_errmsg(ctx));
  return (timing){b.median_ms, b.min_ms, b.ok};
}

/* One table row; vendor_ms <= 0 means "this is the vendor" or unknown. */
static void report(const char *op, const char *cas, const char *algo, timing t, double work, const char *unit,
                   double vendor_ms, const char *note) {
  double rate = t.ok ? work / (t.median_ms * 1e-3) / 1e9 : 0.0;
  double ratio = (t.ok && vendor_ms > 0) ? vendor_ms / t.median_ms : 0.0;
  if (t.ok)
    printf("%-8s %-34s %-16s %10.4f %10.4f %10.1f %-7s %6.3f  %s\n", op, cas, algo, t.median_ms, t.min_ms, rate,
           unit, ratio, note ? note : "");
  else
    printf("%-8s %-34s %-16s %10s  (failed or skipped) %s\n", op, cas, algo, "-", note ? note : "");
  fflush(stdout);
  if (json && t.ok) {
    fprintf(json,
            "%s\n  {\"op\": \"%s\", \"case\": \"%s\", \"algo\": \"%s\", \"median_ms\": %.6f, \"min_ms\": %.6f, "
            "\"rate\": %.3f, \"unit\": \"%s\", \"vs_vendor\": %.4f}",
            json_first ? "" : ",", op, cas, algo, t.median_ms, t.min_ms, rate, unit, ratio);
    json_first = 0;
  }
  if (t.ok) {
    bench_csv_str(&csv, op);
    bench_csv_str(&csv, cas);
    bench_csv_str(&csv, algo);
    bench_csv_num(&csv, "%.6f", t.median_ms);
    bench_csv_num(&csv, "%.6f", t.min_ms);
    bench_csv_num(&csv, "%.3f", rate);
    bench_csv_str(&csv, unit);
    bench_csv_num(&csv, "%.4f", ratio);
    bench_csv_str(&csv, note);
    bench_csv_str(&csv, csv_device);
    bench_csv_end(&csv);
  }
}

static void header(const char *title) {
  printf("\n== %s ==\n%-8s %-34s %-16s %10s %10s %10s %-7s %6s\n", title, "op", "case", "algo", "median_ms",
         "min_ms", "rate", "unit", "xvend");
}

/* --- sgemm -------------------------------------------------------------------------- */

typedef struct {
  int algo, tile, splits; /* algo -1: lab regblock */
  int m, n, k;
  const float *a, *b;
  float *c;
} sgemm_arg;

static int sgemm_run(void *p) {
  sgemm_arg *s = p;
  if (s->algo < 0)
    return gkcu_lab_sgemm_regblock(ctx, s->tile, s->splits, s->m, s->n, s->k, 1.0f, s->a, 0, s->b, 0, 0.0f, s->c);
  return gkcu_sgemm(ctx, s->algo, s->m, s->n, s->k, 1.0f, s->a, 0, s->b, 0, 0.0f, s->c);
}

static const uint64_t SEED_A = 0xa11ce, SEED_B = 0xb0b;

/* Runs the algo once with C poisoned, checks 512 random elements plus the
 * corners against double dot products of the (regenerated) inputs. */
static int sgemm_validate(sgemm_arg *s, int tf32) {
  size_t mn = (size_t)s->m * s->n;
  CUDA_OK(cudaMemsetAsync(s->c, 0xff, mn * sizeof(float), st));
  if (sgemm_run(s) != 0) return 0;
  CUDA_OK(cudaStreamSynchronize(st));
  gpu_rng g = {0x5eed ^ mn};
  double worst = 0.0;
  for (int q = 0; q < 516; q++) {
    int i, j;
    if (q < 4) {
      i = (q & 1) ? s->m - 1 : 0;
      j = (q & 2) ? s->n - 1 : 0;
    } else {
      i = (int)gpu_rng_below(&g, (uint32_t)s->m);
      j = (int)gpu_rng_below(&g, (uint32_t)s->n);
    }
    double sum = 0.0, mag = 0.0;
    for (int p = 0; p < s->k; p++) {
      double x = gkcu_uniform_at(SEED_A, (uint64_t)i * s->k + p, -1.0f, 1.0f);
      double y = gkcu_uniform_at(SEED_B, (uint64_t)p * s->n + j, -1.0f, 1.0f);
      sum += x * y;
      mag += fabs(x * y);
    }
    float got;
    CUDA_OK(cudaMemcpy(&got, s->c + (size_t)i * s->n + j, sizeof got, cudaMemcpyDeviceToHost));
    double e = fabs((double)got - sum) / (mag + 1e-30);
    if (!(e <= 1e300)) e = INFINITY;
    if (e > worst) worst = e;
  }
  double tol = tf32 ? 4e-3 : 1e-5 * (1.0 + sqrt((double)s->k));
  if (!(worst <= tol)) {
    printf("VALIDATION FAILED: sgemm %dx%dx%d algo %d tile %d: max scaled error %.3g (tol %.3g)\n", s->m, s->n,
           s->k, s->algo, s->tile, worst, tol);
    validation_failures++;
    return 0;
  }
  return 1;
}

static void bench_sgemm_shape(int m, int n, int k, int lab) {
  float *a, *b, *c;
  CUDA_OK(cudaMalloc((void **)&a, (size_t)m * k * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&b, (size_t)k * n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&c, (size_t)m * n * sizeof(float)));
  if (gkcu_fill_uniform(ctx, a, (size_t)m * k, SEED_A, -1.0f, 1.0f) != 0 ||
      gkcu_fill_uniform(ctx, b, (size_t)k * n, SEED_B, -1.0f, 1.0f) != 0) {
    fprintf(stderr, "fill: %s\n", gkcu_ctx_errmsg(ctx));
    exit(2);
  }
  char cas[64];
  snprintf(cas, sizeof cas, "%dx%dx%d", m, n, k);
  double flops = 2.0 * m * n * k;
  int n_reps = reps;
  sgemm_arg s = {GKCU_SGEMM_CUBLAS, 0, 0, m, n, k, a, b, c};

  timing vt = {0, 0, 0};
  if (sgemm_validate(&s, 0)) vt = time_it(sgemm_run, &s, n_reps);
  report("sgemm", cas, "cublas", vt, flops, "GFLOP/s", 0, "vendor FP32");
  double vendor = vt.ok ? vt.median_ms : 0;

  double big = (double)m * n * k;
  if (!lab) {
    static const int algos[] = {GKCU_SGEMM_NAIVE, GKCU_SGEMM_SMEM, GKCU_SGEMM_REGBLOCK, GKCU_SGEMM_TF32X3,
                                GKCU_SGEMM_AUTO, GKCU_SGEMM_CUBLAS_TF32};
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
      int al = algos[i];
      if (al == GKCU_SGEMM_NAIVE && big > 2049.0 * 2049 * 2049) continue; /* minutes of runtime */
      if (al == GKCU_SGEMM_SMEM && big > 4097.0 * 4097 * 4097) continue;
      s.algo = al;
      timing t = {0, 0, 0};
      int tf32 = al == GKCU_SGEMM_CUBLAS_TF32;
      if (sgemm_validate(&s, tf32)) t = time_it(sgemm_run, &s, n_reps);
      char note[64] = "";
      if (al == GKCU_SGEMM_REGBLOCK) {
        int tile, splits;
        gkcu_lab_sgemm_regblock_choice(ctx, m, n, k, &tile, &splits);
        snprintf(note, sizeof note, "tile %s, k split %d", gkcu_lab_tile_name(tile), splits);
      } else if (al == GKCU_SGEMM_AUTO) {
        snprintf(note, sizeof note, "-> %s", gkcu_sgemm_algo_name(gkcu_sgemm_pick(ctx, m, n, k)));
      } else if (tf32) {
        snprintf(note, sizeof note, "TF32 tensor cores, ~1e-3 rel. error");
      }
      report("sgemm", cas, gkcu_sgemm_algo_name(al), t, flops, "GFLOP/s", vendor, note);
    }
  } else {
    int sms = gkcu_ctx_sm_count(ctx);
    for (int tile = 0; tile < GKCU_LAB_TILES; tile++)
      for (int splits = 1; splits <= 16; splits *= 2) {
        size_t tiles = gkcu_lab_tile_blocks(tile, m, n);
        if (splits > 1 && (tiles >= 2 * (size_t)sms || k < 256 * splits)) continue;
        s.algo = -1;
        s.tile = tile;
        s.splits = splits;
        timing t = {0, 0, 0};
        if (sgemm_validate(&s, 0)) t = time_it(sgemm_run, &s, n_reps);
        char name[32];
        snprintf(name, sizeof name, "rb/%s/k%d", gkcu_lab_tile_name(tile), splits);
        report("sgemm", cas, name, t, flops, "GFLOP/s", vendor, "lab");
      }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

static void bench_sgemm(const int *sizes, int nsizes, int lab) {
  header(lab ? "sgemm lab: regblock tile shapes and K splits" : "sgemm, row-major, alpha=1 beta=0, FP32");
  for (int i = 0; i < nsizes; i++) bench_sgemm_shape(sizes[i], sizes[i], sizes[i], lab);
  bench_sgemm_shape(8192, 64, 8192, lab);
  bench_sgemm_shape(64, 8192, 64, lab);
}

/* --- reduce ---------------------------------------------------------------------------- */

typedef struct {
  int algo, bps, op; /* algo -1: lab shfl variant `bps` */
  const float *x;
  long long n;
  double *d_out;
} reduce_arg;

static int reduce_run(void *p) {
  reduce_arg *r = p;
  if (r->algo < 0) return gkcu_lab_reduce_shfl_variant(ctx, r->bps, 0, r->op, r->x, r->n, r->d_out);
  return gkcu_reduce_async(ctx, r->algo, r->op, r->x, r->n, r->d_out);
}

static int reduce_validate(reduce_arg *r, double want, double abs_sum) {
  double poison = NAN, got = NAN;
  CUDA_OK(cudaMemcpy(r->d_out, &poison, sizeof poison, cudaMemcpyHostToDevice));
  if (reduce_run(r) != 0) return 0;
  CUDA_OK(cudaStreamSynchronize(st));
  CUDA_OK(cudaMemcpy(&got, r->d_out, sizeof got, cudaMemcpyDeviceToHost));
  int ok = r->op == GKCU_SUM ? fabs(got - want) <= 2e-5 * abs_sum : got == want;
  if (!ok) {
    printf("VALIDATION FAILED: reduce n=%lld op %d algo %d: got %.17g want %.17g\n", r->n, r->op, r->algo, got, want);
    validation_failures++;
  }
  return ok;
}

static void bench_reduce(int lab) {
  header(lab ? "reduce lab: shfl variants (loads in flight, cache hint, blocks per SM)"
             : "reduce over float32 (result double)");
  static const int logs[] = {20, 21, 22, 23, 24, 25, 26, 27, 28};
  const char *opn[] = {"sum", "min", "max"};
  for (size_t li = 0; li < sizeof logs / sizeof logs[0]; li++) {
    long long n = 1LL << logs[li];
    float *x;
    double *d_out;
    CUDA_OK(cudaMalloc((void **)&x, (size_t)n * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&d_out, sizeof(double)));
    if (gkcu_fill_uniform(ctx, x, (size_t)n, 0xfeed + li, -1.0f, 1.0f) != 0) exit(2);
    float *h = malloc((size_t)n * sizeof *h);
    CUDA_OK(cudaStreamSynchronize(st));
    CUDA_OK(cudaMemcpy(h, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    double sum = 0.0, abs_sum = 0.0;
    float mn = NAN, mx = NAN;
    for (long long i = 0; i < n; i++) {
      sum += h[i];
      abs_sum += fabs((double)h[i]);
      mn = fminf(mn, h[i]);
      mx = fmaxf(mx, h[i]);
    }
    free(h);
    double want[3] = {sum, mn, mx};
    for (int op = 0; op < 3; op++) {
      char cas[64];
      snprintf(cas, sizeof cas, "%s 2^%d floats", opn[op], logs[li]);
      reduce_arg r = {GKCU_REDUCE_CUB, 0, op, x, n, d_out};
      timing vt = {0, 0, 0};
      if (reduce_validate(&r, want[op], abs_sum)) vt = time_it(reduce_run, &r, reps * 2);
      report("reduce", cas, "cub", vt, (double)n * 4, "GB/s", 0, "vendor");
      double vendor = vt.ok ? vt.median_ms : 0;
      if (!lab) {
        static const int algos[] = {GKCU_REDUCE_SMEM, GKCU_REDUCE_SHFL, GKCU_REDUCE_AUTO};
        for (size_t i = 0; i < 3; i++) {
          r.algo = algos[i];
          timing t = {0, 0, 0};
          if (reduce_validate(&r, want[op], abs_sum)) t = time_it(reduce_run, &r, reps * 2);
          char note[32];
          snprintf(note, sizeof note, "-> %s", gkcu_reduce_algo_name(gkcu_reduce_pick(ctx, n)));
          report("reduce", cas, gkcu_reduce_algo_name(algos[i]), t, (double)n * 4, "GB/s", vendor,
                 algos[i] == GKCU_REDUCE_AUTO ? note : NULL);
        }
      } else {
        for (int var = 0; var < GKCU_LAB_REDUCE_VARIANTS; var++) {
          r.algo = -1;
          r.bps = var;
          timing t = {0, 0, 0};
          if (reduce_validate(&r, want[op], abs_sum)) t = time_it(reduce_run, &r, reps * 2);
          report("reduce", cas, gkcu_lab_reduce_shfl_name(var), t, (double)n * 4, "GB/s", vendor, "lab");
        }
      }
    }
    cudaFree(x);
    cudaFree(d_out);
  }
}

/* --- spmv ---------------------------------------------------------------------------------- */

typedef struct {
  int algo, width; /* algo -1: lab vector of `width`; -2: lab balanced shape `width`; -3: planned;
                      -4: lab balanced shape `width` from lplan */
  const gpu_csr *h;
  int *rp, *ci;
  float *v, *x, *y;
  void *plan;  /* gkcu_spmv_plan's, made once per matrix (as csr_upload does) */
  void *lplan; /* gkcu_lab_spmv_balanced_plan's for shape `width` */
} spmv_arg;

static int spmv_run(void *p) {
  spmv_arg *s = p;
  const gpu_csr *m = s->h;
  if (s->algo == -4)
    return gkcu_lab_spmv_balanced_planned(ctx, s->width, m->rows, m->cols, m->nnz, s->rp, s->ci, s->v, 1.0f, s->x,
                                          0.0f, s->y, s->lplan);
  if (s->algo == -3)
    return gkcu_spmv_planned(ctx, GKCU_SPMV_BALANCED, m->rows, m->cols, m->nnz, s->rp, s->ci, s->v, 1.0f, s->x, 0.0f,
                             s->y, s->plan);
  if (s->algo == -2)
    return gkcu_lab_spmv_balanced(ctx, s->width, m->rows, m->cols, m->nnz, s->rp, s->ci, s->v, 1.0f, s->x, 0.0f,
                                  s->y);
  if (s->algo < 0)
    return gkcu_lab_spmv_vector(ctx, s->width, m->rows, m->cols, m->nnz, s->rp, s->ci, s->v, 1.0f, s->x, 0.0f, s->y);
  return gkcu_spmv(ctx, s->algo, m->rows, m->cols, m->nnz, s->rp, s->ci, s->v, 1.0f, s->x, 0.0f, s->y);
}

static int spmv_validate(spmv_arg *s, const double *ref, const double *mag, float *out, const char *cas) {
  const gpu_csr *m = s->h;
  CUDA_OK(cudaMemsetAsync(s->y, 0xff, (size_t)m->rows * sizeof(float), st));
  if (spmv_run(s) != 0) return 0;
  CUDA_OK(cudaStreamSynchronize(st));
  CUDA_OK(cudaMemcpy(out, s->y, (size_t)m->rows * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int r = 0; r < m->rows; r++) {
    double e = fabs((double)out[r] - ref[r]) / (mag[r] + 1e-30);
    if (!(e <= 1e-4)) bad++;
  }
  if (bad) {
    printf("VALIDATION FAILED: spmv %s algo %d width %d: %d bad rows\n", cas, s->algo, s->width, bad);
    validation_failures++;
  }
  return !bad;
}

static void bench_spmv_matrix(const gpu_csr *m, const char *name, int lab) {
  spmv_arg s = {0, 0, m, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  size_t nnz = (size_t)m->nnz;
  CUDA_OK(cudaMalloc((void **)&s.rp, ((size_t)m->rows + 1) * sizeof(int)));
  CUDA_OK(cudaMalloc((void **)&s.ci, (nnz ? nnz : 1) * sizeof(int)));
  CUDA_OK(cudaMalloc((void **)&s.v, (nnz ? nnz : 1) * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&s.x, (size_t)m->cols * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&s.y, (size_t)m->rows * sizeof(float)));
  size_t plan_bytes = gkcu_spmv_plan_bytes(ctx, m->rows, m->nnz);
  CUDA_OK(cudaMalloc(&s.plan, plan_bytes ? plan_bytes : 16));
  CUDA_OK(cudaMalloc(&s.lplan, (((size_t)m->rows + nnz) / 512 + 2) * 16));
  CUDA_OK(cudaMemcpy(s.rp, m->row_ptr, ((size_t)m->rows + 1) * sizeof(int), cudaMemcpyHostToDevice));
  if (nnz) {
    CUDA_OK(cudaMemcpy(s.ci, m->col_idx, nnz * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(s.v, m->values, nnz * sizeof(float), cudaMemcpyHostToDevice));
  }
  float *hx = malloc((size_t)m->cols * sizeof *hx), *out = malloc((size_t)m->rows * sizeof *out);
  double *ref = malloc((size_t)m->rows * sizeof *ref), *mag = malloc((size_t)m->rows * sizeof *mag);
  gpu_rng g = {0x5b3c ^ (uint64_t)nnz};
  for (int i = 0; i < m->cols; i++) hx[i] = gpu_rng_float(&g, -1.0f, 1.0f);
  CUDA_OK(cudaMemcpy(s.x, hx, (size_t)m->cols * sizeof(float), cudaMemcpyHostToDevice));
  gpu_spmv_ref(m, 1.0, hx, 0.0, NULL, ref, mag);
  if (gkcu_spmv_plan(ctx, m->rows, m->nnz, s.rp, s.plan) != 0) {
    printf("VALIDATION FAILED: gkcu_spmv_plan: %s\n", gkcu_ctx_errmsg(ctx));
    validation_failures++;
  }

  int maxlen = 0;
  for (int r = 0; r < m->rows; r++) {
    int l = m->row_ptr[r + 1] - m->row_ptr[r];
    if (l > maxlen) maxlen = l;
  }
  char cas[96];
  snprintf(cas, sizeof cas, "%s", name);
  printf("# %s: %d x %d, %zu nnz, mean row %.2f, max row %d\n", name, m->rows, m->cols, nnz,
         (double)nnz / m->rows, maxlen);
  /* minimum traffic: values + col_idx + row_ptr + x once + y written */
  double bytes = nnz * 8.0 + ((double)m->rows + 1) * 4 + (double)m->cols * 4 + (double)m->rows * 4;

  s.algo = GKCU_SPMV_CUSPARSE;
  timing vt = {0, 0, 0};
  if (spmv_validate(&s, ref, mag, out, cas)) vt = time_it(spmv_run, &s, reps);
  report("spmv", cas, "cusparse", vt, bytes, "GB/s", 0, "vendor");
  double vendor = vt.ok ? vt.median_ms : 0;
  if (!lab) {
    static const int algos[] = {GKCU_SPMV_SCALAR, GKCU_SPMV_VECTOR, GKCU_SPMV_BALANCED, GKCU_SPMV_AUTO};
    for (size_t i = 0; i < 4; i++) {
      s.algo = algos[i];
      timing t = {0, 0, 0};
      if (spmv_validate(&s, ref, mag, out, cas)) t = time_it(spmv_run, &s, reps);
      char note[48] = "";
      if (algos[i] == GKCU_SPMV_VECTOR)
        snprintf(note, sizeof note, "width %d", gkcu_lab_spmv_vector_width(ctx, m->rows, m->nnz));
      if (algos[i] == GKCU_SPMV_AUTO)
        snprintf(note, sizeof note, "-> %s", gkcu_spmv_algo_name(gkcu_spmv_pick(ctx, m->rows, m->cols, m->nnz)));
      report("spmv", cas, gkcu_spmv_algo_name(algos[i]), t, bytes, "GB/s", vendor, note);
    }
    {
      /* balanced on a resident matrix: the partition made once at upload */
      s.algo = -3;
      timing t = {0, 0, 0};
      if (spmv_validate(&s, ref, mag, out, cas)) t = time_it(spmv_run, &s, reps);
      report("spmv", cas, "balanced+plan", t, bytes, "GB/s", vendor, "plan from gkcu_spmv_plan");
    }
    /* what auto becomes when the caller passes the longest row */
    s.algo = gkcu_spmv_pick_hint(ctx, m->rows, m->cols, m->nnz, maxlen);
    timing t = {0, 0, 0};
    if (spmv_validate(&s, ref, mag, out, cas)) t = time_it(spmv_run, &s, reps);
    char note[48];
    snprintf(note, sizeof note, "-> %s", gkcu_spmv_algo_name(s.algo));
    report("spmv", cas, "auto+maxrow", t, bytes, "GB/s", vendor, note);
  } else {
    for (int w = 2; w <= 32; w *= 2) {
      s.algo = -1;
      s.width = w;
      timing t = {0, 0, 0};
      if (spmv_validate(&s, ref, mag, out, cas)) t = time_it(spmv_run, &s, reps);
      char name2[48];
      snprintf(name2, sizeof name2, "vector/w%d", w);
      report("spmv", cas, name2, t, bytes, "GB/s", vendor, "lab");
    }
    for (int sh = 0; sh < GKCU_LAB_BALANCED_SHAPES; sh++) {
      s.algo = -2;
      s.width = sh;
      timing t = {0, 0, 0};
      if (spmv_validate(&s, ref, mag, out, cas)) t = time_it(spmv_run, &s, reps);
      char name2[48];
      snprintf(name2, sizeof name2, "bal/%s", gkcu_lab_spmv_balanced_name(sh));
      report("spmv", cas, name2, t, bytes, "GB/s", vendor, "lab");
      /* the same from a plan made once (the resident-matrix path) */
      if (gkcu_lab_spmv_balanced_plan(ctx, sh, m->rows, m->nnz, s.rp, s.lplan) != 0) {
        printf("VALIDATION FAILED: lab plan: %s\n", gkcu_ctx_errmsg(ctx));
        validation_failures++;
        continue;
      }
      s.algo = -4;
      t = (timing){0, 0, 0};
      if (spmv_validate(&s, ref, mag, out, cas)) t = time_it(spmv_run, &s, reps);
      snprintf(name2, sizeof name2, "plan/%s", gkcu_lab_spmv_balanced_name(sh));
      report("spmv", cas, name2, t, bytes, "GB/s", vendor, "lab");
    }
  }
  cudaFree(s.rp);
  cudaFree(s.ci);
  cudaFree(s.v);
  cudaFree(s.x);
  cudaFree(s.y);
  cudaFree(s.plan);
  cudaFree(s.lplan);
  free(hx);
  free(out);
  free(ref);
  free(mag);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void bench_spmv(const char *dir, const char *synth, int lab) {
  header(lab ? "spmv lab: vector group widths, balanced shapes" : "spmv CSR, y = A*x (alpha=1, beta=0)");
  if (dir) {
    DIR *d = opendir(dir);
    if (!d) {
      printf("# %s: cannot open, shared matrices skipped\n", dir);
    } else {
      char *names[256];
      int n = 0;
      struct dirent *e;
      while ((e = readdir(d)) != NULL && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".mtx") == 0) names[n++] = strdup(e->d_name);
      }
      closedir(d);
      qsort(names, (size_t)n, sizeof names[0], cmp_str);
      for (int i = 0; i < n; i++) {
        char path[4096], err[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        gpu_csr m;
        if (gpu_mtx_read(path, &m, err, sizeof err) != 0) {
          printf("# %s\n", err);
          validation_failures++;
        } else {
          bench_spmv_matrix(&m, names[i], lab);
          gpu_csr_free(&m);
        }
        free(names[i]);
      }
    }
  }
  if (!synth) return;
  gpu_csr m;
  double t0;
  if (has_op(synth, "stencil2d")) {
    t0 = bench_now_s();
    if (gpu_csr_stencil2d(&m, 2048) != 0) exit(2);
    printf("# generated in %.1f s\n", bench_now_s() - t0);
    bench_spmv_matrix(&m, "stencil2d-5pt-2048^2", lab);
    gpu_csr_free(&m);
  }
  if (has_op(synth, "stencil3d")) {
    t0 = bench_now_s();
    if (gpu_csr_stencil3d(&m, 128, 27) != 0) exit(2);
    printf("# generated in %.1f s\n", bench_now_s() - t0);
    bench_spmv_matrix(&m, "stencil3d-27pt-128^3", lab);
    gpu_csr_free(&m);
  }
  if (has_op(synth, "powerlaw")) {
    t0 = bench_now_s();
    if (gpu_csr_powerlaw(&m, 42000000, 100000, 42) != 0) exit(2);
    printf("# generated in %.1f s\n", bench_now_s() - t0);
    bench_spmv_matrix(&m, "powerlaw-rmat-42M", lab);
    gpu_csr_free(&m);
  }
}

/* --- main ---------------------------------------------------------------------------------------- */

static int has_op(const char *ops, const char *op) {
  const char *p = ops;
  size_t l = strlen(op);
  while ((p = strstr(p, op)) != NULL) {
    if ((p == ops || p[-1] == ',') && (p[l] == ',' || p[l] == '\0')) return 1;
    p += l;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *ops = "sgemm,reduce,spmv", *dir = NULL, *json_path = NULL, *csv_path = NULL;
  int sizes[16] = {256, 512, 1024, 2048, 4096, 8192}, nsizes = 6, lab = 0;
  const char *synth = "stencil2d,stencil3d,powerlaw";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--matrices") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    else if (!strcmp(argv[i], "--no-synth")) synth = NULL;
    else if (!strcmp(argv[i], "--synth") && i + 1 < argc) synth = argv[++i];
    else if (!strcmp(argv[i], "--validate-only")) validate_only = 1;
    else if (!strcmp(argv[i], "--lab")) lab = 1;
    else if (!strcmp(argv[i], "--sgemm-sizes") && i + 1 < argc) {
      nsizes = 0;
      for (char *t = strtok(argv[++i], ","); t && nsizes < 16; t = strtok(NULL, ",")) sizes[nsizes++] = atoi(t);
    } else {
      fprintf(stderr,
              "usage: %s [--ops sgemm,reduce,spmv] [--reps N] [--matrices DIR] [--sgemm-sizes a,b,..] "
              "[--no-synth] [--synth stencil2d,stencil3d,powerlaw] [--lab] [--validate-only] [--json FILE] [--csv FILE]\n",
              argv[0]);
      return 2;
    }
  }
  if (reps < 20) reps = 20;
  gpu_require_device();

  struct cudaDeviceProp prop;
  int dev = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  printf("device: %s, %d SMs, %.0f MB L2, %.1f GiB, cc %d.%d; runtime %d, driver %d\n", prop.name,
         prop.multiProcessorCount, prop.l2CacheSize / 1e6, prop.totalGlobalMem / 1073741824.0, prop.major,
         prop.minor, rt, drv);

  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  if (gkcu_ctx_create(&ctx, st) != 0) {
    fprintf(stderr, "gkcu_ctx_create failed\n");
    return 2;
  }
  flush_bytes = 2 * gkcu_ctx_l2_bytes(ctx);
  if (flush_bytes < ((size_t)64 << 20)) flush_bytes = (size_t)64 << 20;
  CUDA_OK(cudaMalloc(&flush_buf, flush_bytes));
  printf("timing: median of %d runs (2 warm-up), CUDA events, %.0f MB written before each run\n", reps,
         flush_bytes / 1e6);
  if (json_path) {
    json = fopen(json_path, "w");
    if (json) fprintf(json, "{\"device\": \"%s\", \"results\": [", prop.name);
  }

  snprintf(csv_device, sizeof csv_device, "%s", prop.name);
  if (csv_path &&
      bench_csv_open(&csv, csv_path, "op,case,algo,median_ms,min_ms,rate,unit,vs_vendor,note,device") != 0)
    return 2;

  double t0 = bench_now_s();
  if (has_op(ops, "sgemm")) bench_sgemm(sizes, nsizes, lab);
  if (has_op(ops, "reduce")) bench_reduce(lab);
  if (has_op(ops, "spmv")) bench_spmv(dir, synth, lab);

  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  if (bench_csv_close(&csv) != 0) return 2;
  printf("\nbench_gpu: %.0f s, %d validation failures\n", bench_now_s() - t0, validation_failures);
  cudaFree(flush_buf);
  gkcu_ctx_destroy(ctx);
  return validation_failures ? 1 : 0;
}
