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
 * Implemented in: gkc_shm_pages.c, gkc_shm_keep.c
 */
#ifndef GKC_SHM_H
#define GKC_SHM_H

#include "gkc_internal.h"

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
