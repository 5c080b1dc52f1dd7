/* gkc_solve.h: libgkc's solve and batch calls (part of gkc.h, which
 * includes it at its end: include gkc.h).  One request for a whole Krylov
 * solve (gkc_solve), or for a chain of vector operations on resident data
 * (gkc_batch, gkc_batch_regions); their async forms are in gkc_async.h.
 * It uses gkc.h's types (gkc_conn, gkc_ref, gkc_out, gkc_info) and does
 * not include gkc.h itself, so that the two are one header, not two that
 * include each other.
 */
#ifndef GKC_SOLVE_H
#define GKC_SOLVE_H

#ifndef GKC_H
#error "gkc_solve.h is part of gkc.h: include <gkc.h>"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* gkc_solve solves A x = b inside gkcd (PROTOCOL.md, "solve"): one
 * request, however many iterations.  A is a square resident matrix
 * (gkc_csr_upload); b and x0 are array references of n float32 (memory,
 * region span or handle), or of n float64 (gkc_ref_as(..., GKC_F64), or
 * float64 handles); x goes to *out as for gkc_spmv_ref, in b's dtype, and
 * gkc_out_handle(x0.handle) updates a resident x0 in place.  A converged
 * float64 x meets the tolerance by its true residual ||b - A x||.
 *
 *   gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
 *   s.matrix = A;                                  // from gkc_csr_upload
 *   s.b = gkc_ref_mem(b, n * 4);
 *   s.method = GKC_SOLVE_PCG, s.rtol = 1e-8;
 *   gkc_out out = gkc_out_mem(x, n * 4);
 *   gkc_solve_result res;
 *   if (gkc_solve(c, &s, &out, &res, NULL) == 0 && !res.converged) ...res.reason...
 *
 * A solve that does not converge is not an error: it returns 0 with its
 * last x, converged 0 and the reason.  Errors (GKC_EINVALID_ARGUMENT, before
 * any iteration) are a matrix that is not a square resident one, b or x0 of
 * the wrong length, a negative or non-finite tolerance, max_iter outside
 * [1, 10^8], pcg (or precond jacobi) on a zero diagonal entry, amg on a zero
 * diagonal or an empty row, pcg with a precond other than jacobi, amg on
 * a partitioned matrix; gkc_errmsg names the argument.  GKC_EOUT_OF_MEMORY:
 * the AMG hierarchy did not fit (the matrix stays usable). */
typedef enum {
  GKC_SOLVE_CG = 0,      /* conjugate gradients: A symmetric positive definite */
  GKC_SOLVE_PCG = 1,     /* CG with the Jacobi preconditioner diag(A)^-1 */
  GKC_SOLVE_BICGSTAB = 2 /* BiCGSTAB: any nonsingular A */
} gkc_solve_method;

/* The preconditioner of CG and BiCGSTAB (PROTOCOL.md, "solve", precond). */
typedef enum {
  GKC_PRECOND_NONE = 0,   /* none; with GKC_SOLVE_PCG: its Jacobi (nothing is sent) */
  GKC_PRECOND_JACOBI = 1, /* diag(A)^-1 */
  GKC_PRECOND_AMG = 2,    /* smoothed-aggregation AMG, one V-cycle */
  GKC_PRECOND_AUTO = 3    /* gkcd picks amg or jacobi for the matrix (PROTOCOL.md) */
} gkc_solve_precond;

typedef struct {
  uint32_t matrix;   /* a resident square matrix of n rows */
  gkc_ref b;         /* n float32, or n float64 (marked GKC_F64, or a float64 handle) */
  gkc_ref x0;        /* n of b's dtype; GKC_REF_NONE: start from zero */
  gkc_solve_method method;
  double rtol, atol; /* stop when ||r|| <= max(rtol * ||b||, atol); finite, >= 0 */
  int64_t max_iter;  /* 0: gkcd's default, min(10 n, 10^8) */
  double *history;   /* not NULL: ask for the relative residual after each
                      * iteration, copied here (at most history_cap values;
                      * the caller's memory, valid until the call returns or,
                      * async, until its callback) */
  size_t history_cap;
  uint32_t deadline_ms; /* 0: none; else the solve stops with reason "deadline" */
  int fp32;          /* nonzero: precision "fp32": float32 vectors (dots and
                      * scalars still float64): less memory traffic per
                      * iteration, more iterations at tight tolerances */
  gkc_solve_precond precond; /* GKC_PRECOND_NONE (the default), _JACOBI, _AMG or _AUTO */
} gkc_solve_args;
#define GKC_SOLVE_ARGS_INIT {0, {0}, {0}, GKC_SOLVE_CG, 1e-6, 0.0, 0, NULL, 0, 0, 0, GKC_PRECOND_NONE}

typedef struct {
  int64_t iterations; /* iterations run */
  double residual;    /* ||b - A x|| / ||b|| of the x returned, by gkcd in float64 */
  int converged;      /* reason is "converged" */
  char reason[16];    /* "converged", "max_iter", "breakdown", "non_finite", "deadline" */
  char method[16];    /* the method that ran */
  size_t history_len; /* entries gkcd sent (= iterations when history was asked
                       * for, 0 otherwise); min(history_len, history_cap) copied */
  char precond[16];   /* the preconditioner that ran: "none", "jacobi", "amg" */
  int levels;         /* precond amg: the levels of its hierarchy (else 0) */
  double amg_setup_us; /* precond amg: the time gkcd took to build it (else 0) */
  int amg_reused;      /* precond amg: the matrix's hierarchy, kept from an earlier
                        * solve, was used (no setup: amg_setup_us 0) */
} gkc_solve_result;

/* Blocking solve; *result (not NULL) and info (may be NULL) are filled on success. */
GKC_API int gkc_solve(gkc_conn *c, const gkc_solve_args *args, gkc_out *out,
                      gkc_solve_result *result, gkc_info *info);
/* "cg", "pcg", "bicgstab"; NULL for another value. */
GKC_API const char *gkc_solve_method_name(gkc_solve_method m);
/* The method named s, or -1. */
GKC_API int gkc_solve_method_parse(const char *s);
/* "none", "jacobi", "amg"; NULL for another value. */
GKC_API const char *gkc_solve_precond_name(gkc_solve_precond p);
/* The preconditioner named s, or -1. */
GKC_API int gkc_solve_precond_parse(const char *s);

/* gkc_batch runs up to GKC_BATCH_MAX_STEPS vector operations on resident
 * arrays, in order, as one request (PROTOCOL.md, "batch"): a user's own
 * iteration in one round trip.  Build the steps with the gkc_step_*
 * functions; every array is a resident handle (ids are never 0, so 0 means
 * "none" where an argument is optional), and every array result overwrites
 * an existing resident array `out`.  alpha and beta are numbers
 * (gkc_scalar_num) or taken from earlier dot and reduce steps of the same
 * batch (gkc_scalar_ref(i, j, s) = s * value[i] / value[j]).  One CG
 * iteration with rho = r.r from the previous batch:
 *
 *   gkc_step st[] = {
 *     gkc_step_spmv(A, gkc_scalar_num(1), p, gkc_scalar_num(0), 0, q),   // q = A p
 *     gkc_step_dot(p, q),                                                // 1: p.q
 *     gkc_step_axpby(gkc_scalar_ref(-1, 1, rho), p, gkc_scalar_num(1), x, x),
 *     gkc_step_axpby(gkc_scalar_ref(-1, 1, -rho), q, gkc_scalar_num(1), r, r),
 *     gkc_step_dot(r, r),                                                // 4: new rho
 *     gkc_step_axpby(gkc_scalar_num(1), r, gkc_scalar_ref(4, -1, 1 / rho), p, p)};
 *   gkc_batch_result br;
 *   gkc_batch(c, st, 6, &br, NULL);     // br.value[4] is the new rho
 *
 * Every step is checked before any runs; a bad one fails the call with a
 * message starting "steps[i] (op): ".  A step that fails while running (a
 * scalar reference that comes out NaN or infinite, say) fails it with
 * "step i (op): ..."; steps before i stay written. */
#define GKC_BATCH_MAX_STEPS 64

typedef enum {
  GKC_STEP_DOT = 0, /* value = x . y */
  GKC_STEP_REDUCE,  /* value = sum, min or max of x */
  GKC_STEP_AXPBY,   /* out = alpha x + beta y (out may be x or y) */
  GKC_STEP_SPMV,    /* out = alpha A x + beta y (A: matrix; y optional when beta is 0) */
  GKC_STEP_SGEMM    /* out = alpha op(a) op(b) + beta c (m x n; c optional when beta is 0) */
} gkc_step_op;

/* A step's alpha or beta: value, or scale * value[step] / value[over] of
 * earlier dot or reduce steps (step or over -1: left out).  Steps on
 * float64 handles run in float64 with their referenced values in double;
 * value and scale themselves are float (the struct is ABI). */
typedef struct {
  int is_ref;
  float value;
  int step, over;
  float scale;
} gkc_scalar;

typedef struct {
  gkc_step_op op;
  uint32_t x, y, out;   /* handles; y and out 0: left out where optional */
  uint32_t matrix;      /* spmv */
  gkc_reduce_op fn;     /* reduce */
  gkc_scalar alpha, beta;
  int32_t m, n, k;      /* sgemm, with a, b, c (c 0: left out) */
  uint32_t a, b, c;
  int trans_a, trans_b;
} gkc_step;

GKC_API gkc_scalar gkc_scalar_num(float v);
GKC_API gkc_scalar gkc_scalar_ref(int step, int over, float scale);
GKC_API gkc_step gkc_step_dot(uint32_t x, uint32_t y);
GKC_API gkc_step gkc_step_reduce(uint32_t x, gkc_reduce_op fn);
/* out 0: y, in place. */
GKC_API gkc_step gkc_step_axpby(gkc_scalar alpha, uint32_t x, gkc_scalar beta, uint32_t y,
                                uint32_t out);
GKC_API gkc_step gkc_step_spmv(uint32_t matrix, gkc_scalar alpha, uint32_t x, gkc_scalar beta,
                               uint32_t y, uint32_t out);
GKC_API gkc_step gkc_step_sgemm(int32_t m, int32_t n, int32_t k, gkc_scalar alpha, uint32_t a,
                                int trans_a, uint32_t b, int trans_b, gkc_scalar beta, uint32_t c,
                                uint32_t out);

typedef struct {
  int nsteps;
  double value[GKC_BATCH_MAX_STEPS];   /* dot and reduce steps: the value; others NAN */
  uint32_t handle[GKC_BATCH_MAX_STEPS]; /* array steps: the handle written; others 0 */
} gkc_batch_result;

/* Runs steps[0 .. nsteps) (1 to GKC_BATCH_MAX_STEPS); *result (may be NULL)
 * gets each step's value. */
GKC_API int gkc_batch(gkc_conn *c, const gkc_step *steps, int nsteps, gkc_batch_result *result,
                      gkc_info *info);

/* Region operands of batch steps (PROTOCOL.md, "batch"): an spmv step may
 * read its x from a slice of one of this connection's regions, and write
 * its result into one, instead of resident arrays, so that an exchange
 * through shared memory (the halo of a distributed product) rides in the
 * same request as the vector work.  regions[i] goes with steps[i]; a
 * zeroed entry ({0}) changes nothing, so an array of them can stay mostly
 * empty:
 *   x    GKC_REF_REGION (gkc_ref_region; gkc_ref_as(..., GKC_F64) for
 *        float64): x is that slice, steps[i].x is not read (may be 0);
 *        GKC_REF_NONE: steps[i].x.
 *   out  GKC_OUT_REGION (gkc_out_region): the result is written at that
 *        offset (it must fit), steps[i].out is not read (may be 0), and
 *        result->handle[i] is 0; a zeroed out (GKC_OUT_MEM, data NULL):
 *        steps[i].out.
 * Only spmv steps take them (another step with one is GKC_EINVALID_ARGUMENT
 * here), and out may not overlap x's slice.  gkcd checks every slice
 * against its region (bounds, alignment, owner) and the matrix's shape
 * before any step runs; while the call runs the slices are gkcd's: x must
 * not change and out must not be read.  A step reads what an earlier step
 * of the same batch wrote into a region.  regions NULL: gkc_batch.
 * (A struct of its own beside gkc_step, whose layout is ABI.) */
typedef struct {
  gkc_ref x;
  gkc_out out;
} gkc_step_region;

GKC_API int gkc_batch_regions(gkc_conn *c, const gkc_step *steps, const gkc_step_region *regions,
                              int nsteps, gkc_batch_result *result, gkc_info *info);

#ifdef __cplusplus
}
#endif

#endif /* GKC_SOLVE_H */
