/* gkcu_solve.h: Krylov solvers for A x = b that iterate on the GPU, A square
 * in CSR (float32 values, the matrix as `csr_upload` keeps it).
 *
 *   GKCU_SOLVE_CG        conjugate gradients (A symmetric positive definite)
 *   GKCU_SOLVE_PCG       CG preconditioned by Jacobi, M = diag(A)^-1
 *   GKCU_SOLVE_BICGSTAB  BiCGSTAB, for nonsymmetric A
 *
 * CG and BiCGSTAB take a preconditioner (precond, as cpu_solve.h's): none,
 * Jacobi (M^-1 = diag(A)^-1; PCG is CG with it) or one V(1,1) cycle of an
 * algebraic multigrid hierarchy built for A (gkcu_amg.h, uploaded before).
 * CG applies M^-1 to the residual, the cycle's last kernel reducing r.z as
 * it writes z; BiCGSTAB is right preconditioned (M^-1 p and M^-1 s stand
 * for p and s where they multiply A and move x), as cpu_solve.c, so both
 * stop on the true residual's recurrence.
 *
 * The same recurrences, stopping rules and reasons as cpu_solve.h (the CPU
 * backend's solver, which the tests compare with): by default the vectors
 * are float64 on the device (A's float32 values are exact in double, each
 * row's sum is accumulated in double), so iteration counts and residual
 * histories are those of a float64 solver such as SciPy's, up to summation
 * order.  With fp32 set (the `solve` request's precision "fp32") every
 * vector is stored in float32 and everything else stays double: each row's
 * sum, every dot product, the scalars; each value is rounded once, when
 * stored, and the dots are taken of the rounded values (the vectors the
 * next kernel reads).  That halves the vector traffic (84 against 124
 * bytes per row per CG iteration on a 5-point stencil) and parts from
 * float64 by ~6e-8 relative per step: the iteration counts of well-
 * conditioned problems stay, the history no longer tracks a float64
 * solver's to 1e-6, and the recurrence's residual drifts from b - A x.
 * The residual reported is always recomputed from the x returned.
 *
 * b, x0 and x come as float32 or float64 (io_f64: the request's dtype).  A
 * float64 x (without fp32) is held to the tolerance itself, as
 * cpu_solve.h's: "converged" means ||b - A x|| <= max(rtol ||b||, atol) for
 * the x returned, the iteration starting again from the true residual when
 * the recurrence's has drifted below it (at most a few times, within
 * max_iter).  A float32 x is rounded after the solve, so its true residual
 * may end above a tight rtol.
 *
 * The iteration never comes back to the host: every kernel that ends in a
 * dot product computes it in the same pass as the vector it reads or
 * writes (spmv with p.Ap; the r update with r.r and, for PCG, z = M r
 * with r.z; BiCGSTAB's two spmvs with their two dots each), and CG's x
 * update rides with the p update, which reads p anyway (three passes per
 * iteration, 124 bytes per row of a 5-point stencil); each reduces in
 * double in a fixed order (the same bits every run) and leaves the scalars
 * (alpha, beta, omega, the iteration count, the reason to stop) in a state
 * block in device memory, where the next kernel reads them.  A kernel that
 * finds the solve stopped returns at once, so any number of iterations may
 * be enqueued ahead: the count and the residual stay exact.
 *
 * The loop runs as a CUDA Graph of 8 iterations, launched as often as
 * needed ("unrolled"), or where that cannot be captured the kernels one by
 * one ("stream").  GKCU_SOLVE_GRAPH=while|unrolled|stream in the
 * environment forces one (the tests run all three); "while" is one graph
 * whose conditional while-node repeats the iteration until the solve stops
 * or `chunk` iterations have run (CUDA 12.4+): only on request, since it
 * measured slower per iteration (one more kernel each), does not
 * instantiate on gkcd's green-context streams, and fails under
 * compute-sanitizer memcheck (cuda/NOTES.md).  Between launches the host looks at the state
 * (double-buffered: the next launch is queued before it waits for the
 * previous one) and calls poll() about every poll_ms; `chunk` adapts to the
 * measured iteration rate.
 */
#ifndef GKCU_SOLVE_H
#define GKCU_SOLVE_H

#include "gkcu.h"
#include "gkcu_amg.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { GKCU_SOLVE_CG = 0, GKCU_SOLVE_PCG = 1, GKCU_SOLVE_BICGSTAB = 2 };
/* The preconditioner (cpu_solve.h's CPU_PRECOND_*; GKCU_SOLVE_PCG is CG
 * with GKCU_PRECOND_JACOBI whatever precond says). */
enum { GKCU_PRECOND_NONE = 0, GKCU_PRECOND_JACOBI = 1, GKCU_PRECOND_AMG = 2 };
/* Why it stopped: the order of cpu_solve.h's CPU_SOLVE_* and of
 * SOLVE_REASON_MAP in daemon/job.h. */
enum {
  GKCU_SOLVE_CONVERGED = 0,
  GKCU_SOLVE_MAX_ITER,
  GKCU_SOLVE_BREAKDOWN,
  GKCU_SOLVE_NON_FINITE,
  GKCU_SOLVE_DEADLINE,
  GKCU_SOLVE_CANCELLED
};

typedef struct {
  int method;        /* GKCU_SOLVE_CG, _PCG, _BICGSTAB */
  int32_t n;         /* A is n x n, n >= 1 */
  int64_t nnz;
  const int32_t *row_ptr, *col_idx; /* device; validated when uploaded */
  const void *values; /* device, nnz of them: float, or double with values_f64 */
  int values_f64;     /* 1: A's values are float64 (csr_upload dtype f64) */
  /* b, x0 and x: the request's vectors, float32, or float64 with io_f64 */
  const void *b;     /* device, n values */
  const void *x0;    /* device, n values, or NULL: start from zero */
  void *x;           /* device, n values: the result; may be x0 itself */
  int io_f64;        /* 1: b, x0 and x are double; 0: float */
  double rtol, atol; /* stop when ||r|| <= max(rtol ||b||, atol) */
  int64_t max_iter;  /* >= 1 */
  double *history;   /* host, room for max_iter doubles, or NULL */
  /* Called between launches, about every poll_ms: 0 goes on, else
   * GKCU_SOLVE_DEADLINE or _CANCELLED, which stops the solve there. */
  int (*poll)(void *arg);
  void *poll_arg;
  double poll_ms;
  void *work;        /* device, gkcu_solve_work_bytes() bytes, 256-byte aligned */
  size_t work_bytes;
  int fp32;          /* 1: float32 vectors (see above); 0: float64 */
  int32_t max_row;   /* the longest row (guides the spmv's threads per row), 0: unknown */
  int precond;       /* GKCU_PRECOND_* */
  /* GKCU_PRECOND_AMG: the hierarchy of this matrix (n rows), on ctx's
   * device; its scratch vectors are its own: one solve at a time. */
  const gkcu_amg *amg;
} gkcu_solve_args;

typedef struct {
  int64_t iterations;
  int reason;        /* GKCU_SOLVE_* */
  double residual;   /* ||b - A x|| / ||b|| in double, of the x written */
  int32_t bad_row;   /* GKCU_SOLVE_EZERO_DIAG: the first row with a zero diagonal */
  const char *how;   /* "while", "unrolled", "stream": what ran the loop */
  double loop_us;    /* wall time of the iteration loop */
} gkcu_solve_result;

/* gkcu_solve's failure besides the gkc errors: Jacobi met a zero or
 * non-finite diagonal entry (res->bad_row), before any iteration; x is not
 * written. */
#define GKCU_SOLVE_EZERO_DIAG 1

/* Device bytes of workspace for a solve of order n (0 when n is out of
 * range or the size overflows); with_history: room for max_iter residuals;
 * fp32: float32 vectors; precond: GKCU_PRECOND_* (the AMG cycle's own
 * vectors are the hierarchy's). */
size_t gkcu_solve_work_bytes(int method, int precond, int32_t n, int64_t max_iter,
                             int with_history, int fp32);

/* Solves on ctx's stream and waits for the result.  0 (res filled),
 * GKCU_SOLVE_EZERO_DIAG, or a negative gkc error (message in ctx). */
int gkcu_solve(gkcu_ctx *ctx, const gkcu_solve_args *a, gkcu_solve_result *res);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_SOLVE_H */
