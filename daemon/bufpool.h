/* bufpool.h: big buffers kept for reuse, inside the memory budget.
 *
 * A request that sends its arrays inline arrives in an input buffer of its
 * size, and an array result leaves in a reply buffer of its size.  Fresh
 * memory of that size costs a page fault and a cleared page per 4 KiB the
 * first time it is written (perf on a 2-core VM: a quarter of gkcd's time
 * at 64 MiB), every request again when each buffer is freed after use.
 * The pool keeps a few such buffers when they are done with, so that the
 * next big request of about the same size writes into memory that is
 * already there.
 *
 * Rules, so that it can neither hide memory nor hold up work:
 *  - only buffers of BUFPOOL_MIN bytes or more, at most BUFPOOL_MAX_BUFS of
 *    them and max_bytes together (bufpool_init);
 *  - an idle buffer is charged to the budget as BUDGET_POOL (budget.h): not
 *    work, but kept only while work plus the pool fits under
 *    --memory-budget.  Whenever work grows past that, the budget asks the
 *    pool for the difference first (bufpool_reclaim, registered as the
 *    budget's reclaim hook), so a cached buffer never makes a request wait;
 *  - a buffer idle for BUFPOOL_IDLE_MS is freed (bufpool_trim, from the
 *    sweep), so an idle gkcd holds none; with every slot taken, the one
 *    idle longest makes room for a buffer given back (the sizes in use now
 *    are kept, not those of a while ago);
 *  - a buffer handed out is plain malloc'd memory: whoever holds it may
 *    free() it, or give it back with bufpool_put;
 *  - bufpool_get hands out a buffer only if it is at most a quarter (plus
 *    BUFPOOL_SLACK) larger than what was asked, so what a holder keeps
 *    beyond its charge stays small.
 *
 * bufpool_get and bufpool_put_any are safe from any thread (the workers
 * take result buffers and scratch copies from it, job.h's job_out_alloc,
 * and give scratch back); everything else is for the loop thread, which
 * alone touches the budget: the charges of buffers that a worker took are
 * given back, and of those it gave, taken, at the next bufpool_sync (a
 * worker keeps a buffer only within the room the loop last saw, less what
 * other workers kept since).
 */
#ifndef GKCD_BUFPOOL_H
#define GKCD_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "budget.h"

#define BUFPOOL_MIN ((size_t)1 << 20)     /* smaller buffers are malloc'd and freed as usual */
#define BUFPOOL_MAX_BUFS 16
#define BUFPOOL_SLACK ((size_t)256 << 10) /* beyond a quarter: what a fit may exceed the ask by */
#define BUFPOOL_IDLE_MS 3000

typedef struct {
  void *p;
  size_t cap;        /* malloc_usable_size(p) */
  uint64_t since_ms; /* when it was put back */
} bufpool_buf;

typedef struct bufpool {
  pthread_mutex_t mu;
  bufpool_buf idle[BUFPOOL_MAX_BUFS]; /* under mu */
  int n;
  size_t idle_bytes;   /* under mu: what idle[] holds */
  size_t owed;         /* under mu: taken since the last sync, still charged */
  size_t credit;       /* under mu: kept by bufpool_put_any since the last sync, not yet charged */
  size_t room;         /* under mu: what the budget allowed the pool at the last sync */
  size_t max_bytes;
  gkcd_budget *budget; /* the loop's; NULL: no budget (tests) */
  uint64_t (*now_ms)(void *arg); /* the loop's clock, for the idle time */
  void *now_arg;
  /* Counters (under mu), for status. */
  uint64_t hits, misses, kept, dropped, reclaimed, evicted;
} bufpool;

/* Empty; budget may be NULL.  Registers bufpool_reclaim as the budget's
 * reclaim hook.  now_ms(now_arg) is the loop's time in milliseconds. */
int bufpool_init(bufpool *p, gkcd_budget *budget, size_t max_bytes,
                 uint64_t (*now_ms)(void *arg), void *now_arg);
/* Frees every idle buffer (and gives back their charge). */
void bufpool_destroy(bufpool *p);
/* A buffer of at least n bytes: an idle one that fits (at most n + n/4 +
 * BUFPOOL_SLACK), else a fresh malloc of n (NULL when out of memory).
 * *cap (may be NULL) is its true size; *pooled (may be NULL) says which.
 * p may be NULL: plain malloc.  Any thread. */
void *bufpool_get(bufpool *p, size_t n, size_t *cap, int *pooled);
/* Only an idle buffer that fits, as bufpool_get would hand out, or NULL:
 * never fresh memory (conn.c asks on a peer's declared length, and must
 * not allocate on its word even for a moment).  Any thread. */
void *bufpool_get_idle(bufpool *p, size_t n, size_t *cap);
/* Takes q back (malloc'd; NULL is fine): kept when it is big enough and
 * the pool's bounds and the budget allow, else freed.  Loop thread. */
void bufpool_put(bufpool *p, void *q);
/* bufpool_put from any thread: kept only within the room the loop saw at
 * its last sync (less what was kept since); charged at the next sync. */
void bufpool_put_any(bufpool *p, void *q);
/* Settles the charges of buffers taken and kept by other threads since the
 * last call, and notes the room they may use until the next.  Loop. */
void bufpool_sync(bufpool *p);
/* Frees buffers idle BUFPOOL_IDLE_MS or more.  Loop. */
void bufpool_trim(bufpool *p);
/* The budget's reclaim hook: frees idle buffers, largest first, until want
 * bytes are freed or none is left; returns the bytes freed, whose charge
 * the caller (budget.c) takes off BUDGET_POOL itself.  Loop. */
size_t bufpool_reclaim(void *pool, size_t want);

/* job_set_out_alloc's pair (job.h), pool being a bufpool: the workers'
 * result buffers come from the pool (bufpool_get) and go back to it
 * (bufpool_put_any), with no layer in between. */
void *bufpool_out_alloc(void *pool, size_t bytes);
void bufpool_out_give(void *pool, void *p);

#endif
