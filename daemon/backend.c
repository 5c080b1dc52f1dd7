/* backend.c: what all backends share. */
#include "backend.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gkc_errors.h"
#include "log.h"

static atomic_int g_failed;

void backend_fatal(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_err("%s; shutting down to be restarted", msg);
  if (!atomic_exchange(&g_failed, 1))
    kill(getpid(), SIGTERM); /* the loop's signal handler starts an orderly drain */
}

int backend_failed(void) { return atomic_load(&g_failed); }

/* Until the daemon serves several devices, losing the one it has is fatal. */
void backend_device_lost(gkcd_backend *be, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (atomic_exchange(&be->lost, 1)) return;
  backend_fatal("device %d lost: %s", be->device, msg);
}

int backend_algo_lookup(const gkcd_backend *be, int method, const char *name, size_t len) {
  if (len == 4 && memcmp(name, "auto", 4) == 0) return GKCD_ALGO_AUTO;
  const char *const *list = be->algos[method];
  for (int i = 0; list && list[i]; i++)
    if (strlen(list[i]) == len && memcmp(list[i], name, len) == 0) return i;
  return -2;
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
