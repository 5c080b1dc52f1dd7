/* cpu_amg.h: smoothed-aggregation algebraic multigrid (AMG) on the CPU, as a
 * preconditioner for cpu_solve's CG and BiCGSTAB (issue #27).
 *
 * The algorithm (Vanek, Mandel and Brezina 1996; the same recipe as PyAMG's
 * smoothed_aggregation_solver with its defaults):
 *
 *  1. Strength of connection, symmetric: j is a strong neighbour of i when
 *     i != j and |a_ij| >= theta sqrt(|a_ii a_jj|), theta 0.08 on the finest
 *     level and halved on each coarser one: the coarse operators of
 *     smoothed aggregation spread a row's weight over many more neighbours
 *     (about 26 in 3-D, each then near 1/26 of the diagonal), so a fixed
 *     0.08 finds almost none strong there, the aggregates become singletons
 *     and the levels below grow dense (3-D 64^3: 12 s of setup and a level
 *     of 300 entries a row, against 0.7 s halving it; the same iterations).
 *  2. Greedy aggregation over that graph, in three passes: a node whose
 *     strong neighbours are all free roots an aggregate of itself and them;
 *     a node left over joins an aggregate of one of its strong neighbours;
 *     what is still left roots aggregates of itself and its free strong
 *     neighbours.  Every node ends in one aggregate.
 *  3. Tentative prolongator T (n x aggregates): the constant vector (the
 *     near-null space of a Laplacian-like operator) on each aggregate,
 *     scaled to unit norm per column.
 *  4. Prolongator smoothing: P = (I - omega D^-1 A) T, omega = 4/3 / rho,
 *     rho = rho(D^-1 A) estimated by power iterations.
 *  5. Galerkin coarse operator A_c = R A P with R = P^T (sparse products
 *     with a dense per-thread accumulator; sizes checked, never aborting).
 *  6. Repeat from 1 on A_c until it has <= coarse_size rows (~500), the
 *     aggregation stops shrinking it, or max_levels; the coarsest level is
 *     solved exactly by a dense LU factorisation with partial pivoting in
 *     double (LU rather than Cholesky, so that an indefinite or
 *     nonsymmetric coarse matrix still factors and the Krylov method, not
 *     the preconditioner, reports the breakdown).
 *
 * cpu_amg_apply is one V(1,1) cycle from a zero guess: one smoothing step
 * before and one after the coarse correction on every level.  The smoother
 * is symmetric, so the cycle is a symmetric operator and CG may use it.
 * The smoothers (CPU_AMG_SMOOTHER_*) and their measured cost are described
 * in cpu_amg.c.
 *
 * All arithmetic is double.  Rows are split over OpenMP threads in the
 * products and the cycle's passes on levels large enough to pay for it;
 * the aggregation is sequential (one pass over the matrix).
 *
 * Implemented in: cpu_amg.c
 */
#ifndef CPU_AMG_H
#define CPU_AMG_H

#include <stddef.h>
#include <stdint.h>

#define CPU_AMG_MAX_LEVELS 10
/* Power iterations for each level's rho(D^-1 A) (cpu_amg.c, spectral_radius). */
#define CPU_AMG_POWER_ITERS 15

enum { CPU_AMG_SMOOTHER_L1_JACOBI = 0, CPU_AMG_SMOOTHER_CHEBYSHEV = 1 };

/* cpu_amg_setup's failures. */
enum {
  CPU_AMG_ENOMEM = -1,     /* an allocation failed, or max_bytes would be passed */
  CPU_AMG_EEMPTY_ROW = -2, /* row *bad_row holds no entry */
  CPU_AMG_EZERO_DIAG = -3, /* row *bad_row's diagonal is zero, absent or not finite */
  CPU_AMG_ETOO_LARGE = -4, /* a coarse matrix would hold more than 2^31 - 1 entries */
};

typedef struct {
  double theta;        /* strength threshold; <= 0: 0.08 */
  int max_levels;      /* 1..CPU_AMG_MAX_LEVELS; <= 0: the maximum */
  int32_t coarse_size; /* stop coarsening at this many rows; <= 0: 500 */
  int smoother;        /* CPU_AMG_SMOOTHER_* */
  int cheb_degree;     /* Chebyshev's degree; <= 0: 2 */
  int nthreads;        /* <= 0: all */
  size_t max_bytes;    /* the hierarchy may take at most this much; 0: no limit */
  /* > 0: level 0's rho(D^-1 A), estimated elsewhere by the same power
   * iterations (the CUDA backend runs them on the GPU, where the matrix
   * is: the setup's largest pass over it); 0: estimated here. */
  double rho0;
  /* 1: level 0 uses the caller's row_ptr and col_idx (and its values when
   * they are double) instead of copies, so they must stay valid and
   * unchanged until cpu_amg_free.  The CUDA backend's setup, whose host
   * copy of the matrix is its own and temporary, saves copying (and the
   * fresh pages of) 12 bytes an entry.  0: copies. */
  int borrow;
} cpu_amg_opts;

/* cpu_amg_opts with every default. */
#define CPU_AMG_OPTS_INIT {0.08, CPU_AMG_MAX_LEVELS, 500, CPU_AMG_SMOOTHER_CHEBYSHEV, 2, 0, 0, 0, 0}

/* One level, as cpu_amg_level describes it. */
typedef struct {
  int32_t rows;             /* the level's matrix is rows x rows */
  int64_t nnz;              /* its entries */
  int32_t p_rows, p_cols;   /* its prolongator to the next level (0 x 0 on the last) */
  int64_t p_nnz;
  double rho;               /* the estimate of rho(D^-1 A) (0 on the last, unless it is
                             * smoothed instead of factored: cpu_amg_coarse_rows 0) */
} cpu_amg_level_info;

typedef struct cpu_amg cpu_amg;

/* Builds the hierarchy of the square n x n CSR matrix (row_ptr, col_idx,
 * values: float, or double when values_f64; repeated entries add up,
 * columns in any order; the structure trusted).  Every row must hold an
 * entry and a nonzero finite diagonal.  0 with *out set, or a CPU_AMG_E*
 * code with nothing left allocated (*bad_row set for the row errors). */
int cpu_amg_setup(int32_t n, const int32_t *row_ptr, const int32_t *col_idx, const void *values,
                  int values_f64, const cpu_amg_opts *o, cpu_amg **out, int32_t *bad_row);

/* z = M^-1 r: one V(1,1) cycle from z = 0.  r and z hold n doubles and do
 * not overlap.  It uses the hierarchy's own scratch vectors: one call at a
 * time per hierarchy. */
void cpu_amg_apply(cpu_amg *h, const double *r, double *z);

/* Levels, the finest included (1: the matrix was already small enough). */
int cpu_amg_levels(const cpu_amg *h);
/* What level l (0: the finest) holds. */
void cpu_amg_level(const cpu_amg *h, int l, cpu_amg_level_info *out);
/* --- reading a built hierarchy (what the CUDA backend uploads) ------------ */

/* One of the hierarchy's sparse matrices, owned by it (valid until
 * cpu_amg_free): rows x cols in CSR, columns in no particular order. */
typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  const int32_t *row_ptr, *col_idx;
  const double *values;
} cpu_amg_csr;

enum { CPU_AMG_A = 0, CPU_AMG_P = 1, CPU_AMG_R = 2 };

/* Level l's operator A_l, prolongator P_l (A_l's rows x A_{l+1}'s) or
 * restriction R_l = P_l^T (which: CPU_AMG_*): 0 with *out set, or -1 when
 * l is out of range or the level has none (P and R on the last level). */
int cpu_amg_matrix(const cpu_amg *h, int l, int which, cpu_amg_csr *out);

/* Level l's inverse diagonals, A_l's rows of them: 1 / a_ii (Chebyshev)
 * and 1 / sum_j |a_ij| (l1-Jacobi); 0 for a row smoothing leaves out (see
 * cpu_amg.c, diagonals()).  NULL when l is out of range. */
const double *cpu_amg_dinv(const cpu_amg *h, int l);
const double *cpu_amg_dl1inv(const cpu_amg *h, int l);

/* How cpu_amg_apply smooths, for a cycle elsewhere to do the same: the
 * smoother (CPU_AMG_SMOOTHER_*; a level whose rho is 0 gets l1-Jacobi
 * whatever it says), Chebyshev's degree, and its interval on D^-1 A:
 * [1.1 rho / cheb_ratio, 1.1 rho]. */
typedef struct {
  int smoother;
  int cheb_degree;
  double cheb_ratio;
} cpu_amg_cycle_info;
void cpu_amg_cycle(const cpu_amg *h, cpu_amg_cycle_info *out);

/* The coarsest level's rows when it is solved exactly (dense LU), else 0:
 * coarsening stalled above the dense limit, and the last level is smoothed
 * instead (one smoothing step from zero, then three more). */
int32_t cpu_amg_coarse_rows(const cpu_amg *h);
/* The inverse of the coarsest matrix, nc x nc row-major in inv (nc =
 * cpu_amg_coarse_rows, which must not be 0): by LAPACK (OpenBLAS's dgetrf
 * and dgetri); when that matrix is singular, the linear map the LU solve
 * applies instead (a pivot that came out zero leaves its component 0),
 * column by column on OpenMP threads. */
void cpu_amg_coarse_inverse(const cpu_amg *h, double *inv);

/* Where cpu_amg_setup's time went, in milliseconds summed over the
 * levels: level 0's room, the diagonals (with level 0's copy, made in the
 * same pass), aggregation, rho estimates, the prolongators, their
 * transposes, the products A P and R (A P), and the coarsest
 * factorisation (gkcd logs them with each setup). */
typedef enum {
  CPU_AMG_T_FINEST, CPU_AMG_T_DIAG, CPU_AMG_T_AGGREGATE, CPU_AMG_T_RHO, CPU_AMG_T_PROLONG,
  CPU_AMG_T_TRANSPOSE, CPU_AMG_T_AP, CPU_AMG_T_RAP, CPU_AMG_T_FACTOR, CPU_AMG_T_STEPS
} cpu_amg_step;
double cpu_amg_step_ms(const cpu_amg *h, cpu_amg_step step);

/* The bytes the hierarchy holds (matrices, factors and scratch vectors). */
size_t cpu_amg_bytes(const cpu_amg *h);
/* Frees it (NULL is fine). */
void cpu_amg_free(cpu_amg *h);

#endif
