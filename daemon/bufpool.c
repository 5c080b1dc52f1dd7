/* bufpool.c: see bufpool.h. */
#include "bufpool.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

int bufpool_init(bufpool *p, gkcd_budget *budget, size_t max_bytes,
                 uint64_t (*now_ms)(void *arg), void *now_arg) {
  memset(p, 0, sizeof *p);
  if (pthread_mutex_init(&p->mu, NULL) != 0) return -1;
  p->max_bytes = max_bytes;
  p->budget = budget;
  p->now_ms = now_ms;
  p->now_arg = now_arg;
  p->room = budget ? 0 : SIZE_MAX; /* the first sync says */
  if (budget) {
    budget->reclaim = bufpool_reclaim;
    budget->reclaim_arg = p;
  }
  return 0;
}

/* Removes idle[i] (under mu); its bytes leave idle_bytes. */
static void *take_at(bufpool *p, int i) {
  void *q = p->idle[i].p;
  p->idle_bytes -= p->idle[i].cap;
  p->idle[i] = p->idle[--p->n];
  return q;
}

void bufpool_destroy(bufpool *p) {
  pthread_mutex_lock(&p->mu);
  size_t bytes = p->idle_bytes;
  while (p->n > 0) free(take_at(p, 0));
  size_t owed = p->owed, credit = p->credit;
  p->owed = p->credit = 0;
  pthread_mutex_unlock(&p->mu);
  if (p->budget) {
    p->budget->reclaim = NULL;
    /* What it charged: the idle bytes less those kept since the last sync,
     * plus those taken since. */
    budget_give(p->budget, BUDGET_POOL, bytes - credit + owed);
  }
  pthread_mutex_destroy(&p->mu);
}

void *bufpool_get(bufpool *p, size_t n, size_t *cap, int *pooled) {
  void *q = bufpool_get_idle(p, n, cap);
  if (pooled) *pooled = q != NULL;
  if (q) return q;
  q = malloc(n ? n : 1);
  if (q && cap) *cap = malloc_usable_size(q);
  return q;
}

void *bufpool_get_idle(bufpool *p, size_t n, size_t *cap) {
  if (p && n >= BUFPOOL_MIN) {
    size_t most = n + n / 4 + BUFPOOL_SLACK;
    pthread_mutex_lock(&p->mu);
    int best = -1;
    for (int i = 0; i < p->n; i++)
      if (p->idle[i].cap >= n && p->idle[i].cap <= most &&
          (best < 0 || p->idle[i].cap < p->idle[best].cap))
        best = i;
    if (best >= 0) {
      size_t c = p->idle[best].cap;
      void *q = take_at(p, best);
      p->owed += c;
      p->hits++;
      pthread_mutex_unlock(&p->mu);
      if (cap) *cap = c;
      return q;
    }
    p->misses++;
    pthread_mutex_unlock(&p->mu);
  }
  return NULL;
}

/* With every slot taken, the buffer idle longest makes room for one just
 * given back (under mu): sizes a client sent a while ago must not keep the
 * pool from holding the size it sends now (8 connections' 16 MiB buffers
 * filled the 16 slots, and the 32 MiB ones after them were dropped at
 * every request: fresh memory each time, 1.1 GB/s on the H200 host).  It
 * is freed as a take is (its charge goes at the next sync: owed); only when
 * cap still fits the byte bound without it.  Returns the buffer to free
 * (outside mu), or NULL. */
static void *evict_for(bufpool *p, size_t cap) {
  if (p->n < BUFPOOL_MAX_BUFS) return NULL;
  int old = 0;
  for (int i = 1; i < p->n; i++)
    if (p->idle[i].since_ms < p->idle[old].since_ms) old = i;
  size_t c = p->idle[old].cap;
  if (p->idle_bytes - c + cap > p->max_bytes) return NULL;
  p->owed += c;
  p->evicted++;
  return take_at(p, old);
}

void bufpool_put(bufpool *p, void *q) {
  if (!q) return;
  size_t cap = malloc_usable_size(q);
  if (!p || cap < BUFPOOL_MIN) {
    free(q);
    return;
  }
  uint64_t now = p->now_ms ? p->now_ms(p->now_arg) : 0;
  pthread_mutex_lock(&p->mu);
  void *gone = p->budget && !budget_pool_fits(p->budget, cap) ? NULL : evict_for(p, cap);
  int keep = p->n < BUFPOOL_MAX_BUFS && p->idle_bytes + cap <= p->max_bytes &&
             (!p->budget || budget_pool_fits(p->budget, cap));
  if (keep) {
    p->idle[p->n++] = (bufpool_buf){q, cap, now};
    p->idle_bytes += cap;
    p->kept++;
  } else {
    p->dropped++;
  }
  pthread_mutex_unlock(&p->mu);
  free(gone);
  if (!keep) {
    free(q);
    return;
  }
  if (p->budget) budget_take(p->budget, BUDGET_POOL, cap);
}

void bufpool_put_any(bufpool *p, void *q) {
  if (!q) return;
  size_t cap = malloc_usable_size(q);
  if (!p || cap < BUFPOOL_MIN) {
    free(q);
    return;
  }
  uint64_t now = p->now_ms ? p->now_ms(p->now_arg) : 0;
  pthread_mutex_lock(&p->mu);
  void *gone = cap <= p->room ? evict_for(p, cap) : NULL;
  int keep = p->n < BUFPOOL_MAX_BUFS && p->idle_bytes + cap <= p->max_bytes && cap <= p->room;
  if (keep) {
    p->idle[p->n++] = (bufpool_buf){q, cap, now};
    p->idle_bytes += cap;
    p->credit += cap;
    p->room -= cap;
    p->kept++;
  } else {
    p->dropped++;
  }
  pthread_mutex_unlock(&p->mu);
  free(gone);
  if (!keep) free(q);
}

void bufpool_sync(bufpool *p) {
  pthread_mutex_lock(&p->mu);
  size_t owed = p->owed, credit = p->credit;
  p->owed = p->credit = 0;
  pthread_mutex_unlock(&p->mu);
  if (p->budget) {
    if (credit) budget_take(p->budget, BUDGET_POOL, credit);
    if (owed) budget_give(p->budget, BUDGET_POOL, owed);
  }
  size_t room = SIZE_MAX;
  if (p->budget) {
    const gkcd_budget *b = p->budget;
    size_t held = b->used + b->by_kind[BUDGET_POOL];
    room = held < b->limit ? b->limit - held : 0;
  }
  pthread_mutex_lock(&p->mu);
  p->room = room;
  pthread_mutex_unlock(&p->mu);
}

void bufpool_trim(bufpool *p) {
  bufpool_sync(p); /* every idle byte charged: what goes is given back */
  uint64_t now = p->now_ms ? p->now_ms(p->now_arg) : 0;
  size_t freed = 0;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->n;) {
    if (now - p->idle[i].since_ms >= BUFPOOL_IDLE_MS) {
      freed += p->idle[i].cap;
      free(take_at(p, i));
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&p->mu);
  if (freed && p->budget) budget_give(p->budget, BUDGET_POOL, freed);
}

size_t bufpool_reclaim(void *pool, size_t want) {
  bufpool *p = pool;
  size_t freed = 0;
  pthread_mutex_lock(&p->mu);
  /* Buffers kept by other threads since the last sync were never charged:
   * freeing them alone would not lower the charge, so they go too. */
  size_t target = want + p->credit;
  while (freed < target && p->n > 0) {
    int big = 0;
    for (int i = 1; i < p->n; i++)
      if (p->idle[i].cap > p->idle[big].cap) big = i;
    freed += p->idle[big].cap;
    free(take_at(p, big));
    p->reclaimed++;
  }
  size_t uncharged = freed < p->credit ? freed : p->credit;
  p->credit -= uncharged;
  pthread_mutex_unlock(&p->mu);
  return freed - uncharged;
}

void *bufpool_out_alloc(void *pool, size_t bytes) { return bufpool_get(pool, bytes, NULL, NULL); }
void bufpool_out_give(void *pool, void *p) { bufpool_put_any(pool, p); }
