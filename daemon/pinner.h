/* pinner.h: registering clients' shared-memory regions for DMA (and
 * undoing it) on a thread of its own, off every request's path.
 *
 * Registering a region's pages with the GPU driver (cudaHostRegister)
 * takes a while for big regions, and undoing it too; done inside
 * shm_register, it made a client's first big request wait for it, and
 * done at release it held the event loop.  So shm_register only maps the
 * region, and the pinner registers it in the background: requests that
 * come before it is done copy the region through the backend's pinned ring
 * (as inline bytes go), the ones after it copy from it directly.  Release
 * is queued behind the registration of the same region, so unregistering
 * and unmapping always come after it, in order.
 *
 * pinner_pin and pinner_release are called on the loop thread,
 * pinner_ready anywhere (a worker deciding how to copy).
 */
#ifndef GKCD_PINNER_H
#define GKCD_PINNER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "backend.h"

typedef struct region_pin region_pin;

/* One queued piece of work: pinning a region, or releasing it. */
typedef struct pin_task {
  region_pin *pin;
  int release;
  struct pin_task *next;
} pin_task;

/* One region's registration, shared by its object and the pinner, which
 * frees it once the release is done. */
struct region_pin {
  void *ptr;
  size_t bytes;
  atomic_int ready;  /* the backend registered the pages: DMA straight from them */
  pin_task task_pin, task_release; /* each queued at most once */
};

typedef struct {
  gkcd_backend *be; /* registers regions (every device's copies see them) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pin_task *head, *tail;
  int started, stopping;
  pthread_t thread;
} gkcd_pinner;

/* A pinner registering with be (whose region_pin may be NULL: nothing to
 * register, pinner_pin then returns NULL).  The thread starts with the
 * first region. */
void pinner_init(gkcd_pinner *p, gkcd_backend *be);
/* Queues the registration of the mapping ptr (bytes long) and returns its
 * handle, or NULL when there is nothing to register or no thread or memory
 * for it (the region is then used unregistered, and its owner unmaps it). */
region_pin *pinner_pin(gkcd_pinner *p, void *ptr, size_t bytes);
/* The handle of a mapping already registered for DMA (shm_register with
 * "pinned", region.c): ready at once, released as the others are.  NULL as
 * for pinner_pin, after unregistering it. */
region_pin *pinner_adopt(gkcd_pinner *p, void *ptr, size_t bytes);
/* Queues the end of rp: unregistered if it was registered, unmapped, freed. */
void pinner_release(gkcd_pinner *p, region_pin *rp);
/* Finishes everything queued and stops the thread. */
void pinner_stop(gkcd_pinner *p);

/* The region's pages are registered (rp may be NULL: never). */
static inline int pinner_ready(const region_pin *rp) {
  return rp && atomic_load_explicit(&rp->ready, memory_order_acquire);
}

#endif
