/* rows.c: giving each rank its rows: partition, scatter from one rank, or generate. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void gkcm_rows_free(gkcm_rows *r) {
  if (!r) return;
  free(r->row_ptr), free(r->col_idx), free(r->values);
  memset(r, 0, sizeof *r);
}

static int rows_alloc(gkcm_rows *r, int64_t n, int64_t row0, int32_t rows, int64_t nnz) {
  memset(r, 0, sizeof *r);
  r->n = n, r->row0 = row0, r->rows = rows;
  r->row_ptr = malloc(((size_t)rows + 1) * sizeof *r->row_ptr);
  r->col_idx = malloc((size_t)(nnz ? nnz : 1) * sizeof *r->col_idx);
  r->values = malloc((size_t)(nnz ? nnz : 1) * sizeof *r->values);
  if (r->row_ptr && r->col_idx && r->values) return 0;
  gkcm_rows_free(r);
  return -1;
}

static int64_t csr_row_nnz(int64_t i, const void *arg) {
  const int32_t *rp = arg;
  return (int64_t)rp[i + 1] - rp[i];
}

int gkcm_partition_csr(const int32_t *row_ptr, int64_t n, int nparts, int64_t *offsets) {
  return halo_partition(n, nparts, csr_row_nnz, row_ptr, offsets) ? GKC_EINVALID_ARGUMENT : 0;
}

#define ROWS_TAG 0x6b63 /* "kc": the scatter's messages, on the library's own communicator */

/* The root's row_ptr, checked before anything is sent: one that does not
 * start at 0 or decreases would give a part a negative nonzero count (and
 * the partition negative weights).  An error, or 0. */
static int check_row_ptr(gkcm_ctx *ctx, const int32_t *row_ptr, int64_t n) {
  if (row_ptr[0] != 0)
    return ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "row_ptr[0] is %" PRId32 ", not 0", row_ptr[0]);
  for (int64_t i = 0; i < n; i++)
    if (row_ptr[i + 1] < row_ptr[i])
      return ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "row_ptr[%" PRId64 "] = %" PRId32 " is less "
                      "than row_ptr[%" PRId64 "] = %" PRId32 ": row_ptr must not decrease",
                      i + 1, row_ptr[i + 1], i, row_ptr[i]);
  return 0;
}

int gkcm_scatter_csr(gkcm_ctx *ctx, int root, int64_t n, const int32_t *row_ptr,
                     const int32_t *col_idx, const float *values, gkcm_rows *out) {
  memset(out, 0, sizeof *out);
  int P = ctx->size, rc;
  int64_t *off = malloc(((size_t)P + 1) * sizeof *off);
  if (!off) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory");
  if (ctx->rank == root && off) {
    if (n < P) ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "the matrix has %" PRId64 " rows, fewer "
                        "than the %d ranks", n, P);
    else if (n > INT32_MAX) ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "%" PRId64 " rows", n);
    else if (check_row_ptr(ctx, row_ptr, n) == 0) gkcm_partition_csr(row_ptr, n, P, off);
  }
  if ((rc = ctx_sync(ctx, NULL, 0))) goto done;
  MPI_Bcast(&n, 1, MPI_INT64_T, root, ctx->comm);
  MPI_Bcast(off, P + 1, MPI_INT64_T, root, ctx->comm);
  int32_t rows = (int32_t)(off[ctx->rank + 1] - off[ctx->rank]);
  /* Per rank: the root sends the part's nonzero count (-1: it could not
   * stage the part), the rank answers whether it could allocate, and only
   * then do the arrays travel; a failure on either side leaves no message
   * unreceived. */
  if (ctx->rank == root) {
    for (int q = 0; q < P; q++) {
      int32_t r0 = (int32_t)off[q], nr = (int32_t)(off[q + 1] - off[q]);
      int64_t k0 = row_ptr[r0], nnz = (int64_t)row_ptr[r0 + nr] - k0;
      gkcm_rows part;
      int ok = 1, staged = rows_alloc(&part, n, r0, nr, nnz) == 0;
      if (!staged)
        ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for rank %d's %" PRId64 " nonzeros", q,
                 nnz);
      if (q != root) {
        int64_t head = staged ? nnz : -1;
        MPI_Send(&head, 1, MPI_INT64_T, q, ROWS_TAG, ctx->comm);
        if (staged) MPI_Recv(&ok, 1, MPI_INT, q, ROWS_TAG, ctx->comm, MPI_STATUS_IGNORE);
      }
      if (!staged) continue;
      for (int32_t i = 0; i <= nr; i++) part.row_ptr[i] = row_ptr[r0 + i] - (int32_t)k0;
      for (int64_t k = 0; k < nnz; k++) part.col_idx[k] = col_idx[k0 + k];
      memcpy(part.values, values + k0, (size_t)nnz * sizeof *values);
      if (q == root) {
        *out = part;
        continue;
      }
      if (ok) {
        MPI_Send(part.row_ptr, nr + 1, MPI_INT32_T, q, ROWS_TAG, ctx->comm);
        MPI_Send(part.col_idx, (int)nnz, MPI_INT64_T, q, ROWS_TAG, ctx->comm);
        MPI_Send(part.values, (int)nnz, MPI_FLOAT, q, ROWS_TAG, ctx->comm);
      }
      gkcm_rows_free(&part);
    }
  } else {
    int64_t nnz;
    MPI_Recv(&nnz, 1, MPI_INT64_T, root, ROWS_TAG, ctx->comm, MPI_STATUS_IGNORE);
    if (nnz >= 0) {
      int ok = rows_alloc(out, n, off[ctx->rank], rows, nnz) == 0;
      if (!ok) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for %" PRId64 " nonzeros", nnz);
      MPI_Send(&ok, 1, MPI_INT, root, ROWS_TAG, ctx->comm);
      if (ok) {
        MPI_Recv(out->row_ptr, rows + 1, MPI_INT32_T, root, ROWS_TAG, ctx->comm,
                 MPI_STATUS_IGNORE);
        MPI_Recv(out->col_idx, (int)nnz, MPI_INT64_T, root, ROWS_TAG, ctx->comm,
                 MPI_STATUS_IGNORE);
        MPI_Recv(out->values, (int)nnz, MPI_FLOAT, root, ROWS_TAG, ctx->comm, MPI_STATUS_IGNORE);
      }
    }
  }
  rc = ctx_sync(ctx, NULL, 0);
  if (rc) gkcm_rows_free(out);
done:
  free(off);
  return rc;
}

typedef struct {
  int64_t nx, ny, nz;
} grid3;

static int64_t poisson_row_nnz(int64_t i, const void *arg) {
  const grid3 *g = arg;
  int64_t x = i % g->nx, y = (i / g->nx) % g->ny, z = i / (g->nx * g->ny);
  return 1 + (x > 0) + (x < g->nx - 1) + (y > 0) + (y < g->ny - 1) + (z > 0) + (z < g->nz - 1);
}

int gkcm_poisson3d(gkcm_ctx *ctx, int32_t nx, int32_t ny, int32_t nz, gkcm_rows *out) {
  memset(out, 0, sizeof *out);
  int P = ctx->size;
  grid3 g = {nx, ny, nz};
  int64_t n = g.nx * g.ny * g.nz;
  int64_t *off = malloc(((size_t)P + 1) * sizeof *off);
  if (nx < 1 || ny < 1 || nz < 1)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "grid %" PRId32 " x %" PRId32 " x %" PRId32 ": each "
             "side must be at least 1", nx, ny, nz);
  else if (n < P)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "the grid has %" PRId64 " points, fewer than the %d "
             "ranks", n, P);
  else if (!off)
    ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory");
  else {
    /* Every rank computes the same partition: O(n) each, and no messages. */
    halo_partition(n, P, poisson_row_nnz, &g, off);
    int64_t row0 = off[ctx->rank], rows = off[ctx->rank + 1] - row0, nnz = 0;
    for (int64_t i = row0; i < row0 + rows; i++) nnz += poisson_row_nnz(i, &g);
    if (rows > INT32_MAX || nnz > INT32_MAX)
      ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "rank %d would hold %" PRId64 " rows and %" PRId64
               " nonzeros, more than int32 indexes: use more ranks", ctx->rank, rows, nnz);
    else if (rows_alloc(out, n, row0, (int32_t)rows, nnz) != 0)
      ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for %" PRId64 " nonzeros", nnz);
    else {
      int32_t k = 0;
      out->row_ptr[0] = 0;
      int64_t sx = 1, sy = g.nx, sz = g.nx * g.ny;
      for (int64_t i = row0; i < row0 + rows; i++) {
        int64_t x = i % g.nx, y = (i / g.nx) % g.ny, z = i / sz;
        /* Ascending columns, as a CSR reader would give them. */
#define P3_PUT(c, v) (out->col_idx[k] = (c), out->values[k++] = (v))
        if (z > 0) P3_PUT(i - sz, -1.0f);
        if (y > 0) P3_PUT(i - sy, -1.0f);
        if (x > 0) P3_PUT(i - sx, -1.0f);
        P3_PUT(i, 6.0f);
        if (x < g.nx - 1) P3_PUT(i + sx, -1.0f);
        if (y < g.ny - 1) P3_PUT(i + sy, -1.0f);
        if (z < g.nz - 1) P3_PUT(i + sz, -1.0f);
#undef P3_PUT
        out->row_ptr[i - row0 + 1] = k;
      }
    }
  }
  free(off);
  int rc = ctx_sync(ctx, NULL, 0);
  if (rc) gkcm_rows_free(out);
  return rc;
}
