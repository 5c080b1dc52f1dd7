/* test_mpi_halo.c: the row partition and the halo plan of gkc-mpi, without MPI or gkcd.
 *
 * Every rank's plan is built in this one process; the exchange MPI would do
 * is done here by copying, and the split spmv (own columns + ghosts) is
 * checked against a float64 spmv of the whole matrix.  On matrices whose
 * coupling is known (a tridiagonal, a 3-D Poisson grid cut into slabs) the
 * exact ghost lists are checked too.
 */
#include <stdint.h>
#include <time.h>

#include "halo.h"
#include "test.h"

typedef struct {
  int64_t n, nnz;
  int32_t *row_ptr;
  int64_t *col;
  float *val;
} gcsr;

static uint64_t rng_state;
static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static float rndf(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2 - 1); }

static void gcsr_free(gcsr *m) { free(m->row_ptr), free(m->col), free(m->val); }

static void gcsr_alloc(gcsr *m, int64_t n, int64_t cap) {
  m->n = n, m->nnz = 0;
  m->row_ptr = calloc((size_t)n + 1, sizeof *m->row_ptr);
  m->col = malloc((size_t)cap * sizeof *m->col);
  m->val = malloc((size_t)cap * sizeof *m->val);
  ASSERT(m->row_ptr && m->col && m->val);
}

static void tridiag(gcsr *m, int64_t n) {
  gcsr_alloc(m, n, 3 * n);
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = i - 1; j <= i + 1; j++)
      if (j >= 0 && j < n) m->col[m->nnz] = j, m->val[m->nnz++] = j == i ? 2.0f : -1.0f;
    m->row_ptr[i + 1] = (int32_t)m->nnz;
  }
}

static void poisson3(gcsr *m, int64_t nx, int64_t ny, int64_t nz) {
  int64_t n = nx * ny * nz, sz = nx * ny;
  gcsr_alloc(m, n, 7 * n);
  for (int64_t i = 0; i < n; i++) {
    int64_t x = i % nx, y = (i / nx) % ny, z = i / sz;
    int64_t nb[7] = {z > 0 ? i - sz : -1, y > 0 ? i - nx : -1, x > 0 ? i - 1 : -1, i,
                     x < nx - 1 ? i + 1 : -1, y < ny - 1 ? i + nx : -1, z < nz - 1 ? i + sz : -1};
    for (int k = 0; k < 7; k++)
      if (nb[k] >= 0) m->col[m->nnz] = nb[k], m->val[m->nnz++] = nb[k] == i ? 6.0f : -1.0f;
    m->row_ptr[i + 1] = (int32_t)m->nnz;
  }
}

/* Random pattern, unsymmetric, 0 to 12 entries a row (some empty rows),
 * columns anywhere, duplicates allowed. */
static void random_csr(gcsr *m, int64_t n) {
  gcsr_alloc(m, n, 12 * n);
  for (int64_t i = 0; i < n; i++) {
    int k = (int)(rnd() % 13);
    for (int j = 0; j < k; j++) {
      int64_t c = rnd() % 4 ? (int64_t)(rnd() % (uint64_t)n) : i; /* mostly anywhere */
      m->col[m->nnz] = c, m->val[m->nnz++] = rndf();
    }
    m->row_ptr[i + 1] = (int32_t)m->nnz;
  }
}

static int64_t row_nnz(int64_t i, const void *arg) {
  const gcsr *m = arg;
  return (int64_t)m->row_ptr[i + 1] - m->row_ptr[i];
}

/* Builds every rank's plan (local rows re-based), then the send sides from
 * the receivers' ghost lists, as the MPI_Alltoallv in dmat.c does. */
static halo_plan *plans_for(const gcsr *m, const int64_t *off, int P) {
  halo_plan *pl = calloc((size_t)P, sizeof *pl);
  ASSERT(pl);
  char msg[256];
  for (int q = 0; q < P; q++) {
    int32_t r0 = (int32_t)off[q], rows = (int32_t)(off[q + 1] - off[q]);
    int32_t *rp = malloc(((size_t)rows + 1) * sizeof *rp);
    for (int32_t i = 0; i <= rows; i++) rp[i] = m->row_ptr[r0 + i] - m->row_ptr[r0];
    int rc = halo_plan_build(&pl[q], off, P, q, m->n, rows, rp, m->col + m->row_ptr[r0],
                             m->val + m->row_ptr[r0], msg, sizeof msg);
    if (rc) TEST_FAIL("rank %d: %s", q, msg);
    free(rp);
  }
  for (int q = 0; q < P; q++) { /* what each p asks q for */
    int *count = calloc((size_t)P, sizeof *count);
    /* Several ranks may ask q for the same row: size by what they ask
     * (n + 1 overflowed for some seeds under ASan). */
    size_t total = 1;
    for (int p = 0; p < P; p++) total += (size_t)pl[p].recv_count[q];
    int64_t *ids = malloc(total * sizeof *ids);
    int64_t k = 0;
    for (int p = 0; p < P; p++) {
      count[p] = pl[p].recv_count[q];
      for (int j = 0; j < count[p]; j++) ids[k++] = pl[p].ghost[pl[p].recv_displ[q] + j];
    }
    if (halo_plan_set_sends(&pl[q], count, ids, msg, sizeof msg)) TEST_FAIL("rank %d: %s", q, msg);
    free(count), free(ids);
  }
  return pl;
}

/* The invariants every plan must hold, and y = A x through the plans
 * against the whole matrix in float64. */
static void check_plans(const gcsr *m, const int64_t *off, int P, halo_plan *pl) {
  float *x = malloc((size_t)m->n * sizeof *x);
  for (int64_t i = 0; i < m->n; i++) x[i] = rndf();
  for (int q = 0; q < P; q++) {
    halo_plan *p = &pl[q];
    ASSERT_EQ(p->row0, off[q]);
    ASSERT_EQ(p->d_nnz + p->o_nnz, (int64_t)m->row_ptr[off[q + 1]] - m->row_ptr[off[q]]);
    ASSERT_EQ(p->recv_count[q], 0);
    int64_t sum = 0;
    for (int r = 0; r < P; r++) {
      ASSERT_EQ(p->recv_displ[r], sum);
      sum += p->recv_count[r];
      for (int j = 0; j < p->recv_count[r]; j++) { /* grouped by the right owner */
        int64_t g = p->ghost[p->recv_displ[r] + j];
        ASSERT(g >= off[r] && g < off[r + 1]);
      }
    }
    ASSERT_EQ(sum, p->nghost);
    char *used = calloc((size_t)p->nghost + 1, 1);
    for (int32_t k = 0; k < p->nghost; k++) {
      if (k) ASSERT(p->ghost[k] > p->ghost[k - 1]); /* sorted, unique */
      ASSERT(p->ghost[k] < p->row0 || p->ghost[k] >= p->row0 + p->rows);
    }
    for (int64_t k = 0; k < p->o_nnz; k++) {
      ASSERT(p->o_col[k] >= 0 && p->o_col[k] < p->nghost);
      used[p->o_col[k]] = 1;
    }
    for (int32_t k = 0; k < p->nghost; k++) ASSERT(used[k]); /* no ghost that no row reads */
    free(used);
    for (int64_t k = 0; k < p->d_nnz; k++) ASSERT(p->d_col[k] >= 0 && p->d_col[k] < p->rows);
    /* The exchange: rank q's ghost buffer from the owners' send lists. */
    float *recv = malloc(((size_t)p->nghost + 1) * sizeof *recv);
    for (int r = 0; r < P; r++) {
      ASSERT_EQ(pl[r].send_count[q], p->recv_count[r]);
      for (int j = 0; j < p->recv_count[r]; j++) {
        int32_t li = pl[r].send_idx[pl[r].send_displ[q] + j];
        ASSERT_EQ(pl[r].row0 + li, p->ghost[p->recv_displ[r] + j]);
        recv[p->recv_displ[r] + j] = x[pl[r].row0 + li];
      }
    }
    for (int32_t i = 0; i < p->rows; i++) {
      double split = 0, whole = 0, mag = 0;
      for (int32_t k = p->d_row_ptr[i]; k < p->d_row_ptr[i + 1]; k++)
        split += (double)p->d_val[k] * x[p->row0 + p->d_col[k]];
      for (int32_t k = p->o_row_ptr[i]; k < p->o_row_ptr[i + 1]; k++)
        split += (double)p->o_val[k] * recv[p->o_col[k]];
      int64_t gi = p->row0 + i;
      for (int32_t k = m->row_ptr[gi]; k < m->row_ptr[gi + 1]; k++) {
        whole += (double)m->val[k] * x[m->col[k]];
        mag += fabs((double)m->val[k] * x[m->col[k]]);
      }
      ASSERT_NEAR(split, whole, 1e-14 * (mag + 1));
    }
    free(recv);
  }
  free(x);
}

static void free_plans(halo_plan *pl, int P) {
  for (int q = 0; q < P; q++) halo_plan_free(&pl[q]);
  free(pl);
}

static void test_partition(void) {
  for (int t = 0; t < 40; t++) {
    gcsr m;
    int64_t n = 1 + (int64_t)(rnd() % 300);
    random_csr(&m, n);
    int P = 1 + (int)(rnd() % 9);
    int64_t off[10];
    if (n < P) {
      ASSERT_EQ(halo_partition(n, P, row_nnz, &m, off), -1);
      gcsr_free(&m);
      continue;
    }
    ASSERT_EQ(halo_partition(n, P, row_nnz, &m, off), 0);
    ASSERT_EQ(off[0], 0);
    ASSERT_EQ(off[P], n);
    int64_t total = m.nnz + n, heaviest = 0;
    for (int64_t i = 0; i < n; i++) heaviest = row_nnz(i, &m) + 1 > heaviest ? row_nnz(i, &m) + 1 : heaviest;
    for (int q = 0; q < P; q++) {
      ASSERT(off[q + 1] > off[q]);
      int64_t w = (int64_t)m.row_ptr[off[q + 1]] - m.row_ptr[off[q]] + (off[q + 1] - off[q]);
      /* Balanced: no part over its share by more than one row's weight,
       * unless it is down to one row (a row cannot be split). */
      if (off[q + 1] - off[q] > 1) ASSERT(w <= total / P + 2 * heaviest);
      /* Exact: a cut falls at the first row where the running weight
       * reaches (q+1)/P of the total, or earlier only when every part left
       * is down to one row. */
      if (q < P - 1) {
        int64_t target = (int64_t)((double)total * (q + 1) / P);
        int64_t cum = (int64_t)m.row_ptr[off[q + 1]] + off[q + 1];
        int64_t before = (int64_t)m.row_ptr[off[q + 1] - 1] + off[q + 1] - 1;
        ASSERT(cum >= target || n - off[q + 1] == P - 1 - q);
        ASSERT(before < target || off[q + 1] - 1 == off[q]);
      }
      ASSERT_EQ(halo_owner(off, P, off[q]), q);
      ASSERT_EQ(halo_owner(off, P, off[q + 1] - 1), q);
    }
    halo_plan *pl = plans_for(&m, off, P);
    check_plans(&m, off, P, pl);
    free_plans(pl, P);
    gcsr_free(&m);
  }
}

/* A tridiagonal on 4 ranks of 5 rows: each rank needs exactly the row on
 * either side of its range, and sends its first and last rows. */
static void test_tridiagonal(void) {
  gcsr m;
  tridiag(&m, 20);
  int64_t off[5] = {0, 5, 10, 15, 20};
  halo_plan *pl = plans_for(&m, off, 4);
  check_plans(&m, off, 4, pl);
  for (int q = 0; q < 4; q++) {
    halo_plan *p = &pl[q];
    int32_t want = (q > 0) + (q < 3);
    ASSERT_EQ(p->nghost, want);
    ASSERT_EQ(p->nsend, want);
    int k = 0;
    if (q > 0) {
      ASSERT_EQ(p->ghost[k++], off[q] - 1);
      ASSERT_EQ(p->recv_count[q - 1], 1);
      ASSERT_EQ(p->send_idx[p->send_displ[q - 1]], 0);
    }
    if (q < 3) {
      ASSERT_EQ(p->ghost[k++], off[q + 1]);
      ASSERT_EQ(p->recv_count[q + 1], 1);
      ASSERT_EQ(p->send_idx[p->send_displ[q + 1]], 4);
    }
    for (int r = 0; r < 4; r++)
      if (r != q - 1 && r != q + 1) ASSERT_EQ(p->recv_count[r] + p->send_count[r], 0);
    ASSERT_EQ(p->o_nnz, want);
  }
  free_plans(pl, 4);
  gcsr_free(&m);
}

/* A 6 x 5 x 8 Poisson grid cut into 4 slabs of 2 z-planes: a rank needs the
 * whole plane below its slab and the one above, nothing else. */
static void test_poisson_slabs(void) {
  gcsr m;
  int64_t nx = 6, ny = 5, nz = 8, plane = nx * ny;
  poisson3(&m, nx, ny, nz);
  int64_t off[5];
  for (int q = 0; q <= 4; q++) off[q] = q * 2 * plane;
  halo_plan *pl = plans_for(&m, off, 4);
  check_plans(&m, off, 4, pl);
  for (int q = 0; q < 4; q++) {
    halo_plan *p = &pl[q];
    ASSERT_EQ(p->nghost, ((q > 0) + (q < 3)) * plane);
    int64_t k = 0;
    if (q > 0)
      for (int64_t j = 0; j < plane; j++) ASSERT_EQ(p->ghost[k++], off[q] - plane + j);
    if (q < 3)
      for (int64_t j = 0; j < plane; j++) ASSERT_EQ(p->ghost[k++], off[q + 1] + j);
    /* Each ghost is read by exactly one row: the point across the cut. */
    ASSERT_EQ(p->o_nnz, p->nghost);
    if (q < 3) /* sends its top plane up */
      for (int64_t j = 0; j < plane; j++)
        ASSERT_EQ(p->send_idx[p->send_displ[q + 1] + j], p->rows - plane + j);
  }
  free_plans(pl, 4);
  /* Balanced by nonzeros, the cuts need not fall on planes: still exact. */
  int64_t off2[8];
  ASSERT_EQ(halo_partition(m.n, 7, row_nnz, &m, off2), 0);
  pl = plans_for(&m, off2, 7);
  check_plans(&m, off2, 7, pl);
  free_plans(pl, 7);
  gcsr_free(&m);
}

static void test_errors(void) {
  gcsr m;
  tridiag(&m, 10);
  char msg[256];
  halo_plan p;
  int64_t off[3] = {0, 5, 10};
  int32_t rp[6];
  for (int i = 0; i <= 5; i++) rp[i] = m.row_ptr[i];
  m.col[3] = 10; /* out of range */
  ASSERT_EQ(halo_plan_build(&p, off, 2, 0, 10, 5, rp, m.col, m.val, msg, sizeof msg), -1);
  ASSERT_CONTAINS(msg, "col_idx[3] = 10 is outside [0, 10)");
  m.col[3] = -1;
  ASSERT_EQ(halo_plan_build(&p, off, 2, 0, 10, 5, rp, m.col, m.val, msg, sizeof msg), -1);
  ASSERT_CONTAINS(msg, "col_idx[3] = -1");
  m.col[3] = 2;
  ASSERT_EQ(halo_plan_build(&p, off, 2, 0, 10, 4, rp, m.col, m.val, msg, sizeof msg), -1);
  ASSERT_CONTAINS(msg, "4 rows given, its range holds 5");
  int64_t gap[3] = {0, 5, 9};
  ASSERT_EQ(halo_plan_build(&p, gap, 2, 0, 10, 5, rp, m.col, m.val, msg, sizeof msg), -1);
  ASSERT_CONTAINS(msg, "not [0, 10)");
  int64_t empty[3] = {0, 0, 10};
  ASSERT_EQ(halo_plan_build(&p, empty, 2, 1, 10, 10, m.row_ptr, m.col, m.val, msg, sizeof msg), -1);
  ASSERT_CONTAINS(msg, "rank order, none empty");
  ASSERT_EQ(halo_plan_build(&p, off, 2, 0, 10, 5, rp, m.col, m.val, msg, sizeof msg), 0);
  int count[2] = {0, 2};
  int64_t ids[2] = {4, 7}; /* rank 1 asks rank 0 for row 7, which is rank 1's own */
  ASSERT_EQ(halo_plan_set_sends(&p, count, ids, msg, sizeof msg), -1);
  ASSERT_CONTAINS(msg, "rank 1 asked rank 0 for row 7");
  int self[2] = {1, 0};
  ASSERT_EQ(halo_plan_set_sends(&p, self, ids, msg, sizeof msg), -1);
  halo_plan_free(&p);
  gcsr_free(&m);
}

int main(void) {
  const char *s = getenv("GKC_TEST_SEED");
  rng_state = s ? strtoull(s, NULL, 10) : 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
  if (!rng_state) rng_state = 1;
  fprintf(stderr, "seed %llu (GKC_TEST_SEED to replay)\n", (unsigned long long)rng_state);
  test_partition();
  test_tridiagonal();
  test_poisson_slabs();
  test_errors();
  printf("test_mpi_halo: passed\n");
  return 0;
}
