/* cpu_part.c: the partitioned-matrix primitives (backend.h, gkcd_part_ops)
 * on the CPU backend, whose resident memory is host memory: copies are
 * memcpy, the rest OpenMP loops over the device's own threads, in float64
 * like cpu_solve.  A device that was lost refuses (as a GPU that fell off
 * the bus would). */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "gkc_errors.h"

/* cpu_backend.c: the device's kernel threads (<= 0: all). */
int cpu_backend_threads(const gkcd_backend *be);

/* Below this many entries one thread does it all (as cpu_solve.c). */
enum { PAR_MIN = 16384 };

static int nth(const gkcd_backend *be, int64_t n) {
  if (n < PAR_MIN) return 1;
  int t = cpu_backend_threads(be);
  return t > 0 ? t : omp_get_max_threads();
}

static int gone(gkcd_backend *be, char *msg, size_t msglen) {
  if (!atomic_load(&be->lost)) return 0;
  snprintf(msg, msglen, "device %d was lost: %s", be->device, backend_lost_reason(be));
  return GKC_EDEVICE_LOST;
}

static int copy(gkcd_backend *be, void *dst, const void *src, size_t bytes, char *msg,
                size_t msglen) {
  int rc = gone(be, msg, msglen);
  if (rc) return rc;
  if (bytes) memcpy(dst, src, bytes);
  return 0;
}

static int spmv(gkcd_backend *be, int32_t rows, int64_t nnz, const int32_t *rp, const int32_t *ci,
                const float *v, const double *x, double *y, double *xy, char *msg, size_t msglen) {
  (void)nnz;
  int rc = gone(be, msg, msglen);
  if (rc) return rc;
  double d = 0;
#pragma omp parallel for num_threads(nth(be, rows)) reduction(+ : d) schedule(static)
  for (int32_t i = 0; i < rows; i++) {
    double s = 0;
    for (int32_t t = rp[i]; t < rp[i + 1]; t++) s += (double)v[t] * x[ci[t]];
    y[i] = s;
    d += x[i] * s;
  }
  if (xy) *xy = d;
  return 0;
}

static int gather(gkcd_backend *be, double *dst, const double *src, const int32_t *idx, int64_t n,
                  char *msg, size_t msglen) {
  int rc = gone(be, msg, msglen);
  if (rc) return rc;
#pragma omp parallel for num_threads(nth(be, n)) schedule(static)
  for (int64_t i = 0; i < n; i++) dst[i] = src[idx[i]];
  return 0;
}

static int dot(gkcd_backend *be, const double *x, const double *y, int64_t n, double *out,
               char *msg, size_t msglen) {
  int rc = gone(be, msg, msglen);
  if (rc) return rc;
  double s = 0;
#pragma omp parallel for num_threads(nth(be, n)) reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
  *out = s;
  return 0;
}

static int axpby(gkcd_backend *be, double a, const double *x, double b, double *y, int64_t n,
                 char *msg, size_t msglen) {
  int rc = gone(be, msg, msglen);
  if (rc) return rc;
  if (b == 0) {
#pragma omp parallel for num_threads(nth(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
  } else {
#pragma omp parallel for num_threads(nth(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b * y[i];
  }
  return 0;
}

static int cg_update(gkcd_backend *be, double a, const double *p, const double *q, double *x,
                     double *r, const double *dinv, double *z, int64_t n, double out[2], char *msg,
                     size_t msglen) {
  int rc = gone(be, msg, msglen);
  if (rc) return rc;
  double rr = 0, rz = 0;
  int upd = a != 0;
#pragma omp parallel for num_threads(nth(be, n)) reduction(+ : rr, rz) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    double ri = r[i];
    if (upd) {
      x[i] = a * p[i] + x[i];
      r[i] = ri = ri - a * q[i];
    }
    rr += ri * ri;
    if (dinv) {
      double zi = dinv[i] * ri;
      z[i] = zi;
      rz += ri * zi;
    }
  }
  out[0] = rr, out[1] = rz;
  return 0;
}

const gkcd_part_ops cpu_part_ops = {
    .to_dev = copy, .to_host = copy, .spmv = spmv, .gather = gather, .dot = dot, .axpby = axpby,
    .cg_update = cg_update};
