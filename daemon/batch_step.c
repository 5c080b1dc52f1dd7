/* batch_step.c: see batch_step.h. */
#include "batch_step.h"

#include <math.h>

#include "gkc_errors.h"
#include "proto_dtypes.h"

static const char *const op_names[] = {
#define BATCH__NAME(name, str) str,
    BATCH_OP_MAP(BATCH__NAME)
#undef BATCH__NAME
};

const char *batch_op_name(int op) { return op >= 0 && op < BATCH_NOPS ? op_names[op] : "?"; }

double batch_scalar_value(const gkcd_step *steps, const gkcd_scalar *s) {
  double v = s->scale;
  if (s->num >= 0) v *= steps[s->num].value;
  if (s->den >= 0) v /= steps[s->den].value;
  return v;
}

int batch_scalar(const gkcd_step *steps, const gkcd_scalar *s, float *out) {
  double v = batch_scalar_value(steps, s);
  if (!isfinite(v) || fabs(v) > 3.4028234663852886e38) return -1;
  *out = (float)v;
  return 0;
}

/* A scalar a step of dtype can take: finite, and for float32 arrays within
 * their range. */
static int fits(double v, int dtype) {
  return isfinite(v) && (dtype == PROTO_DT_F64 || fabs(v) <= 3.4028234663852886e38);
}

static void fail_scalar(gkcd_job *job, int i, int which, double value) {
  const gkcd_step *st = &job->in.batch.steps[i];
  job_fail(job, GKC_EINVALID_ARGUMENT, "step %d (%s): argument '%s' came out as %g, not a"
           " finite %s (a division by zero?); steps 0 to %d ran and their outputs are"
           " written", i, batch_op_name(st->op), which == 'a' ? "alpha" : "beta", value,
           st->dtype == PROTO_DT_F64 ? "number" : "float32", i - 1);
}

int batch_step_begin64(gkcd_job *job, int i, int stop, double *alpha, double *beta) {
  gkcd_step *steps = job->in.batch.steps, *st = &steps[i];
  if (stop) {
    job_fail(job, stop == BATCH_STOP_CANCELLED ? GKC_ECANCELLED : GKC_EDEADLINE_EXCEEDED,
             "step %d (%s): %s before it started; steps 0 to %d ran", i, batch_op_name(st->op),
             stop == BATCH_STOP_CANCELLED ? "cancelled" : "the deadline passed", i - 1);
    return -1;
  }
  *alpha = *beta = 0;
  if (st->op != BATCH_AXPBY && st->op != BATCH_SPMV && st->op != BATCH_SGEMM) return 0;
  *alpha = batch_scalar_value(steps, &st->alpha);
  *beta = batch_scalar_value(steps, &st->beta);
  int bad = !fits(*alpha, st->dtype) ? 'a' : !fits(*beta, st->dtype) ? 'b' : 0;
  if (!bad) return 0;
  fail_scalar(job, i, bad, bad == 'a' ? *alpha : *beta);
  return -1;
}

int batch_step_begin(gkcd_job *job, int i, int stop, float *alpha, float *beta) {
  double a, b;
  int rc = batch_step_begin64(job, i, stop, &a, &b);
  *alpha = rc ? 0 : (float)a, *beta = rc ? 0 : (float)b;
  return rc;
}

void batch_fail_scalar(gkcd_job *job, int i, int which, double value) {
  fail_scalar(job, i, which, value);
}
