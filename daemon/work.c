/* work.c: see work.h. */
#include "work.h"

#include <stdatomic.h>

#include "backend.h"
#include "devices.h"
#include "fault.h"
#include "gkc_errors.h"
#include "method.h"
#include "proto_methods.h"
#include "move.h"
#include "part.h"

/* 1 (the job failed) when its device has been lost: it never reaches the
 * backend, which may no longer be able to run anything. */
static int device_gone(gkcd_job *job) {
  if (!atomic_load(&job->be->lost)) return 0;
  char msg[sizeof job->errmsg];
  job_fail(job, GKC_EDEVICE_LOST, "%s", devices_lost_msg(job->be, msg, sizeof msg));
  return 1;
}

/* The row's checks that read whole arrays, when it has any. */
static int row_check(gkcd_job *job) { return job->row->check ? job->row->check(job) : 0; }

void work_run(gkcd_job *job, void *arg) {
  (void)arg;
  gkcd_backend *be = job->be;
  if (job->deadline_ns && job->t_run_ns > job->deadline_ns) {
    job_fail(job, GKC_EDEADLINE_EXCEEDED, "waited %.1f ms for a worker, past its deadline_ms",
             (double)(job->t_run_ns - job->t_start_ns) / 1e6);
  } else if (job->row->where == METHOD_DAEMON) {
    job->row->run_daemon(be, job);
  } else if (job->gang_mask) {
    /* A gang job: every device it holds is counted as running a job. */
    for (int d = 0; d < GKCD_MAX_DEVICES; d++)
      if (job->gang_mask & (1ull << d)) fault_device_be(devices_backend(d));
    if (!job->row->part_run)
      job_fail(job, GKC_EINTERNAL, "internal: %s cannot run partitioned",
               proto_method_name(job->method));
    else if (row_check(job) == 0 && fault_inject(job) == 0 && part_gang_ready(job) == 0)
      job->row->part_run(job);
  } else if (!be->run[job->method]) { /* rpc.c refuses these: another device's kind */
    job_fail(job, GKC_EUNKNOWN_METHOD, "method '%s' is not served by device %d's %s backend",
             proto_method_name(job->method), be->device, be->name);
  } else if (fault_device(job) == 0 && !device_gone(job) && move_operands(job) == 0 &&
             fault_inject(job) == 0 && row_check(job) == 0) {
    be->run[job->method](be, job);
    return; /* the backend finishes the job, now or later */
  }
  job_finish(job);
}
