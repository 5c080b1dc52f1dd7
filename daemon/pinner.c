/* pinner.c: see pinner.h. */
#include "pinner.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "log.h"
#include "threads.h"

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Unregisters rp's pages when registered, unmaps them, frees rp. */
static void undo(gkcd_pinner *p, region_pin *rp) {
  if (atomic_load_explicit(&rp->ready, memory_order_acquire) && p->be->region_unpin)
    p->be->region_unpin(p->be, rp->ptr);
  munmap(rp->ptr, rp->bytes);
  free(rp);
}

/* With mu held: the kept ones past their time or past the bound (the
 * oldest first), off the list, for the caller to undo without mu. */
static region_pin *expire(gkcd_pinner *p, uint64_t now) {
  region_pin **pp = &p->kept;
  size_t bytes = 0;
  while (*pp && bytes + (*pp)->bytes <= p->keep_max &&
         now - (*pp)->since_ns < p->keep_ms * 1000000u) {
    bytes += (*pp)->bytes;
    pp = &(*pp)->next_kept;
  }
  region_pin *gone = *pp; /* this one and every older one */
  *pp = NULL;
  p->kept_bytes = bytes;
  return gone;
}

static void undo_all(gkcd_pinner *p, region_pin *list) {
  while (list) {
    region_pin *next = list->next_kept;
    undo(p, list);
    list = next;
  }
}

/* A released region: kept, when its file is known and it fits, else undone. */
static void release(gkcd_pinner *p, region_pin *rp) {
  pthread_mutex_lock(&p->mu);
  if (!rp->ino || rp->bytes > p->keep_max || p->stopping) {
    pthread_mutex_unlock(&p->mu);
    undo(p, rp);
    return;
  }
  rp->since_ns = mono_ns();
  rp->next_kept = p->kept;
  p->kept = rp;
  region_pin *gone = expire(p, rp->since_ns);
  pthread_mutex_unlock(&p->mu);
  undo_all(p, gone);
}

static void *main_loop(void *arg) {
  gkcd_pinner *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->head && !p->stopping) {
      if (!p->kept) {
        pthread_cond_wait(&p->cv, &p->mu);
        continue;
      }
      /* Kept ones expire: look again within a second (or keep_ms). */
      uint64_t wait_ns = (p->keep_ms < 1000 ? p->keep_ms : 1000) * 1000000u, at = mono_ns() + wait_ns;
      struct timespec until = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
      pthread_cond_timedwait(&p->cv, &p->mu, &until);
      region_pin *gone = expire(p, mono_ns());
      if (gone) {
        pthread_mutex_unlock(&p->mu);
        undo_all(p, gone);
        pthread_mutex_lock(&p->mu);
      }
    }
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
      release(p, rp);
    }
    pthread_mutex_lock(&p->mu);
  }
  region_pin *gone = p->kept; /* stopping: nothing is kept any longer */
  p->kept = NULL;
  p->kept_bytes = 0;
  pthread_mutex_unlock(&p->mu);
  undo_all(p, gone);
  return NULL;
}

void pinner_init(gkcd_pinner *p, gkcd_backend *be) {
  *p = (gkcd_pinner){.be = be, .keep_ms = PINNER_KEEP_MS};
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the kept ones' clock */
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
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
static region_pin *make(gkcd_pinner *p, void *ptr, size_t bytes, int ready, uint64_t dev,
                        uint64_t ino) {
  if (!p->be || p->stopping) return NULL;
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
  rp->dev = dev;
  rp->ino = ino;
  atomic_init(&rp->ready, ready);
  rp->task_pin.pin = rp;
  rp->task_release = (pin_task){.pin = rp, .release = 1};
  return rp;
}

region_pin *pinner_pin(gkcd_pinner *p, void *ptr, size_t bytes, uint64_t dev, uint64_t ino) {
  region_pin *rp = make(p, ptr, bytes, 0, dev, ino);
  if (rp && p->be->region_pin) push(p, &rp->task_pin);
  return rp;
}

region_pin *pinner_adopt(gkcd_pinner *p, void *ptr, size_t bytes, uint64_t dev, uint64_t ino) {
  region_pin *rp = make(p, ptr, bytes, 1, dev, ino);
  /* No handle: nobody would unregister it, so it is done here, and the
   * region is used unregistered like any other without one. */
  if (!rp && p->be && p->be->region_unpin) p->be->region_unpin(p->be, ptr);
  return rp;
}

void pinner_release(gkcd_pinner *p, region_pin *rp) { push(p, &rp->task_release); }

void pinner_kept(gkcd_pinner *p, size_t *bytes, uint64_t *hits) {
  pthread_mutex_lock(&p->mu);
  *bytes = p->kept_bytes;
  *hits = p->kept_hits;
  pthread_mutex_unlock(&p->mu);
}

void *pinner_take_kept(gkcd_pinner *p, uint64_t dev, uint64_t ino, size_t bytes, int *pinned) {
  if (!ino) return NULL;
  pthread_mutex_lock(&p->mu);
  region_pin **pp = &p->kept;
  while (*pp && !((*pp)->dev == dev && (*pp)->ino == ino && (*pp)->bytes == bytes)) pp = &(*pp)->next_kept;
  region_pin *rp = *pp;
  if (rp) {
    *pp = rp->next_kept;
    p->kept_bytes -= rp->bytes;
    p->kept_hits++;
  }
  pthread_mutex_unlock(&p->mu);
  if (!rp) return NULL;
  void *ptr = rp->ptr;
  *pinned = atomic_load_explicit(&rp->ready, memory_order_acquire);
  free(rp);
  return ptr;
}

void pinner_stop(gkcd_pinner *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  if (p->started) pthread_join(p->thread, NULL);
  p->started = 0;
}
