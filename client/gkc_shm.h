/* gkc_shm.h: transparent shared memory, the library's side (gkc.h,
 * "transparent shared memory"); not installed.
 *
 * Each connection owns an arena: a few sealed memfd regions registered with
 * gkcd, cut into slices by a first-fit allocator.  A method's prep hands
 * its array references and result target to gkc__shm_stage as its last
 * step; big arrays in this process's memory are copied into slices and
 * become region references, a big result gets a slice as its target.  The
 * request holds its slices until it ends (its end hook gives them back).
 * The arena never blocks an async context: while it is being set up or
 * grown, or is full, arrays simply go inline.
 *
 * A region's pages are allocated the first time a call needs them, in bulk
 * and on several threads (gkc_shm_pages.c), before gkcd maps them where the
 * region is new: a first call of a new size then pays no page faults on
 * either side one at a time (issue #25).  GKC_SHM_TRACE=1 in the
 * environment prints where an arena's first calls spend their time, one
 * line on stderr per growth and per staged call that met fresh pages.
 *
 * A connection's regions outlive it in the process, bounded
 * (gkc_shm_keep.c, GKC_SHM_KEEP): the next connection's arena takes them,
 * pages and all.
 *
 * Implemented in: gkc_shm_region.c, gkc_shm_pages.c, gkc_shm_keep.c
 */
#ifndef GKC_SHM_H
#define GKC_SHM_H

#include "gkc_internal.h"

/* --- the arena (gkc_shm.c; its regions: gkc_shm_region.c) --- */

/* Regions of one arena at most; gkcd allows a connection 64, the rest are
 * the caller's own. */
#define NSLOTS 8

typedef struct {
  uint64_t off, len;
} extent;

typedef struct {
  gkc_region *reg; /* NULL: the slot is unused */
  int ready;       /* registered: gkcd knows it (else its shm_register is in flight) */
  size_t live;     /* slices handed out and not yet back */
  extent *ext;     /* the free bytes: sorted by offset, never two adjacent */
  size_t next, capext;
  /* Its pages known allocated: [0, pop_head) and [pop_tail, its size).  A
   * slice outside them meets fresh pages, populated in bulk before use. */
  uint64_t pop_head, pop_tail;
  /* A request holding a slice of it ended without gkcd's answer (the
   * connection failed, timed out, was closed): gkcd may still write there,
   * so the region is never kept for another connection. */
  int tainted;
} slot;

struct gkc__shm {
  size_t threshold, max_bytes;
  size_t env_threshold, env_max; /* what the environment set; 0: the defaults */
  int env_off;                   /* GKC_NO_SHM, or a bad value: off until gkc_set_shm says on */
  int off;                       /* stage nothing; why says so */
  char why[256];
  int limits_known;  /* gkcd_max has been asked for */
  uint64_t gkcd_max; /* gkcd's --max-request-bytes; 0: it did not say */
  int gkcd_reuse;    /* gkcd takes shm_register's "reuse" (its status said so) */
  int cannot_grow;   /* gkcd refused a region while others serve: grow no more */
  int probing;       /* async: the status request is in flight */
  int growing;       /* async: a shm_register is in flight */
  uint64_t want;     /* async: what calls sent inline meanwhile wanted: the size to
                      * grow to once probing or the registration in flight ends */
  int grow_rc;       /* why the last blocking growth failed (0: no room, nothing called) */
  int want_populate; /* async: want came from gkc_shm_reserve (fault its pages in) */
  uint64_t staged, fallbacks;
  int trace; /* GKC_SHM_TRACE: where the first calls spend their time, on stderr */
  size_t keep_max; /* GKC_SHM_KEEP: the most bytes of regions the process keeps */
  slot slots[NSLOTS];
};

/* Makes c's arena (no region yet) with the settings of the environment
 * (GKC_NO_SHM, GKC_SHM_THRESHOLD, GKC_SHM_MAX_BYTES).  Out of memory leaves c->shm
 * NULL: the connection then sends everything inline. */
void gkc__shm_init(gkc_conn *c);
/* Frees the arena here; call after gkc__conn_destroy (which ends every
 * request, and with them their slices).  gkcd frees its side of the
 * regions when the connection closes. */
void gkc__shm_destroy(gkc_conn *c);

/* The prep's last step: moves the GKC_REF_MEM arrays among refs[0 .. n)
 * (entries may be NULL) of at least the threshold into the arena, and out,
 * when it is GKC_OUT_MEM of at least the threshold, to a slice.
 * out_known is the result's size in bytes as the arguments fix it, 0 when
 * the library cannot tell; out_key names the result in messages.  All or
 * nothing: when the arena has no room the request goes inline, unchanged.
 * Never fails the request. */
void gkc__shm_stage(gkc_conn *c, gkc__req *r, gkc_ref *const *refs, int n, gkc_out *out,
                    uint64_t out_known, const char *out_key);

/* take's part for a result that went through a slice (r->out_staged): o is
 * the reply's region reference; copies the result to r->out. */
int gkc__shm_take_out(gkc_conn *c, gkc__req *r, const msgpack_object *o);

/* --- regions (gkc_shm_region.c): made, registered, released --- */

/* The bytes of s's region; 0 for an unused slot. */
uint64_t gkc__shm_slot_bytes(const slot *s);
/* Frees s's region and its free list; the slot is unused after. */
void gkc__shm_slot_clear(slot *s);
/* As gkc__shm_slot_clear, but a registered region nothing can still write
 * to goes to the process's kept regions (gkc_shm_keep.c), pages and all,
 * for the next connection that grows its arena. */
void gkc__shm_slot_retire(slot *s, size_t keep_max);
/* Gives back the regions no request uses (shm_release, then retired):
 * before growing (their bytes count against max_bytes) and when the arena
 * is turned off. */
void gkc__shm_release_idle(gkc_conn *c);
/* Adds a region as slot i (unused): a kept one of need to room bytes
 * (gkc__shm_take_kept; its own size then), else a new one of size bytes;
 * populates what its first call takes (need bytes, the last tail of them
 * cut from its end: a result of unknown size), or all of it (reserve:
 * gkc_shm_reserve, and gkcd registers it for DMA before it answers), and
 * registers it: *ok when it is ready now (blocking); an async connection
 * only sends the shm_register (A->growing), whose reply goes to
 * registered (r->userdata: i).  A refusal by rule or a failure to make a
 * region may turn the arena off (A->grow_rc: why a blocking one failed). */
void gkc__shm_add_region(gkc_conn *c, int i, uint64_t size, uint64_t room, uint64_t need,
                         uint64_t tail, int reserve, gkc__done_fn registered, int *ok);
/* A refused shm_register (status): by rule, the arena turns off, or stops
 * growing when regions already serve; otherwise only this attempt failed. */
void gkc__shm_refused(gkc_conn *c, int status);
/* The arena's own request, to be prepped and sent with
 * gkc__shm_internal_submit, its reply to done; NULL when out of memory. */
gkc__req *gkc__shm_internal_req(gkc__done_fn done);
/* Sends r; -1 (r freed) when it could not be queued. */
int gkc__shm_internal_submit(gkc_conn *c, gkc__req *r);
/* Stages nothing from now on; why: fmt with detail. */
void gkc__shm_turn_off(gkc__shm *A, const char *fmt, const char *detail);
/* A monotonic clock in ms, for GKC_SHM_TRACE. */
double gkc__shm_now_ms(void);

/* --- pages (gkc_shm_pages.c) --- */

/* dst[0 .. n) = src[0 .. n), on GKC_COPY_THREADS threads from 16 MiB up.
 * fresh: dst's pages have not been touched yet: each thread populates its
 * piece (MADV_POPULATE_WRITE) before copying it. */
void gkc__shm_copy(void *dst, const void *src, size_t n, int fresh);
/* Allocates and maps the pages under dst[0 .. n), writable, keeping their
 * bytes, on the same threads. */
void gkc__shm_populate(void *dst, size_t n);
/* --- kept regions (gkc_shm_keep.c) --- */

/* Takes reg (registered on a connection that no longer uses it: nothing of
 * gkcd's can write to it any more), with its populated marks, for a later
 * connection of this process; frees it, or the oldest kept, so that they
 * hold max bytes at most (the connection's GKC_SHM_KEEP). */
void gkc__shm_keep(gkc_region *reg, uint64_t pop_head, uint64_t pop_tail, uint64_t max);
/* The smallest kept region of min_bytes to max_bytes, now the caller's
 * (with its marks); NULL when none fits. */
gkc_region *gkc__shm_take_kept(uint64_t min_bytes, uint64_t max_bytes, uint64_t *pop_head,
                               uint64_t *pop_tail);
/* Bytes kept now. */
uint64_t gkc__shm_kept_bytes(void);
/* Tests: frees every kept region. */
void gkc__shm_keep_reset(void);

/* Tests: on (1) makes population take the path of a kernel without
 * MADV_POPULATE_WRITE (a write to each page), as if it had refused it. */
void gkc__shm_populate_fallback(int on);

#endif
