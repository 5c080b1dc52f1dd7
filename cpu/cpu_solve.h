/* cpu_solve.h: Krylov solvers for A x = b on the CPU, A square in CSR.
 *
 *   CPU_CG        conjugate gradients (A symmetric positive definite)
 *   CPU_PCG       CG preconditioned by Jacobi: M = diag(A)^-1
 *   CPU_BICGSTAB  BiCGSTAB (van der Vorst 1992), for nonsymmetric A
 *
 * CG and BiCGSTAB take a preconditioner M (opts.precond): none, Jacobi
 * (M^-1 = diag(A)^-1) or one V-cycle of smoothed-aggregation AMG
 * (cpu_amg.h), its hierarchy built here for the solve (and freed after
 * it, or handed back to be kept with the matrix: amg_keep), or one built
 * before for the same matrix (opts.amg).
 * CG applies M^-1 to the residual (Saad algorithm 9.1); BiCGSTAB is right
 * preconditioned (Saad algorithm 7.7 on A M^-1, x recovered as it goes),
 * so both stop on the true residual's recurrence, not a preconditioned one.
 *
 * A's values, b and x0 come as float32 or float64 (the wire's formats;
 * opts say which), all exact in double; the iteration runs in double (x, r, p, ... in double, OpenMP over rows),
 * so iteration counts are those of a float64 solver on the same numbers,
 * e.g. scipy.sparse.linalg.cg.  It stops when the recurrence's residual
 * satisfies ||r|| <= max(rtol * ||b||, atol) (scipy's rule), after max_iter
 * iterations, on a breakdown (CG: p.Ap <= 0, which a positive definite A
 * never gives; PCG also r.z <= 0; BiCGSTAB: rhat.r, rhat.v or omega
 * vanishing), on a non-finite value (NaN or Inf in b, x0, A or anything
 * computed), or when poll() asks it to.  A float32 x is then rounded to
 * float32, and res->residual = ||b - A x|| / ||b|| is recomputed in double
 * from the x returned, so it describes exactly that x (0 when b = 0, where
 * x = 0; NaN when b holds a non-finite value).  A float64 x (vec_f64,
 * without fp32) is held to the tolerance itself: "converged" means
 * ||b - A x|| <= max(rtol ||b||, atol) for the x returned, the iteration
 * restarting from the true residual when the recurrence's has drifted
 * below it.  The inputs are trusted: validate the CSR structure first.
 *
 * With fp32 set (the `solve` request's precision "fp32", which the CUDA
 * backend runs on float32 vectors for speed) every vector element is
 * rounded to float32 as it is stored, and everything else stays double
 * (row sums, dot products of the rounded values, the scalars): the same
 * arithmetic as the GPU's fp32 mode, so both backends agree on it.  On the
 * CPU it saves nothing; it is there so a client sees one behaviour.
 */
#ifndef CPU_SOLVE_H
#define CPU_SOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_amg.h"

enum { CPU_CG = 0, CPU_PCG = 1, CPU_BICGSTAB = 2 };
/* The preconditioner (CPU_PCG is CPU_CG with CPU_PRECOND_JACOBI whatever
 * precond says). */
enum { CPU_PRECOND_NONE = 0, CPU_PRECOND_JACOBI = 1, CPU_PRECOND_AMG = 2 };
/* Why it stopped (the same order as SOLVE_REASON_MAP in daemon/job.h). */
enum {
  CPU_SOLVE_CONVERGED = 0,
  CPU_SOLVE_MAX_ITER,
  CPU_SOLVE_BREAKDOWN,
  CPU_SOLVE_NON_FINITE,
  CPU_SOLVE_DEADLINE,
  CPU_SOLVE_CANCELLED
};
/* cpu_solve's failures: out of memory for the vectors; a zero or non-finite
 * diagonal entry (Jacobi, AMG) or an empty row (AMG) in row bad_row; the
 * AMG hierarchy out of memory (or over amg_max_bytes), or a coarse matrix
 * over 2^31 - 1 entries. */
enum {
  CPU_SOLVE_ENOMEM = -1,
  CPU_SOLVE_EZERO_DIAG = -2,
  CPU_SOLVE_EEMPTY_ROW = -3,
  CPU_SOLVE_EAMG_NOMEM = -4,
  CPU_SOLVE_EAMG_TOO_LARGE = -5
};

typedef struct {
  int method;        /* CPU_CG, CPU_PCG, CPU_BICGSTAB */
  double rtol, atol; /* >= 0 */
  int64_t max_iter;  /* >= 1 */
  double *history;   /* NULL, or room for max_iter values: ||r_k|| / ||b|| after iteration k */
  /* Called before every iteration but the first: 0 goes on, else the
   * CPU_SOLVE_* reason to stop with (deadline, cancelled).  May be NULL. */
  int (*poll)(void *arg);
  void *poll_arg;
  int nthreads;      /* <= 0: all */
  int fp32;          /* 1: vectors rounded to float32 as stored (see above) */
  int values_f64;    /* A's values are double (else float) */
  int vec_f64;       /* b, x0 and x are double (else float) */
  int precond;       /* CPU_PRECOND_* */
  size_t amg_max_bytes; /* the AMG hierarchy may take at most this much; 0: no limit */
  /* AMG: a hierarchy of this A built before (used, not freed; one solve
   * at a time), or NULL to build one; with amg_keep, one built here goes
   * to res->amg_built instead of being freed. */
  cpu_amg *amg;
  int amg_keep;
} cpu_solve_opts;

typedef struct {
  int64_t iterations;
  int reason;        /* CPU_SOLVE_* */
  double residual;   /* ||b - A x|| / ||b|| of the x returned */
  int32_t bad_row;   /* CPU_SOLVE_EZERO_DIAG, _EEMPTY_ROW: the row */
  int levels;        /* AMG: the hierarchy's levels (else 0) */
  double amg_setup_us; /* AMG: the time its setup took (0 when opts.amg was given) */
  size_t amg_bytes;  /* AMG: the bytes the hierarchy held */
  cpu_amg *amg_built; /* AMG with amg_keep: the hierarchy built here, now the caller's */
} cpu_solve_result;

/* Solves A x = b (A n x n), starting from x0 (NULL: zero), writing x.  x may
 * be x0 itself; b may overlap x (it is read before x is written).  0, or
 * one of the failures above, found before any iteration (x is then not
 * written). */
int cpu_solve(int32_t n, const int32_t *row_ptr, const int32_t *col_idx, const void *values,
              const void *b, const void *x0, void *x, const cpu_solve_opts *o,
              cpu_solve_result *res);

#endif
