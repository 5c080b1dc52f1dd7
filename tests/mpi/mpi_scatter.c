/* mpi_scatter.c: gkcm_scatter_csr under mpirun (driven by e2e_mpi.py).
 *
 * Rank 0 scatters a matrix with empty rows and rows of very different
 * lengths; every rank rebuilds the same matrix from the seed and checks that
 * it received exactly its rows of the partition gkcm_partition_csr gives.
 * Then row_ptr arrays that do not start at 0, or decrease, must be refused
 * on every rank with a message naming the entry, and leave *out empty.
 * Prints "mpi_scatter: ok" on rank 0; exits 1 on a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_mpi.h"
#include "test.h"

#define N 97

typedef struct {
  int32_t row_ptr[N + 1];
  int32_t *col_idx;
  float *values;
} csr;

static uint64_t next(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

/* Row i holds 0 to 3 entries, or a long one every 13th row; same on every rank. */
static void build(csr *m) {
  uint64_t s = 12345;
  m->row_ptr[0] = 0;
  for (int i = 0; i < N; i++) {
    int len = i % 13 == 5 ? 40 : (int)(next(&s) % 4);
    m->row_ptr[i + 1] = m->row_ptr[i] + len;
  }
  int32_t nnz = m->row_ptr[N];
  m->col_idx = malloc((size_t)nnz * sizeof *m->col_idx);
  m->values = malloc((size_t)nnz * sizeof *m->values);
  ASSERT(m->col_idx && m->values);
  for (int32_t k = 0; k < nnz; k++) {
    m->col_idx[k] = (int32_t)(next(&s) % N);
    m->values[k] = (float)(next(&s) % 1000) / 7.0f - 50.0f;
  }
}

static void check_rows(const csr *m, int rank, int size, const gkcm_rows *r) {
  int64_t off[65];
  ASSERT(size < 65);
  ASSERT_EQ(gkcm_partition_csr(m->row_ptr, N, size, off), 0);
  ASSERT_EQ(r->n, N);
  ASSERT_EQ(r->row0, off[rank]);
  ASSERT_EQ(r->rows, off[rank + 1] - off[rank]);
  int32_t k0 = m->row_ptr[r->row0];
  for (int32_t i = 0; i <= r->rows; i++) ASSERT_EQ(r->row_ptr[i], m->row_ptr[r->row0 + i] - k0);
  for (int32_t k = 0; k < r->row_ptr[r->rows]; k++) {
    ASSERT_EQ(r->col_idx[k], m->col_idx[k0 + k]);
    if (r->values[k] != m->values[k0 + k])
      TEST_FAIL("rank %d: values[%d] = %g, want %g", rank, k, r->values[k], m->values[k0 + k]);
  }
}

/* A bad row_ptr on the root: refused everywhere, naming the entry. */
static void expect_refused(gkcm_ctx *ctx, const csr *m, const int32_t *row_ptr, const char *want) {
  gkcm_rows r;
  int rc = gkcm_scatter_csr(ctx, 0, N, row_ptr, m->col_idx, m->values, &r);
  ASSERT_EQ(rc, GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkcm_errmsg(ctx), want);
  ASSERT(r.row_ptr == NULL && r.col_idx == NULL && r.values == NULL);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  gkcm_ctx *ctx;
  if (gkcm_init(MPI_COMM_WORLD, NULL, &ctx) != 0) TEST_FAIL("%s", gkcm_errmsg(ctx));
  int rank = gkcm_rank(ctx), size = gkcm_size(ctx);
  csr m;
  build(&m);

  gkcm_rows r;
  int rc = gkcm_scatter_csr(ctx, 0, N, m.row_ptr, m.col_idx, m.values, &r);
  if (rc) TEST_FAIL("rank %d: %s", rank, gkcm_errmsg(ctx));
  check_rows(&m, rank, size, &r);
  gkcm_rows_free(&r);

  int32_t bad[N + 1];
  memcpy(bad, m.row_ptr, sizeof bad);
  bad[0] = 1;
  expect_refused(ctx, &m, bad, "row_ptr[0] is 1, not 0");
  memcpy(bad, m.row_ptr, sizeof bad);
  bad[60] = bad[59] - 1; /* row 59 "ends before it starts" */
  char want[128];
  snprintf(want, sizeof want, "row_ptr[60] = %d is less than row_ptr[59] = %d", (int)bad[60],
           (int)bad[59]);
  expect_refused(ctx, &m, bad, want);

  /* The context is still good after a refusal. */
  rc = gkcm_scatter_csr(ctx, 0, N, m.row_ptr, m.col_idx, m.values, &r);
  if (rc) TEST_FAIL("rank %d: after the refusals: %s", rank, gkcm_errmsg(ctx));
  check_rows(&m, rank, size, &r);
  gkcm_rows_free(&r);

  free(m.col_idx), free(m.values);
  gkcm_free(ctx);
  if (rank == 0) printf("mpi_scatter: ok on %d rank%s\n", size, size > 1 ? "s" : "");
  MPI_Finalize();
  return 0;
}
