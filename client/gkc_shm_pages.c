/* gkc_shm_pages.c: the arena's bytes moved in bulk (gkc_shm.h, "pages"):
 * copies into and out of it, and a new region's pages allocated.
 *
 * One thread's memcpy (~5-10 GB/s) is what a big array by value waits on:
 * from 16 MiB up a copy is cut into pieces that threads copy at once
 * (GKC_COPY_THREADS of them, default up to 16, the CPUs there are: on a
 * 16-core H200 host a 256 MiB reduce by value ran at 19.8 GB/s with 8 and
 * 21.3 with 16, bench/RESULTS.md).  A thread that cannot be started leaves
 * its piece to the caller's thread.
 *
 * Fresh memfd pages cost more than the copy: a write fault each, that
 * allocates and zeroes a 4 KiB page (THP is off for shmem on the hosts we
 * measured, "shmem_enabled never").  Taking the faults one by one inside
 * memcpy costs 1.2-1.7x what MADV_POPULATE_WRITE (Linux 5.14) costs for the
 * same pages, which allocates them in one pass per thread without a trap
 * for each (bench/RESULTS.md, "first call"); so a piece of fresh memory is
 * populated first, then copied, by the same thread.  An older kernel
 * (EINVAL) gets a write to each page instead.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gkc_shm.h"

#define SHM_PARALLEL_COPY_MIN ((size_t)16 << 20)
#define SHM_COPY_MAX_THREADS 16
#define PAGE ((size_t)4096)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Whether MADV_POPULATE_WRITE was refused once (EINVAL: an older kernel):
 * the fallback then, without asking again.  Any thread may set it. */
static int no_populate_write;

typedef struct {
  char *dst;
  const char *src; /* NULL: populate only */
  size_t n;
  int fresh;       /* dst's pages are new: populate before the copy */
} piece;

void gkc__shm_populate_fallback(int on) { __atomic_store_n(&no_populate_write, on, __ATOMIC_RELAXED); }

/* Faults the pages under [p, p + n) in, writable, keeping their bytes. */
static void populate(char *p, size_t n) {
  if (n == 0) return;
  if (!__atomic_load_n(&no_populate_write, __ATOMIC_RELAXED)) {
    /* Whole pages: population keeps every byte, so the neighbours' bytes in
     * the first and last page (other slices) are safe. */
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + n + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0) return;
    /* EINVAL: the kernel does not know it (before 5.14); anything else
     * (ENOMEM, EFAULT, a signal) leaves the faults to the writes below. */
    if (errno == EINVAL) __atomic_store_n(&no_populate_write, 1, __ATOMIC_RELAXED);
  }
  /* A write of each page's first byte back as it was, only of bytes in
   * [p, p + n): those are this caller's alone (a slice being filled, or a
   * region nobody uses yet), while the rest of a shared first page may be
   * gkcd's result being written. */
  volatile char *q = p;
  size_t first = (PAGE - ((uintptr_t)p & (PAGE - 1))) & (PAGE - 1);
  for (size_t i = first; i < n; i += PAGE) q[i] = q[i];
}

static void *run(void *arg) {
  piece *p = arg;
  if (p->fresh || !p->src) populate(p->dst, p->n);
  if (p->src) memcpy(p->dst, p->src, p->n);
  return NULL;
}

static int copy_threads(void) {
  const char *e = getenv("GKC_COPY_THREADS");
  long n = e && *e ? strtol(e, NULL, 10) : 0;
  if (n <= 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    n = cpus < 1 ? 1 : cpus > 16 ? 16 : cpus;
  }
  return n > SHM_COPY_MAX_THREADS ? SHM_COPY_MAX_THREADS : (int)n;
}

static void pieces(void *dst, const void *src, size_t n, int fresh) {
  int k = n < SHM_PARALLEL_COPY_MIN ? 1 : copy_threads();
  if (k < 2) {
    run(&(piece){dst, src, n, fresh});
    return;
  }
  piece part[SHM_COPY_MAX_THREADS];
  pthread_t tid[SHM_COPY_MAX_THREADS];
  int started[SHM_COPY_MAX_THREADS] = {0};
  size_t step = (n + (size_t)k - 1) / (size_t)k;
  step = (step + PAGE - 1) & ~(PAGE - 1); /* whole pages to each */
  int m = 0;
  for (size_t at = 0; at < n; at += step, m++)
    part[m] = (piece){(char *)dst + at, src ? (const char *)src + at : NULL,
                      n - at < step ? n - at : step, fresh};
  for (int i = 1; i < m; i++) started[i] = pthread_create(&tid[i], NULL, run, &part[i]) == 0;
  run(&part[0]);
  for (int i = 1; i < m; i++) {
    if (started[i]) pthread_join(tid[i], NULL);
    else run(&part[i]);
  }
}

void gkc__shm_copy(void *dst, const void *src, size_t n, int fresh) { pieces(dst, src, n, fresh); }

void gkc__shm_populate(void *dst, size_t n) { pieces(dst, NULL, n, 1); }
