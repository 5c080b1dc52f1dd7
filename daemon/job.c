/* job.c: the helpers every layer that fails a job or fills its result
 * shares. */
#include "job.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Set once at start-up, before the workers, then only read. */
static void *(*out_alloc)(void *arg, size_t bytes);
static void (*out_give)(void *arg, void *p);
static void *out_alloc_arg;

void job_set_out_alloc(void *(*alloc)(void *arg, size_t bytes), void (*give)(void *arg, void *p),
                       void *arg) {
  out_alloc = alloc;
  out_give = give;
  out_alloc_arg = arg;
}

void job_out_free(void *p) {
  if (out_give)
    out_give(out_alloc_arg, p);
  else
    free(p);
}

void *job_out_alloc(size_t bytes) {
  if (!bytes) bytes = 1;
  return out_alloc ? out_alloc(out_alloc_arg, bytes) : malloc(bytes);
}

void job_fail(gkcd_job *job, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(job->errmsg, sizeof job->errmsg, fmt, ap);
  va_end(ap);
  job->err = err;
}

int job_poll(const gkcd_job *job) {
  if (atomic_load_explicit(&job->cancel, memory_order_relaxed)) return SOLVE_R_CANCELLED;
  if (job->deadline_ns) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec > job->deadline_ns)
      return SOLVE_R_DEADLINE;
  }
  return 0;
}
