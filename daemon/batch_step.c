/* batch_step.c: see batch_step.h. */
#include "batch_step.h"

#include <math.h>

#include "gkc_errors.h"

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

int batch_step_begin(gkcd_job *job, int i, int stop, float *alpha, float *beta) {
  gkcd_step *steps = job->in.batch.steps, *st = &steps[i];
  if (stop) {
    job_fail(job, stop == BATCH_STOP_CANCELLED ? GKC_ECANCELLED : GKC_EDEADLINE_EXCEEDED,
             "step %d (%s): %s before it started; steps 0 to %d ran", i, batch_op_name(st->op),
             stop == BATCH_STOP_CANCELLED ? "cancelled" : "the deadline passed", i - 1);
    return -1;
  }
  *alpha = *beta = 0;
  int bad = 0;
  if (st->op == BATCH_AXPBY || st->op == BATCH_SPMV || st->op == BATCH_SGEMM) {
    if (batch_scalar(steps, &st->alpha, alpha)) bad = 'a';
    else if (batch_scalar(steps, &st->beta, beta)) bad = 'b';
  }
  if (!bad) return 0;
  batch_fail_scalar(job, i, bad, batch_scalar_value(steps, bad == 'a' ? &st->alpha : &st->beta));
  return -1;
}

void batch_fail_scalar(gkcd_job *job, int i, int which, double value) {
  job_fail(job, GKC_EINVALID_ARGUMENT, "step %d (%s): argument '%s' came out as %g, not a"
           " finite float32 (a division by zero?); steps 0 to %d ran and their outputs are"
           " written", i, batch_op_name(job->in.batch.steps[i].op),
           which == 'a' ? "alpha" : "beta", value, i - 1);
}
