/* halo.c: see halo.h. */
#include "halo.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *msg, size_t msglen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, msglen, fmt, ap);
  va_end(ap);
  return -1;
}

int halo_partition(int64_t n, int nparts, int64_t (*row_nnz)(int64_t i, const void *arg),
                   const void *arg, int64_t *offsets) {
  if (nparts < 1 || n < nparts) return -1;
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++) total += row_nnz(i, arg) + 1;
  /* Part q ends at the first row where the running weight reaches
   * (q+1)/nparts of the total, but never so late that a later part would
   * be left without a row, nor so early that this one has none. */
  offsets[0] = 0;
  int q = 0;
  int64_t acc = 0;
  for (int64_t i = 0; i < n && q < nparts - 1; i++) {
    acc += row_nnz(i, arg) + 1;
    int64_t target = (int64_t)((double)total * (q + 1) / nparts);
    int64_t left = n - (i + 1); /* rows after i */
    if (acc >= target || left == nparts - 1 - q) offsets[++q] = i + 1;
  }
  offsets[nparts] = n;
  return 0;
}

int halo_owner(const int64_t *offsets, int nparts, int64_t i) {
  int lo = 0, hi = nparts - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (offsets[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Position of v in the sorted a[0..n), which holds it. */
static int32_t find_i64(const int64_t *a, int32_t n, int64_t v) {
  int32_t lo = 0, hi = n - 1;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int halo_plan_build(halo_plan *p, const int64_t *offsets, int nranks, int rank, int64_t n,
                    int32_t rows, const int32_t *row_ptr, const int64_t *col_idx,
                    const float *values, char *msg, size_t msglen) {
  memset(p, 0, sizeof *p);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(msg, msglen, "rank %d of %d is out of range", rank, nranks);
  if (rows < 1) return fail(msg, msglen, "rank %d holds %" PRId32 " rows, needs at least 1", rank, rows);
  if (offsets[0] != 0 || offsets[nranks] != n)
    return fail(msg, msglen, "the ranks' rows cover [%" PRId64 ", %" PRId64 "), not [0, %" PRId64
                ")", offsets[0], offsets[nranks], n);
  for (int q = 0; q < nranks; q++)
    if (offsets[q + 1] <= offsets[q])
      return fail(msg, msglen, "rank %d's rows start at %" PRId64 " but rank %d's end at %"
                  PRId64 ": ranges must follow each other in rank order, none empty",
                  q + 1 < nranks ? q + 1 : q, offsets[q + 1], q, offsets[q]);
  int64_t row0 = offsets[rank];
  if (offsets[rank + 1] - row0 != rows)
    return fail(msg, msglen, "rank %d: %" PRId32 " rows given, its range holds %" PRId64, rank,
                rows, offsets[rank + 1] - row0);
  if (row_ptr[0] != 0) return fail(msg, msglen, "row_ptr[0] is %" PRId32 ", must be 0", row_ptr[0]);
  for (int32_t i = 0; i < rows; i++)
    if (row_ptr[i + 1] < row_ptr[i])
      return fail(msg, msglen, "row_ptr decreases at local row %" PRId32, i);
  int64_t nnz = row_ptr[rows];
  int64_t nout = 0;
  for (int64_t k = 0; k < nnz; k++) {
    int64_t c = col_idx[k];
    if (c < 0 || c >= n)
      return fail(msg, msglen, "col_idx[%" PRId64 "] = %" PRId64 " is outside [0, %" PRId64 ")",
                  k, c, n);
    nout += c < row0 || c >= row0 + rows;
  }
  p->nranks = nranks, p->rank = rank, p->n = n, p->row0 = row0, p->rows = rows;
  size_t nr = (size_t)nranks;
  p->recv_count = calloc(nr, sizeof(int));
  p->recv_displ = calloc(nr, sizeof(int));
  p->send_count = calloc(nr, sizeof(int));
  p->send_displ = calloc(nr, sizeof(int));
  p->ghost = malloc((size_t)(nout ? nout : 1) * sizeof *p->ghost);
  p->d_row_ptr = malloc(((size_t)rows + 1) * sizeof(int32_t));
  p->o_row_ptr = malloc(((size_t)rows + 1) * sizeof(int32_t));
  p->d_col = malloc((size_t)(nnz - nout + 1) * sizeof(int32_t));
  p->d_val = malloc((size_t)(nnz - nout + 1) * sizeof(float));
  p->o_col = malloc((size_t)(nout + 1) * sizeof(int32_t));
  p->o_val = malloc((size_t)(nout + 1) * sizeof(float));
  if (!p->recv_count || !p->recv_displ || !p->send_count || !p->send_displ || !p->ghost ||
      !p->d_row_ptr || !p->o_row_ptr || !p->d_col || !p->d_val || !p->o_col || !p->o_val) {
    halo_plan_free(p);
    return fail(msg, msglen, "out of memory for the halo plan of %" PRId64 " nonzeros", nnz);
  }
  /* The ghosts, sorted and unique. */
  int64_t g = 0;
  for (int64_t k = 0; k < nnz; k++)
    if (col_idx[k] < row0 || col_idx[k] >= row0 + rows) p->ghost[g++] = col_idx[k];
  qsort(p->ghost, (size_t)g, sizeof *p->ghost, cmp_i64);
  int64_t u = 0;
  for (int64_t k = 0; k < g; k++)
    if (u == 0 || p->ghost[u - 1] != p->ghost[k]) p->ghost[u++] = p->ghost[k];
  if (u > INT32_MAX) {
    halo_plan_free(p);
    return fail(msg, msglen, "%" PRId64 " ghost columns, more than int32 can index", u);
  }
  p->nghost = (int32_t)u;
  for (int32_t k = 0; k < p->nghost; k++) p->recv_count[halo_owner(offsets, nranks, p->ghost[k])]++;
  for (int q = 1; q < nranks; q++) p->recv_displ[q] = p->recv_displ[q - 1] + p->recv_count[q - 1];
  /* The split: entries keep their order within each row. */
  int32_t dk = 0, ok = 0;
  p->d_row_ptr[0] = p->o_row_ptr[0] = 0;
  for (int32_t i = 0; i < rows; i++) {
    for (int32_t k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
      int64_t c = col_idx[k];
      if (c >= row0 && c < row0 + rows) {
        p->d_col[dk] = (int32_t)(c - row0);
        p->d_val[dk++] = values[k];
      } else {
        p->o_col[ok] = find_i64(p->ghost, p->nghost, c);
        p->o_val[ok++] = values[k];
      }
    }
    p->d_row_ptr[i + 1] = dk, p->o_row_ptr[i + 1] = ok;
  }
  p->d_nnz = dk, p->o_nnz = ok;
  return 0;
}

int halo_plan_set_sends(halo_plan *p, const int *count, const int64_t *ids, char *msg,
                        size_t msglen) {
  int64_t total = 0;
  for (int q = 0; q < p->nranks; q++) {
    if (count[q] < 0 || (q == p->rank && count[q] != 0))
      return fail(msg, msglen, "rank %d asked rank %d for %d rows", q, p->rank, count[q]);
    total += count[q];
  }
  if (total > INT32_MAX) return fail(msg, msglen, "%" PRId64 " rows to send", total);
  int32_t *idx = malloc((size_t)(total ? total : 1) * sizeof *idx);
  if (!idx) return fail(msg, msglen, "out of memory for %" PRId64 " send indices", total);
  int64_t k = 0;
  for (int q = 0; q < p->nranks; q++) {
    p->send_displ[q] = (int)k;
    p->send_count[q] = count[q];
    for (int j = 0; j < count[q]; j++, k++) {
      int64_t id = ids[k];
      if (id < p->row0 || id >= p->row0 + p->rows) {
        free(idx);
        return fail(msg, msglen, "rank %d asked rank %d for row %" PRId64 ", which it does not "
                    "hold ([%" PRId64 ", %" PRId64 "))", q, p->rank, id, p->row0,
                    p->row0 + p->rows);
      }
      idx[k] = (int32_t)(id - p->row0);
    }
  }
  free(p->send_idx);
  p->send_idx = idx;
  p->nsend = (int32_t)total;
  return 0;
}

void halo_plan_free(halo_plan *p) {
  free(p->ghost), free(p->recv_count), free(p->recv_displ), free(p->send_count);
  free(p->send_displ), free(p->send_idx), free(p->d_row_ptr), free(p->d_col), free(p->d_val);
  free(p->o_row_ptr), free(p->o_col), free(p->o_val);
  memset(p, 0, sizeof *p);
}
