/* test_part_plan: the row partition and halo plan of daemon/part_plan.c on
 * their own: blocks balanced by nonzeros (each cut within one row of the
 * ideal), the exact halo of a tridiagonal matrix and of the 2-D Laplacian,
 * and, on random matrices, that every block's local CSR maps back to the
 * global matrix and that its send lists mirror the receivers' halos. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "part_plan.h"
#include "test.h"

#define CHECK(cond, ...) \
  do { if (!(cond)) TEST_FAIL(__VA_ARGS__); } while (0)

typedef struct {
  int32_t rows, cols;
  int32_t *rp, *ci;
} csr;

static void csr_free(csr *a) { free(a->rp), free(a->ci); }

/* The 5-point Laplacian's pattern on a g x g grid, rows in grid order. */
static csr laplacian(int32_t g) {
  csr a = {g * g, g * g, malloc(sizeof(int32_t) * ((size_t)g * g + 1)), malloc(sizeof(int32_t) * 5 * (size_t)g * g)};
  int32_t t = 0;
  a.rp[0] = 0;
  for (int32_t r = 0; r < g * g; r++) {
    int32_t i = r / g, j = r % g;
    if (i > 0) a.ci[t++] = r - g;
    if (j > 0) a.ci[t++] = r - 1;
    a.ci[t++] = r;
    if (j < g - 1) a.ci[t++] = r + 1;
    if (i < g - 1) a.ci[t++] = r + g;
    a.rp[r + 1] = t;
  }
  return a;
}

static csr tridiagonal(int32_t n) {
  csr a = {n, n, malloc(sizeof(int32_t) * ((size_t)n + 1)), malloc(sizeof(int32_t) * 3 * (size_t)n)};
  int32_t t = 0;
  a.rp[0] = 0;
  for (int32_t r = 0; r < n; r++) {
    for (int32_t c = r - 1; c <= r + 1; c++)
      if (c >= 0 && c < n) a.ci[t++] = c;
    a.rp[r + 1] = t;
  }
  return a;
}

/* Rows of random lengths (some long), distinct sorted columns. */
static csr random_csr(int32_t rows, int32_t cols, unsigned *seed) {
  csr a = {rows, cols, malloc(sizeof(int32_t) * ((size_t)rows + 1)), NULL};
  a.rp[0] = 0;
  for (int32_t r = 0; r < rows; r++) {
    int32_t len = (int32_t)(rand_r(seed) % 8);
    if (rand_r(seed) % 20 == 0) len *= 10;
    if (len > cols) len = cols;
    a.rp[r + 1] = a.rp[r] + len;
  }
  a.ci = malloc(sizeof(int32_t) * ((size_t)a.rp[rows] + 1));
  char *used = calloc((size_t)cols, 1);
  for (int32_t r = 0; r < rows; r++) {
    int32_t len = a.rp[r + 1] - a.rp[r], got = 0;
    while (got < len) {
      int32_t c = (int32_t)(rand_r(seed) % (unsigned)cols);
      if (!used[c]) used[c] = 1, got++;
    }
    int32_t t = a.rp[r];
    for (int32_t c = 0; c < cols; c++)
      if (used[c]) a.ci[t++] = c, used[c] = 0;
  }
  free(used);
  return a;
}

/* Every cut within one row of j * nnz / k; blocks cover the rows in order. */
static void check_balance(const csr *a, int k) {
  int32_t start[65];
  part_plan_bounds(a->rows, a->rp, k, start);
  int64_t nnz = a->rp[a->rows];
  CHECK(start[0] == 0 && start[k] == a->rows, "bounds end at 0 and rows");
  for (int j = 1; j < k; j++) {
    CHECK(start[j] > start[j - 1], "block %d has no row", j - 1);
    double ideal = (double)nnz * j / k;
    int32_t r = start[j];
    /* the ideal lies between the counts one row either side of the cut,
     * unless the cut was pushed to keep a row in every block */
    int pushed = r == start[j - 1] + 1 || r == a->rows - (k - j);
    CHECK(pushed || (a->rp[r - 1] <= ideal && ideal <= a->rp[r + 1]),
          "cut %d at row %d: counts %d..%d around it, ideal %.1f", j, r, a->rp[r - 1],
          a->rp[r + 1], ideal);
  }
}

/* Local CSR back to global; halo ascending, owned by others; send lists
 * are the receivers' halos in the sender's numbering. */
static void check_plan(const csr *a, const part_plan *p) {
  for (int j = 0; j < p->k; j++) {
    const part_block *b = &p->b[j];
    CHECK(b->nnz == a->rp[b->row0 + b->rows] - a->rp[b->row0], "block %d nnz", j);
    for (int32_t i = 0; i + 1 < b->nhalo; i++) CHECK(b->halo[i] < b->halo[i + 1], "halo ascending");
    for (int32_t i = 0; i < b->rows; i++) {
      int32_t g = b->row0 + i;
      CHECK(b->row_ptr[i + 1] - b->row_ptr[i] == a->rp[g + 1] - a->rp[g], "row %d length", g);
      for (int32_t t = 0; t < b->row_ptr[i + 1] - b->row_ptr[i]; t++) {
        int32_t l = b->col_idx[b->row_ptr[i] + t];
        int32_t c = l < b->ncols ? b->col0 + l : b->halo[l - b->ncols];
        CHECK(l >= 0 && l < b->ncols + b->nhalo && c == a->ci[a->rp[g] + t],
              "block %d row %d entry %d: local %d -> %d, global %d", j, g, t, l, c,
              a->ci[a->rp[g] + t]);
      }
    }
    for (int e = 0; e < p->k; e++) {
      const part_block *o = &p->b[e];
      for (int32_t i = b->recv_off[e]; i < b->recv_off[e + 1]; i++) {
        CHECK(e != j && b->halo[i] >= o->col0 && b->halo[i] < o->col0 + o->ncols,
              "halo column %d of block %d is not block %d's", b->halo[i], j, e);
        int32_t s = o->send_off[j] + (i - b->recv_off[e]);
        CHECK(o->send[s] + o->col0 == b->halo[i], "block %d sends %d where %d reads %d", e,
              o->send[s] + o->col0, j, b->halo[i]);
      }
      if (e != j) CHECK(o->send_off[j + 1] - o->send_off[j] == b->recv_off[e + 1] - b->recv_off[e],
                        "send %d->%d count", e, j);
    }
  }
}

int main(void) {
  /* Tridiagonal, 30 rows over 3: cuts at 10 and 20 (nnz 29 + 30 + 29);
   * block 1 reads exactly columns 9 and 20, blocks 0 and 2 one each. */
  csr t = tridiagonal(30);
  part_plan p;
  CHECK(part_plan_make(&p, 3, t.rows, t.cols, t.rp, t.ci) == 0, "plan");
  check_balance(&t, 3);
  check_plan(&t, &p);
  CHECK(p.b[1].row0 == 10 && p.b[2].row0 == 20, "cuts at %d, %d", p.b[1].row0, p.b[2].row0);
  CHECK(p.b[0].nhalo == 1 && p.b[0].halo[0] == 10, "block 0 halo");
  CHECK(p.b[1].nhalo == 2 && p.b[1].halo[0] == 9 && p.b[1].halo[1] == 20, "block 1 halo");
  CHECK(p.b[2].nhalo == 1 && p.b[2].halo[0] == 19, "block 2 halo");
  CHECK(p.b[1].send_off[0] == 0 && p.b[1].send[0] == 0 && p.b[1].send[1] == 9,
        "block 1 sends its first row to 0 and its last to 2");
  part_plan_free(&p);
  csr_free(&t);

  /* The g x g Laplacian: block [r0, r1) reads exactly [r0 - g, r0) and
   * [r1, r1 + g) (clipped), all of them. */
  for (int k = 1; k <= 5; k++) {
    int32_t g = 23;
    csr a = laplacian(g);
    CHECK(part_plan_make(&p, k, a.rows, a.cols, a.rp, a.ci) == 0, "plan");
    check_balance(&a, k);
    check_plan(&a, &p);
    for (int j = 0; j < k; j++) {
      const part_block *b = &p.b[j];
      int32_t r0 = b->row0, r1 = b->row0 + b->rows, want = 0;
      for (int32_t c = r0 - g > 0 ? r0 - g : 0; c < r0; c++) {
        CHECK(want < b->nhalo && b->halo[want] == c, "k %d block %d halo[%d] != %d", k, j, want, c);
        want++;
      }
      for (int32_t c = r1; c < r1 + g && c < a.rows; c++) {
        CHECK(want < b->nhalo && b->halo[want] == c, "k %d block %d halo[%d] != %d", k, j, want, c);
        want++;
      }
      CHECK(b->nhalo == want, "k %d block %d: %d halo columns, want %d", k, j, b->nhalo, want);
    }
    part_plan_free(&p);
    csr_free(&a);
  }

  /* Random square and rectangular matrices, k up to 7. */
  unsigned seed = 12345;
  for (int round = 0; round < 40; round++) {
    int32_t rows = 7 + (int32_t)(rand_r(&seed) % 400), cols = 1 + (int32_t)(rand_r(&seed) % 500);
    if (round % 3 == 0) cols = rows;
    int k = 1 + (int)(rand_r(&seed) % 7);
    csr a = random_csr(rows, cols, &seed);
    CHECK(part_plan_make(&p, k, a.rows, a.cols, a.rp, a.ci) == 0, "plan");
    check_balance(&a, k);
    check_plan(&a, &p);
    int32_t owned = 0;
    for (int j = 0; j < k; j++) owned += p.b[j].ncols;
    CHECK(owned == cols, "the blocks own %d of %d columns", owned, cols);
    part_plan_free(&p);
    csr_free(&a);
  }
  /* Every row empty: still one row per block. */
  int32_t rp0[6] = {0, 0, 0, 0, 0, 0};
  CHECK(part_plan_make(&p, 5, 5, 5, rp0, NULL) == 0, "empty plan");
  for (int j = 0; j < 5; j++) CHECK(p.b[j].rows == 1 && p.b[j].nhalo == 0, "empty block %d", j);
  part_plan_free(&p);
  printf("test_part_plan: ok\n");
  return 0;
}
