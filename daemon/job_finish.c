/* job_finish.c: a finished job goes back to the loop (job.h).
 *
 * The queue the workers fill (job_done_queue, the loop's, set up by the
 * server) sits below everything that finishes jobs (workers, backends'
 * callbacks, split.c's last part), so that a finished job reaches the
 * loop's completion (rpc.c's, through the queue's async handle) without
 * passing back through the pool that ran it.
 *
 * Apart from job.c so that tests which link job.c for job_fail can define a
 * job_finish of their own (test_place, test_gpu_multidev). */
#include "job.h"

#include <time.h>
#include <uv.h>

#include "log.h"

static job_done_queue *done; /* set before any worker starts */

void job_done_setup(job_done_queue *q, struct uv_async_s *wake) {
  pthread_mutex_init(&q->mu, NULL);
  q->head = q->tail = NULL;
  atomic_init(&q->waiting, 0);
  q->wake = wake;
  done = q;
}

void job_finish(gkcd_job *job) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  job->t_done_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  if (job->on_finish) { /* a split's part: into its parent */
    job->on_finish(job, job->finish_arg); /* the job may be gone once it returns */
    return;
  }
  job->next = NULL;
  pthread_mutex_lock(&done->mu);
  if (done->tail)
    done->tail->next = job;
  else
    done->head = job;
  done->tail = job;
  atomic_store_explicit(&done->waiting, 1, memory_order_release);
  pthread_mutex_unlock(&done->mu);
  int rc = uv_async_send(done->wake);
  if (rc) log_err("uv_async_send: %s", uv_strerror(rc)); /* cannot fail on Linux */
}
