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
 * Kept registrations.  A region registered with "reuse" (a client library
 * that keeps its regions for its process's next connection) and released
 * with its connection (not by shm_release, nor with a connection gkcd
 * closed) stays mapped and registered for a while instead of being undone: the same process registering the same
 * memfd again, as libgkc and the Python package do with a closed
 * connection's regions (GKC_SHM_KEEP), then costs neither a mapping nor a
 * registration (pinner_take_kept).  The kept bytes are bounded by keep_max
 * (the server sets --max-conn-pinned: one client's worth), the oldest go
 * first, and each goes after PINNER_KEEP_MS.  A memfd's inode cannot be
 * reused while its mapping is kept, so (device, inode) names one file.
 * Kept pages stay allocated: a client that died leaves them for at most
 * that long.
 *
 * pinner_pin and pinner_release are called on the loop thread,
 * pinner_take_kept on a worker (shm_register's), pinner_ready anywhere (a
 * worker deciding how to copy).
 */
#ifndef GKCD_PINNER_H
#define GKCD_PINNER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define PINNER_KEEP_MS 10000 /* the default of gkcd_pinner.keep_ms */

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
  uint64_t dev, ino; /* its file; ino 0: unknown, never kept */
  uint64_t since_ns; /* kept since */
  region_pin *next_kept;
};

typedef struct {
  gkcd_backend *be; /* registers regions (every device's copies see them) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pin_task *head, *tail;
  int started, stopping;
  pthread_t thread;
  /* Kept registrations, newest first (under mu). */
  region_pin *kept;
  size_t kept_bytes, keep_max; /* keep_max 0: none kept */
  uint64_t keep_ms;            /* how long one is kept (PINNER_KEEP_MS) */
  uint64_t kept_hits;          /* registrations served from them */
} gkcd_pinner;

/* A pinner registering with be (whose region_pin may be NULL: nothing to
 * register, pinner_pin then returns NULL).  The thread starts with the
 * first region. */
void pinner_init(gkcd_pinner *p, gkcd_backend *be);
/* Queues the registration of the mapping ptr (bytes long, of the file dev,
 * ino: 0 when unknown) and returns its handle, or NULL when there is no
 * thread or memory for it (the region is then used unregistered, and its
 * owner unmaps it).  A backend that registers nothing gets a handle all
 * the same (never ready), so that its release can be kept. */
region_pin *pinner_pin(gkcd_pinner *p, void *ptr, size_t bytes, uint64_t dev, uint64_t ino);
/* The handle of a mapping already registered for DMA (shm_register with
 * "pinned", region.c, or one taken from the kept ones): ready at once,
 * released as the others are.  NULL as for pinner_pin, after unregistering
 * it. */
region_pin *pinner_adopt(gkcd_pinner *p, void *ptr, size_t bytes, uint64_t dev, uint64_t ino);
/* Queues the end of rp: kept (above), or unregistered if it was
 * registered, unmapped and freed. */
void pinner_release(gkcd_pinner *p, region_pin *rp);
/* Any thread: the kept mapping of file dev, ino of exactly bytes bytes,
 * taken (no longer kept; the caller owns the mapping, and its
 * registration: *pinned 1 when registered), or NULL. */
void *pinner_take_kept(gkcd_pinner *p, uint64_t dev, uint64_t ino, size_t bytes, int *pinned);
/* What is kept now, and how many registrations were served from it. */
void pinner_kept(gkcd_pinner *p, size_t *bytes, uint64_t *hits);
/* Finishes everything queued, undoes what is kept, stops the thread. */
void pinner_stop(gkcd_pinner *p);

/* The region's pages are registered (rp may be NULL: never). */
static inline int pinner_ready(const region_pin *rp) {
  return rp && atomic_load_explicit(&rp->ready, memory_order_acquire);
}

#endif
