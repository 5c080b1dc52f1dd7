/* work.h: what a worker thread does with a job the scheduler handed it.
 *
 * A job that is already past its deadline is failed without running (the
 * scheduler checked when it dispatched, but a worker may take a moment to
 * start); shm_register maps the client's region; every other job gets its
 * arrays checked (validate.h) and goes to the backend.  Fault injection
 * (tests only) sits just before the backend.
 */
#ifndef GKCD_WORK_H
#define GKCD_WORK_H

#include "job.h"

/* The pool's run hook: job->be is its device (arg unused).  A job whose
 * device was lost is answered device_lost without running; operands that
 * live on other devices are moved first (move.h). */
void work_run(gkcd_job *job, void *arg);

#endif
