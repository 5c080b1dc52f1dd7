/* pinner.c: see pinner.h. */
#include "pinner.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "log.h"
#include "threads.h"

static void *main_loop(void *arg) {
  gkcd_pinner *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->head && !p->stopping) pthread_cond_wait(&p->cv, &p->mu);
    pin_task *t = p->head;
    if (!t) break; /* stopping, and nothing left */
    p->head = t->next;
    if (!p->head) p->tail = NULL;
    pthread_mutex_unlock(&p->mu);
    region_pin *rp = t->pin;
    if (!t->release) {
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      int rc = p->be->region_pin(p->be, rp->ptr, rp->bytes);
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
      /* What registering costs, for bench/RESULTS.md: big ones only.  When
       * it ran (CLOCK_MONOTONIC, as bench_byvalue --trace prints its calls)
       * says whether a first call overlapped it, and what that cost it:
       * requests never wait for it (pinner_ready), but the driver may. */
      if (rp->bytes >= ((size_t)64 << 20))
        log_info("registered a %zu MiB region for DMA in %.1f ms%s (monotonic %.1f to %.1f ms)",
                 rp->bytes >> 20, ms, rc ? " (refused)" : "",
                 (double)t0.tv_sec * 1e3 + (double)t0.tv_nsec / 1e6,
                 (double)t1.tv_sec * 1e3 + (double)t1.tv_nsec / 1e6);
      if (rc == 0)
        atomic_store_explicit(&rp->ready, 1, memory_order_release);
      else
        log_info("a %zu-byte region could not be registered for DMA: copied through the"
                 " pinned ring instead", rp->bytes);
    } else {
      if (atomic_load_explicit(&rp->ready, memory_order_acquire) && p->be->region_unpin)
        p->be->region_unpin(p->be, rp->ptr);
      munmap(rp->ptr, rp->bytes);
      free(rp);
    }
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

void pinner_init(gkcd_pinner *p, gkcd_backend *be) {
  *p = (gkcd_pinner){.be = be};
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
}

static void push(gkcd_pinner *p, pin_task *t) {
  t->next = NULL;
  pthread_mutex_lock(&p->mu);
  if (p->tail)
    p->tail->next = t;
  else
    p->head = t;
  p->tail = t;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* A handle for ptr, the thread running (which does every release); NULL
 * when there is none or no memory. */
static region_pin *make(gkcd_pinner *p, void *ptr, size_t bytes, int ready) {
  if (!p->be || !p->be->region_pin || p->stopping) return NULL;
  if (!p->started) {
    /* Possibly from the loop thread: SIGINT and SIGTERM blocked (threads.h). */
    if (thread_start(&p->thread, main_loop, p) != 0) {
      log_warn("cannot start the thread that registers regions: they are copied through the"
               " pinned ring");
      return NULL;
    }
    p->started = 1;
  }
  region_pin *rp = calloc(1, sizeof *rp);
  if (!rp) return NULL;
  rp->ptr = ptr;
  rp->bytes = bytes;
  atomic_init(&rp->ready, ready);
  rp->task_pin.pin = rp;
  rp->task_release = (pin_task){.pin = rp, .release = 1};
  return rp;
}

region_pin *pinner_pin(gkcd_pinner *p, void *ptr, size_t bytes) {
  region_pin *rp = make(p, ptr, bytes, 0);
  if (rp) push(p, &rp->task_pin);
  return rp;
}

region_pin *pinner_adopt(gkcd_pinner *p, void *ptr, size_t bytes) {
  region_pin *rp = make(p, ptr, bytes, 1);
  /* No handle: nobody would unregister it, so it is done here, and the
   * region is used unregistered like any other without one. */
  if (!rp && p->be && p->be->region_unpin) p->be->region_unpin(p->be, ptr);
  return rp;
}

void pinner_release(gkcd_pinner *p, region_pin *rp) { push(p, &rp->task_release); }

void pinner_stop(gkcd_pinner *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  if (p->started) pthread_join(p->thread, NULL);
  p->started = 0;
}
