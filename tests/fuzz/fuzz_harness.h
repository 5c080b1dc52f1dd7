/* fuzz_harness.h: what the files of fuzz_request, the libFuzzer target over
 * gkcd's request decoding path, share:
 *
 *   fuzz_server.c   the fake server: its resident table, two connections'
 *                   shares of it, the two backends' algo lists, and the
 *                   regions and resident objects it holds;
 *   fuzz_checks.c   the invariants checked on an accepted job (spans, out,
 *                   CSR) and on the replies read back as a client would;
 *   fuzz_request.c  one frame and one job as gkcd handles them, and the
 *                   libFuzzer entry points (its opening comment says how).
 *
 * An invariant that does not hold traps (__builtin_trap) after a line on
 * stderr naming the check.
 */
#ifndef GKC_FUZZ_HARNESS_H
#define GKC_FUZZ_HARNESS_H

#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "fuzz_objects.h"
#include "job.h"
#include "proto_frame.h"
#include "proto_rpc.h"
#include "budget.h"
#include "devices.h"
#include "resident.h"

/* Small limits, shaped like the daemon's (rpc.c: max_bytes is also the
 * max_bytes methods_parse gets, cfg.max_request_bytes). */
#define FUZZ_MAX_BYTES ((size_t)1 << 20)
extern const proto_limits LIM;
/* How a client reads replies back (client/gkc_client.c recv_frame). */
extern const proto_limits CLIENT_LIM;

/* GKC_FUZZ_VERBOSE=1: one line per frame saying how it ended (for checking
 * what a seed or a reproducer exercises: fuzz_request FILE). */
extern int g_verbose;
#define NOTE(...)                                                 \
  do {                                                            \
    if (g_verbose) fprintf(stderr, "fuzz_request: " __VA_ARGS__); \
  } while (0)

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "fuzz_request: invariant violated at %s:%d: %s\n", __FILE__,   \
              __LINE__, #cond);                                                      \
      __builtin_trap();                                                              \
    }                                                                                \
  } while (0)

/* --- the fake server (fuzz_server.c) --- */

extern gkcd_residents g_res;     /* what the server's table would hold */
extern gkcd_devices g_devs;      /* two devices of the backend under test */
extern res_owner g_conn, g_other; /* the connection sending the frames, and another */

typedef struct {
  uint32_t id;
  int kind, dtype;
  res_owner *owner;
  size_t bytes;
  void *mem; /* allocated once, exact size, so ASan guards both ends */
  gkcd_res *res; /* this input's registration */
} fake_obj;
extern fake_obj g_obj[FZ_NOBJ + 1];

/* The backends: algo lists, and memory that must never be freed. */
extern gkcd_backend cpu_be, cuda_be;
int list_len(const char *const *l); /* entries before the NULL */

void *xmalloc(size_t n); /* malloc, or an invariant violated */
void setup_once(void);   /* the objects' memory, once per process */
/* A fresh server with the objects registered, as a connection would find
 * it after earlier requests. */
void server_begin(gkcd_backend *be);
/* Every reference a job took has been dropped; then forget the objects. */
void server_end(void);
/* The fake object whose memory holds [p, p+n), or NULL. */
fake_obj *obj_holding(const void *p, size_t n);
int job_holds(const gkcd_job *job, const fake_obj *o);

/* --- invariants (fuzz_checks.c) --- */

int inside(const void *p, size_t n, const void *base, size_t len);
/* A span the job may read: want bytes (UINT64_MAX: any), lying inside the
 * request (or a private copy of it) when sent by value, inside a region the
 * job holds when by region, or exactly a resident array (or part of a
 * resident matrix) the job holds, of the dtype the argument needs. */
void check_span(const gkcd_job *job, const gkcd_span *s, uint64_t want, int dtype,
                const uint8_t *frame, size_t len);
/* An accepted `out` names its target exactly: {name: "handle"},
 * {name: {"handle": h}} or {name: {"region": r, "offset": o}}, nothing more. */
void check_out_arg(const msgpack_object *params, const gkcd_job *job);
/* Where the result goes is somewhere the job may write. */
void check_out(const gkcd_job *job, const gkcd_span *const *inputs, int ninputs);
/* The CSR rules of validate.h, checked here independently; the longest row
 * in *longest. */
int csr_sound(int32_t rows, int32_t cols, int64_t nnz, const void *rp, const void *ci,
              int32_t *longest);
/* What a backend may do with a job its row's check accepted: a reference spmv
 * on exact-size copies of the arrays, so ASan sees any index out of bounds. */
void reference_spmv(const gkcd_job *job);
/* Reads a packed reply back as libgkc does.  body_bytes: the size of the bin
 * body the daemon sends right after sb (array results by value), or 0. */
void check_reply(msgpack_sbuffer *sb, uint64_t body_bytes, uint32_t want_msgid, int want_error);
/* The error reply the daemon would send, packed and read back. */
void reply_error(int msgid_known, uint32_t msgid, int code, const char *msg);
/* The empty-map result (release, shm_release), packed and read back. */
void reply_empty_map(uint32_t msgid);

#endif
