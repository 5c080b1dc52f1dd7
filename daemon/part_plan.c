/* part_plan.c: see part_plan.h. */
#include "part_plan.h"

#include <stdlib.h>
#include <string.h>

void part_plan_bounds(int32_t rows, const int32_t *row_ptr, int k, int32_t *start) {
  int64_t nnz = row_ptr[rows];
  start[0] = 0;
  start[k] = rows;
  int32_t r = 0;
  for (int j = 1; j < k; j++) {
    /* The ideal cut j * nnz / k, rounded to the nearer of the two rows
     * around it, then kept where every block has a row. */
    double ideal = (double)nnz * j / k;
    while (r < rows && row_ptr[r] < ideal) r++;
    int32_t cut = r;
    if (cut > 0 && ideal - row_ptr[cut - 1] < row_ptr[cut] - ideal) cut--;
    if (cut < start[j - 1] + 1) cut = start[j - 1] + 1;
    if (cut > rows - (k - j)) cut = rows - (k - j);
    start[j] = cut;
    if (r < cut) r = cut;
  }
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

void part_plan_drop_csr(part_plan *p) {
  for (int j = 0; p->b && j < p->k; j++) {
    free(p->b[j].row_ptr), free(p->b[j].col_idx);
    p->b[j].row_ptr = p->b[j].col_idx = NULL;
  }
}

void part_plan_free(part_plan *p) {
  part_plan_drop_csr(p);
  for (int j = 0; p->b && j < p->k; j++) {
    part_block *b = &p->b[j];
    free(b->halo), free(b->recv_off), free(b->send), free(b->send_off);
  }
  free(p->b);
  memset(p, 0, sizeof *p);
}

/* The block owning global column c (cols are cut at colb[1..k-1]). */
static int owner(const int32_t *colb, int k, int32_t c) {
  int lo = 0, hi = k - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (colb[mid] <= c) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

int part_plan_make(part_plan *p, int k, int32_t rows, int32_t cols, const int32_t *row_ptr,
                   const int32_t *col_idx) {
  memset(p, 0, sizeof *p);
  p->k = k, p->rows = rows, p->cols = cols, p->nnz = row_ptr[rows];
  int32_t *start = malloc(sizeof *start * (size_t)(k + 1));
  int32_t *colb = malloc(sizeof *colb * (size_t)(k + 1));
  int32_t *stamp = malloc(sizeof *stamp * (size_t)cols); /* block that last saw column c, + 1 */
  int32_t *local = malloc(sizeof *local * (size_t)cols); /* its local index there */
  p->b = calloc((size_t)k, sizeof *p->b);
  if (!start || !colb || !stamp || !local || !p->b) goto oom;
  part_plan_bounds(rows, row_ptr, k, start);
  for (int j = 0; j <= k; j++) colb[j] = start[j] < cols ? start[j] : cols;
  colb[k] = cols;
  memset(stamp, 0, sizeof *stamp * (size_t)cols);
  for (int j = 0; j < k; j++) {
    part_block *b = &p->b[j];
    b->row0 = start[j], b->rows = start[j + 1] - start[j];
    b->col0 = colb[j], b->ncols = colb[j + 1] - colb[j];
    int64_t o = row_ptr[b->row0];
    b->nnz = row_ptr[start[j + 1]] - o;
    b->row_ptr = malloc(sizeof *b->row_ptr * ((size_t)b->rows + 1));
    b->col_idx = malloc(sizeof *b->col_idx * (size_t)(b->nnz ? b->nnz : 1));
    b->recv_off = calloc((size_t)k + 1, sizeof *b->recv_off);
    b->send_off = calloc((size_t)k + 1, sizeof *b->send_off);
    if (!b->row_ptr || !b->col_idx || !b->recv_off || !b->send_off) goto oom;
    /* The halo: every column read outside [col0, col0 + ncols), once. */
    int32_t nh = 0;
    for (int64_t t = o; t < o + b->nnz; t++) {
      int32_t c = col_idx[t];
      if ((c < b->col0 || c >= b->col0 + b->ncols) && stamp[c] != j + 1) stamp[c] = j + 1, nh++;
    }
    b->nhalo = nh;
    b->halo = malloc(sizeof *b->halo * (size_t)(nh ? nh : 1));
    if (!b->halo) goto oom;
    nh = 0;
    for (int64_t t = o; t < o + b->nnz; t++) {
      int32_t c = col_idx[t];
      if ((c < b->col0 || c >= b->col0 + b->ncols) && stamp[c] == j + 1)
        stamp[c] = -(j + 1), b->halo[nh++] = c; /* taken: -(j + 1) */
    }
    qsort(b->halo, (size_t)nh, sizeof *b->halo, cmp_i32);
    for (int32_t i = 0; i < nh; i++) {
      local[b->halo[i]] = b->ncols + i;
      b->recv_off[owner(colb, k, b->halo[i]) + 1]++;
    }
    for (int e = 0; e < k; e++) b->recv_off[e + 1] += b->recv_off[e];
    b->row_ptr[0] = 0;
    for (int32_t i = 0; i < b->rows; i++) {
      int64_t t0 = row_ptr[b->row0 + i], t1 = row_ptr[b->row0 + i + 1];
      for (int64_t t = t0; t < t1; t++) {
        int32_t c = col_idx[t];
        b->col_idx[t - o] = c >= b->col0 && c < b->col0 + b->ncols ? c - b->col0 : local[c];
      }
      b->row_ptr[i + 1] = (int32_t)(t1 - o);
    }
  }
  /* The send lists mirror the receivers' halos. */
  for (int e = 0; e < k; e++) {
    part_block *s = &p->b[e];
    for (int j = 0; j < k; j++) {
      s->send_off[j + 1] = s->send_off[j];
      if (j != e) s->send_off[j + 1] += p->b[j].recv_off[e + 1] - p->b[j].recv_off[e];
    }
    s->nsend = s->send_off[k];
    s->send = malloc(sizeof *s->send * (size_t)(s->nsend ? s->nsend : 1));
    if (!s->send) goto oom;
    for (int j = 0; j < k; j++) {
      if (j == e) continue;
      const part_block *r = &p->b[j];
      for (int32_t i = r->recv_off[e]; i < r->recv_off[e + 1]; i++)
        s->send[s->send_off[j] + (i - r->recv_off[e])] = r->halo[i] - s->col0;
    }
  }
  free(start), free(colb), free(stamp), free(local);
  return 0;
oom:
  free(start), free(colb), free(stamp), free(local);
  part_plan_free(p);
  return -1;
}
