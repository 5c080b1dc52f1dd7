/* pool.h: worker threads between the event loop and the backend.
 *
 * The pool runs jobs; it decides nothing about their order.  The scheduler
 * (scheduler.c, on the loop thread) hands it a job only when the job's lane has
 * a worker for it, so the pool's queues stay a few jobs deep and every
 * ordering decision is made where all clients' queues are visible.
 *
 * Workers are grouped by lane: each lane has its own workers and its own
 * FIFO, so a long job in one lane never delays a job of another.  The last
 * worker of a lane to finish a job polls briefly for the next one before it
 * sleeps (spin_us), and the most recently active sleeper is woken first.
 * A finished job goes back to the loop through job_finish (job.h), not
 * through the pool: the pool only hands jobs out.
 */
#ifndef GKCD_POOL_H
#define GKCD_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"

typedef struct gkcd_pool gkcd_pool;

#define POOL_MAX_LANES 2

/* Worker thread: runs job, which ends in job_finish (called by run itself,
 * or later by a device callback). */
typedef void (*pool_run_cb)(gkcd_job *job, void *arg);

/* Starts workers[l] threads for each of nlanes lanes of each of ndevices
 * devices: every device has its own workers, so a slow or failed device
 * never holds up another's jobs.  Returns 0 or a negative gkc_error. */
int pool_start(gkcd_pool **out, int ndevices, int nlanes, const int *workers, double spin_us,
               pool_run_cb run, void *run_arg);

/* Loop thread: queues job on its device's lane (job->device, job->lane)
 * and wakes a worker. */
void pool_submit(gkcd_pool *s, gkcd_job *job);

/* Jobs handed to a device's lane that no worker has taken yet. */
size_t pool_waiting(gkcd_pool *s, int device, int lane);

/* Jobs a polling worker took without being woken (see --spin-us). */
uint64_t pool_spin_hits(gkcd_pool *s);

/* Loop thread, once nothing is in flight: joins the workers and frees s. */
void pool_stop(gkcd_pool *s);

#endif
