/* cpu_part.c: the partitioned-matrix primitives (backend.h, gkcd_part_ops)
 * on the CPU backend, whose resident memory is host memory: copies are
 * memcpy, the rest OpenMP loops over the device's own threads, in float64
 * like cpu_solve.  A device that was lost refuses (as a GPU that fell off
 * the bus would).
 *
 * Sums are taken in a fixed order, whatever the threads: the range is cut
 * into at most SUM_PARTS pieces by its length alone, each summed in order,
 * then the pieces' sums in order (an OpenMP reduction adds the threads'
 * sums as they finish, which differs run to run).  So a partitioned solve
 * gives the same bits every run, as the CUDA backend's does. */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cpu_impl.h"
#include "gkc_errors.h"

/* Below this many entries one thread does it all (as cpu_solve.c). */
enum { PAR_MIN = 16384 };

static int nth(const gkcd_backend *be, int64_t n) {
  if (n < PAR_MIN) return 1;
  int t = ((const cpu_impl *)be->impl)->nthreads;
  return t > 0 ? t : omp_get_max_threads();
}

/* Pieces of a sum over n entries: *len entries each, the last shorter. */
enum { SUM_PARTS = 256, SUM_MIN_LEN = 1024 };
static int64_t sum_parts(int64_t n, int64_t *len) {
  int64_t l = (n + SUM_PARTS - 1) / SUM_PARTS;
  *len = l < SUM_MIN_LEN ? SUM_MIN_LEN : l;
  return (n + *len - 1) / *len;
}

static double sum_in_order(const double *part, int64_t nparts) {
  double s = 0;
  for (int64_t c = 0; c < nparts; c++) s += part[c];
  return s;
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
  double part[SUM_PARTS];
  int64_t len, nparts = sum_parts(rows, &len);
#pragma omp parallel for num_threads(nth(be, rows)) schedule(static)
  for (int64_t c = 0; c < nparts; c++) {
    int64_t end = (c + 1) * len < rows ? (c + 1) * len : rows;
    double d = 0;
    for (int64_t i = c * len; i < end; i++) {
      double s = 0;
      for (int32_t t = rp[i]; t < rp[i + 1]; t++) s += (double)v[t] * x[ci[t]];
      y[i] = s;
      d += x[i] * s;
    }
    part[c] = d;
  }
  if (xy) *xy = sum_in_order(part, nparts);
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
  double part[SUM_PARTS];
  int64_t len, nparts = sum_parts(n, &len);
#pragma omp parallel for num_threads(nth(be, n)) schedule(static)
  for (int64_t c = 0; c < nparts; c++) {
    int64_t end = (c + 1) * len < n ? (c + 1) * len : n;
    double s = 0;
    for (int64_t i = c * len; i < end; i++) s += x[i] * y[i];
    part[c] = s;
  }
  *out = sum_in_order(part, nparts);
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
  double prr[SUM_PARTS], prz[SUM_PARTS];
  int64_t len, nparts = sum_parts(n, &len);
  int upd = a != 0;
#pragma omp parallel for num_threads(nth(be, n)) schedule(static)
  for (int64_t c = 0; c < nparts; c++) {
    int64_t end = (c + 1) * len < n ? (c + 1) * len : n;
    double rr = 0, rz = 0;
    for (int64_t i = c * len; i < end; i++) {
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
    prr[c] = rr, prz[c] = rz;
  }
  double rr = sum_in_order(prr, nparts), rz = dinv ? sum_in_order(prz, nparts) : 0;
  out[0] = rr, out[1] = rz;
  return 0;
}

const gkcd_part_ops cpu_part_ops = {
    .to_dev = copy, .to_host = copy, .spmv = spmv, .gather = gather, .dot = dot, .axpby = axpby,
    .cg_update = cg_update};
