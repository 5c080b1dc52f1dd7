/* batch_step.h: what a backend needs to run a batch's steps (job.h
 * gkcd_step): the scalars an earlier step feeds a later one, and the
 * messages of a step that stops.  Below both the backends and the batch
 * row (method_batch.c), which parses the steps.
 */
#ifndef GKCD_BATCH_STEP_H
#define GKCD_BATCH_STEP_H

#include "job.h"

/* A batch step's alpha or beta (gkcd_scalar) from the values of the
 * earlier steps it names: 0 with *out set, or -1 when it comes out
 * non-finite or outside the float32 range (batch_scalar_value then gives
 * the double it came to, for the message).  */
int batch_scalar(const gkcd_step *steps, const gkcd_scalar *s, float *out);
double batch_scalar_value(const gkcd_step *steps, const gkcd_scalar *s);

/* Before batch step i, in either backend: stop is what the backend's poll
 * said (0 go on, BATCH_STOP_CANCELLED, BATCH_STOP_DEADLINE).  0 with the
 * step's alpha and beta resolved; nonzero after failing the job with a
 * message naming the step and what already ran. */
enum { BATCH_STOP_CANCELLED = 1, BATCH_STOP_DEADLINE = 2 };
int batch_step_begin(gkcd_job *job, int i, int stop, float *alpha, float *beta);
/* The same with the scalars in double, for a backend that runs float64
 * steps: a step of float32 arrays (st->dtype) still needs them finite and
 * within the float32 range, one of float64 arrays only finite. */
int batch_step_begin64(gkcd_job *job, int i, int stop, double *alpha, double *beta);
/* Fails job for step i's alpha (which 'a') or beta ('b') coming out as
 * value, not what the step takes (a finite float32, or for float64 arrays
 * a finite number): batch_step_begin's message, for a backend that
 * resolved the scalar itself (the CUDA backend, on the device). */
void batch_fail_scalar(gkcd_job *job, int i, int which, double value);
/* The wire name of a batch op (BATCH_*). */
const char *batch_op_name(int op);

#endif
