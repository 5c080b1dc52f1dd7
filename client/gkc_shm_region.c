/* gkc_shm_region.c: the arena's regions, one at a time: made (or taken
 * from the process's kept ones), their first pages populated, registered
 * with gkcd, and released or kept when the arena no longer needs them;
 * see gkc_shm.h.  How big a region to add and when is gkc_shm.c's (its
 * growth policy), and so is cutting slices from them.
 *
 * A blocking connection registers and releases on the spot; an async one
 * sends them as the arena's internal requests, whose replies complete them
 * from the loop (an shm_register's reply goes to the policy's callback,
 * which may grow again at once).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gkc_shm.h"

double gkc__shm_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

void gkc__shm_turn_off(gkc__shm *A, const char *fmt, const char *detail) {
  A->off = 1;
  snprintf(A->why, sizeof A->why, fmt, detail);
}

/* --- a region's slot ------------------------------------------------------------------ */

uint64_t gkc__shm_slot_bytes(const slot *s) { return s->reg ? gkc_region_bytes(s->reg) : 0; }

static int slot_init(slot *s, gkc_region *reg) {
  memset(s, 0, sizeof *s);
  s->ext = malloc(4 * sizeof *s->ext);
  if (!s->ext) return -1;
  s->capext = 4;
  s->ext[0] = (extent){0, gkc_region_bytes(reg)};
  s->next = 1;
  s->reg = reg;
  s->pop_tail = gkc_region_bytes(reg);
  return 0;
}

void gkc__shm_slot_clear(slot *s) {
  gkc__region_free(s->reg);
  free(s->ext);
  memset(s, 0, sizeof *s);
}

/* As slot_clear, but a registered region nothing can still write to goes
 * to the process's kept regions (gkc_shm_keep.c), pages and all, for the
 * next connection that grows its arena. */
void gkc__shm_slot_retire(slot *s, size_t keep_max) {
  if (s->reg && s->ready && !s->tainted && s->live == 0) {
    gkc__shm_keep(s->reg, s->pop_head, s->pop_tail, keep_max);
    s->reg = NULL;
  }
  gkc__shm_slot_clear(s);
}

/* --- gkcd's side: registering, refusals, releasing ------------------------------------ */

/* A refused shm_register: a refusal by rule (gkcd's limit on regions, no
 * descriptor arriving through a proxy, an older gkcd) turns the arena off,
 * or stops its growth when regions already serve; lack of memory, a busy
 * or broken connection only fail this attempt. */
void gkc__shm_refused(gkc_conn *c, int status) {
  gkc__shm *A = c->shm;
  if (status != GKC_EINVALID_ARGUMENT && status != GKC_EUNKNOWN_METHOD && status != GKC_EPROTOCOL)
    return;
  int serving = 0;
  for (int i = 0; i < NSLOTS; i++) serving |= A->slots[i].ready;
  if (serving)
    A->cannot_grow = 1;
  else
    gkc__shm_turn_off(A, "gkcd refused shm_register: %.220s", c->errmsg);
}

static void released(gkc_conn *c, gkc__req *r, gkc_result *res) {
  (void)c, (void)res;
  free(r);
}

/* An internal request, queued; NULL when it could not be. */
gkc__req *gkc__shm_internal_req(gkc__done_fn done) {
  gkc__req *r = malloc(sizeof *r);
  if (!r) return NULL;
  gkc__req_init(r);
  r->internal = 1;
  r->done = done;
  return r;
}

int gkc__shm_internal_submit(gkc_conn *c, gkc__req *r) {
  if (gkc__submit(c, r, 0, 0) == 0) return 0;
  free(r);
  return -1;
}

/* Gives back the regions no request uses: before growing (their bytes
 * count against max_bytes) and when the arena is turned off. */
void gkc__shm_release_idle(gkc_conn *c) {
  gkc__shm *A = c->shm;
  for (int i = 0; i < NSLOTS; i++) {
    slot *s = &A->slots[i];
    if (!s->reg || !s->ready || s->live) continue;
    uint32_t id = gkc_region_id(s->reg);
    if (c->fd >= 0 && !c->write_cut) {
      if (!c->nonblock) {
        gkc_shm_release(c, id);
      } else {
        gkc__req *r = gkc__shm_internal_req(released);
        gkc_shm_release_args a = {id};
        if (r) {
          gkc__prep_shm_release(c, r, &a);
          gkc__shm_internal_submit(c, r);
        }
      }
    }
    /* Idle: no request holds a slice of it, so gkcd writes nothing there
     * any more, and it may serve another connection. */
    gkc__shm_slot_retire(s, A->keep_max);
  }
}

/* Populates what a new region's first call takes (need bytes, the last
 * tail of them cut from its end), or the whole region (reserve), and marks
 * them: done before gkcd maps it, so that gkcd finds the pages there and
 * maps them in bulk too (region.c), and the call's copy meets no faults. */
static void populate_new(slot *s, uint64_t need, uint64_t tail, int reserve) {
  char *p = gkc_region_data(s->reg);
  uint64_t size = gkc__shm_slot_bytes(s);
  if (reserve || need >= size) need = size, tail = 0;
  uint64_t head = need - tail; /* a kept region may have some of it already */
  if (head > s->pop_head && s->pop_head < s->pop_tail) {
    uint64_t end = head < s->pop_tail ? head : s->pop_tail;
    gkc__shm_populate(p + s->pop_head, (size_t)(end - s->pop_head));
  }
  if (head > s->pop_head) s->pop_head = head;
  if (tail && size - tail < s->pop_tail) {
    uint64_t lo = size - tail > s->pop_head ? size - tail : s->pop_head;
    if (lo < s->pop_tail) gkc__shm_populate(p + lo, (size_t)(s->pop_tail - lo));
    s->pop_tail = size - tail;
  }
}

/* Adds a region as slot i (see gkc_shm.h): made, or kept by an earlier
 * connection of this process; its first call's pages populated;
 * registered with gkcd. */
void gkc__shm_add_region(gkc_conn *c, int i, uint64_t size, uint64_t room, uint64_t need,
                         uint64_t tail, int reserve, gkc__done_fn registered, int *ok) {
  gkc__shm *A = c->shm;
  gkc_region *reg;
  *ok = 0;
  double t0 = gkc__shm_now_ms();
  /* A region an earlier connection of this process left, its pages there
   * already: the smallest that holds need within this arena's bounds. */
  uint64_t kept_head = 0, kept_tail = 0;
  int rc = 0;
  reg = gkc__shm_take_kept(need, room, &kept_head, &kept_tail);
  int was_kept = reg != NULL;
  if (reg) {
    size = gkc_region_bytes(reg);
  } else {
    rc = gkc__region_alloc(c, (size_t)size, &reg);
    A->grow_rc = rc;
  }
  if (rc) {
    if (rc != GKC_EOUT_OF_MEMORY) gkc__shm_turn_off(A, "%.250s", c->errmsg);
    return;
  }
  slot *s = &A->slots[i];
  if (slot_init(s, reg) != 0) {
    gkc__region_free(reg);
    return;
  }
  if (was_kept) s->pop_head = kept_head, s->pop_tail = kept_tail;
  double t1 = gkc__shm_now_ms();
  populate_new(s, need, tail, reserve);
  double t2 = gkc__shm_now_ms();
  if (c->nonblock) {
    if (A->trace)
      fprintf(stderr, "gkc shm: region %d of %llu MiB for %llu bytes: %s %.2f ms, populate"
              " %.2f ms (%llu MiB); shm_register sent\n", i, (unsigned long long)(size >> 20),
              (unsigned long long)need, was_kept ? "kept one taken" : "memfd+mmap", t1 - t0, t2 - t1,
              (unsigned long long)((s->pop_head + size - s->pop_tail) >> 20));
    gkc__req *r = gkc__shm_internal_req(registered);
    gkc_shm_register_args a = {gkc__region_fd(reg), (size_t)size,
                               reserve | (A->gkcd_reuse ? GKC__REG_REUSE : 0)};
    if (!r) {
      gkc__shm_slot_clear(s);
      return;
    }
    gkc__prep_shm_register(c, r, &a);
    r->userdata = (void *)(intptr_t)i;
    if (gkc__shm_internal_submit(c, r) != 0) {
      gkc__shm_slot_clear(s);
      return;
    }
    A->growing = 1;
    return;
  }
  uint32_t id;
  /* Set up ahead (reserve: gkc_shm_reserve): gkcd registers it for DMA
   * before answering too, so that nothing of it is left for the first call. */
  rc = gkc__shm_register(c, gkc__region_fd(reg), (size_t)size, reserve | (A->gkcd_reuse ? GKC__REG_REUSE : 0),
                         &id);
  A->grow_rc = rc;
  if (A->trace)
    fprintf(stderr, "gkc shm: region %d of %llu MiB for %llu bytes: %s %.2f ms, populate"
            " %.2f ms (%llu MiB), shm_register %.2f ms%s\n", i,
            (unsigned long long)(size >> 20), (unsigned long long)need,
            was_kept ? "kept one taken" : "memfd+mmap", t1 - t0, t2 - t1,
            (unsigned long long)((s->pop_head + size - s->pop_tail) >> 20), gkc__shm_now_ms() - t2,
            rc ? " (refused)" : "");
  if (rc) {
    gkc__shm_refused(c, rc);
    gkc__shm_slot_clear(s);
    return;
  }
  gkc__region_set_id(reg, id);
  s->ready = 1;
  *ok = 1;
}
