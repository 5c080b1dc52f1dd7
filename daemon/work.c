/* work.c: see work.h. */
#include "work.h"

#include "backend.h"
#include "fault.h"
#include "gkc_errors.h"
#include "methods.h"
#include "region.h"
#include "validate.h"

void work_run(gkcd_job *job, void *backend) {
  gkcd_backend *be = backend;
  if (job->deadline_ns && job->t_run_ns > job->deadline_ns) {
    job_fail(job, GKC_EDEADLINE_EXCEEDED, "waited %.1f ms for a worker, past its deadline_ms",
             (double)(job->t_run_ns - job->t_start_ns) / 1e6);
  } else if (!methods_is_backend(job->method)) {
    region_map(be, job);
  } else if (fault_inject(job) == 0 && validate_job(job) == 0) {
    be->run(be, job);
    return; /* the backend finishes the job, now or later */
  }
  job_finish(job);
}
