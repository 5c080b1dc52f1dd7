/* job.c: the one helper every layer that fails a job shares. */
#include "job.h"

#include <stdarg.h>
#include <stdio.h>

void job_fail(gkcd_job *job, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(job->errmsg, sizeof job->errmsg, fmt, ap);
  va_end(ap);
  job->err = err;
}
