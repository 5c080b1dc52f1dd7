/* test_bufpool: the pool of big buffers (daemon/bufpool.c) and its books in
 * the memory budget (daemon/budget.c), on their own with a clock of the
 * test's: which buffer serves which request, the bounds (size, count,
 * bytes, the budget), the budget taking the pool's memory back before work
 * would pass the limit, the idle trim, buffers taken on other threads. */
#include <malloc.h>
#include <pthread.h>

#include "budget.h"
#include "bufpool.h"
#include "test.h"

#define MiB ((size_t)1 << 20)

static uint64_t g_now;
static uint64_t clock_ms(void *arg) {
  (void)arg;
  return g_now;
}

static gkcd_budget g_budget;
static int g_freed_calls;
static void on_free(void *arg) {
  (void)arg;
  g_freed_calls++;
}

static void fresh_budget(size_t limit) {
  memset(&g_budget, 0, sizeof g_budget);
  g_budget.limit = limit;
  g_budget.on_free = on_free;
}

/* A buffer of the pool's size class, written through (as a request's bytes
 * would be). */
static void *filled(size_t n, unsigned char v) {
  void *p = malloc(n);
  ASSERT(p);
  memset(p, v, n);
  return p;
}

static void test_small_buffers_pass_through(void) {
  bufpool p;
  fresh_budget(1024 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 256 * MiB, clock_ms, NULL), 0);
  int pooled = 1;
  size_t cap = 0;
  void *q = bufpool_get(&p, 1000, &cap, &pooled);
  ASSERT(q && cap >= 1000 && !pooled);
  bufpool_put(&p, q); /* under BUFPOOL_MIN: freed, never kept */
  ASSERT_EQ(p.n, 0);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
  bufpool_put(&p, NULL);
  /* No pool at all: plain malloc and free. */
  q = bufpool_get(NULL, 4 * MiB, &cap, &pooled);
  ASSERT(q && !pooled && cap >= 4 * MiB);
  bufpool_put(NULL, q);
  bufpool_destroy(&p);
}

static void test_reuse_and_fit(void) {
  bufpool p;
  fresh_budget(1024 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 256 * MiB, clock_ms, NULL), 0);
  void *a = filled(8 * MiB, 1);
  size_t acap = malloc_usable_size(a);
  bufpool_put(&p, a);
  ASSERT_EQ(p.n, 1);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], acap);
  ASSERT_EQ(g_budget.used, 0); /* not work: budget_fits does not see it */
  ASSERT(budget_fits(&g_budget, 1024 * MiB));
  /* Too small for a bigger ask, too big for a much smaller one. */
  int pooled;
  void *q = bufpool_get(&p, 9 * MiB, NULL, &pooled);
  ASSERT(!pooled);
  free(q);
  q = bufpool_get(&p, 2 * MiB, NULL, &pooled);
  ASSERT(!pooled);
  free(q);
  ASSERT_EQ(p.n, 1);
  ASSERT_EQ(p.misses, 2);
  /* Within a quarter: the same memory comes back, its bytes as they were. */
  size_t cap;
  q = bufpool_get(&p, 7 * MiB, &cap, &pooled);
  ASSERT(pooled && q == a && cap == acap);
  ASSERT_EQ(((unsigned char *)q)[8 * MiB - 1], 1);
  ASSERT_EQ(p.n, 0);
  /* Taken, but still charged until the loop syncs. */
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], acap);
  int calls = g_freed_calls;
  bufpool_sync(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
  ASSERT_EQ(g_freed_calls, calls); /* the pool's bytes wake no waiter */
  /* The smallest that fits is chosen. */
  void *big = filled(12 * MiB, 2), *mid = filled(10 * MiB, 3);
  bufpool_put(&p, big);
  bufpool_put(&p, q);
  bufpool_put(&p, mid);
  ASSERT_EQ(p.n, 3);
  void *r = bufpool_get(&p, 9 * MiB, NULL, &pooled);
  ASSERT(pooled && r == mid);
  free(r); /* a holder may free() what it took */
  bufpool_sync(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], malloc_usable_size(big) + acap);
  bufpool_destroy(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
}

static void test_bounds(void) {
  bufpool p;
  fresh_budget(1024 * MiB);
  /* Bytes: at most 20 MiB idle. */
  ASSERT_EQ(bufpool_init(&p, &g_budget, 20 * MiB, clock_ms, NULL), 0);
  bufpool_put(&p, filled(8 * MiB, 0));
  bufpool_put(&p, filled(8 * MiB, 0));
  bufpool_put(&p, filled(8 * MiB, 0)); /* 24 MiB: freed */
  ASSERT_EQ(p.n, 2);
  ASSERT_EQ(p.dropped, 1);
  bufpool_destroy(&p);
  /* Count: at most BUFPOOL_MAX_BUFS. */
  ASSERT_EQ(bufpool_init(&p, &g_budget, 1024 * MiB, clock_ms, NULL), 0);
  for (int i = 0; i < BUFPOOL_MAX_BUFS + 3; i++) bufpool_put(&p, filled(BUFPOOL_MIN, 0));
  ASSERT_EQ(p.n, BUFPOOL_MAX_BUFS);
  bufpool_destroy(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
  /* The budget: work and the pool under the limit. */
  fresh_budget(40 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 1024 * MiB, clock_ms, NULL), 0);
  budget_take(&g_budget, BUDGET_JOBS, 25 * MiB);
  bufpool_put(&p, filled(8 * MiB, 0));  /* 33 MiB held: kept */
  bufpool_put(&p, filled(8 * MiB, 0));  /* 41 MiB: freed */
  ASSERT_EQ(p.n, 1);
  ASSERT(g_budget.used + g_budget.by_kind[BUDGET_POOL] <= g_budget.limit);
  budget_give(&g_budget, BUDGET_JOBS, 25 * MiB);
  bufpool_destroy(&p);
}

static void test_work_reclaims(void) {
  bufpool p;
  fresh_budget(64 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 1024 * MiB, clock_ms, NULL), 0);
  for (int i = 0; i < 5; i++) bufpool_put(&p, filled(8 * MiB, 0));
  size_t pool = g_budget.by_kind[BUDGET_POOL];
  ASSERT_EQ(p.n, 5);
  ASSERT(pool >= 40 * MiB);
  /* Work that fits beside the pool leaves it alone. */
  budget_take(&g_budget, BUDGET_JOBS, 16 * MiB);
  ASSERT_EQ(p.n, 5);
  /* Work that does not: the pool gives back at least the difference, at once. */
  budget_take(&g_budget, BUDGET_REPLIES, 16 * MiB);
  ASSERT(g_budget.used + g_budget.by_kind[BUDGET_POOL] <= g_budget.limit);
  ASSERT_EQ(g_budget.used, 32 * MiB);
  ASSERT(p.n < 5 && p.n >= 3);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], p.idle_bytes);
  /* Input admitted as work (budget_move) too. */
  budget_take(&g_budget, BUDGET_INPUT, 30 * MiB);
  budget_move(&g_budget, BUDGET_INPUT, BUDGET_JOBS, 30 * MiB);
  ASSERT(g_budget.used + g_budget.by_kind[BUDGET_POOL] <= g_budget.limit);
  ASSERT_EQ(p.n, 0);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
  ASSERT(p.reclaimed >= 5);
  budget_give(&g_budget, BUDGET_JOBS, 46 * MiB);
  budget_give(&g_budget, BUDGET_REPLIES, 16 * MiB);
  ASSERT_EQ(g_budget.used, 0);
  bufpool_destroy(&p);
}

static void test_idle_trim(void) {
  bufpool p;
  fresh_budget(1024 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 1024 * MiB, clock_ms, NULL), 0);
  g_now = 1000;
  bufpool_put(&p, filled(4 * MiB, 0));
  g_now = 1000 + BUFPOOL_IDLE_MS / 2;
  bufpool_put(&p, filled(6 * MiB, 0));
  bufpool_trim(&p);
  ASSERT_EQ(p.n, 2);
  g_now = 1000 + BUFPOOL_IDLE_MS;
  bufpool_trim(&p); /* the first is idle long enough */
  ASSERT_EQ(p.n, 1);
  ASSERT(p.idle[0].cap >= 6 * MiB);
  g_now += BUFPOOL_IDLE_MS;
  bufpool_trim(&p);
  ASSERT_EQ(p.n, 0);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
  bufpool_destroy(&p);
}

/* Workers take result buffers while the loop puts and syncs. */
static bufpool g_shared;
static void *taker(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) {
    int pooled;
    void *q = bufpool_get(&g_shared, 2 * MiB, NULL, &pooled);
    ASSERT(q);
    ((char *)q)[0] = 1;
    free(q);
  }
  return NULL;
}

static void test_threads(void) {
  fresh_budget(1024 * MiB);
  ASSERT_EQ(bufpool_init(&g_shared, &g_budget, 1024 * MiB, clock_ms, NULL), 0);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, taker, NULL);
  for (int i = 0; i < 200; i++) {
    bufpool_put(&g_shared, filled(2 * MiB, 0));
    bufpool_sync(&g_shared);
  }
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  bufpool_sync(&g_shared);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], g_shared.idle_bytes);
  ASSERT(g_shared.hits + g_shared.misses == 600);
  bufpool_destroy(&g_shared);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
}

/* Workers give scratch back (bufpool_put_any): kept within the room the
 * loop last saw, charged at the next sync; trimmed and reclaimed without
 * the books going wrong. */
static void test_put_any(void) {
  bufpool p;
  fresh_budget(24 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 1024 * MiB, clock_ms, NULL), 0);
  bufpool_put_any(&p, filled(4 * MiB, 0)); /* no sync yet: no room known */
  ASSERT_EQ(p.n, 0);
  bufpool_sync(&p);
  bufpool_put_any(&p, filled(8 * MiB, 0));
  bufpool_put_any(&p, filled(8 * MiB, 0));
  bufpool_put_any(&p, filled(12 * MiB, 0)); /* past the room the loop saw */
  ASSERT_EQ(p.n, 2);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0); /* not charged before the sync */
  bufpool_sync(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], p.idle_bytes);
  ASSERT(g_budget.by_kind[BUDGET_POOL] <= g_budget.limit);
  /* Kept since the last sync, then reclaimed: only what was charged comes off. */
  void *q = bufpool_get(&p, 8 * MiB, NULL, NULL);
  bufpool_sync(&p);
  bufpool_put_any(&p, q);
  budget_take(&g_budget, BUDGET_JOBS, 20 * MiB);
  bufpool_sync(&p);
  ASSERT(g_budget.used + g_budget.by_kind[BUDGET_POOL] <= g_budget.limit);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], p.idle_bytes);
  budget_give(&g_budget, BUDGET_JOBS, 20 * MiB);
  bufpool_sync(&p);
  bufpool_put_any(&p, filled(2 * MiB, 0));
  g_now += BUFPOOL_IDLE_MS;
  bufpool_trim(&p);
  ASSERT_EQ(p.n, 0);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
  bufpool_destroy(&p);
}

/* Every slot taken: the buffer idle longest makes room for one given back,
 * when the byte bound allows; its charge goes at the next sync. */
static void test_evict_oldest(void) {
  bufpool p;
  fresh_budget(1024 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 1024 * MiB, clock_ms, NULL), 0);
  g_now = 1000;
  for (int i = 0; i < BUFPOOL_MAX_BUFS; i++, g_now++) bufpool_put(&p, filled(MiB + (size_t)i * 4096, 0));
  ASSERT_EQ(p.n, BUFPOOL_MAX_BUFS);
  g_now += 50;
  bufpool_put(&p, filled(3 * MiB, 7)); /* a size in use now */
  ASSERT_EQ(p.n, BUFPOOL_MAX_BUFS);
  ASSERT_EQ(p.evicted, 1);
  ASSERT_EQ(p.dropped, 0);
  uint64_t oldest = UINT64_MAX;
  for (int i = 0; i < p.n; i++)
    if (p.idle[i].since_ms < oldest) oldest = p.idle[i].since_ms;
  ASSERT_EQ(oldest, 1001); /* the one put at 1000 went */
  bufpool_sync(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], p.idle_bytes);
  int pooled = 0;
  void *q = bufpool_get(&p, 3 * MiB, NULL, &pooled);
  ASSERT(pooled && ((unsigned char *)q)[0] == 7);
  bufpool_put(&p, q);
  /* From a worker too (put_any), within the room the loop last saw. */
  g_now += 50;
  bufpool_sync(&p);
  bufpool_put_any(&p, filled(5 * MiB, 0));
  ASSERT_EQ(p.n, BUFPOOL_MAX_BUFS);
  ASSERT_EQ(p.evicted, 2);
  bufpool_sync(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], p.idle_bytes);
  bufpool_destroy(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
  /* Not past the byte bound: 16 MiB idle of 16.5 allowed, a 2 MiB buffer
   * would need more than the 1 MiB the oldest frees: dropped. */
  fresh_budget(1024 * MiB);
  ASSERT_EQ(bufpool_init(&p, &g_budget, 16 * MiB + MiB / 2, clock_ms, NULL), 0);
  for (int i = 0; i < BUFPOOL_MAX_BUFS; i++, g_now++) bufpool_put(&p, filled(MiB, 0));
  size_t idle = p.idle_bytes;
  bufpool_put(&p, filled(2 * MiB, 0));
  ASSERT_EQ(p.evicted, 0);
  ASSERT_EQ(p.dropped, 1);
  ASSERT_EQ(p.idle_bytes, idle);
  bufpool_destroy(&p);
  ASSERT_EQ(g_budget.by_kind[BUDGET_POOL], 0);
}

int main(void) {
  test_small_buffers_pass_through();
  test_reuse_and_fit();
  test_bounds();
  test_work_reclaims();
  test_idle_trim();
  test_threads();
  test_put_any();
  test_evict_oldest();
  printf("test_bufpool: ok\n");
  return 0;
}
