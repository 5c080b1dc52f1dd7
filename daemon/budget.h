/* budget.h: the memory budget (--memory-budget), in one set of books.
 *
 * Every byte gkcd holds on a client's behalf is charged here, by what holds
 * it.  Two pools:
 *
 *  - work: requests admitted to run and their results (jobs), replies not
 *    yet taken by the socket, resident arrays and matrices.  The scheduler
 *    admits a request only when its bytes and its result fit under
 *    --memory-budget (budget_fits), so admitted work never waits on bytes
 *    that are not yet work;
 *  - input: bytes received and not admitted: input buffers and the requests
 *    waiting for memory or for their client to read.  It has an allowance
 *    of its own (input_limit, budget_input_allowance: a quarter of
 *    --memory-budget, at least BUDGET_INPUT_MIN; conn.c reads only while it
 *    has room), plus one request at a time past it (conn.c's overdraft), so
 *    partial requests can neither fill the work pool nor wait for each
 *    other forever.
 *
 *  - pool: big buffers kept idle for reuse (bufpool.h).  Not work, so not in
 *    `used` nor in budget_fits; but work plus the pool stays under
 *    --memory-budget: whenever work grows past that, the reclaim hook is
 *    asked for the difference first (budget_take, budget_move), and the
 *    pool keeps a buffer only while it fits (bufpool_put).
 *
 * What gkcd holds for clients is thus at most --memory-budget + the input
 * allowance + one request (1.25 x --memory-budget + --max-request-bytes
 * once the budget is 128 MiB or more), whatever they do.  Loop thread only.
 */
#ifndef GKCD_BUDGET_H
#define GKCD_BUDGET_H

#include <stddef.h>
#include <stdint.h>

enum { BUDGET_INPUT, BUDGET_JOBS, BUDGET_REPLIES, BUDGET_RESIDENT, BUDGET_POOL, BUDGET_KINDS };

/* The input allowance: a quarter of the budget, and never less than 32 MiB.
 *
 * A fixed 32 MiB (what it was) let one big inline frame at a time arrive:
 * connections sending 64-256 MiB frames took turns at the allowance's edge,
 * 64 KiB per read, and 8 of them got no more than one did (bench/RESULTS.md,
 * "Inline GB/s").  The allowance has to hold several big frames at once, so
 * it scales with what the operator gave gkcd for requests: a frame only
 * waits here until it becomes work, which must fit --memory-budget anyway,
 * so room for a quarter of the budget in flight lets a few budget-sized
 * streams of frames arrive side by side (8 x 256 MiB under an 8 GiB budget),
 * while what gkcd can hold stays within a fixed factor of its budget (the
 * same quarter the pool of big buffers may keep, bufpool.h, there inside
 * the budget).  The floor keeps small budgets (--memory-budget 48M in the
 * tests) reading requests of a few MiB as before. */
#define BUDGET_INPUT_MIN ((size_t)32 << 20)
static inline size_t budget_input_allowance(size_t limit) {
  return limit / 4 > BUDGET_INPUT_MIN ? limit / 4 : BUDGET_INPUT_MIN;
}

typedef struct {
  size_t limit;
  size_t input_limit;        /* the input allowance (budget_input_allowance(limit)) */
  size_t used;               /* work: jobs, replies, resident */
  size_t by_kind[BUDGET_KINDS];
  size_t peak;               /* highest `used` since start */
  size_t input_peak;
  void (*on_free)(void *arg); /* called after every give of work or input, to resume waiters */
  void *arg;
  /* Frees up to want bytes of the pool; returns what it freed, which the
   * budget takes off BUDGET_POOL (the pool's, bufpool_init). */
  size_t (*reclaim)(void *pool, size_t want);
  void *reclaim_arg;
} gkcd_budget;

/* 1 when n more bytes of work fit under the limit. */
static inline int budget_fits(const gkcd_budget *b, size_t n) {
  return b->used <= b->limit && n <= b->limit - b->used;
}
/* 1 when n more input bytes fit in the input allowance. */
static inline int budget_input_fits(const gkcd_budget *b, size_t n) {
  size_t in = b->by_kind[BUDGET_INPUT];
  return in <= b->input_limit && n <= b->input_limit - in;
}
void budget_take(gkcd_budget *b, int kind, size_t n);
void budget_give(gkcd_budget *b, int kind, size_t n);
/* Moves n bytes from one kind to another (a result becoming a reply). */
void budget_move(gkcd_budget *b, int from, int to, size_t n);
/* 1 when n more bytes may be kept in the pool: work and the pool under the limit. */
static inline int budget_pool_fits(const gkcd_budget *b, size_t n) {
  size_t held = b->used + b->by_kind[BUDGET_POOL];
  return held <= b->limit && n <= b->limit - held;
}
/* "input", "jobs", "replies", "resident", "pool". */
const char *budget_kind_name(int kind);

#endif
