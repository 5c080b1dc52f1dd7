/* budget.c: see budget.h. */
#include "budget.h"

#include "log.h"

static void note(gkcd_budget *b) {
  if (b->used > b->peak) b->peak = b->used;
  if (b->by_kind[BUDGET_INPUT] > b->input_peak) b->input_peak = b->by_kind[BUDGET_INPUT];
}

void budget_take(gkcd_budget *b, int kind, size_t n) {
  b->by_kind[kind] += n;
  if (kind != BUDGET_INPUT) b->used += n;
  note(b);
}

void budget_give(gkcd_budget *b, int kind, size_t n) {
  if (n > b->by_kind[kind]) { /* a bug in the books: say so, never wrap */
    log_err("budget: giving back %zu %s bytes, only %zu charged", n, budget_kind_name(kind),
            b->by_kind[kind]);
    n = b->by_kind[kind];
  }
  b->by_kind[kind] -= n;
  if (kind != BUDGET_INPUT) b->used -= n;
  if (n && b->on_free) b->on_free(b->arg);
}

void budget_move(gkcd_budget *b, int from, int to, size_t n) {
  if (n > b->by_kind[from]) {
    log_err("budget: moving %zu %s bytes, only %zu charged", n, budget_kind_name(from),
            b->by_kind[from]);
    n = b->by_kind[from];
  }
  b->by_kind[from] -= n;
  b->by_kind[to] += n;
  if (from == BUDGET_INPUT && to != BUDGET_INPUT) b->used += n;
  if (to == BUDGET_INPUT && from != BUDGET_INPUT) b->used -= n;
  note(b);
}

const char *budget_kind_name(int kind) {
  static const char *const names[BUDGET_KINDS] = {"input", "jobs", "replies", "resident"};
  return kind >= 0 && kind < BUDGET_KINDS ? names[kind] : "?";
}
