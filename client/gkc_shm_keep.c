/* gkc_shm_keep.c: arena regions kept for the next connection of this
 * process (gkc_shm.h, "kept regions").
 *
 * A region's pages cost more the first time (allocated and zeroed, 4 KiB
 * at a time) than every later copy into them.  A connection that closes, or
 * replaces an idle region by a bigger one, leaves its regions here instead
 * of unmapping them, and the next connection that grows its arena takes
 * one that fits (gkcd maps it anew: a new shm_register), so a program that
 * connects again, or holds several connections one after another, pays for
 * its pages once.  Bounded: GKC_SHM_KEEP bytes at most (a size, read by
 * each connection as it is made; default GKC_SHM_DEFAULT_MAX, 0 keeps none),
 * the oldest given back first; all of them go when the process exits.
 *
 * A region is a MAP_SHARED memfd: after fork both processes would see the
 * same pages, so a region kept by another process (the parent) is never
 * handed out; the child frees its copies of them instead.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gkc_shm.h"

#define KEEP_MAX 8 /* regions at most: one arena's worth */

typedef struct {
  gkc_region *reg; /* NULL: unused */
  uint64_t pop_head, pop_tail;
  unsigned long long seq; /* the order they came in: the oldest goes first */
} kept;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kept list[KEEP_MAX];
static pid_t owner;           /* the process whose regions list holds */
static unsigned long long seq;

/* Under mu: a list inherited across fork is not ours to hand out. */
static void check_owner(void) {
  pid_t me = getpid();
  if (owner == me) return;
  for (int i = 0; i < KEEP_MAX; i++)
    if (list[i].reg) gkc__region_free(list[i].reg);
  memset(list, 0, sizeof list);
  owner = me;
}

static uint64_t held(void) {
  uint64_t n = 0;
  for (int i = 0; i < KEEP_MAX; i++) n += gkc_region_bytes(list[i].reg);
  return n;
}

void gkc__shm_keep(gkc_region *reg, uint64_t pop_head, uint64_t pop_tail, uint64_t max) {
  if (!reg) return;
  uint64_t bytes = gkc_region_bytes(reg);
  pthread_mutex_lock(&mu);
  check_owner();
  if (bytes > max) {
    pthread_mutex_unlock(&mu);
    gkc__region_free(reg);
    return;
  }
  /* Room, by giving back the oldest. */
  for (;;) {
    int oldest = -1, free_at = -1;
    for (int i = 0; i < KEEP_MAX; i++) {
      if (!list[i].reg) {
        if (free_at < 0) free_at = i;
      } else if (oldest < 0 || list[i].seq < list[oldest].seq) {
        oldest = i;
      }
    }
    if (free_at >= 0 && held() + bytes <= max) {
      list[free_at] = (kept){reg, pop_head, pop_tail, ++seq};
      break;
    }
    gkc__region_free(list[oldest].reg); /* oldest >= 0: the list holds something */
    list[oldest].reg = NULL;
  }
  pthread_mutex_unlock(&mu);
}

gkc_region *gkc__shm_take_kept(uint64_t min_bytes, uint64_t max_bytes, uint64_t *pop_head,
                               uint64_t *pop_tail) {
  pthread_mutex_lock(&mu);
  check_owner();
  int best = -1;
  for (int i = 0; i < KEEP_MAX; i++) {
    uint64_t b = gkc_region_bytes(list[i].reg);
    if (list[i].reg && b >= min_bytes && b <= max_bytes &&
        (best < 0 || b < gkc_region_bytes(list[best].reg)))
      best = i;
  }
  gkc_region *r = NULL;
  if (best >= 0) {
    r = list[best].reg;
    *pop_head = list[best].pop_head;
    *pop_tail = list[best].pop_tail;
    list[best].reg = NULL;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

uint64_t gkc__shm_kept_bytes(void) {
  pthread_mutex_lock(&mu);
  check_owner();
  uint64_t n = held();
  pthread_mutex_unlock(&mu);
  return n;
}

void gkc__shm_keep_reset(void) {
  pthread_mutex_lock(&mu);
  check_owner();
  for (int i = 0; i < KEEP_MAX; i++)
    if (list[i].reg) gkc__region_free(list[i].reg);
  memset(list, 0, sizeof list);
  pthread_mutex_unlock(&mu);
}
