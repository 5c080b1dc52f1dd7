#define _POSIX_C_SOURCE 200809L
/* test_gpu_spmv: every spmv algo (and every vector width) against a
 * double-precision CPU reference on matrices chosen to break them: random
 * rows with empty ones, an all-empty matrix, one row holding most of the
 * nonzeros, a single huge row, many empty rows around a few long ones,
 * rectangular shapes, stencils, a power-law matrix, and every *.mtx in the
 * shared matrix folder when it exists ($GKC_GPU_MATRICES, else
 * $GKC_SHARED_MATRICES).  y is poisoned with NaN when beta = 0 and holds
 * random input otherwise; every element is checked, scaled by the sum of
 * |terms| of its row.  Some matrices also run with every device array 4 or
 * 12 bytes off 16-byte alignment, and some are past 4M path items (the
 * balanced algo's v8 shapes, regular and skewed).  Every balanced shape also runs from
 * its own plan.  GKC_GPU_TEST_SHORT=1: no large matrices (memcheck);
 * GKC_GPU_TEST_TINY=1: four small ones (racecheck).  Keeps going after a
 * failure. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_lab.h"
#include "gkcu_spmv.h"
#include "gpu_util.h"
#include "gpu_test.h"
#include "test.h"

static int failures, runs;

typedef struct {
  char name[48];
  int algo; /* -1: lab vector with width; -2: lab balanced, width = shape */
  int width;
} variant;

static int variants(variant *vs) {
  int n = 0;
  int no_vendor = getenv("GKC_GPU_TEST_NO_VENDOR") != NULL; /* racecheck: cuSPARSE trips it */
  for (int a = GKCU_SPMV_AUTO; a < GKCU_SPMV_NALGO; a++) {
    if (no_vendor && a == GKCU_SPMV_CUSPARSE) continue;
    snprintf(vs[n].name, sizeof vs[n].name, "%s", gkcu_spmv_algo_name(a));
    vs[n].algo = a;
    vs[n++].width = 0;
  }
  for (int w = 2; w <= 32; w *= 2) {
    snprintf(vs[n].name, sizeof vs[n].name, "vector/w%d", w);
    vs[n].algo = -1;
    vs[n++].width = w;
  }
  /* every balanced shape, v7's and v8's among them: on the stencils most
   * tiles are row-regular (summed by rows) and some at the boundary planes
   * may not be (walked in the same launch by v7's mixed shape, listed for
   * v8's second launch), so both paths run in one call; the random, skewed
   * and mostly-empty matrices give tiles of many short pieces or one long
   * one (walked, or looped over by the rows-only shape) */
  for (int sh = 0; sh < GKCU_LAB_BALANCED_SHAPES; sh++) {
    snprintf(vs[n].name, sizeof vs[n].name, "bal/%s", gkcu_lab_spmv_balanced_name(sh));
    vs[n].algo = -2;
    vs[n++].width = sh;
  }
  return n;
}

/* off: elements (4 bytes each) by which every device array is shifted from
 * cudaMalloc's alignment. */
static void check_matrix_at(gkcu_ctx *ctx, gpu_rng *g, const gpu_csr *m, const char *what, int off) {
  int rows = m->rows, cols = m->cols;
  long long nnz = m->nnz;
  float *x = malloc((size_t)cols * sizeof *x), *y0 = malloc((size_t)rows * sizeof *y0);
  float *out = malloc((size_t)rows * sizeof *out);
  double *ref = malloc((size_t)rows * sizeof *ref), *mag = malloc((size_t)rows * sizeof *mag);
  if (!x || !y0 || !out || !ref || !mag) TEST_FAIL("out of memory");
  for (int i = 0; i < cols; i++) x[i] = gpu_rng_float(g, -1.0f, 1.0f);
  for (int i = 0; i < rows; i++) y0[i] = gpu_rng_float(g, -1.0f, 1.0f);

  int *brp, *bci = NULL, *drp, *dci = NULL;
  float *bv = NULL, *bx, *by, *dv = NULL, *dx, *dy;
  CUDA_OK(cudaMalloc((void **)&brp, ((size_t)rows + 1 + off) * sizeof(int)));
  drp = brp + off;
  CUDA_OK(cudaMemcpy(drp, m->row_ptr, ((size_t)rows + 1) * sizeof(int), cudaMemcpyHostToDevice));
  if (nnz > 0) {
    CUDA_OK(cudaMalloc((void **)&bci, ((size_t)nnz + off) * sizeof(int)));
    CUDA_OK(cudaMalloc((void **)&bv, ((size_t)nnz + off) * sizeof(float)));
    dci = bci + off;
    dv = bv + off;
    CUDA_OK(cudaMemcpy(dci, m->col_idx, (size_t)nnz * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dv, m->values, (size_t)nnz * sizeof(float), cudaMemcpyHostToDevice));
  }
  CUDA_OK(cudaMalloc((void **)&bx, ((size_t)cols + off) * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&by, ((size_t)rows + off) * sizeof(float)));
  dx = bx + off;
  dy = by + off;
  CUDA_OK(cudaMemcpy(dx, x, (size_t)cols * sizeof(float), cudaMemcpyHostToDevice));

  static const float ab[][2] = {{1.0f, 0.0f}, {-0.75f, 1.5f}, {2.0f, 0.0f}};
  variant vs[48];
  int nv = variants(vs);
  /* cuSPARSE rejects nnz > rows*cols (possible here: duplicates are kept) */
  int dup_heavy = nnz > (long long)rows * cols;
  for (int p = 0; p < 3; p++) {
    float alpha = ab[p][0], beta = ab[p][1];
    gpu_spmv_ref(m, alpha, x, beta, y0, ref, mag);
    for (int v = 0; v < nv; v++) {
      if (beta != 0.0f) CUDA_OK(cudaMemcpy(dy, y0, (size_t)rows * sizeof(float), cudaMemcpyHostToDevice));
      else CUDA_OK(cudaMemset(dy, 0xff, (size_t)rows * sizeof(float))); /* NaN */
      int rc = vs[v].algo >= 0 ? gkcu_spmv(ctx, vs[v].algo, rows, cols, nnz, drp, dci, dv, alpha, dx, beta, dy)
               : vs[v].algo == -2
                   ? gkcu_lab_spmv_balanced(ctx, vs[v].width, rows, cols, nnz, drp, dci, dv, alpha, dx, beta, dy)
                   : gkcu_lab_spmv_vector(ctx, vs[v].width, rows, cols, nnz, drp, dci, dv, alpha, dx, beta, dy);
      runs++;
      if (dup_heavy && vs[v].algo == GKCU_SPMV_CUSPARSE) {
        if (rc != GKC_EINVALID_ARGUMENT) {
          failures++;
          printf("FAIL cusparse %s: nnz > rows*cols gave rc %d, want invalid_argument\n", what, rc);
        }
        continue;
      }
      if (rc != 0) {
        failures++;
        printf("FAIL %-12s %s (offset %d): rc %d (%s)\n", vs[v].name, what, off * 4, rc, gkcu_ctx_errmsg(ctx));
        continue;
      }
      CUDA_OK(cudaMemcpy(out, dy, (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost));
      double worst = 0.0;
      int worst_at = 0, nbad = 0;
      for (int r = 0; r < rows; r++) {
        double e = fabs((double)out[r] - ref[r]) / (mag[r] + 1e-30);
        if (!(e <= 1e300)) e = INFINITY;
        if (e > 1e-4) nbad++;
        if (e > worst) {
          worst = e;
          worst_at = r;
        }
      }
      if (nbad) {
        failures++;
        printf("FAIL %-12s %s (offset %d) alpha=%g beta=%g: %d bad rows, worst row %d (len %d) got %.9g want %.9g "
               "(scaled err %.3g)\n",
               vs[v].name, what, off * 4, alpha, beta, nbad, worst_at,
               m->row_ptr[worst_at + 1] - m->row_ptr[worst_at], out[worst_at], ref[worst_at], worst);
      }
    }
  }
  cudaFree(brp);
  cudaFree(bci);
  cudaFree(bv);
  cudaFree(bx);
  cudaFree(by);
  free(x);
  free(y0);
  free(out);
  free(ref);
  free(mag);
}

static void check_matrix(gkcu_ctx *ctx, gpu_rng *g, const gpu_csr *m, const char *what) {
  check_matrix_at(ctx, g, m, what, 0);
}

/* gkcu_spmv_planned with a plan from gkcu_spmv_plan against gkcu_spmv, for
 * balanced (and auto, which runs balanced; scalar must ignore the plan).
 * Bitwise identical where the sums are deterministic: below 4M path items
 * every row (the one-pass shape has no atomics: a split row's parts are
 * added in tile order by one block, with or without a plan); above, beta =
 * 0 and rows shorter than a tile (a row over at most two tiles is 0 + a +
 * b either way), while rows split over three or more tiles, or beta != 0
 * on a split row, are summed with atomics in either order, so those are
 * checked against the reference like every other run. */
static void check_planned(gkcu_ctx *ctx, gpu_rng *g, const gpu_csr *m, const char *what) {
  int rows = m->rows, cols = m->cols;
  long long nnz = m->nnz;
  size_t pb = gkcu_spmv_plan_bytes(ctx, rows, nnz);
  if (pb == 0) {
    failures++;
    printf("FAIL planned %s: plan_bytes 0\n", what);
    return;
  }
  float *x = malloc((size_t)cols * sizeof *x), *y0 = malloc((size_t)rows * sizeof *y0);
  float *a = malloc((size_t)rows * sizeof *a), *b = malloc((size_t)rows * sizeof *b);
  double *ref = malloc((size_t)rows * sizeof *ref), *mag = malloc((size_t)rows * sizeof *mag);
  if (!x || !y0 || !a || !b || !ref || !mag) TEST_FAIL("out of memory");
  for (int i = 0; i < cols; i++) x[i] = gpu_rng_float(g, -1.0f, 1.0f);
  for (int i = 0; i < rows; i++) y0[i] = gpu_rng_float(g, -1.0f, 1.0f);
  int *drp, *dci = NULL;
  float *dv = NULL, *dx, *dy;
  void *plan;
  CUDA_OK(cudaMalloc((void **)&drp, ((size_t)rows + 1) * sizeof(int)));
  CUDA_OK(cudaMemcpy(drp, m->row_ptr, ((size_t)rows + 1) * sizeof(int), cudaMemcpyHostToDevice));
  if (nnz > 0) {
    CUDA_OK(cudaMalloc((void **)&dci, (size_t)nnz * sizeof(int)));
    CUDA_OK(cudaMalloc((void **)&dv, (size_t)nnz * sizeof(float)));
    CUDA_OK(cudaMemcpy(dci, m->col_idx, (size_t)nnz * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dv, m->values, (size_t)nnz * sizeof(float), cudaMemcpyHostToDevice));
  }
  CUDA_OK(cudaMalloc((void **)&dx, (size_t)cols * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&dy, (size_t)rows * sizeof(float)));
  CUDA_OK(cudaMalloc(&plan, pb));
  CUDA_OK(cudaMemset(plan, 0xff, pb)); /* garbage the plan must overwrite */
  CUDA_OK(cudaMemcpy(dx, x, (size_t)cols * sizeof(float), cudaMemcpyHostToDevice));
  int rc = gkcu_spmv_plan(ctx, rows, nnz, drp, plan);
  if (rc != 0) {
    failures++;
    printf("FAIL planned %s: gkcu_spmv_plan rc %d (%s)\n", what, rc, gkcu_ctx_errmsg(ctx));
    goto done;
  }
  static const float ab[][2] = {{1.0f, 0.0f}, {-0.75f, 1.5f}, {2.0f, 0.0f}};
  static const int algos[] = {GKCU_SPMV_BALANCED, GKCU_SPMV_AUTO, GKCU_SPMV_SCALAR};
  for (int p = 0; p < 3; p++) {
    float alpha = ab[p][0], beta = ab[p][1];
    gpu_spmv_ref(m, alpha, x, beta, y0, ref, mag);
    for (int ai = 0; ai < 3; ai++) {
      for (int k = 0; k < 2; k++) { /* twice with the same plan: it is only read */
        for (int planned = 0; planned < 2; planned++) {
          if (beta != 0.0f) CUDA_OK(cudaMemcpy(dy, y0, (size_t)rows * sizeof(float), cudaMemcpyHostToDevice));
          else CUDA_OK(cudaMemset(dy, 0xff, (size_t)rows * sizeof(float))); /* NaN */
          rc = planned ? gkcu_spmv_planned(ctx, algos[ai], rows, cols, nnz, drp, dci, dv, alpha, dx, beta, dy, plan)
                       : gkcu_spmv(ctx, algos[ai], rows, cols, nnz, drp, dci, dv, alpha, dx, beta, dy);
          runs++;
          if (rc != 0) {
            failures++;
            printf("FAIL planned=%d %s %s: rc %d (%s)\n", planned, gkcu_spmv_algo_name(algos[ai]), what, rc,
                   gkcu_ctx_errmsg(ctx));
            goto done;
          }
          CUDA_OK(cudaMemcpy(planned ? b : a, dy, (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost));
        }
        int nbad = 0, ndiff = 0, first = -1;
        for (int r = 0; r < rows; r++) {
          double e = fabs((double)b[r] - ref[r]) / (mag[r] + 1e-30);
          if (!(e <= 1e-4)) nbad++;
          int exact = (beta == 0.0f && m->row_ptr[r + 1] - m->row_ptr[r] < 1000) || algos[ai] == GKCU_SPMV_SCALAR ||
                      (long long)rows + nnz < 4000000;
          if (exact && memcmp(&a[r], &b[r], sizeof(float)) != 0) {
            if (first < 0) first = r;
            ndiff++;
          }
        }
        if (nbad || ndiff) {
          failures++;
          printf("FAIL planned %-8s %s alpha=%g beta=%g: %d rows off the reference, %d rows not bitwise equal "
                 "to gkcu_spmv (first %d: %.9g vs %.9g)\n",
                 gkcu_spmv_algo_name(algos[ai]), what, alpha, beta, nbad, ndiff, first, first >= 0 ? b[first] : 0.0,
                 first >= 0 ? a[first] : 0.0);
        }
      }
    }
  }
  /* every lab shape from its own plan (beta != 0: the prescaled split rows) */
  {
    void *lplan;
    CUDA_OK(cudaMalloc(&lplan, (((size_t)rows + (size_t)nnz) / 512 + 2) * 16));
    const float alpha = -0.75f, beta = 1.5f;
    gpu_spmv_ref(m, alpha, x, beta, y0, ref, mag);
    for (int sh = 0; sh < GKCU_LAB_BALANCED_SHAPES; sh++) {
      CUDA_OK(cudaMemcpy(dy, y0, (size_t)rows * sizeof(float), cudaMemcpyHostToDevice));
      rc = gkcu_lab_spmv_balanced_plan(ctx, sh, rows, nnz, drp, lplan);
      if (rc == 0)
        rc = gkcu_lab_spmv_balanced_planned(ctx, sh, rows, cols, nnz, drp, dci, dv, alpha, dx, beta, dy, lplan);
      runs++;
      if (rc != 0) {
        failures++;
        printf("FAIL planned %s %s: rc %d (%s)\n", gkcu_lab_spmv_balanced_name(sh), what, rc, gkcu_ctx_errmsg(ctx));
        continue;
      }
      CUDA_OK(cudaMemcpy(b, dy, (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost));
      int nbad = 0;
      for (int r = 0; r < rows; r++)
        if (!(fabs((double)b[r] - ref[r]) / (mag[r] + 1e-30) <= 1e-4)) nbad++;
      if (nbad) {
        failures++;
        printf("FAIL planned %s %s: %d rows off the reference\n", gkcu_lab_spmv_balanced_name(sh), what, nbad);
      }
    }
    cudaFree(lplan);
  }
done:
  cudaFree(plan);
  cudaFree(drp);
  cudaFree(dci);
  cudaFree(dv);
  cudaFree(dx);
  cudaFree(dy);
  free(x);
  free(y0);
  free(a);
  free(b);
  free(ref);
  free(mag);
}

/* Rows with lengths from len(r), random columns (sorted, duplicates kept). */
static void build(gpu_csr *m, gpu_rng *g, int rows, int cols, int (*len)(gpu_rng *, int, int), int arg) {
  int *l = malloc((size_t)rows * sizeof *l);
  long long nnz = 0;
  for (int r = 0; r < rows; r++) nnz += (l[r] = len(g, r, arg));
  if (gpu_csr_alloc(m, rows, cols, nnz) != 0) TEST_FAIL("out of memory");
  long long k = 0;
  for (int r = 0; r < rows; r++) {
    for (int j = 0; j < l[r]; j++) {
      m->col_idx[k] = (int)gpu_rng_below(g, (uint32_t)cols);
      m->values[k++] = gpu_rng_float(g, -1.0f, 1.0f);
    }
    m->row_ptr[r + 1] = (int)k;
  }
  free(l);
  gpu_csr_sort(m);
}

static int len_random(gpu_rng *g, int r, int maxlen) { return gpu_rng_below(g, 4) == 0 ? 0 : (int)gpu_rng_below(g, (uint32_t)maxlen + 1); }
static int len_zero(gpu_rng *g, int r, int arg) { return 0; }
static int len_one_huge(gpu_rng *g, int r, int huge_row) { return r == huge_row ? 200000 : (int)gpu_rng_below(g, 4); }
static int len_sparse_long(gpu_rng *g, int r, int arg) {
  /* 95% empty rows, the rest 1..5000 long */
  return gpu_rng_below(g, 20) ? 0 : 1 + (int)gpu_rng_below(g, 5000);
}
static int len_const(gpu_rng *g, int r, int n) { return n; }
/* Regular and skewed stretches side by side (a kernel that treats tiles of
 * short, even rows differently from the rest must get both and the seams
 * between them, split rows included): rows of 5, then of 27, then random
 * lengths with a long row (300..3000) every 97th, then rows of 0..2, then 5
 * again. */
static int len_mixed(gpu_rng *g, int r, int rows) {
  int part = (int)((long long)r * 5 / rows);
  if (part == 0 || part == 4) return 5;
  if (part == 1) return 27;
  if (part == 2) return r % 97 == 0 ? 300 + (int)gpu_rng_below(g, 2701) : (int)gpu_rng_below(g, 12);
  return (int)gpu_rng_below(g, 3);
}

static void shared_matrices(gkcu_ctx *ctx, gpu_rng *g) {
  const char *dir = getenv("GKC_GPU_MATRICES");
  if (!dir || !*dir) dir = getenv("GKC_SHARED_MATRICES");
  if (!dir || !*dir) {
    printf("no matrix folder given: shared matrices skipped\n");
    return;
  }
  DIR *d = opendir(dir);
  if (!d) {
    printf("%s: not there: shared matrices skipped\n", dir);
    return;
  }
  struct dirent *e;
  int count = 0;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l < 5 || strcmp(e->d_name + l - 4, ".mtx") != 0) continue;
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    gpu_csr m;
    if (gpu_mtx_read(path, &m, err, sizeof err) != 0) {
      failures++;
      printf("FAIL reading %s: %s\n", path, err);
      continue;
    }
    printf("%s: %d x %d, %lld nonzeros\n", e->d_name, m.rows, m.cols, (long long)m.nnz);
    check_matrix(ctx, g, &m, e->d_name);
    gpu_csr_free(&m);
    count++;
  }
  closedir(d);
  printf("%d shared matrices checked\n", count);
}

static void argument_checks(gkcu_ctx *ctx) {
  int *ip;
  float *fp;
  CUDA_OK(cudaMalloc((void **)&ip, 64));
  CUDA_OK(cudaMalloc((void **)&fp, 64));
  ASSERT_EQ(gkcu_spmv(ctx, GKCU_SPMV_BALANCED, 0, 1, 0, ip, ip, fp, 1.0f, fp, 0.0f, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv(ctx, GKCU_SPMV_VECTOR, 1, 0, 0, ip, ip, fp, 1.0f, fp, 0.0f, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv(ctx, GKCU_SPMV_SCALAR, 1, 1, -1, ip, ip, fp, 1.0f, fp, 0.0f, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv(ctx, GKCU_SPMV_SCALAR, 1, 1, 3, ip, NULL, fp, 1.0f, fp, 0.0f, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv(ctx, GKCU_SPMV_CUSPARSE, 1, 1, 1, ip, ip, fp, 1.0f, NULL, 0.0f, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv(ctx, 17, 1, 1, 1, ip, ip, fp, 1.0f, fp, 0.0f, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_lab_spmv_vector(ctx, 3, 1, 1, 1, ip, ip, fp, 1.0f, fp, 0.0f, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_plan_bytes(ctx, 0, 0), 0);
  ASSERT_EQ(gkcu_spmv_plan_bytes(ctx, 1, -1), 0);
  ASSERT_EQ(gkcu_spmv_plan_bytes(ctx, 1, 0) >= 32, 1);
  ASSERT_EQ(gkcu_spmv_plan(ctx, 0, 0, ip, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_plan(ctx, 1, 0, NULL, fp), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_plan(ctx, 1, 0, ip, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_plan(ctx, 1, 0, ip, (char *)fp + 4), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_planned(ctx, GKCU_SPMV_BALANCED, 1, 1, 0, ip, ip, fp, 1.0f, fp, 0.0f, fp, (char *)fp + 4),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_planned(ctx, GKCU_SPMV_BALANCED, 0, 1, 0, ip, ip, fp, 1.0f, fp, 0.0f, fp, fp),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_algo_parse("balanced"), GKCU_SPMV_BALANCED);
  ASSERT_EQ(gkcu_spmv_algo_parse("merge"), -1);
  ASSERT_EQ(gkcu_spmv_pick(ctx, 1000, 1000, 5000), GKCU_SPMV_BALANCED);
  ASSERT_EQ(gkcu_spmv_pick_hint(ctx, 4000000, 4000000, 20000000, 5), GKCU_SPMV_SCALAR);
  ASSERT_EQ(gkcu_spmv_pick_hint(ctx, 2000000, 2000000, 54000000, 27), GKCU_SPMV_VECTOR);
  ASSERT_EQ(gkcu_spmv_pick_hint(ctx, 4000000, 4000000, 42000000, 100000), GKCU_SPMV_CUSPARSE);
  ASSERT_EQ(gkcu_spmv_pick_hint(ctx, 45101, 45101, 379952, 17663), GKCU_SPMV_BALANCED); /* vsp_model1 */
  ASSERT_EQ(gkcu_spmv_pick_hint(ctx, 67, 67, 294, 6), GKCU_SPMV_VECTOR);                 /* west0067 */
  ASSERT_EQ(gkcu_spmv_pick_hint(ctx, 114599, 114599, 239332, 6), GKCU_SPMV_VECTOR);      /* luxembourg_osm */
  cudaFree(ip);
  cudaFree(fp);
}

int main(void) {
  gpu_require_device();
  gpu_rng g = {gpu_seed("test_gpu_spmv")};
  gkcu_ctx *ctx;
  int rc = gkcu_ctx_create(&ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks(ctx);

  gpu_csr m;
  if (getenv("GKC_GPU_TEST_TINY")) {
    /* For racecheck, which instruments every shared-memory access and ran
     * past 110 s on the short list: short and long rows, split rows, rows
     * over several tiles, empty rows, a plan; a few thousand rows each. */
    build(&m, &g, 997, 1009, len_random, 40);
    check_matrix(ctx, &g, &m, "random 997x1009");
    gpu_csr_free(&m);
    build(&m, &g, 3001, 3001, len_mixed, 3001);
    check_matrix(ctx, &g, &m, "mixed 3001^2");
    gpu_csr_free(&m);
    if (gpu_csr_stencil3d(&m, 10, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
    check_planned(ctx, &g, &m, "stencil3d 10^3");
    gpu_csr_free(&m);
    gkcu_ctx_destroy(ctx);
    printf("test_gpu_spmv (tiny): %d runs, %d failures\n", runs, failures);
    return failures ? 1 : 0;
  }
  static const int small[][3] = {{1, 1, 1}, {1, 9, 5}, {7, 3, 4}, {13, 17, 9}, {100, 100, 20},
                                 {997, 1009, 40}, {4099, 257, 12}, {30011, 30011, 70}};
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
    char what[64];
    build(&m, &g, small[i][0], small[i][1], len_random, small[i][2]);
    snprintf(what, sizeof what, "random %dx%d", small[i][0], small[i][1]);
    check_matrix(ctx, &g, &m, what);
    gpu_csr_free(&m);
  }
  build(&m, &g, 1000, 50, len_zero, 0);
  check_matrix(ctx, &g, &m, "all-empty 1000x50");
  gpu_csr_free(&m);
  build(&m, &g, 1, 1, len_zero, 0);
  check_matrix(ctx, &g, &m, "all-empty 1x1");
  gpu_csr_free(&m);
  build(&m, &g, 5000, 70000, len_one_huge, 1234);
  check_matrix(ctx, &g, &m, "one row with most nonzeros");
  gpu_csr_free(&m);
  build(&m, &g, 3, 300000, len_one_huge, 2);
  check_matrix(ctx, &g, &m, "last of 3 rows huge");
  gpu_csr_free(&m);
  build(&m, &g, 1, 250000, len_const, 250000);
  check_matrix(ctx, &g, &m, "single row of 250000");
  gpu_csr_free(&m);
  build(&m, &g, 60000, 60000, len_sparse_long, 0);
  check_matrix(ctx, &g, &m, "95% empty rows, long others");
  gpu_csr_free(&m);
  build(&m, &g, 20000, 3, len_const, 3);
  check_matrix(ctx, &g, &m, "20000x3 dense rows");
  gpu_csr_free(&m);
  build(&m, &g, 50021, 50021, len_mixed, 50021);
  check_matrix(ctx, &g, &m, "mixed regular and skewed 50021^2");
  gpu_csr_free(&m);
  build(&m, &g, 70001, 70001, len_random, 2); /* ~700 rows per tile, many of them empty */
  check_matrix(ctx, &g, &m, "random 70001^2, rows 0..2");
  gpu_csr_free(&m);
  /* every device array off 16-byte alignment (4 and 12 bytes) */
  build(&m, &g, 4099, 4111, len_random, 37);
  check_matrix_at(ctx, &g, &m, "random 4099x4111", 1);
  check_matrix_at(ctx, &g, &m, "random 4099x4111", 3);
  gpu_csr_free(&m);
  build(&m, &g, 5000, 70000, len_one_huge, 4321);
  check_matrix_at(ctx, &g, &m, "one row with most nonzeros", 3);
  gpu_csr_free(&m);
  if (gpu_csr_stencil2d(&m, 300) != 0) TEST_FAIL("out of memory");
  check_matrix(ctx, &g, &m, "stencil2d 300^2");
  gpu_csr_free(&m);
  if (gpu_csr_stencil3d(&m, 24, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
  check_matrix(ctx, &g, &m, "stencil3d 24^3");
  gpu_csr_free(&m);
  /* Plans: random with empty rows, one huge row, all-empty, a stencil. */
  build(&m, &g, 30011, 30011, len_random, 70);
  check_planned(ctx, &g, &m, "random 30011^2");
  gpu_csr_free(&m);
  build(&m, &g, 997, 1009, len_random, 40);
  check_planned(ctx, &g, &m, "random 997x1009");
  gpu_csr_free(&m);
  build(&m, &g, 5000, 70000, len_one_huge, 1234);
  check_planned(ctx, &g, &m, "one row with most nonzeros");
  gpu_csr_free(&m);
  build(&m, &g, 60000, 60000, len_sparse_long, 0);
  check_planned(ctx, &g, &m, "95% empty rows, long others");
  gpu_csr_free(&m);
  build(&m, &g, 50021, 50021, len_mixed, 50021);
  check_planned(ctx, &g, &m, "mixed regular and skewed 50021^2");
  gpu_csr_free(&m);
  build(&m, &g, 1000, 50, len_zero, 0);
  check_planned(ctx, &g, &m, "all-empty 1000x50");
  gpu_csr_free(&m);
  if (gpu_csr_stencil2d(&m, 300) != 0) TEST_FAIL("out of memory");
  check_planned(ctx, &g, &m, "stencil2d 300^2");
  gpu_csr_free(&m);
  if (!getenv("GKC_GPU_TEST_SHORT")) { /* under racecheck too slow; every shape ran above */
    if (gpu_csr_stencil2d(&m, 1000) != 0) TEST_FAIL("out of memory"); /* 6M items: 256x8 tiles */
    check_planned(ctx, &g, &m, "stencil2d 1000^2");
    gpu_csr_free(&m);
  }

  if (!getenv("GKC_GPU_TEST_SHORT")) { /* short: for compute-sanitizer */
    /* a few million path items (thousands of tiles, split rows at most
     * boundaries); prime sizes, a quarter of the rows empty, arrays 4
     * bytes off alignment */
    build(&m, &g, 200003, 199999, len_random, 29);
    check_matrix_at(ctx, &g, &m, "random 200003x199999", 1);
    gpu_csr_free(&m);
    if (gpu_csr_stencil3d(&m, 61, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
    check_matrix(ctx, &g, &m, "stencil3d 61^3");
    gpu_csr_free(&m);
    if (gpu_csr_powerlaw(&m, 2000000, 100000, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
    check_matrix(ctx, &g, &m, "power-law 2M nnz");
    gpu_csr_free(&m);
    /* past 4M path items and skewed, with a short and a long mean row: the
     * balanced algo's v8 shapes with most tiles listed for the walk launch */
    if (gpu_csr_powerlaw(&m, 6000000, 1500000, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
    check_matrix(ctx, &g, &m, "power-law 6M nnz, mean 4");
    gpu_csr_free(&m);
    if (gpu_csr_powerlaw(&m, 6000000, 200000, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
    check_matrix(ctx, &g, &m, "power-law 6M nnz, mean 30");
    gpu_csr_free(&m);
    shared_matrices(ctx, &g);
  }

  gkcu_ctx_destroy(ctx);
  printf("test_gpu_spmv: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
