/* cpu_amg_sparse.c: the AMG setup's sparse matrices (see cpu_amg_sparse.h):
 * memory counted in the hierarchy, y = A x, C = A B, A^T, and the
 * smoothed prolongator. */
#include "cpu_amg_sparse.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_hugemem.h"

/* count * size bytes, counted in h; NULL when that overflows, passes
 * max_bytes or malloc fails. */
void *amg_alloc(amg_mem *h, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  size_t b = count * size;
  if (h->max_bytes && (b > h->max_bytes || h->bytes > h->max_bytes - b)) return NULL;
  void *p = cpu_hugemem_alloc(b);
  if (p) h->bytes += b;
  return p;
}

int amg_threads(const amg_mem *h, int32_t n) {
  if (n < PAR_MIN) return 1;
  return h->nth > 0 ? h->nth : omp_get_max_threads();
}

void amg_csr_free(csr *a) {
  free(a->rp), free(a->ci), free(a->v);
  memset(a, 0, sizeof *a);
}

/* Room for an n x m matrix of nnz entries. */
int amg_csr_alloc(amg_mem *h, csr *a, int32_t n, int32_t m, int64_t nnz) {
  a->n = n, a->m = m;
  a->rp = amg_alloc(h, (size_t)n + 1, sizeof *a->rp);
  a->ci = amg_alloc(h, (size_t)nnz, sizeof *a->ci);
  a->v = amg_alloc(h, (size_t)nnz, sizeof *a->v);
  if (a->rp && a->ci && a->v) return 0;
  amg_csr_free(a);
  return AMG_ENOMEM;
}

/* Frees a and takes its bytes off h's count (a part never allocated
 * counts nothing). */
void amg_csr_drop(amg_mem *h, csr *a) {
  size_t nnz = a->ci || a->v ? (size_t)a->rp[a->n] : 0;
  if (a->rp) h->bytes -= ((size_t)a->n + 1) * sizeof *a->rp;
  if (a->ci) h->bytes -= nnz * sizeof *a->ci;
  if (a->v) h->bytes -= nnz * sizeof *a->v;
  amg_csr_free(a);
}

/* y = A x (beta 0) or y += A x (beta 1) */
void amg_spmv(const amg_mem *h, const csr *A, const double *x, double *y, int add) {
#pragma omp parallel for num_threads(amg_threads(h, A->n)) schedule(static)
  for (int32_t i = 0; i < A->n; i++) {
    double s = 0;
    for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++) s += A->v[j] * x[A->ci[j]];
    y[i] = add ? y[i] + s : s;
  }
}

/* C = A B (A n x k, B k x m): a symbolic pass counting each row's columns,
 * then a numeric one, both with a per-thread marker over B's columns (rows
 * in increasing order per thread, so a mark below the row's start is
 * stale).  Repeated entries of A or B add up. */
int amg_spgemm(amg_mem *h, const csr *A, const csr *B, csr *C) {
  int nth = amg_threads(h, A->n);
  int32_t m = B->m;
  int rc = AMG_ENOMEM;
  int32_t *mark = amg_alloc(h, (size_t)nth * (size_t)(m > 0 ? m : 1), sizeof *mark);
  C->n = A->n, C->m = m;
  /* each row's count at rp[i + 1] (at most m: an int32_t), then summed */
  int32_t *cnt = C->rp = amg_alloc(h, (size_t)A->n + 1, sizeof *C->rp);
  if (!mark || !cnt) goto out;
  /* (the arrays as restrict locals: a store to the marks or to C cannot
   * alias them, so the compiler keeps A's and B's pointers in registers
   * instead of reloading them through the structs after every store) */
  const int32_t *restrict arp = A->rp, *restrict aci = A->ci, *restrict brp = B->rp,
                          *restrict bci = B->ci;
  const double *restrict av = A->v, *restrict bv = B->v;
#pragma omp parallel num_threads(nth)
  {
    int32_t *restrict mk = mark + (size_t)omp_get_thread_num() * (size_t)m;
    for (int32_t j = 0; j < m; j++) mk[j] = -1;
#pragma omp for schedule(static)
    for (int32_t i = 0; i < A->n; i++) {
      int32_t c = 0;
      for (int32_t t = arp[i]; t < arp[i + 1]; t++) {
        int32_t k = aci[t];
        for (int32_t u = brp[k]; u < brp[k + 1]; u++)
          if (mk[bci[u]] != i) mk[bci[u]] = i, c++;
      }
      cnt[i + 1] = c;
    }
  }
  int64_t nnz = 0;
  cnt[0] = 0;
  for (int32_t i = 0; i < A->n; i++) {
    nnz += cnt[i + 1];
    if (nnz > INT32_MAX) {
      rc = AMG_ETOO_LARGE;
      goto out;
    }
    cnt[i + 1] = (int32_t)nnz;
  }
  C->ci = amg_alloc(h, (size_t)nnz, sizeof *C->ci);
  C->v = amg_alloc(h, (size_t)nnz, sizeof *C->v);
  if (!C->ci || !C->v) goto out;
  const int32_t *restrict crp = C->rp;
  int32_t *restrict cci = C->ci;
  double *restrict cv = C->v;
#pragma omp parallel num_threads(nth)
  {
    int32_t *restrict mk = mark + (size_t)omp_get_thread_num() * (size_t)m;
    for (int32_t j = 0; j < m; j++) mk[j] = -1;
#pragma omp for schedule(static)
    for (int32_t i = 0; i < A->n; i++) {
      int32_t start = crp[i], len = 0;
      for (int32_t t = arp[i]; t < arp[i + 1]; t++) {
        int32_t k = aci[t];
        double a = av[t];
        for (int32_t u = brp[k]; u < brp[k + 1]; u++) {
          int32_t j = bci[u];
          if (mk[j] < start) {
            mk[j] = start + len;
            cci[start + len] = j;
            cv[start + len] = a * bv[u];
            len++;
          } else {
            cv[mk[j]] += a * bv[u];
          }
        }
      }
    }
  }
  rc = 0;
out:
  if (mark) h->bytes -= (size_t)nth * (size_t)(m > 0 ? m : 1) * sizeof *mark;
  free(mark);
  if (rc) amg_csr_drop(h, C);
  return rc;
}

/* T = A^T: a counting sort by column, each column's entries in increasing
 * row order.  On several threads each takes a block of rows and places
 * its entries after those of the blocks above it (per-block column
 * counts): the same T as one thread gives. */
int amg_transpose(amg_mem *h, const csr *A, csr *T) {
  int32_t nnz = A->rp[A->n], m = A->m;
  if (amg_csr_alloc(h, T, m, A->n, nnz)) return AMG_ENOMEM;
  int nb = amg_threads(h, A->n);
  size_t cb = (size_t)nb * ((size_t)m + 1) * sizeof(int32_t);
  int32_t *cnt = nb > 1 ? amg_alloc(h, (size_t)nb * ((size_t)m + 1), sizeof *cnt) : NULL;
  if (!cnt) { /* one thread (or no room for the counts) */
    memset(T->rp, 0, ((size_t)m + 1) * sizeof *T->rp);
    for (int32_t t = 0; t < nnz; t++) T->rp[A->ci[t] + 1]++;
    for (int32_t j = 0; j < m; j++) T->rp[j + 1] += T->rp[j];
    for (int32_t i = 0; i < A->n; i++)
      for (int32_t t = A->rp[i]; t < A->rp[i + 1]; t++) {
        int32_t p = T->rp[A->ci[t]]++;
        T->ci[p] = i;
        T->v[p] = A->v[t];
      }
    for (int32_t j = m; j > 0; j--) T->rp[j] = T->rp[j - 1];
    T->rp[0] = 0;
    return 0;
  }
#pragma omp parallel num_threads(nb)
  {
    int b = omp_get_thread_num(), tn = omp_get_num_threads();
    int32_t lo = (int32_t)((int64_t)A->n * b / tn), hi = (int32_t)((int64_t)A->n * (b + 1) / tn);
    int32_t *c = cnt + (size_t)b * ((size_t)m + 1);
    memset(c, 0, ((size_t)m + 1) * sizeof *c);
    for (int32_t t = A->rp[lo]; t < A->rp[hi]; t++) c[A->ci[t]]++;
#pragma omp barrier
    /* column j's start for block b: T's column start + the blocks above */
#pragma omp for schedule(static)
    for (int32_t j = 0; j < m; j++) {
      int32_t run = 0;
      for (int q = 0; q < tn; q++) {
        int32_t *cq = cnt + (size_t)q * ((size_t)m + 1);
        int32_t k = cq[j];
        cq[j] = run;
        run += k;
      }
      T->rp[j + 1] = run; /* the column's length, summed below */
    }
#pragma omp single
    {
      T->rp[0] = 0;
      for (int32_t j = 0; j < m; j++) T->rp[j + 1] += T->rp[j];
    }
    for (int32_t i = lo; i < hi; i++)
      for (int32_t t = A->rp[i]; t < A->rp[i + 1]; t++) {
        int32_t j = A->ci[t], p = T->rp[j] + c[j]++;
        T->ci[p] = i;
        T->v[p] = A->v[t];
      }
  }
  h->bytes -= cb;
  free(cnt);
  return 0;
}

/* Rows of A up to this long gather their prolongator columns by a linear
 * search of the columns found so far (a stencil's row meets a few);
 * longer rows (coarse levels of a 3-D problem) mark them in an array over
 * the aggregates, as spgemm does. */
enum { SHORT_ROW = 32 };

/* Row i of A T's distinct columns (T: ts[agg[j]] in row j, column
 * agg[j]), in order of first appearance: into col (and, with val, the
 * sums of a_ij ts[agg[j]] into val); their number.  mk marks long rows'
 * columns (see spgemm). */
static int32_t prol_row(const csr *A, const int32_t *agg, const double *ts, int32_t i,
                        int32_t *restrict col, double *restrict val, int32_t *restrict mk) {
  int32_t len = 0, lo = A->rp[i], hi = A->rp[i + 1];
  const int32_t *restrict ci = A->ci;
  const double *restrict av = A->v;
  if (hi - lo <= SHORT_ROW) {
    for (int32_t t = lo; t < hi; t++) {
      int32_t c = agg[ci[t]], p = 0;
      while (p < len && col[p] != c) p++;
      if (p == len) {
        col[len++] = c;
        if (val) val[p] = av[t] * ts[c];
      } else if (val) {
        val[p] += av[t] * ts[c];
      }
    }
    return len;
  }
  for (int32_t t = lo; t < hi; t++) {
    int32_t c = agg[ci[t]];
    if (mk[c] < 0 || mk[c] >= len || col[mk[c]] != c) { /* a mark left by another row */
      mk[c] = len;
      col[len] = c;
      if (val) val[len] = av[t] * ts[c];
      len++;
    } else if (val) {
      val[mk[c]] += av[t] * ts[c];
    }
  }
  return len;
}

/* P = (I - omega D^-1 A) T for the aggregates agg (na of them), T the
 * tentative prolongator (cpu_amg.h, step 3).  A T is A with each column j
 * renamed agg[j] and the repeats added: built here directly, a count pass
 * then a fill pass over A's rows, rather than as a general product with T
 * through spgemm's marker array (2-D 2048^2 on the H200 host's 16
 * threads: 61-101 ms as that product, 37-75 this way, both with the
 * other changes of session 14). */
int amg_prolongator(amg_mem *h, level *L, const int32_t *agg, int32_t na, csr *P) {
  const csr *A = &L->A;
  const int32_t n = A->n;
  int nth = amg_threads(h, n);
  int32_t maxlen = 0;
#pragma omp parallel for num_threads(nth) schedule(static) reduction(max : maxlen)
  for (int32_t i = 0; i < n; i++)
    if (A->rp[i + 1] - A->rp[i] > maxlen) maxlen = A->rp[i + 1] - A->rp[i];
  /* Per thread: a row's columns (and the long rows' marks), a row's
   * values, each thread's at least a cache line (64 bytes) from the next:
   * packed together, the threads' few-entry rows shared lines, and the
   * whole pass ran 2.5x slower on 16 threads than the product it
   * replaced (H200 host, 2048^2: 180-210 ms against 61-101). */
  const size_t li = 64 / sizeof(int32_t), ld = 64 / sizeof(double);
  size_t mw = ((size_t)maxlen + li - 1) / li * li;
  size_t per = mw + (maxlen > SHORT_ROW ? ((size_t)na + li - 1) / li * li : 0) + li;
  size_t dper = ((size_t)maxlen + ld - 1) / ld * ld + ld;
  int32_t *iw = amg_alloc(h, (size_t)nth * per, sizeof *iw);
  double *dw = amg_alloc(h, (size_t)nth * dper, sizeof *dw);
  /* T's entries: 1 / sqrt(the aggregate's size), a unit column each */
  double *ts = amg_alloc(h, (size_t)na, sizeof *ts);
  int rc = AMG_ENOMEM;
  if (!iw || !dw || !ts) goto out;
  memset(ts, 0, (size_t)na * sizeof *ts);
  for (int32_t i = 0; i < n; i++) ts[agg[i]]++;
  for (int32_t c = 0; c < na; c++) ts[c] = 1.0 / sqrt(ts[c]);
  int64_t total = 0;
  if (!(P->rp = amg_alloc(h, (size_t)n + 1, sizeof *P->rp))) goto out;
  int32_t *cnt = P->rp; /* each row's count at cnt[i + 1], then summed */
#pragma omp parallel num_threads(nth)
  {
    int32_t *col = iw + (size_t)omp_get_thread_num() * per, *mk = col + mw;
    if (maxlen > SHORT_ROW)
      for (int32_t c = 0; c < na; c++) mk[c] = -1;
#pragma omp for schedule(static) reduction(+ : total)
    for (int32_t i = 0; i < n; i++) {
      cnt[i + 1] = prol_row(A, agg, ts, i, col, NULL, mk);
      total += cnt[i + 1];
    }
  }
  if (total > INT32_MAX) {
    rc = AMG_ETOO_LARGE;
    goto out;
  }
  cnt[0] = 0;
  for (int32_t i = 0; i < n; i++) cnt[i + 1] += cnt[i];
  P->n = n, P->m = na;
  P->ci = amg_alloc(h, (size_t)total, sizeof *P->ci);
  P->v = amg_alloc(h, (size_t)total, sizeof *P->v);
  if (!P->ci || !P->v) goto out;
  const double omega = L->rho > 0 ? 4.0 / 3.0 / L->rho : 0;
#pragma omp parallel num_threads(nth)
  {
    int32_t *col = iw + (size_t)omp_get_thread_num() * per, *mk = col + mw;
    double *val = dw + (size_t)omp_get_thread_num() * dper;
    if (maxlen > SHORT_ROW)
      for (int32_t c = 0; c < na; c++) mk[c] = -1;
#pragma omp for schedule(static)
    for (int32_t i = 0; i < n; i++) {
      int32_t len = prol_row(A, agg, ts, i, col, val, mk), at = P->rp[i];
      /* the order of operations of (A T) scaled, then T added: the same
       * bits as the product it replaces */
      for (int32_t p = 0; p < len; p++) {
        double v = val[p] * (-omega * L->dinv[i]);
        if (col[p] == agg[i]) v += ts[col[p]];
        P->ci[at + p] = col[p];
        P->v[at + p] = v;
      }
    }
  }
  rc = 0;
out:
  if (rc) amg_csr_drop(h, P);
  if (iw) h->bytes -= (size_t)nth * per * sizeof *iw;
  if (dw) h->bytes -= (size_t)nth * dper * sizeof *dw;
  if (ts) h->bytes -= (size_t)na * sizeof *ts;
  free(iw), free(dw), free(ts);
  return rc;
}
