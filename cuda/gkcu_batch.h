/* gkcu_batch.h: what a `batch` needs beyond the single-operation launchers:
 * its steps' scalars kept on the device, so that a batch whose axpby steps
 * take alpha or beta from earlier dot products (a CG iteration) never
 * waits for the GPU until it ends.
 *
 * The batch's state lives in device memory: vals[i] is step i's dot or
 * reduce (written there by gkcu_dot_async / gkcu_reduce_async), and a
 * failure record.  gkcu_axpby_ref resolves its alpha and beta from vals in
 * every thread (scale * vals[num] / vals[den] in double, then float32, as
 * the daemon's batch_scalar does on the host; kept in double on float64
 * vectors); when one comes out NaN, infinite or (float32) beyond float32's
 * range, the kernel writes nothing and records
 * the step, which scalar, and its value.  Every gkcu_axpby_ref of a later
 * step finds that record and writes nothing either, so after one failure
 * no later axpby writes, as the protocol promises; the caller must check
 * the record (or synchronise) before launching a step that cannot look at
 * it (spmv, sgemm on the host's scalars).
 */
#ifndef GKCU_BATCH_H
#define GKCU_BATCH_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKCU_BATCH_MAX_STEPS 64

/* The device state of one batch; zero it (gkcu_batch_state_init) first. */
typedef struct {
  double vals[GKCU_BATCH_MAX_STEPS];
  int fail_step;     /* -1, or the first step whose scalar was not finite (float32) */
  int fail_which;    /* 'a' (alpha) or 'b' (beta) */
  double fail_value; /* what it came to (double) */
} gkcu_batch_state;

/* A scalar: scale * vals[num] / vals[den]; num, den -1 when absent. */
typedef struct {
  double scale;
  int num, den;
} gkcu_bscalar;

/* Resets *d_state (device) on the context's stream: fail_step = -1. */
int gkcu_batch_state_init(gkcu_ctx *ctx, gkcu_batch_state *d_state);

/* Step `step`: out[i] = alpha*x[i] + beta*y[i], i < n, alpha and beta
 * resolved on the device from d_state (see above).  A zero coefficient
 * means its vector is not read (as gkcu_axpby); out may be x or y (each
 * element is read before it is written); when out is x and not y the sum
 * is rounded as beta*y + alpha*x, as gkcu_axpby(beta, y, alpha, out).
 * Enqueues and returns. */
int gkcu_axpby_ref(gkcu_ctx *ctx, int step, int64_t n, gkcu_bscalar alpha, const float *x,
                   gkcu_bscalar beta, const float *y, float *out, gkcu_batch_state *d_state);
/* The same on float64 vectors (8-byte aligned): alpha and beta stay
 * double and fail only when not finite; the sum is fma(alpha, x, beta*y)
 * in double, as gkcu_axpby_f64. */
int gkcu_axpby_ref_f64(gkcu_ctx *ctx, int step, int64_t n, gkcu_bscalar alpha, const double *x,
                       gkcu_bscalar beta, const double *y, double *out, gkcu_batch_state *d_state);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_BATCH_H */
