/* validate.c: see validate.h. */
#include "validate.h"
#include "res_object.h"

#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_errors.h"

/* The arrays sit at arbitrary offsets inside the request, so they are read
 * element by element with memcpy, which compilers turn into plain loads. */
static inline int32_t load_i32(const unsigned char *p, int64_t i) {
  int32_t v;
  memcpy(&v, p + 4 * i, 4);
  return v;
}

int validate_csr(int32_t rows, int32_t cols, int64_t nnz, const void *row_ptr,
                 const void *col_idx, int32_t *max_row, char *msg, size_t msglen) {
  const unsigned char *rp = row_ptr, *ci = col_idx;
  int32_t first = load_i32(rp, 0);
  if (first != 0) {
    snprintf(msg, msglen, "argument 'row_ptr': row_ptr[0] is %" PRId32 ", must be 0", first);
    return GKC_EINVALID_ARGUMENT;
  }
  int32_t prev = 0, longest = 0;
  for (int64_t r = 1; r <= rows; r++) {
    int32_t v = load_i32(rp, r);
    if (v < prev) {
      snprintf(msg, msglen, "argument 'row_ptr': decreases at row %" PRId64 " (%" PRId32
               " after %" PRId32 ")", r - 1, v, prev);
      return GKC_EINVALID_ARGUMENT;
    }
    if (v - prev > longest) longest = v - prev;
    prev = v;
  }
  *max_row = longest;
  if (prev != nnz) {
    snprintf(msg, msglen, "argument 'row_ptr': row_ptr[rows] is %" PRId32 " but col_idx holds"
             " %" PRId64 " entries", prev, nnz);
    return GKC_EINVALID_ARGUMENT;
  }
  /* One unsigned compare catches negatives too; the exact position is only
   * looked for once something is known to be wrong. */
  uint32_t bad = 0;
  for (int64_t j = 0; j < nnz; j++) bad |= (uint32_t)load_i32(ci, j) >= (uint32_t)cols;
  if (bad) {
    for (int64_t j = 0; j < nnz; j++) {
      int32_t c = load_i32(ci, j);
      if ((uint32_t)c >= (uint32_t)cols) {
        snprintf(msg, msglen, "argument 'col_idx': col_idx[%" PRId64 "] = %" PRId32
                 " is outside [0, %" PRId32 ")", j, c, cols);
        return GKC_EINVALID_ARGUMENT;
      }
    }
  }
  return 0;
}

/* A client can rewrite its region while we work: indices that decide what
 * memory a kernel touches are copied out of it first, and the copy is what
 * gets checked and used. */
static int privatize(gkcd_job *job, gkcd_span *s, int slot) {
  if (!s->shared || s->bytes == 0) return 0;
  void *p = malloc(s->bytes);
  if (!p) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot copy %zu bytes of indices", s->bytes);
    return -1;
  }
  memcpy(p, s->ptr, s->bytes);
  job->priv[slot] = p;
  s->ptr = p;
  s->shared = s->pinned = 0;
  return 0;
}

int validate_spmv(gkcd_job *job) {
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  if (s->validated) return 0; /* a resident matrix, checked when it was uploaded */
  if (privatize(job, &s->row_ptr, 0) || privatize(job, &s->col_idx, 1)) return job->err;
  int rc = validate_csr(s->rows, s->cols, s->nnz, s->row_ptr.ptr, s->col_idx.ptr, &s->max_row,
                        job->errmsg, sizeof job->errmsg);
  if (rc) job->err = rc;
  return rc;
}

/* The positive share of the off-diagonal weight, sum of a_ij > 0 over sum
 * of |a_ij| (i != j; 0 when there is none): how far the matrix is from an
 * M-matrix, for solve's precond auto (method_solve.c).  Read from the
 * request's values once the indices are known to be in range; values in a
 * client's region may change meanwhile, which changes only this figure. */
static float pos_offdiag(const __typeof__(((gkcd_job *)0)->in.csr) *s) {
  /* the bins lie wherever msgpack put them: loads through memcpy */
  const unsigned char *rp = s->row_ptr.ptr, *ci = s->col_idx.ptr, *vb = s->values.ptr;
  int f64 = s->values.dtype == DT_F64;
  double pos = 0, all = 0;
  for (int32_t i = 0; i < s->rows; i++)
    for (int32_t k = load_i32(rp, i), end = load_i32(rp, i + 1); k < end; k++) {
      if (load_i32(ci, k) == i) continue;
      double v;
      if (f64) {
        memcpy(&v, vb + 8 * (size_t)k, 8);
      } else {
        float f;
        memcpy(&f, vb + 4 * (size_t)k, 4);
        v = f;
      }
      if (!(v == v)) continue; /* a NaN is the solve's to report */
      all += fabs(v);
      if (v > 0) pos += v;
    }
  return all > 0 && isfinite(all) ? (float)(pos / all) : 0.0f;
}

int validate_csr_upload(gkcd_job *job) {
  __typeof__(job->in.csr) *s = &job->in.csr;
  if (privatize(job, &s->row_ptr, 0) || privatize(job, &s->col_idx, 1)) return job->err;
  int rc = validate_csr(s->rows, s->cols, s->nnz, s->row_ptr.ptr, s->col_idx.ptr, &s->max_row,
                        job->errmsg, sizeof job->errmsg);
  if (rc) {
    job->err = rc;
    return rc;
  }
  s->pos_offdiag = s->values.ptr && s->values.where == SPAN_HOST ? pos_offdiag(s) : -1.0f;
  return 0;
}
