/* gpu_util.c: see gpu_util.h. */
#define _POSIX_C_SOURCE 200809L
#include "gpu_util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

void gpu_require_device(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    fprintf(stderr, "SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "count 0");
    exit(77);
  }
}

/* --- random numbers ------------------------------------------------------------ */

uint64_t gpu_seed(const char *who) {
  const char *env = getenv("GKC_TEST_SEED");
  uint64_t seed;
  if (env && *env) {
    seed = strtoull(env, NULL, 0);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
  }
  printf("%s: seed %llu (GKC_TEST_SEED=%llu reproduces this run)\n", who, (unsigned long long)seed,
         (unsigned long long)seed);
  fflush(stdout);
  return seed;
}

uint64_t gpu_rng_next(gpu_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double gpu_rng_unit(gpu_rng *r) { return (double)(gpu_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

float gpu_rng_float(gpu_rng *r, float lo, float hi) { return lo + (hi - lo) * (float)gpu_rng_unit(r); }

uint32_t gpu_rng_below(gpu_rng *r, uint32_t n) { return (uint32_t)(((gpu_rng_next(r) >> 32) * n) >> 32); }

/* --- CSR basics ------------------------------------------------------------------- */

void gpu_csr_free(gpu_csr *m) {
  free(m->row_ptr);
  free(m->col_idx);
  free(m->values);
  memset(m, 0, sizeof *m);
}

int gpu_csr_alloc(gpu_csr *m, int32_t rows, int32_t cols, int64_t nnz) {
  memset(m, 0, sizeof *m);
  m->rows = rows;
  m->cols = cols;
  m->nnz = nnz;
  m->row_ptr = calloc((size_t)rows + 1, sizeof(int32_t));
  if (nnz > 0) {
    m->col_idx = malloc((size_t)nnz * sizeof(int32_t));
    m->values = malloc((size_t)nnz * sizeof(float));
  }
  if (!m->row_ptr || (nnz > 0 && (!m->col_idx || !m->values))) {
    gpu_csr_free(m);
    return -1;
  }
  return 0;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Sorts the (col, value) pairs of each row by column. */
void gpu_csr_sort(gpu_csr *m) {
  for (int32_t r = 0; r < m->rows; r++) {
    int32_t b = m->row_ptr[r], e = m->row_ptr[r + 1];
    /* insertion sort: rows are short, and often nearly sorted */
    if (e - b <= 64) {
      for (int32_t i = b + 1; i < e; i++) {
        int32_t c = m->col_idx[i];
        float v = m->values[i];
        int32_t j = i - 1;
        while (j >= b && m->col_idx[j] > c) {
          m->col_idx[j + 1] = m->col_idx[j];
          m->values[j + 1] = m->values[j];
          j--;
        }
        m->col_idx[j + 1] = c;
        m->values[j + 1] = v;
      }
    } else {
      /* long rows: sort (col << 32 | index) keys, then permute */
      int64_t n = e - b;
      uint64_t *key = malloc((size_t)n * sizeof *key);
      float *tmp = malloc((size_t)n * sizeof *tmp);
      if (!key || !tmp) {
        free(key);
        free(tmp);
        qsort(m->col_idx + b, (size_t)n, sizeof(int32_t), cmp_i32); /* values lose order */
        continue;
      }
      for (int64_t i = 0; i < n; i++) key[i] = ((uint64_t)(uint32_t)m->col_idx[b + i] << 32) | (uint64_t)i;
      qsort(key, (size_t)n, sizeof *key, cmp_u64);
      for (int64_t i = 0; i < n; i++) tmp[i] = m->values[b + (key[i] & 0xffffffffu)];
      for (int64_t i = 0; i < n; i++) {
        m->col_idx[b + i] = (int32_t)(key[i] >> 32);
        m->values[b + i] = tmp[i];
      }
      free(key);
      free(tmp);
    }
  }
}

/* --- Matrix Market ----------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

int gpu_mtx_read(const char *path, gpu_csr *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (!f) return fail(err, errlen, "%s: %s", path, strerror(errno));
  char line[1024];
  int rc = -1;
  int32_t *ri = NULL, *ci = NULL;
  float *vv = NULL;
  long lineno = 1;
  if (!fgets(line, sizeof line, f)) {
    fail(err, errlen, "%s: empty file", path);
    goto done;
  }
  for (char *p = line; *p; p++) *p = (char)tolower((unsigned char)*p);
  char obj[32], fmt[32], field[32], sym[32];
  if (sscanf(line, "%%%%matrixmarket %31s %31s %31s %31s", obj, fmt, field, sym) != 4 ||
      strcmp(obj, "matrix") != 0 || strcmp(fmt, "coordinate") != 0) {
    fail(err, errlen, "%s:1: not a coordinate Matrix Market file", path);
    goto done;
  }
  int pattern = strcmp(field, "pattern") == 0;
  if (!pattern && strcmp(field, "real") != 0 && strcmp(field, "integer") != 0) {
    fail(err, errlen, "%s:1: field '%s' not supported", path, field);
    goto done;
  }
  int symmetric = strcmp(sym, "symmetric") == 0, skew = strcmp(sym, "skew-symmetric") == 0;
  if (!symmetric && !skew && strcmp(sym, "general") != 0) {
    fail(err, errlen, "%s:1: symmetry '%s' not supported", path, sym);
    goto done;
  }
  long long rows = 0, cols = 0, entries = 0;
  for (;;) {
    if (!fgets(line, sizeof line, f)) {
      fail(err, errlen, "%s: no size line", path);
      goto done;
    }
    lineno++;
    if (line[0] != '%' && strspn(line, " \t\r\n") != strlen(line)) break;
  }
  if (sscanf(line, "%lld %lld %lld", &rows, &cols, &entries) != 3 || rows < 1 || cols < 1 || entries < 0 ||
      rows > 0x7fffffffLL || cols > 0x7fffffffLL) {
    fail(err, errlen, "%s:%ld: bad size line", path, lineno);
    goto done;
  }
  long long cap = (symmetric || skew) ? 2 * entries : entries;
  ri = malloc((size_t)(cap ? cap : 1) * sizeof *ri);
  ci = malloc((size_t)(cap ? cap : 1) * sizeof *ci);
  vv = malloc((size_t)(cap ? cap : 1) * sizeof *vv);
  if (!ri || !ci || !vv) {
    fail(err, errlen, "%s: out of memory", path);
    goto done;
  }
  long long n = 0;
  for (long long e = 0; e < entries; e++) {
    do {
      if (!fgets(line, sizeof line, f)) {
        fail(err, errlen, "%s: %lld of %lld entries", path, e, entries);
        goto done;
      }
      lineno++;
    } while (line[0] == '%');
    char *p = line, *q;
    long long i = strtoll(p, &q, 10);
    if (q == p) goto bad;
    p = q;
    long long j = strtoll(p, &q, 10);
    if (q == p) goto bad;
    p = q;
    double v = 1.0;
    if (!pattern) {
      v = strtod(p, &q);
      if (q == p) goto bad;
    }
    if (i < 1 || i > rows || j < 1 || j > cols) goto bad;
    ri[n] = (int32_t)(i - 1);
    ci[n] = (int32_t)(j - 1);
    vv[n] = (float)v;
    n++;
    if ((symmetric || skew) && i != j) {
      ri[n] = (int32_t)(j - 1);
      ci[n] = (int32_t)(i - 1);
      vv[n] = skew ? -(float)v : (float)v;
      n++;
    }
    continue;
  bad:
    fail(err, errlen, "%s:%ld: bad entry", path, lineno);
    goto done;
  }
  if (gpu_csr_alloc(out, (int32_t)rows, (int32_t)cols, n) != 0) {
    fail(err, errlen, "%s: out of memory", path);
    goto done;
  }
  for (long long e = 0; e < n; e++) out->row_ptr[ri[e] + 1]++;
  for (int32_t r = 0; r < out->rows; r++) out->row_ptr[r + 1] += out->row_ptr[r];
  {
    int32_t *fill = malloc((size_t)out->rows * sizeof *fill);
    if (!fill) {
      gpu_csr_free(out);
      fail(err, errlen, "%s: out of memory", path);
      goto done;
    }
    memcpy(fill, out->row_ptr, (size_t)out->rows * sizeof *fill);
    for (long long e = 0; e < n; e++) {
      int32_t at = fill[ri[e]]++;
      out->col_idx[at] = ci[e];
      out->values[at] = vv[e];
    }
    free(fill);
  }
  gpu_csr_sort(out);
  rc = 0;
done:
  free(ri);
  free(ci);
  free(vv);
  fclose(f);
  return rc;
}

/* --- synthetic matrices ------------------------------------------------------------ */

int gpu_csr_stencil2d(gpu_csr *m, int32_t n) {
  int64_t rows = (int64_t)n * n;
  if (gpu_csr_alloc(m, (int32_t)rows, (int32_t)rows, 5 * rows - 4 * (int64_t)n) != 0) return -1;
  int64_t k = 0;
  for (int32_t i = 0; i < n; i++) {
    for (int32_t j = 0; j < n; j++) {
      int32_t r = i * n + j;
      /* columns in increasing order */
      if (i > 0) { m->col_idx[k] = r - n; m->values[k++] = -1.0f; }
      if (j > 0) { m->col_idx[k] = r - 1; m->values[k++] = -1.0f; }
      m->col_idx[k] = r; m->values[k++] = 4.0f;
      if (j < n - 1) { m->col_idx[k] = r + 1; m->values[k++] = -1.0f; }
      if (i < n - 1) { m->col_idx[k] = r + n; m->values[k++] = -1.0f; }
      m->row_ptr[r + 1] = (int32_t)k;
    }
  }
  m->nnz = k;
  return 0;
}

int gpu_csr_stencil3d(gpu_csr *m, int32_t n, uint64_t seed) {
  int64_t rows = (int64_t)n * n * n;
  int64_t inner = (int64_t)(3 * n - 2);  /* neighbours along one axis, summed over the axis */
  int64_t nnz = inner * inner * inner;   /* exact count of 27-point entries */
  if (gpu_csr_alloc(m, (int32_t)rows, (int32_t)rows, nnz) != 0) return -1;
  gpu_rng g = {seed};
  int64_t k = 0;
  for (int32_t z = 0; z < n; z++)
    for (int32_t y = 0; y < n; y++)
      for (int32_t x = 0; x < n; x++) {
        int64_t r = ((int64_t)z * n + y) * n + x;
        for (int dz = -1; dz <= 1; dz++)
          for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
              int32_t zz = z + dz, yy = y + dy, xx = x + dx;
              if (zz < 0 || zz >= n || yy < 0 || yy >= n || xx < 0 || xx >= n) continue;
              m->col_idx[k] = (int32_t)(((int64_t)zz * n + yy) * n + xx);
              m->values[k++] = gpu_rng_float(&g, -1.0f, 1.0f);
            }
        m->row_ptr[r + 1] = (int32_t)k;
      }
  m->nnz = k;
  return 0;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int gpu_csr_powerlaw(gpu_csr *m, int64_t target_nnz, int32_t max_row, uint64_t seed) {
  gpu_rng g = {seed};
  /* Row lengths: floor(u^(-1/1.05)), a Pareto tail with mean about 9.3 once
   * truncated at 100k, drawn until the target is met. */
  const double shape = 1.05;
  int64_t cap_rows = target_nnz / 2 + 16;
  int32_t *len = malloc((size_t)cap_rows * sizeof *len);
  if (!len) return -1;
  int64_t rows = 0, nnz = 0;
  while (nnz < target_nnz && rows < cap_rows) {
    double u = 1.0 - gpu_rng_unit(&g); /* (0, 1] */
    double l = floor(pow(u, -1.0 / shape));
    int32_t li = l > max_row ? max_row : (int32_t)l;
    if (li < 1) li = 1;
    len[rows++] = li;
    nnz += li;
  }
  if (rows == 0) {
    free(len);
    return -1;
  }
  /* exactly one row of max_row, somewhere in the middle */
  int64_t big = rows / 3;
  nnz += max_row - len[big];
  len[big] = max_row;
  if (gpu_csr_alloc(m, (int32_t)rows, (int32_t)rows, nnz) != 0) {
    free(len);
    return -1;
  }
  for (int64_t r = 0; r < rows; r++) m->row_ptr[r + 1] = m->row_ptr[r] + len[r];
  free(len);

  /* Columns: each of nbits bits is 1 with probability 0.3 (R-MAT's skew
   * towards a corner), rejected when >= cols, then scattered by a fixed
   * multiplicative permutation so hot columns are not all at the start. */
  int nbits = 0;
  while (((int64_t)1 << nbits) < rows) nbits++;
  uint64_t mul = 2654435761u % (uint64_t)rows;
  while (mul < 2 || gcd_u64(mul, (uint64_t)rows) != 1) mul++;
  for (int64_t k = 0; k < nnz; k++) {
    uint64_t c;
    do {
      c = 0;
      uint64_t w[4] = {gpu_rng_next(&g), gpu_rng_next(&g), 0, 0};
      if (nbits > 16) w[2] = gpu_rng_next(&g);
      if (nbits > 24) w[3] = gpu_rng_next(&g);
      for (int b = 0; b < nbits; b++) /* 0.3 ~ 77/256 from one byte each */
        if (((w[b / 8] >> (8 * (b % 8))) & 0xff) < 77) c |= (uint64_t)1 << b;
    } while (c >= (uint64_t)rows);
    m->col_idx[k] = (int32_t)((c * mul) % (uint64_t)rows);
    m->values[k] = gpu_rng_float(&g, -1.0f, 1.0f);
  }
  gpu_csr_sort(m);
  return 0;
}

void gpu_spmv_ref(const gpu_csr *m, double alpha, const float *x, double beta, const float *y_in,
                  double *y, double *mag) {
  for (int32_t r = 0; r < m->rows; r++) {
    double s = 0.0, a = 0.0;
    for (int32_t j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++) {
      double t = (double)m->values[j] * (double)x[m->col_idx[j]];
      s += t;
      a += fabs(t);
    }
    double out = alpha * s, sc = fabs(alpha) * a;
    if (beta != 0.0) {
      out += beta * (double)y_in[r];
      sc += fabs(beta * (double)y_in[r]);
    }
    y[r] = out;
    if (mag) mag[r] = sc;
  }
}

void gpu_sgemm_reference(int m, int n, int k, int ta, int tb, float alpha, float beta, const float *a, const float *b,
                      const float *c0, double *ref, double *mag) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0, sa = 0.0;
      for (int p = 0; p < k; p++) {
        double x = ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
        double y = tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
        s += x * y;
        sa += fabs(x * y);
      }
      double r = (double)alpha * s, sc = fabs((double)alpha) * sa;
      if (beta != 0.0f) {
        r += (double)beta * c0[(size_t)i * n + j];
        sc += fabs((double)beta * c0[(size_t)i * n + j]);
      }
      ref[(size_t)i * n + j] = r;
      mag[(size_t)i * n + j] = sc;
    }
}

float *gpu_host_random(gpu_rng *g, size_t n, float lo, float hi) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  if (!p) return NULL;
  for (size_t i = 0; i < n; i++) p[i] = gpu_rng_float(g, lo, hi);
  return p;
}

gpu_sgemm_err gpu_sgemm_errors(const float *out, const double *ref, const double *mag, size_t nc, float beta,
                               const float *c0) {
  gpu_sgemm_err e = {0, 0, 0, 0};
  double num = 0.0, den = 0.0, den_ref = 0.0;
  for (size_t i = 0; i < nc; i++) {
    double d = fabs((double)out[i] - ref[i]);
    double s = d / (mag[i] + 1e-30);
    if (!(s <= 1e300)) s = INFINITY; /* NaN */
    if (s > e.worst) e.worst = s, e.worst_at = i;
    num += d * d;
    double bc = beta != 0.0f ? (double)beta * c0[i] : 0.0;
    double t = fabs(ref[i] - bc) + fabs(bc);
    den += t * t;
    den_ref += ref[i] * ref[i];
  }
  e.frob = sqrt(num / (den + 1e-300));
  if (!(e.frob <= 1e300)) e.frob = INFINITY;
  e.frob_ref = sqrt(num / (den_ref + 1e-300));
  if (!(e.frob_ref <= 1e300)) e.frob_ref = INFINITY;
  return e;
}

void gpu_sgemm_show_bad(const float *out, const double *ref, const double *mag, int m, int n, double tol) {
  size_t bad = 0;
  for (size_t i = 0; i < (size_t)m * n; i++) {
    double s = fabs((double)out[i] - ref[i]) / (mag[i] + 1e-30);
    if (!(s <= tol)) {
      if (bad < 6) printf("    (%zu,%zu) got %.7g want %.7g\n", i / n, i % n, out[i], ref[i]);
      bad++;
    }
  }
  printf("    %zu of %zu elements wrong\n", bad, (size_t)m * n);
}

int gpu_sgemm_accuracy_inputs(gpu_rng *g, const char *what, int m, int n, int k, float **a, float **b) {
  int positive = !strcmp(what, "positive"), cancel = !strcmp(what, "cancellation");
  float *pa = gpu_host_random(g, (size_t)m * k, positive ? 0.0f : -1.0f, 1.0f);
  float *pb = gpu_host_random(g, (size_t)k * n, positive ? 0.0f : -1.0f, 1.0f);
  if (!pa || !pb) {
    free(pa), free(pb);
    return -1;
  }
  if (cancel) { /* second half of each dot product nearly undoes the first */
    int h = k / 2;
    for (int i = 0; i < m; i++)
      for (int p = h; p < 2 * h; p++) pa[(size_t)i * k + p] = pa[(size_t)i * k + p - h];
    for (int p = h; p < 2 * h; p++)
      for (int j = 0; j < n; j++)
        pb[(size_t)p * n + j] = -pb[(size_t)(p - h) * n + j] * (1.0f + gpu_rng_float(g, -1.0f, 1.0f) / 1024.0f);
  }
  *a = pa, *b = pb;
  return 0;
}

double gpu_csr_residual(const gpu_csr *A, const double *vals64, const double *b, const double *x,
                        double *mag) {
  long double rr = 0, bb = 0, mm = 0;
  for (int32_t i = 0; i < A->rows; i++) {
    long double s = 0, m = 0;
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++) {
      long double aij = vals64 ? (long double)vals64[j] : (long double)A->values[j];
      s += aij * x[A->col_idx[j]];
      m += fabsl(aij * x[A->col_idx[j]]);
    }
    rr += ((long double)b[i] - s) * ((long double)b[i] - s);
    bb += (long double)b[i] * b[i];
    mm += m * m;
  }
  if (mag) *mag = bb == 0 ? 0 : (double)(sqrtl(mm) / sqrtl(bb));
  return bb == 0 ? 0 : (double)(sqrtl(rr) / sqrtl(bb));
}

double *gpu_csr_values64_near(const gpu_csr *A) {
  double *v = malloc((size_t)(A->nnz ? A->nnz : 1) * sizeof *v);
  if (!v) return NULL;
  for (int32_t i = 0; i < A->rows; i++)
    for (int32_t t = A->row_ptr[i]; t < A->row_ptr[i + 1]; t++) {
      uint32_t lo = (uint32_t)(i < A->col_idx[t] ? i : A->col_idx[t]),
               hi = (uint32_t)(i < A->col_idx[t] ? A->col_idx[t] : i);
      uint32_t h = (lo * 2654435761u) ^ (hi * 40503u + 0x9e3779b9u);
      h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
      v[t] = (double)A->values[t] * (1.0 + 1e-6 * ((double)(h & 0xffff) / 65536.0 - 0.5));
    }
  return v;
}
