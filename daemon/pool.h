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
 * Finished jobs come back through a queue drained on the loop after a
 * uv_async_send (which coalesces wake-ups, hence the queue).
 */
#ifndef GKCD_POOL_H
#define GKCD_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "job.h"

typedef struct gkcd_pool gkcd_pool;

#define POOL_MAX_LANES 2

/* Worker thread: runs job; the job reaches `done` once job_finish is called
 * for it (by run itself, or later by a device callback) and its finish hook
 * is the pool's. */
typedef void (*pool_run_cb)(gkcd_job *job, void *arg);
/* Loop thread: every finished job, in completion order. */
typedef void (*pool_done_cb)(gkcd_job *job, void *arg);

/* Starts workers[l] threads for each of nlanes lanes of each of ndevices
 * devices: every device has its own workers, so a slow or failed device
 * never holds up another's jobs.  Returns 0 or a negative gkc_error / uv
 * error. */
int pool_start(gkcd_pool **out, uv_loop_t *loop, int ndevices, int nlanes, const int *workers,
               double spin_us, pool_run_cb run, void *run_arg, pool_done_cb done, void *done_arg);

/* Loop thread: queues job on its device's lane (job->device, job->lane)
 * and wakes a worker.  A job without a finish hook (job.h on_finish) gets
 * the pool's; one with its own (a split's part) keeps it. */
void pool_submit(gkcd_pool *s, gkcd_job *job);

/* Makes the pool's hand-back job's finish hook: job_finish then queues it
 * for `done` on the loop.  For a job finished without running on a worker
 * of its own (a split's parent, finished by its last part). */
void pool_finish_through(gkcd_pool *s, gkcd_job *job);

/* Jobs handed to a device's lane that no worker has taken yet. */
size_t pool_waiting(gkcd_pool *s, int device, int lane);

/* Jobs a polling worker took without being woken (see --spin-us). */
uint64_t pool_spin_hits(gkcd_pool *s);

/* Loop thread, once nothing is in flight: joins the workers and closes the
 * async handle; s is freed from its close callback. */
void pool_stop(gkcd_pool *s);

#endif
