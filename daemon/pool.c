/* pool.c: see pool.h. */
#include "pool.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"
#include "gkc_errors.h"
#include "log.h"
#include "methods.h"
#include "region.h"
#include "validate.h"

struct gkcd_pool {
  uv_async_t async;        /* loop side: wakes on finished jobs */
  gkcd_backend *be;
  pool_done_cb done;
  void *done_arg;

  pthread_mutex_t mu;
  pthread_cond_t cv;
  gkcd_job *head, *tail;   /* waiting for a worker */
  size_t waiting, max_queue, running;
  gkcd_job *done_head, *done_tail; /* finished, not yet seen by the loop */
  int stopping;

  int nworkers;
  pthread_t *workers;
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg) {
  gkcd_pool *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
    if (!s->head) {
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
    gkcd_job *job = s->head;
    s->head = job->next;
    if (!s->head) s->tail = NULL;
    s->waiting--;
    s->running++;
    pthread_mutex_unlock(&s->mu);

    job->next = NULL;
    uint64_t now = mono_ns();
    job->t_run_ns = now;
    if (job->deadline_ns && now > job->deadline_ns)
      job_fail(job, GKC_EDEADLINE_EXCEEDED, "waited %.1f ms for a worker, past its deadline_ms",
               (double)(now - job->t_start_ns) / 1e6);
    else if (!methods_is_backend(job->method))
      region_map(s->be, job);
    else if (fault_inject(job) == 0 && validate_job(job) == 0) {
      s->be->run(s->be, job);
      continue; /* the backend finishes the job, now or later */
    }
    job_finish(job);
  }
}

void job_finish(gkcd_job *job) {
  gkcd_pool *s = job->pool;
  job->next = NULL;
  job->t_done_ns = mono_ns();
  pthread_mutex_lock(&s->mu);
  if (s->done_tail)
    s->done_tail->next = job;
  else
    s->done_head = job;
  s->done_tail = job;
  s->running--;
  pthread_mutex_unlock(&s->mu);
  int rc = uv_async_send(&s->async);
  if (rc) log_err("uv_async_send: %s", uv_strerror(rc)); /* cannot fail on Linux */
}

void job_fail(gkcd_job *job, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(job->errmsg, sizeof job->errmsg, fmt, ap);
  va_end(ap);
  job->err = err;
}

static void on_async(uv_async_t *h) {
  gkcd_pool *s = h->data;
  pthread_mutex_lock(&s->mu);
  gkcd_job *list = s->done_head;
  s->done_head = s->done_tail = NULL;
  pthread_mutex_unlock(&s->mu);
  while (list) {
    gkcd_job *next = list->next;
    list->next = NULL;
    s->done(list, s->done_arg);
    list = next;
  }
}

int pool_start(gkcd_pool **out, uv_loop_t *loop, int nworkers, size_t max_queue,
                gkcd_backend *be, pool_done_cb done, void *done_arg) {
  gkcd_pool *s = calloc(1, sizeof *s);
  if (!s) return GKC_EOUT_OF_MEMORY;
  s->be = be;
  s->done = done;
  s->done_arg = done_arg;
  s->max_queue = max_queue;
  s->nworkers = nworkers;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->workers = calloc((size_t)nworkers, sizeof *s->workers);
  if (!s->workers) {
    free(s);
    return GKC_EOUT_OF_MEMORY;
  }
  int rc = uv_async_init(loop, &s->async, on_async);
  if (rc) {
    free(s->workers);
    free(s);
    return rc;
  }
  s->async.data = s;
  for (int i = 0; i < nworkers; i++) {
    rc = pthread_create(&s->workers[i], NULL, worker_main, s);
    if (rc) {
      log_err("cannot start worker thread %d: %s", i, strerror(rc));
      s->nworkers = i;
      pool_stop(s);
      return GKC_EINTERNAL;
    }
  }
  *out = s;
  return 0;
}

int pool_submit(gkcd_pool *s, gkcd_job *job) {
  pthread_mutex_lock(&s->mu);
  if (s->waiting >= s->max_queue) {
    pthread_mutex_unlock(&s->mu);
    return GKC_EBUSY;
  }
  job->pool = s;
  job->next = NULL;
  if (s->tail)
    s->tail->next = job;
  else
    s->head = job;
  s->tail = job;
  s->waiting++;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

size_t pool_waiting(gkcd_pool *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->waiting;
  pthread_mutex_unlock(&s->mu);
  return n;
}

size_t pool_running(gkcd_pool *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->running;
  pthread_mutex_unlock(&s->mu);
  return n;
}

static void on_async_closed(uv_handle_t *h) {
  gkcd_pool *s = h->data;
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->workers);
  free(s);
}

void pool_stop(gkcd_pool *s) {
  pthread_mutex_lock(&s->mu);
  s->stopping = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
  uv_close((uv_handle_t *)&s->async, on_async_closed);
}
