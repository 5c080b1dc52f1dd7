/* pool.h: worker threads between the event loop and the backend.
 *
 * The loop submits validated jobs; a fixed pool of workers takes them in
 * order (the last worker to finish one polls briefly for the next before it
 * sleeps, and the most recently active sleeper is woken first), checks their contents (CSR structure and the like, which costs time
 * proportional to the input and so must not run on the loop), and hands them
 * to the backend.  Finished jobs come back through a queue drained on the
 * loop after a uv_async_send (which coalesces wake-ups, hence the queue).
 */
#ifndef GKCD_POOL_H
#define GKCD_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "backend.h"
#include "job.h"

typedef struct gkcd_pool gkcd_pool;

/* Called on the loop thread for every finished job, in completion order. */
typedef void (*pool_done_cb)(gkcd_job *job, void *arg);

/* Starts nworkers threads; a worker that finishes a job polls spin_us for
 * the next one before it sleeps (0: never).  Returns 0 or a negative
 * gkc_error / uv error. */
int pool_start(gkcd_pool **out, uv_loop_t *loop, int nworkers, size_t max_queue,
               double spin_us, gkcd_backend *be, pool_done_cb done, void *done_arg);

/* Loop thread.  Queues job, or returns GKC_EBUSY when max_queue jobs are
 * already waiting; then the caller still owns job. */
int pool_submit(gkcd_pool *s, gkcd_job *job);

/* Jobs waiting for a worker, and jobs a worker or device is running. */
size_t pool_waiting(gkcd_pool *s);
size_t pool_running(gkcd_pool *s);
/* Jobs a polling worker took without being woken (see --spin-us). */
uint64_t pool_spin_hits(gkcd_pool *s);

/* Loop thread, once nothing is in flight: joins the workers and closes the
 * async handle; s is freed from its close callback. */
void pool_stop(gkcd_pool *s);

#endif
