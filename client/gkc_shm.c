/* gkc_shm.c: the arena of transparent shared memory (see gkc_shm.h; the
 * caller's view is gkc.h, "transparent shared memory"): its settings, how
 * it grows (gkcd's limits, the size of the next region, gkc_shm_reserve),
 * and staging a call's arrays in its slices.  Each region's own life (made,
 * registered, released) is gkc_shm_region.c's.
 *
 * The arena is up to NSLOTS regions.  Each keeps its free bytes as a list
 * of extents sorted by offset and merged on free; a slice is cut from the
 * front of the first extent that holds it (first fit), or, for a result of
 * unknown size, from the extent that ends the region.  A region is usable
 * once gkcd has answered its shm_register.
 *
 * Setting up takes requests of the arena's own: a status (gkcd's
 * --max-request-bytes caps a region) and a shm_register per region; idle
 * regions replaced by a bigger one get a shm_release.  A blocking
 * connection makes them on the spot, inside the caller's call (nothing else
 * is in flight there).  An async one must never wait: it queues them as
 * internal requests, whose replies complete them from the loop, and sends
 * the arrays of the call that needed them inline meanwhile.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_reply.h"
#include "gkc_shm.h"
#include "proto_rpc.h"

/* Slices start on a cache line: two requests' arrays never share one. */
#define SLICE_ALIGN 64
#define MIN_REGION ((uint64_t)4 << 20)

static uint64_t align_up(uint64_t n) { return (n + SLICE_ALIGN - 1) & ~(uint64_t)(SLICE_ALIGN - 1); }

/* The largest region: gkcd maps no more than --max-request-bytes at once. */
static uint64_t region_cap(const gkc__shm *A) {
  uint64_t m = A->max_bytes;
  return A->gkcd_max && A->gkcd_max < m ? A->gkcd_max : m;
}

/* --- one region's free list ----------------------------------------------------------- */

/* Whether [off, off + len) may hold pages never touched, and, when it does,
 * it counts as populated from now on (the caller populates it).  A front
 * slice that starts within the head, or a slice that ends the region, moves
 * the marks; any other is populated whole each time it is fresh (a cost
 * of time only, never of correctness: populating keeps bytes). */
static int slot_fresh(slot *s, uint64_t off, uint64_t len) {
  uint64_t end = off + len;
  if (end <= s->pop_head || off >= s->pop_tail) return 0;
  if (end == gkc__shm_slot_bytes(s)) {
    s->pop_tail = off;
  } else if (off <= s->pop_head) {
    s->pop_head = end;
  }
  return 1;
}

/* A slice of len bytes; -1 when none fits. */
static int slot_alloc(slot *s, uint64_t len, int tail, uint64_t *off) {
  if (!s->reg || !s->ready) return -1;
  /* The free bytes lie in at most live + 1 extents (a slice between any two),
   * so a free, which cannot fail, never needs more than live + 2 entries:
   * make room now. */
  if (s->capext < s->live + 2) {
    size_t n = (s->live + 2) * 2;
    extent *e = realloc(s->ext, n * sizeof *e);
    if (!e) return -1;
    s->ext = e;
    s->capext = n;
  }
  if (tail) {
    extent *e = s->next ? &s->ext[s->next - 1] : NULL;
    if (!e || e->off + e->len != gkc__shm_slot_bytes(s) || e->len < len) return -1;
    e->len -= len;
    *off = e->off + e->len;
    if (e->len == 0) s->next--;
  } else {
    size_t i = 0;
    while (i < s->next && s->ext[i].len < len) i++;
    if (i == s->next) return -1;
    *off = s->ext[i].off;
    s->ext[i].off += len;
    s->ext[i].len -= len;
    if (s->ext[i].len == 0) {
      memmove(&s->ext[i], &s->ext[i + 1], (s->next - i - 1) * sizeof *s->ext);
      s->next--;
    }
  }
  s->live++;
  return 0;
}

static void slot_free(slot *s, uint64_t off, uint64_t len) {
  size_t i = 0;
  while (i < s->next && s->ext[i].off < off) i++;
  int prev = i > 0 && s->ext[i - 1].off + s->ext[i - 1].len == off;
  int next = i < s->next && off + len == s->ext[i].off;
  if (prev && next) {
    s->ext[i - 1].len += len + s->ext[i].len;
    memmove(&s->ext[i], &s->ext[i + 1], (s->next - i - 1) * sizeof *s->ext);
    s->next--;
  } else if (prev) {
    s->ext[i - 1].len += len;
  } else if (next) {
    s->ext[i].off = off;
    s->ext[i].len += len;
  } else {
    memmove(&s->ext[i + 1], &s->ext[i], (s->next - i) * sizeof *s->ext);
    s->ext[i] = (extent){off, len};
    s->next++;
  }
  s->live--;
}

/* --- settings ------------------------------------------------------------------------- */

/* "4096", "64K", "4M", "1G" (binary units); -1 when s is not such a size. */
static int parse_size(const char *s, size_t *out) {
  if (*s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return -1;
  int shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
  }
  if (*end || v > (SIZE_MAX >> shift)) return -1;
  *out = (size_t)v << shift;
  return 0;
}

static void env_size(gkc__shm *A, const char *name, size_t *dst) {
  const char *v = getenv(name);
  if (!v || !*v || A->env_off) return;
  if (parse_size(v, dst) == 0) return;
  A->env_off = 1;
  snprintf(A->why, sizeof A->why, "%s='%.64s' is not a size (bytes, or with a K, M or G suffix)",
           name, v);
}

static void on_reconnect(gkc_conn *c);

void gkc__shm_init(gkc_conn *c) {
  gkc__shm *A = calloc(1, sizeof *A);
  c->shm = A;
  if (!A) return;
  c->on_reconnect = on_reconnect;
  const char *v = getenv("GKC_NO_SHM");
  if (v && *v && strcmp(v, "0") != 0) {
    A->env_off = 1;
    snprintf(A->why, sizeof A->why, "GKC_NO_SHM is set in the environment");
  }
  env_size(A, "GKC_SHM_THRESHOLD", &A->env_threshold);
  env_size(A, "GKC_SHM_MAX_BYTES", &A->env_max);
  v = getenv("GKC_SHM_TRACE");
  A->trace = v && *v && strcmp(v, "0") != 0;
  /* A malformed bound keeps nothing, and turns nothing off. */
  v = getenv("GKC_SHM_KEEP");
  A->keep_max = GKC_SHM_DEFAULT_MAX;
  if (v && *v && parse_size(v, &A->keep_max) != 0) A->keep_max = 0;
  A->off = A->env_off;
  A->threshold = A->env_threshold ? A->env_threshold : GKC_SHM_DEFAULT_THRESHOLD;
  A->max_bytes = A->env_max ? A->env_max : GKC_SHM_DEFAULT_MAX;
}

/* The connection was made again (gkc_reconnect.c): gkcd freed the regions
 * with the old one, and every request, so every slice, has ended.  The
 * arena starts over (gkcd's limits may have changed too). */
static void on_reconnect(gkc_conn *c) {
  gkc__shm *A = c->shm;
  if (!A) return;
  for (int i = 0; i < NSLOTS; i++)
    if (A->slots[i].reg) gkc__shm_slot_retire(&A->slots[i], A->keep_max);
  A->limits_known = A->cannot_grow = A->probing = A->growing = 0;
  A->gkcd_max = A->want = 0;
  A->gkcd_reuse = 0; /* asked again of the new gkcd */
}

void gkc__shm_destroy(gkc_conn *c) {
  gkc__shm *A = c->shm;
  if (!A) return;
  for (int i = 0; i < NSLOTS; i++)
    if (A->slots[i].reg) gkc__shm_slot_retire(&A->slots[i], A->keep_max);
  free(A);
  c->shm = NULL;
}

/* --- growing: gkcd's limits, and the next region -------------------------------------- */

static void pack_none(msgpack_packer *pk, const gkc__req *r) {
  (void)r;
  msgpack_pack_map(pk, 0);
}

/* status, for limits.max_request_bytes, and whether gkcd takes
 * shm_register's "reuse" (a gkcd that keeps registrations reports
 * resident.regions_kept_hits; an older one refuses the argument). */
static int take_limits(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)req, (void)res;
  const msgpack_object *m = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "limits") : NULL;
  const msgpack_object *rs = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "resident") : NULL;
  c->shm->gkcd_reuse = rs && rs->type == MSGPACK_OBJECT_MAP && proto_map_get(rs, "regions_kept_hits");
  uint64_t v;
  if (!m || gkc__get_uint(c, m, "max_request_bytes", UINT64_MAX, &v) != 0)
    return gkc__fail(c, GKC_EPROTOCOL, "gkcd's status reports no max_request_bytes");
  c->shm->gkcd_max = v;
  return 0;
}

static void prep_limits(gkc__req *r) {
  r->method = "status";
  r->pack = pack_none;
  r->take = take_limits;
}

/* Where the status request ended: an old gkcd without the limit leaves
 * regions bounded by max_bytes alone. */
static void limits_known(gkc__shm *A, int status) {
  if (status == 0 || status == GKC_EPROTOCOL) {
    if (status) A->gkcd_max = 0;
    A->limits_known = 1;
  }
}

static void grow_wanted(gkc_conn *c);

/* An async shm_register's reply (gkc__shm_add_region's request). */
static void registered(gkc_conn *c, gkc__req *r, gkc_result *res) {
  gkc__shm *A = c->shm;
  slot *s = &A->slots[(intptr_t)r->userdata];
  A->growing = 0;
  if (res->status == 0) {
    gkc__region_set_id(s->reg, res->id);
    s->ready = 1;
  } else {
    gkc__shm_refused(c, res->status);
    gkc__shm_slot_clear(s);
  }
  free(r);
  if (A->off) { /* turned off meanwhile */
    char saved[sizeof c->errmsg];
    memcpy(saved, c->errmsg, sizeof saved);
    gkc__shm_release_idle(c);
    memcpy(c->errmsg, saved, sizeof saved);
    return;
  }
  /* Calls went inline while this was in flight: a burst of requests, all
   * sent before any reply came.  Grow for them at once, not one region per
   * turn of the loop. */
  if (res->status == 0) grow_wanted(c);
}

static void grow(gkc_conn *c, uint64_t need, uint64_t tail, int reserve, int *ok);

/* Async: a region for what calls wanted while the arena could not serve
 * them (want, at most what one region may hold). */
static void grow_wanted(gkc_conn *c) {
  gkc__shm *A = c->shm;
  uint64_t w = A->want;
  int populate = A->want_populate;
  A->want = 0;
  A->want_populate = 0;
  if (!A->limits_known || A->off || c->fd < 0 || w == 0) return;
  if (w > region_cap(A)) w = region_cap(A);
  char saved[sizeof c->errmsg];
  memcpy(saved, c->errmsg, sizeof saved);
  int ok;
  grow(c, w, 0, populate, &ok);
  memcpy(c->errmsg, saved, sizeof saved);
}

static void probed(gkc_conn *c, gkc__req *r, gkc_result *res) {
  c->shm->probing = 0;
  limits_known(c->shm, res->status);
  free(r);
  grow_wanted(c); /* for the call that started this, and those since */
}

/* Adds a region with room for need bytes (tail of them: a result of
 * unknown size, cut from the end): *ok when it is ready now (blocking); an
 * async connection only starts registering it.  reserve (gkc_shm_reserve):
 * all its pages are populated, and gkcd registers it for DMA before it
 * answers. */
static void grow(gkc_conn *c, uint64_t need, uint64_t tail, int reserve, int *ok) {
  gkc__shm *A = c->shm;
  *ok = 0;
  if (A->growing || A->cannot_grow) return;
  gkc__shm_release_idle(c);
  uint64_t kept = 0;
  int free_slot = -1;
  for (int i = 0; i < NSLOTS; i++) {
    if (A->slots[i].reg)
      kept += gkc__shm_slot_bytes(&A->slots[i]);
    else if (free_slot < 0)
      free_slot = i;
  }
  if (free_slot < 0) return;
  /* A power of two: a blocking connection whose calls keep getting bigger
   * replaces its region a logarithmic number of times.  (An async
   * context's need includes what went inline for want of room meanwhile:
   * its arena keeps pace with what it has in flight.) */
  uint64_t size = MIN_REGION;
  while (size < need && size <= UINT64_MAX / 2) size <<= 1;
  uint64_t room = region_cap(A);
  uint64_t left = A->max_bytes > kept ? A->max_bytes - kept : 0;
  if (left < room) room = left;
  if (size > room) size = room & ~(uint64_t)4095; /* a slice at the end must start aligned */
  if (size < need || size > SIZE_MAX) return;
  gkc__shm_add_region(c, free_slot, size, room, need, tail, reserve, registered, ok);
}

/* --- staging ---------------------------------------------------------------------------- */

/* 0 when the arena may serve a request of total bytes now. */
static int setup(gkc_conn *c, uint64_t total) {
  gkc__shm *A = c->shm;
  if (!A->limits_known) {
    if (c->nonblock) {
      if (A->probing) return -1;
      gkc__req *r = gkc__shm_internal_req(probed);
      if (!r) return -1;
      prep_limits(r);
      if (gkc__shm_internal_submit(c, r) == 0) A->probing = 1;
      return -1;
    }
    gkc__req r;
    gkc_result res;
    gkc__req_init(&r);
    gkc__result_init(&res);
    prep_limits(&r);
    double t0 = gkc__shm_now_ms();
    limits_known(A, gkc__run(c, &r, &res));
    if (A->trace)
      fprintf(stderr, "gkc shm: status (gkcd's limits) %.2f ms\n", gkc__shm_now_ms() - t0);
    if (!A->limits_known) return -1; /* the connection failed: the call will say so */
  }
  /* More than one region may hold goes inline, where gkcd judges its size
   * as it always did. */
  return total <= region_cap(A) ? 0 : -1;
}

static void give_back(gkc_conn *c, gkc__req *r) {
  for (int i = 0; i < r->nslices; i++)
    slot_free(&c->shm->slots[r->slices[i].slot], r->slices[i].off, r->slices[i].len);
  r->nslices = 0;
}

/* One slice from the first region with room; -1 when none has. */
static int take(gkc_conn *c, gkc__req *r, uint64_t len, int tail) {
  gkc__shm *A = c->shm;
  for (int i = 0; i < NSLOTS; i++) {
    uint64_t off;
    if (slot_alloc(&A->slots[i], len, tail, &off) == 0) {
      r->slices[r->nslices].slot = i;
      r->slices[r->nslices].off = off;
      r->slices[r->nslices].len = len;
      r->nslices++;
      return 0;
    }
  }
  return -1;
}

/* Slices for the result (first: slices[0]) and every input, or none. */
static int take_all(gkc_conn *c, gkc__req *r, gkc_ref **in, int nin, const gkc_out *out,
                    int mode) {
  int rc = 0;
  if (mode) rc = take(c, r, align_up(out->bytes), mode == GKC__OUT_TAIL);
  for (int i = 0; rc == 0 && i < nin; i++) rc = take(c, r, align_up(in[i]->bytes), 0);
  if (rc) give_back(c, r);
  return rc;
}

static const char *result_name(const gkc__req *r) { return r->out_key ? r->out_key : "result"; }

/* A result bigger than the tail slice was refused by gkcd, naming its own
 * "out" (which the caller never gave): say it as the inline path would. */
static void rewrite_out_error(gkc_conn *c, gkc__req *r) {
  unsigned long long n;
  if (strncmp(c->errmsg, "argument 'out'", 14) != 0) return;
  if (sscanf(c->errmsg, "argument 'out': the %llu-byte result", &n) != 1) {
    snprintf(c->errmsg, sizeof c->errmsg, "the result '%s' is larger than the %zu bytes out"
             " was given", result_name(r), r->out->bytes);
  } else if (strcmp(r->method, "download") == 0) {
    snprintf(c->errmsg, sizeof c->errmsg, "handle %u holds %llu bytes, not the %zu asked for",
             r->a.download.handle, n, r->out->bytes);
  } else {
    snprintf(c->errmsg, sizeof c->errmsg, "the result '%s' has %llu bytes, but out was given %zu",
             result_name(r), n, r->out->bytes);
  }
}

static void end(gkc_conn *c, gkc__req *r, int status) {
  if (status == GKC_EINVALID_ARGUMENT && r->out_staged == GKC__OUT_TAIL) rewrite_out_error(c, r);
  /* Ended here rather than by gkcd's answer: gkcd may be using its slices. */
  if (status == GKC_ETIMEOUT || status <= GKC_ECONNECT)
    for (int i = 0; i < r->nslices; i++) c->shm->slots[r->slices[i].slot].tainted = 1;
  give_back(c, r);
}
static void stage(gkc_conn *c, gkc__req *r, gkc_ref *const *refs, int n, gkc_out *out,
                  uint64_t out_known, const char *out_key);

void gkc__shm_stage(gkc_conn *c, gkc__req *r, gkc_ref *const *refs, int n, gkc_out *out,
                    uint64_t out_known, const char *out_key) {
  /* The arena's own blocking calls below must not connect again midway
   * (gkc_reconnect.c): the slices being cut belong to this connection. */
  int was = c->staging;
  c->staging = 1;
  stage(c, r, refs, n, out, out_known, out_key);
  c->staging = was;
}

static void stage(gkc_conn *c, gkc__req *r, gkc_ref *const *refs, int n, gkc_out *out,
                  uint64_t out_known, const char *out_key) {
  gkc__shm *A = c->shm;
  if (!A || A->off || c->fd < 0 || c->write_cut) return;
  gkc_ref *in[GKC__MAX_SLICES];
  int nin = 0;
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    gkc_ref *f = refs[i];
    if (f && f->kind == GKC_REF_MEM && f->bytes > 0 && f->bytes >= A->threshold &&
        nin < GKC__MAX_SLICES - 1) {
      in[nin++] = f;
      total += align_up(f->bytes);
    }
  }
  int mode = GKC__OUT_DIRECT;
  /* A result of a size the arguments fix, but not the caller's, stays
   * inline: gkcd's reply then fails it as it always did. */
  if (out && out->kind == GKC_OUT_MEM && out->bytes >= A->threshold)
    mode = out_known == 0 ? GKC__OUT_TAIL : out_known == out->bytes ? GKC__OUT_EXACT : mode;
  if (nin == 0 && mode == GKC__OUT_DIRECT) return;
  if (mode) total += align_up(out->bytes);
  /* The arena's own calls write errmsg; the caller's call has not failed. */
  char saved[sizeof c->errmsg];
  memcpy(saved, c->errmsg, sizeof saved);
  int rc = setup(c, total);
  if (rc == 0 && take_all(c, r, in, nin, out, mode) != 0) {
    int ok;
    grow(c, total, mode == GKC__OUT_TAIL ? align_up(out->bytes) : 0, 0, &ok);
    rc = ok ? take_all(c, r, in, nin, out, mode) : -1;
  }
  memcpy(c->errmsg, saved, sizeof saved);
  if (rc != 0) {
    A->fallbacks++;
    /* Async: remembered, so that the next region is sized for them. */
    if (c->nonblock && total <= region_cap(A) && A->want <= UINT64_MAX - total) A->want += total;
    return;
  }
  int k = 0;
  double t0 = gkc__shm_now_ms();
  uint64_t fresh_bytes = 0;
  if (mode) {
    slot *s = &A->slots[r->slices[0].slot];
    r->out_staged = mode;
    r->out_key = out_key;
    r->wire_out = (gkc_out){.kind = GKC_OUT_REGION, .region = gkc_region_id(s->reg),
                            .offset = r->slices[0].off};
    /* gkcd writes the result: its pages allocated here, on several threads,
     * rather than by faults on gkcd's one worker. */
    if (slot_fresh(s, r->slices[0].off, r->slices[0].len)) {
      gkc__shm_populate((char *)gkc_region_data(s->reg) + r->slices[0].off, out->bytes);
      fresh_bytes += out->bytes;
    }
    k = 1;
  }
  for (int i = 0; i < nin; i++, k++) {
    slot *s = &A->slots[r->slices[k].slot];
    int fresh = slot_fresh(s, r->slices[k].off, r->slices[k].len);
    gkc__shm_copy((char *)gkc_region_data(s->reg) + r->slices[k].off, in[i]->data, in[i]->bytes,
                  fresh);
    if (fresh) fresh_bytes += in[i]->bytes;
    size_t bytes = in[i]->bytes;
    *in[i] = (gkc_ref){.kind = GKC_REF_REGION, .region = gkc_region_id(s->reg),
                       .offset = r->slices[k].off, .bytes = bytes};
  }
  r->end = end;
  A->staged += (uint64_t)nin + (mode != GKC__OUT_DIRECT);
  if (A->trace && fresh_bytes)
    fprintf(stderr, "gkc shm: %s: staged %llu bytes (%llu on fresh pages) in %.2f ms\n", r->method,
            (unsigned long long)total, (unsigned long long)fresh_bytes, gkc__shm_now_ms() - t0);
}

int gkc__shm_take_out(gkc_conn *c, gkc__req *r, const msgpack_object *o) {
  gkc_out *out = r->out;
  uint64_t bytes;
  int rc;
  if (o->type != MSGPACK_OBJECT_MAP)
    return gkc__fail(c, GKC_EPROTOCOL, "reply's '%s' is not a reference map", result_name(r));
  if ((rc = gkc__get_uint(c, o, "bytes", SIZE_MAX, &bytes))) return rc;
  if (bytes != out->bytes)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "the result '%s' has %llu bytes, but out was given"
                     " %zu", result_name(r), (unsigned long long)bytes, out->bytes);
  const slot *s = &c->shm->slots[r->slices[0].slot];
  gkc__shm_copy(out->data, (const char *)gkc_region_data(s->reg) + r->slices[0].off, out->bytes, 0);
  return 0;
}

/* --- the caller's knobs ------------------------------------------------------------------ */

int gkc_set_shm(gkc_conn *c, size_t threshold, size_t max_bytes) {
  if (!c) return GKC_EINVALID_ARGUMENT;
  gkc__shm *A = c->shm;
  if (!A) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory: the connection has no arena");
  char saved[sizeof c->errmsg];
  memcpy(saved, c->errmsg, sizeof saved);
  if (threshold == GKC_SHM_OFF) {
    gkc__shm_turn_off(A, "%s", "turned off by gkc_set_shm");
    gkc__shm_release_idle(c);
  } else {
    A->threshold = threshold ? threshold : A->env_threshold ? A->env_threshold
                                                            : GKC_SHM_DEFAULT_THRESHOLD;
    A->max_bytes = max_bytes ? max_bytes : A->env_max ? A->env_max : GKC_SHM_DEFAULT_MAX;
    /* The program's own choice wins over the environment's, as the
     * Python package's keywords do. */
    A->off = 0;
    A->why[0] = 0;
    A->cannot_grow = 0;
    uint64_t have = 0;
    for (int i = 0; i < NSLOTS; i++) have += gkc__shm_slot_bytes(&A->slots[i]);
    if (have > A->max_bytes) gkc__shm_release_idle(c);
  }
  memcpy(c->errmsg, saved, sizeof saved);
  return 0;
}

/* A free span of len bytes in a registered region. */
static int fits(const gkc__shm *A, uint64_t len) {
  for (int i = 0; i < NSLOTS; i++) {
    const slot *s = &A->slots[i];
    for (size_t j = 0; s->ready && j < s->next; j++)
      if (s->ext[j].len >= len) return 1;
  }
  return 0;
}

int gkc_shm_reserve(gkc_conn *c, size_t bytes) {
  if (!c) return GKC_EINVALID_ARGUMENT;
  gkc__shm *A = c->shm;
  if (!A) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory: the connection has no arena");
  if (A->off) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "gkc_shm_reserve: the arena is off: %s", A->why);
  if (c->fd < 0 || c->write_cut)
    return gkc__fail(c, GKC_ECONNECT, "gkc_shm_reserve: not connected to gkcd");
  uint64_t need = align_up(bytes);
  if (bytes == 0 || fits(A, need)) return 0;
  if (c->nonblock) {
    /* Started here, finished by the replies (probed, registered). */
    if (need > A->want) A->want = need;
    A->want_populate = 1;
    if (A->limits_known && !A->growing) grow_wanted(c);
    else if (!A->limits_known) (void)setup(c, need);
    return 0;
  }
  c->errmsg[0] = 0;
  (void)setup(c, need);
  if (!A->limits_known) return c->errmsg[0] ? GKC_ECONNECT : gkc__fail(c, GKC_ECONNECT, "gkc_shm_reserve: gkcd did not answer status");
  if (need > region_cap(A))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "gkc_shm_reserve: %zu bytes is more than one region may hold"
                     " (%llu: the smaller of GKC_SHM_MAX_BYTES and gkcd's --max-request-bytes)",
                     bytes, (unsigned long long)region_cap(A));
  if (A->cannot_grow)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "gkc_shm_reserve: gkcd refused this connection a"
                     " further region; the arena keeps the ones it has");
  int ok;
  A->grow_rc = 0;
  grow(c, need, 0, 1, &ok);
  if (ok) return 0;
  if (A->grow_rc) return A->grow_rc;
  return gkc__fail(c, GKC_EOUT_OF_MEMORY, "gkc_shm_reserve: no room for a %llu-byte region: the arena"
                   " may hold %zu bytes in %d regions (GKC_SHM_MAX_BYTES), and those in use stay",
                   (unsigned long long)need, A->max_bytes, NSLOTS);
}

int gkc_shm_state(const gkc_conn *c, gkc_shm_info *info) {
  if (info) memset(info, 0, sizeof *info);
  if (!c) return 0;
  const gkc__shm *A = c->shm;
  if (!A) {
    if (info) snprintf(info->why, sizeof info->why, "out of memory: the connection has no arena");
    return 0;
  }
  if (info) {
    info->on = !A->off;
    info->threshold = A->threshold;
    info->max_bytes = A->max_bytes;
    for (int i = 0; i < NSLOTS; i++)
      if (A->slots[i].ready) {
        info->arena_bytes += gkc__shm_slot_bytes(&A->slots[i]);
        info->regions++;
      }
    info->staged = A->staged;
    info->fallbacks = A->fallbacks;
    snprintf(info->why, sizeof info->why, "%s", A->off ? A->why : "");
  }
  return !A->off;
}
