/* cpu_amg_sparse.h: the AMG setup's sparse matrices (cpu_amg.c's own
 * header, not installed): the hierarchy's layout, its memory (every array
 * counted in the hierarchy, so that opts.max_bytes bounds the setup),
 * and the sparse products the setup and the cycle run on OpenMP threads.
 * Each product gives the same bits on any number of threads.
 *
 * Implemented in: cpu_amg_sparse.c
 */
#ifndef CPU_AMG_SPARSE_H
#define CPU_AMG_SPARSE_H

#include <stddef.h>
#include <stdint.h>

/* What the setup's arrays are counted in: bytes held, the bound on them
 * (cpu_amg_opts.max_bytes; 0: none), and the threads a pass may take (<=
 * 0: all). */
typedef struct {
  size_t bytes, max_bytes;
  int nth;
} amg_mem;

/* The failures below; cpu_amg.c checks they are its AMG_ENOMEM and
 * CPU_AMG_ETOO_LARGE. */
enum { AMG_ENOMEM = -1, AMG_ETOO_LARGE = -4 };

/* Below this many rows a pass runs on one thread: starting a parallel
 * region costs more than a short pass (the coarse levels). */
enum { PAR_MIN = 16384 };

typedef struct {
  int32_t n, m; /* rows, columns */
  int32_t *rp, *ci;
  double *v;
} csr;

typedef struct {
  csr A, P, R;      /* R = P^T; P and R empty on the last level */
  double *dinv;     /* 1 / a_ii (Chebyshev) */
  double *dl1inv;   /* 1 / sum_j |a_ij| (l1-Jacobi) */
  double rho;       /* rho(D^-1 A), estimated */
  double *b, *x;    /* the level's right-hand side and solution (level >= 1) */
  double *r, *d, *q; /* scratch */
} level;


/* count * size bytes, counted in mem; NULL when that overflows, passes
 * max_bytes or malloc fails (big arrays in huge pages: cpu_hugemem.h). */
void *amg_alloc(amg_mem *mem, size_t count, size_t size);
/* The threads a pass over n rows runs on (1 below PAR_MIN). */
int amg_threads(const amg_mem *mem, int32_t n);

/* Frees a's arrays and zeroes it (no accounting). */
void amg_csr_free(csr *a);
/* Room for an n x m matrix of nnz entries: 0, or AMG_ENOMEM with a
 * left empty. */
int amg_csr_alloc(amg_mem *mem, csr *a, int32_t n, int32_t m, int64_t nnz);
/* Frees a and takes its bytes off mem's count. */
void amg_csr_drop(amg_mem *mem, csr *a);

/* y = A x (add 0) or y += A x (add 1). */
void amg_spmv(const amg_mem *mem, const csr *A, const double *x, double *y, int add);
/* C = A B: 0, AMG_ENOMEM or AMG_ETOO_LARGE (C then empty). */
int amg_spgemm(amg_mem *mem, const csr *A, const csr *B, csr *C);
/* T = A^T, each column's entries in increasing row order: 0 or
 * AMG_ENOMEM. */
int amg_transpose(amg_mem *mem, const csr *A, csr *T);
/* P = (I - omega D^-1 A) T for level L's matrix, dinv and rho, T the
 * tentative prolongator of the aggregates agg (na of them; cpu_amg.h,
 * steps 3-4): 0, AMG_ENOMEM or AMG_ETOO_LARGE (P then empty). */
int amg_prolongator(amg_mem *mem, level *L, const int32_t *agg, int32_t na, csr *P);

#endif
