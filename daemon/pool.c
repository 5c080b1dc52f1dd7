/* pool.c: see pool.h. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gkc_errors.h"
#include "log.h"

/* A worker, as the pool sees it: asleep on its own condition variable, so
 * that the pool chooses whom to wake. */
typedef struct worker {
  gkcd_pool *pool;
  struct lane *lane;
  pthread_t thread;
  pthread_cond_t cv;
  struct worker *next_idle;
  int idle; /* on the idle stack; cleared by whoever wakes it */
} worker;

typedef struct lane {
  gkcd_job *head, *tail;   /* waiting for a worker */
  size_t waiting;
  atomic_size_t queued;    /* = waiting, for the spinner to poll without mu */
  /* Waking a sleeping thread costs tens of microseconds on a virtual
   * machine whose idle vCPUs halt (measured 17-27 us of queue_us on the
   * H200 hosts), more than a small GPU request's own overhead.  So the
   * worker that finishes a job polls for the next one for spin_ns before it
   * sleeps: a client that sends its next request as soon as it has the
   * reply (an iterative solver) finds a worker awake.  One spinner per lane
   * at a time; the others sleep on a stack, and the most recently active
   * one is woken first, its caches and its vCPU the warmest. */
  int spinning;            /* a worker is polling */
  int spin_claimed;        /* a queued job counts on that worker: wake no one for it */
  worker *idle_top;
} lane;

struct gkcd_pool {
  pool_run_cb run;
  void *run_arg;

  pthread_mutex_t mu;
  lane *lanes;             /* device d's lane l is lanes[d * nlanes + l] */
  int nlanes, ndevices;
  int stopping;
  uint64_t spin_ns;
  uint64_t spin_hits;      /* jobs taken by a spinner */

  int nworkers;
  worker *workers;
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* With mu held: the next job for w, or NULL when the pool stops.  may_spin:
 * w has just finished a job (a worker polls once per job, not forever). */
static gkcd_job *next_job(gkcd_pool *s, worker *w, int may_spin) {
  lane *l = w->lane;
  for (;;) {
    if (l->head) {
      gkcd_job *job = l->head;
      l->head = job->next;
      if (!l->head) l->tail = NULL;
      l->waiting--;
      atomic_store_explicit(&l->queued, l->waiting, memory_order_relaxed);
      return job;
    }
    if (s->stopping) return NULL;
    if (may_spin && s->spin_ns && !l->spinning) {
      may_spin = 0;
      l->spinning = 1;
      pthread_mutex_unlock(&s->mu);
      /* sched_yield, not a bare pause: on a machine with fewer CPUs than
       * busy threads the event loop and the clients get the CPU first. */
      uint64_t end = mono_ns() + s->spin_ns;
      while (!atomic_load_explicit(&l->queued, memory_order_relaxed) && mono_ns() < end) sched_yield();
      pthread_mutex_lock(&s->mu);
      if (l->spin_claimed && l->head) s->spin_hits++;
      l->spinning = l->spin_claimed = 0;
      continue; /* whatever it saw, the queue is checked again under mu */
    }
    w->idle = 1;
    w->next_idle = l->idle_top;
    l->idle_top = w;
    while (w->idle) pthread_cond_wait(&w->cv, &s->mu);
  }
}

/* With mu held: wakes the lane's most recently idle worker, if any sleeps. */
static void wake_one(lane *l) {
  worker *w = l->idle_top;
  if (!w) return;
  l->idle_top = w->next_idle;
  w->idle = 0;
  pthread_cond_signal(&w->cv);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  gkcd_pool *s = w->pool;
  int may_spin = 0;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    gkcd_job *job = next_job(s, w, may_spin);
    pthread_mutex_unlock(&s->mu);
    if (!job) return NULL;
    may_spin = 1;
    job->next = NULL;
    job->t_run_ns = mono_ns();
    s->run(job, s->run_arg); /* ends, now or later, in job_finish */
  }
}

int pool_start(gkcd_pool **out, int ndevices, int nlanes, const int *workers, double spin_us,
               pool_run_cb run, void *run_arg) {
  if (nlanes < 1 || nlanes > POOL_MAX_LANES || ndevices < 1) return GKC_EINVALID_ARGUMENT;
  int total = 0;
  for (int l = 0; l < nlanes; l++) total += workers[l];
  total *= ndevices;
  gkcd_pool *s = calloc(1, sizeof *s);
  if (!s) return GKC_EOUT_OF_MEMORY;
  s->lanes = calloc((size_t)(ndevices * nlanes), sizeof *s->lanes);
  if (!s->lanes) {
    free(s);
    return GKC_EOUT_OF_MEMORY;
  }
  s->ndevices = ndevices;
  s->run = run;
  s->run_arg = run_arg;
  s->nlanes = nlanes;
  s->spin_ns = spin_us > 0 ? (uint64_t)(spin_us * 1e3) : 0;
  for (int l = 0; l < ndevices * nlanes; l++) atomic_init(&s->lanes[l].queued, 0);
  pthread_mutex_init(&s->mu, NULL);
  s->workers = calloc((size_t)total, sizeof *s->workers);
  if (!s->workers) {
    pthread_mutex_destroy(&s->mu);
    free(s->lanes);
    free(s);
    return GKC_EOUT_OF_MEMORY;
  }
  int rc;
  for (int dl = 0, i = 0; dl < ndevices * nlanes; dl++) {
    for (int k = 0; k < workers[dl % nlanes]; k++, i++) {
      worker *w = &s->workers[i];
      w->pool = s;
      w->lane = &s->lanes[dl];
      pthread_cond_init(&w->cv, NULL);
      rc = pthread_create(&w->thread, NULL, worker_main, w);
      if (rc) {
        log_err("cannot start worker thread %d: %s", i, strerror(rc));
        pthread_cond_destroy(&w->cv);
        pool_stop(s);
        return GKC_EINTERNAL;
      }
      s->nworkers = i + 1;
    }
  }
  *out = s;
  return 0;
}

void pool_submit(gkcd_pool *s, gkcd_job *job) {
  pthread_mutex_lock(&s->mu);
  int dev = job->device >= 0 && job->device < s->ndevices ? job->device : 0;
  lane *l = &s->lanes[dev * s->nlanes + (job->lane < s->nlanes ? job->lane : 0)];
  if (job->first) { /* its client's only job: ahead of the others' primed ones (job.h) */
    job->next = l->head;
    l->head = job;
    if (!l->tail) l->tail = job;
  } else {
    job->next = NULL;
    if (l->tail)
      l->tail->next = job;
    else
      l->head = job;
    l->tail = job;
  }
  l->waiting++;
  atomic_store_explicit(&l->queued, l->waiting, memory_order_relaxed);
  if (l->spinning && !l->spin_claimed)
    l->spin_claimed = 1; /* the spinner will see it */
  else
    wake_one(l);
  pthread_mutex_unlock(&s->mu);
}

size_t pool_waiting(gkcd_pool *s, int device, int l) {
  if (device < 0 || device >= s->ndevices || l < 0 || l >= s->nlanes) return 0;
  return atomic_load_explicit(&s->lanes[device * s->nlanes + l].queued, memory_order_relaxed);
}

uint64_t pool_spin_hits(gkcd_pool *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->spin_hits;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void pool_stop(gkcd_pool *s) {
  pthread_mutex_lock(&s->mu);
  s->stopping = 1;
  for (int l = 0; l < s->ndevices * s->nlanes; l++)
    while (s->lanes[l].idle_top) wake_one(&s->lanes[l]); /* a spinner sees stopping when its time is up */
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < s->nworkers; i++) pthread_join(s->workers[i].thread, NULL);
  for (int i = 0; i < s->nworkers; i++) pthread_cond_destroy(&s->workers[i].cv);
  pthread_mutex_destroy(&s->mu);
  free(s->workers);
  free(s->lanes);
  free(s);
}
