/* budget.c: see budget.h. */
#include "budget.h"

#include "log.h"

static void note(gkcd_budget *b) {
  if (b->used > b->peak) b->peak = b->used;
  if (b->by_kind[BUDGET_INPUT] > b->input_peak) b->input_peak = b->by_kind[BUDGET_INPUT];
}

/* Neither input nor the pool: the kinds in `used`. */
static int is_work(int kind) { return kind != BUDGET_INPUT && kind != BUDGET_POOL; }

/* Work grew: the pool gives back what no longer fits beside it. */
static void squeeze_pool(gkcd_budget *b) {
  size_t pool = b->by_kind[BUDGET_POOL];
  if (!pool || !b->reclaim || b->used + pool <= b->limit) return;
  size_t want = b->used >= b->limit ? pool : b->used + pool - b->limit;
  size_t freed = b->reclaim(b->reclaim_arg, want);
  b->by_kind[BUDGET_POOL] -= freed < pool ? freed : pool;
}

void budget_take(gkcd_budget *b, int kind, size_t n) {
  b->by_kind[kind] += n;
  if (is_work(kind)) {
    b->used += n;
    squeeze_pool(b);
  }
  note(b);
}

void budget_give(gkcd_budget *b, int kind, size_t n) {
  if (n > b->by_kind[kind]) { /* a bug in the books: say so, never wrap */
    log_err("budget: giving back %zu %s bytes, only %zu charged", n, budget_kind_name(kind),
            b->by_kind[kind]);
    n = b->by_kind[kind];
  }
  b->by_kind[kind] -= n;
  if (is_work(kind)) b->used -= n;
  /* The pool's bytes are nobody's to wait for. */
  if (n && kind != BUDGET_POOL && b->on_free) b->on_free(b->arg);
}

void budget_move(gkcd_budget *b, int from, int to, size_t n) {
  if (n > b->by_kind[from]) {
    log_err("budget: moving %zu %s bytes, only %zu charged", n, budget_kind_name(from),
            b->by_kind[from]);
    n = b->by_kind[from];
  }
  b->by_kind[from] -= n;
  b->by_kind[to] += n;
  if (!is_work(from) && is_work(to)) b->used += n;
  if (is_work(from) && !is_work(to)) b->used -= n;
  squeeze_pool(b);
  note(b);
}

const char *budget_kind_name(int kind) {
  static const char *const names[BUDGET_KINDS] = {"input", "jobs", "replies", "resident", "pool"};
  return kind >= 0 && kind < BUDGET_KINDS ? names[kind] : "?";
}
