/* job_finish.c: a finished job goes to its finish hook (job.h).
 *
 * Apart from job.c so that tests which link job.c for job_fail can define a
 * job_finish of their own (test_place, test_gpu_multidev). */
#include "job.h"

#include <time.h>

void job_finish(gkcd_job *job) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  job->t_done_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  job->on_finish(job, job->finish_arg); /* the job may be gone once it returns */
}
