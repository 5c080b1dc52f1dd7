/* fuzz_request.c: libFuzzer target for gkcd's request decoding path.
 *
 * The input is what a client wrote to its connection.  It goes through the
 * same steps as in gkcd (conn.c parse_frames -> rpc.c rpc_handle_frame /
 * submit -> methods.c + refs.c -> validate.c on a worker), minus the socket,
 * the event loop and the backend's run():
 *
 *   proto_frame_scan over the bytes left, frame after frame, stopping on
 *   PROTO_PARTIAL or an error (the daemon then answers and closes);
 *   each complete frame copied into its own exact-size allocation (like the
 *   daemon, so ASan sees any read past its end), msgpack_unpack into a zone,
 *   proto_request_parse; ping/status, release/shm_release answered as on the
 *   loop; job methods through methods_parse with the CPU backend's algo
 *   lists and again with the CUDA backend's, then validate_job, whose spans
 *   point into the frame, into a region or at resident memory;
 *   the reply the daemon would send (proto_pack_error, or
 *   proto_pack_result_head + methods_pack_result) packed into a
 *   msgpack_sbuffer and read back as a client would (proto_response_parse).
 *
 * Before every input a fresh fake server holds the regions and resident
 * objects of fuzz_objects.h, some the connection's own, some shared, some
 * another connection's, so that handles, regions and `out` are exercised;
 * releases in one frame are seen by the next.  The harness keeps one
 * reference of its own on each, so project code never frees their memory;
 * at the end of the input every reference a job took must have been given
 * back.
 *
 * Invariants that do not hold trap (__builtin_trap) after a line on stderr
 * naming the check; ASan and UBSan catch memory errors and undefined
 * behaviour.  GKC_FUZZ_VERBOSE=1 prints what happened to each frame.
 *
 * Not reachable from here: conn.c and pool.c need a libuv loop, so the two
 * small functions of theirs that methods.c and validate.c call,
 * conn_take_fd and job_fail, are copied below (and devices.c's
 * devices_count, as two devices); the fake connection never
 * has a descriptor waiting, so shm_register always fails and region_map is
 * not run.  release/shm_release go through resident.c's
 * res_release_request, as in rpc.c; the one line of submit() that prepares
 * a job (reg_fd = -1) is copied.  The fake
 * backends hold only algo name lists, which must be kept equal to
 * cpu/cpu_backend.c and cuda/cuda_backend.c + cuda/gkcu_*.cu.
 */
#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "backend.h"
#include "devices.h"
#include "fuzz_objects.h"
#include "gkc_errors.h"
#include "job.h"
#include "methods.h"
#include "part.h"
#include "proto_errors.h"
#include "proto_frame.h"
#include "proto_methods.h"
#include "proto_rpc.h"
#include "refs.h"
#include "resident.h"
#include "server.h"
#include "validate.h"

/* Small limits, shaped like the daemon's (server.c: max_bytes is also the
 * max_bytes methods_parse gets, cfg.max_request_bytes). */
#define FUZZ_MAX_BYTES ((size_t)1 << 20)
static const proto_limits LIM = {FUZZ_MAX_BYTES, PROTO_MAX_OBJECTS, PROTO_MAX_DEPTH};
/* How a client reads replies back (client/gkc_client.c recv_frame). */
static const proto_limits CLIENT_LIM = {(size_t)1 << 40, 1u << 20, 64};

/* GKC_FUZZ_VERBOSE=1: one line per frame saying how it ended (for checking
 * what a seed or a reproducer exercises: fuzz_request FILE). */
static int g_verbose;
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

/* --- what conn.c would provide (it needs libuv) ---------------------------- */

int conn_take_fd(gkcd_conn *c) { /* conn.c */
  if (c->nfds == 0) return -1;
  int fd = c->fds[0];
  memmove(c->fds, c->fds + 1, (size_t)--c->nfds * sizeof c->fds[0]);
  return fd;
}

/* --- what devices.c would provide (it opens real backends) ---------------- */

/* Two devices, so `device` 0 and 1 parse and anything else is refused. */
int devices_count(void) { return 2; }
uint64_t devices_live(const gkcd_devices *d) { (void)d; return 3; }
/* Backends without partition primitives: csr_upload `devices` is parsed,
 * then refused (part.c is not linked; no partitioned matrix is ever made). */
gkcd_backend *devices_backend(int i) {
  static gkcd_backend plain = {.name = "fuzz"};
  return i >= 0 && i < 2 ? &plain : NULL;
}
void part_free(gkcd_part *p) {
  if (p) __builtin_trap();
}
void part_pack(msgpack_packer *pk, const gkcd_part *p) {
  (void)pk, (void)p;
  __builtin_trap();
}

/* --- fake backends: algo lists, and memory that must never be freed ------ */

static void never_res_free(gkcd_backend *be, void *ptr, size_t cap) {
  (void)be, (void)ptr, (void)cap;
  fprintf(stderr, "fuzz_request: resident memory freed while the harness holds a reference\n");
  __builtin_trap();
}

static void never_unpin(gkcd_backend *be, void *ptr) {
  (void)be, (void)ptr;
  fprintf(stderr, "fuzz_request: region unmapped while the harness holds a reference\n");
  __builtin_trap();
}

static const char *const cpu_sgemm[] = {"openblas", NULL};
static const char *const cpu_reduce[] = {"cpu_omp", NULL};
static const char *const cpu_spmv[] = {"cpu_merge", NULL};
static const char *const cpu_blas1[] = {"openblas", NULL};
static gkcd_backend cpu_be = {
    .name = "cpu",
    .algos = {[PROTO_M_SGEMM] = cpu_sgemm, [PROTO_M_REDUCE] = cpu_reduce,
              [PROTO_M_SPMV] = cpu_spmv, [PROTO_M_DOT] = cpu_blas1, [PROTO_M_AXPBY] = cpu_blas1},
    .res_free = never_res_free,
    .region_unpin = never_unpin,
};

static const char *const cuda_sgemm[] = {"naive", "smem", "regblock", "cublas", "cublas_tf32",
                                         NULL};
static const char *const cuda_reduce[] = {"smem", "shfl", "cub", NULL};
static const char *const cuda_spmv[] = {"scalar", "vector", "balanced", "cusparse", NULL};
static const char *const cuda_blas1[] = {"gkcu", NULL};
static gkcd_backend cuda_be = {
    .name = "cuda",
    .algos = {[PROTO_M_SGEMM] = cuda_sgemm, [PROTO_M_REDUCE] = cuda_reduce,
              [PROTO_M_SPMV] = cuda_spmv, [PROTO_M_DOT] = cuda_blas1,
              [PROTO_M_AXPBY] = cuda_blas1},
    .res_free = never_res_free,
    .region_unpin = never_unpin,
};

static int list_len(const char *const *l) {
  int n = 0;
  while (l && l[n]) n++;
  return n;
}

/* --- the fake server, its connection, and the objects it holds ----------- */

static gkcd_server *g_srv;
static gkcd_conn g_conn, g_other;

typedef struct {
  uint32_t id;
  int kind, dtype;
  gkcd_conn *owner;
  size_t bytes;
  void *mem; /* allocated once, exact size, so ASan guards both ends */
  gkcd_res *res; /* this input's registration */
} fake_obj;
static fake_obj g_obj[FZ_NOBJ + 1];

static const int32_t M_ROW_PTR[5] = {0, 2, 2, 5, 6};
static const int32_t M_COL_IDX[6] = {0, 4, 1, 2, 3, 4};

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  CHECK(p);
  return p;
}

static void def_obj(uint32_t id, int kind, int dtype, gkcd_conn *owner, size_t bytes) {
  fake_obj *o = &g_obj[id];
  o->id = id, o->kind = kind, o->dtype = dtype, o->owner = owner, o->bytes = bytes;
  o->mem = xmalloc(bytes);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    float v = (float)(i / 4) * 0.25f - 1.0f;
    memcpy((char *)o->mem + i, &v, 4);
  }
}

static void setup_once(void) {
  g_srv = calloc(1, sizeof *g_srv);
  CHECK(g_srv);
  def_obj(FZ_REGION_A, RES_REGION, 0, &g_conn, FZ_RA_BYTES);
  def_obj(FZ_REGION_B, RES_REGION, 0, &g_conn, FZ_RB_BYTES);
  def_obj(FZ_ARR_F32_16, RES_ARRAY, DT_F32, &g_conn, 16);
  def_obj(FZ_ARR_F32_20, RES_ARRAY, DT_F32, &g_conn, 20);
  def_obj(FZ_ARR_I32_20, RES_ARRAY, DT_I32, &g_conn, 20);
  def_obj(FZ_MATRIX, RES_MATRIX, DT_F32, &g_conn, 5 * 4 + 6 * 4 + 6 * 4);
  def_obj(FZ_ARR_SHARED, RES_ARRAY, DT_F32, NULL, 16);
  def_obj(FZ_ARR_OTHER, RES_ARRAY, DT_F32, &g_other, 16);
  def_obj(FZ_REGION_OTHER, RES_REGION, 0, &g_other, FZ_RA_BYTES);
  def_obj(FZ_ARR_F32_16B, RES_ARRAY, DT_F32, &g_conn, 16);
  /* The matrix, by value in region A (and one with a bad column). */
  char *ra = g_obj[FZ_REGION_A].mem;
  memcpy(ra + FZ_RA_ROW_PTR, M_ROW_PTR, sizeof M_ROW_PTR);
  memcpy(ra + FZ_RA_COL_IDX, M_COL_IDX, sizeof M_COL_IDX);
  int32_t bad[6];
  memcpy(bad, M_COL_IDX, sizeof bad);
  bad[3] = 5;
  memcpy(ra + FZ_RA_BAD_COL, bad, sizeof bad);
  /* The resident matrix: row_ptr, col_idx, values back to back. */
  char *m = g_obj[FZ_MATRIX].mem;
  memcpy(m, M_ROW_PTR, sizeof M_ROW_PTR);
  memcpy(m + sizeof M_ROW_PTR, M_COL_IDX, sizeof M_COL_IDX);
}

/* A fresh server with the objects registered, as a connection would find
 * it after earlier requests. */
static void server_begin(gkcd_backend *be) {
  memset(g_srv, 0, sizeof *g_srv);
  g_srv->be = be;
  g_srv->limits = LIM;
  g_srv->cfg.max_request_bytes = FUZZ_MAX_BYTES;
  g_srv->cfg.memory_budget = 4 * FUZZ_MAX_BYTES;
  memset(&g_conn, 0, sizeof g_conn);
  memset(&g_other, 0, sizeof g_other);
  g_conn.srv = g_other.srv = g_srv;
  g_conn.id = 1, g_other.id = 2;
  for (uint32_t id = 1; id <= FZ_NOBJ; id++) {
    fake_obj *o = &g_obj[id];
    gkcd_res *r = res_add(g_srv, o->kind, o->owner);
    CHECK(r && r->id == id);
    r->ptr = o->mem, r->bytes = o->bytes, r->cap = o->bytes, r->dtype = o->dtype;
    if (o->kind == RES_MATRIX) r->rows = 4, r->cols = 5, r->nnz = 6, r->max_row = 3;
    if (o->kind != RES_REGION) budget_take(&g_srv->budget, BUDGET_RESIDENT, o->bytes);
    res_ref(r); /* the harness's own */
    o->res = r;
  }
}

/* Every reference a job took has been dropped; then forget the objects. */
static void server_end(void) {
  for (uint32_t id = 1; id <= FZ_NOBJ; id++) {
    gkcd_res *r = g_obj[id].res;
    CHECK(r->refs == (r->released ? 1 : 2));
    free(r);
    g_obj[id].res = NULL;
  }
  memset(g_srv->res_table, 0, sizeof g_srv->res_table);
}

/* The fake object whose memory holds [p, p+n), or NULL. */
static fake_obj *obj_holding(const void *p, size_t n) {
  const char *c = p;
  for (uint32_t id = 1; id <= FZ_NOBJ; id++) {
    const char *m = g_obj[id].mem;
    if (c >= m && c <= m + g_obj[id].bytes && n <= (size_t)(m + g_obj[id].bytes - c))
      return &g_obj[id];
  }
  return NULL;
}

static int job_holds(const gkcd_job *job, const fake_obj *o) {
  for (int i = 0; i < job->nres; i++)
    if (job->res[i] == o->res) return 1;
  return 0;
}

/* --- helpers --------------------------------------------------------------- */

static int32_t ld_i32(const void *p, int64_t i) {
  int32_t v;
  memcpy(&v, (const unsigned char *)p + 4 * i, 4);
  return v;
}

static float ld_f32(const void *p, int64_t i) {
  float v;
  memcpy(&v, (const unsigned char *)p + 4 * i, 4);
  return v;
}

static int inside(const void *p, size_t n, const void *base, size_t len) {
  const uint8_t *q = p, *b = base;
  return q >= b && q <= b + len && n <= (size_t)(b + len - q);
}

/* A span the job may read: want bytes (UINT64_MAX: any), lying inside the
 * request (or a private copy of it) when sent by value, inside a region the
 * job holds when by region, or exactly a resident array (or part of a
 * resident matrix) the job holds, of the dtype the argument needs. */
static void check_span(const gkcd_job *job, const gkcd_span *s, uint64_t want, int dtype,
                       const uint8_t *frame, size_t len) {
  if (want != UINT64_MAX) CHECK(s->bytes == want);
  CHECK(s->bytes % 4 == 0);
  if (s->ptr == NULL) {
    CHECK(s->bytes == 0);
    return;
  }
  if (s->where == SPAN_RES) {
    fake_obj *o = obj_holding(s->ptr, s->bytes);
    CHECK(o && o->kind != RES_REGION && job_holds(job, o));
    CHECK(!s->shared && !s->pinned);
    if (o->kind == RES_ARRAY) CHECK(s->ptr == o->mem && s->bytes == o->bytes && o->dtype == dtype);
    return;
  }
  CHECK(s->where == SPAN_HOST);
  if (s->shared) {
    fake_obj *o = obj_holding(s->ptr, s->bytes);
    CHECK(o && o->kind == RES_REGION && job_holds(job, o));
    CHECK(((const char *)s->ptr - (const char *)o->mem) % 4 == 0);
    CHECK(s->pinned == o->res->pinned);
    return;
  }
  CHECK(!s->pinned);
  CHECK(inside(s->ptr, s->bytes, frame, len) ||
        (job->priv[0] && s->ptr == job->priv[0]) || (job->priv[1] && s->ptr == job->priv[1]));
}

/* An accepted `out` names its target exactly: {name: "handle"},
 * {name: {"handle": h}} or {name: {"region": r, "offset": o}}, nothing more. */
static void check_out_arg(const msgpack_object *params, const gkcd_job *job) {
  const msgpack_object *o = proto_map_get(params, "out");
  if (!o) {
    CHECK(job->out_kind == OUT_BIN);
    return;
  }
  CHECK(o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 1);
  const msgpack_object *t = &o->via.map.ptr[0].val;
  if (t->type == MSGPACK_OBJECT_STR) {
    CHECK(job->out_kind == OUT_RES_NEW);
    return;
  }
  CHECK(t->type == MSGPACK_OBJECT_MAP);
  CHECK(t->via.map.size == (job->out_kind == OUT_RES ? 1u : 2u));
}

/* Where the result goes is somewhere the job may write. */
static void check_out(const gkcd_job *job, const gkcd_span *const *inputs, int ninputs) {
  switch (job->out_kind) {
    case OUT_BIN: CHECK(job->out_ptr == NULL && job->out_res == NULL); break;
    case OUT_RES_NEW: CHECK(job->out_res == NULL); break;
    case OUT_HOST: {
      fake_obj *o = obj_holding(job->out_ptr, job->out_bytes);
      CHECK(o && o->kind == RES_REGION && o->res == job->out_res && job_holds(job, o));
      CHECK((char *)job->out_ptr == (char *)o->mem + job->out_offset);
      CHECK(job->out_offset % 4 == 0);
      break;
    }
    case OUT_RES: {
      fake_obj *o = obj_holding(job->out_ptr, job->out_bytes);
      CHECK(o && o->kind == RES_ARRAY && o->res == job->out_res && job_holds(job, o));
      CHECK(job->out_ptr == o->mem && o->bytes == job->out_bytes && o->dtype == DT_F32);
      /* Never an input too, except axpby's y (updated in place). */
      int in_place = job->method == PROTO_M_AXPBY && job->in.vec.y.ptr == job->out_ptr;
      for (int i = 0; i < ninputs; i++)
        if (inputs[i]->ptr == job->out_ptr) CHECK(in_place);
      break;
    }
    default: CHECK(0);
  }
}

/* The CSR rules of validate.h, checked here independently; the longest row
 * in *longest. */
static int csr_sound(int32_t rows, int32_t cols, int64_t nnz, const void *rp, const void *ci,
                     int32_t *longest) {
  *longest = 0;
  if (ld_i32(rp, 0) != 0) return 0;
  for (int64_t r = 1; r <= rows; r++) {
    int32_t a = ld_i32(rp, r - 1), b = ld_i32(rp, r);
    if (b < a) return 0;
    if (b - a > *longest) *longest = b - a;
  }
  if ((int64_t)ld_i32(rp, rows) != nnz) return 0;
  for (int64_t j = 0; j < nnz; j++) {
    int32_t c = ld_i32(ci, j);
    if (c < 0 || c >= cols) return 0;
  }
  return 1;
}

static void *copy_span(const gkcd_span *s) {
  void *p = xmalloc(s->bytes ? s->bytes : 1);
  if (s->bytes) memcpy(p, s->ptr, s->bytes);
  return p;
}

/* What a backend may do with a job validate_job accepted: a reference spmv
 * on exact-size copies of the arrays, so ASan sees any index out of bounds. */
static void reference_spmv(const gkcd_job *job) {
  const __typeof__(job->in.spmv) *s = &job->in.spmv;
  int32_t *rp = copy_span(&s->row_ptr), *ci = copy_span(&s->col_idx);
  float *val = copy_span(&s->values), *x = copy_span(&s->x);
  float *y = xmalloc((size_t)s->rows * 4);
  for (int32_t r = 0; r < s->rows; r++) {
    float acc = 0.0f;
    for (int32_t j = rp[r]; j < rp[r + 1]; j++) acc += val[j] * x[ci[j]];
    float old = s->y.ptr ? ld_f32(s->y.ptr, r) : 0.0f;
    y[r] = s->alpha * acc + (s->beta != 0.0f ? s->beta * old : 0.0f);
  }
  free(rp), free(ci), free(val), free(x), free(y);
}

/* --- replies --------------------------------------------------------------- */

/* msgpack's str is UTF-8 (and Python's msgpack.Unpacker(raw=False), as in
 * tests/e2e_python.py, refuses anything else). */
static int utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4, cp = c & 0x07;
    } else {
      return 0;
    }
    if (n - i < len) return 0;
    for (size_t j = 1; j < len; j++) {
      if ((s[i + j] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (s[i + j] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    i += len;
  }
  return 1;
}

/* Reads a packed reply back as libgkc does.  body_bytes: the size of the bin
 * body the daemon sends right after sb (array results by value), or 0. */
static void check_reply(msgpack_sbuffer *sb, uint64_t body_bytes, uint32_t want_msgid,
                        int want_error) {
  proto_frame_info info;
  if (body_bytes > 0) {
    /* Without the body the reply is partial, and the scanner asks for
     * exactly the body's bytes (libgkc sizes its buffer from that). */
    ssize_t r = proto_frame_scan((const uint8_t *)sb->data, sb->size, &CLIENT_LIM, &info);
    CHECK(r == PROTO_PARTIAL);
    CHECK(info.msgid_known && info.msgid == want_msgid);
    CHECK(info.need == sb->size + body_bytes);
    static const char zeros[65536];
    if (body_bytes > sizeof zeros) return; /* keep executions fast */
    msgpack_sbuffer_write(sb, zeros, (size_t)body_bytes);
  }
  ssize_t r = proto_frame_scan((const uint8_t *)sb->data, sb->size, &CLIENT_LIM, &info);
  CHECK(r == (ssize_t)sb->size);
  msgpack_zone zone;
  CHECK(msgpack_zone_init(&zone, 1024));
  msgpack_object root;
  size_t off = 0;
  CHECK(msgpack_unpack(sb->data, sb->size, &off, &zone, &root) == MSGPACK_UNPACK_SUCCESS);
  CHECK(off == sb->size);
  proto_response resp;
  CHECK(proto_response_parse(&root, &resp) == 0);
  CHECK(resp.msgid == want_msgid);
  CHECK(resp.error == want_error);
  if (want_error)
    CHECK(resp.message != NULL && resp.message_len > 0);
  else
    CHECK(resp.result && resp.result->type == MSGPACK_OBJECT_MAP);
  msgpack_zone_destroy(&zone);
}

static void reply_error(int msgid_known, uint32_t msgid, int code, const char *msg) {
  /* Every code the daemon sends has a wire name and a message. */
  CHECK(code < 0 && strcmp(proto_err_wire(code), "unknown") != 0);
  CHECK(msg && msg[0]);
  /* Names from the request are echoed through proto_echo: whatever bytes
   * came, the message is UTF-8 (crashers/README.md). */
  if (!utf8_valid((const unsigned char *)msg, strlen(msg))) {
    fprintf(stderr, "fuzz_request: error message is not UTF-8: %s\n", msg);
    CHECK(0);
  }
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error(&pk, msgid_known, msgid, code, msg);
  check_reply(&sb, 0, msgid_known ? msgid : UINT32_MAX, code);
  msgpack_sbuffer_destroy(&sb);
}

static void reply_empty_map(uint32_t msgid) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_result_head(&pk, msgid);
  msgpack_pack_map(&pk, 0);
  check_reply(&sb, 0, msgid, 0);
  msgpack_sbuffer_destroy(&sb);
}

/* --- one job --------------------------------------------------------------- */

/* rpc.c job_free, less the frame (the caller's) and out (never made). */
static void job_release(gkcd_job *job) {
  for (int i = 0; i < job->nres; i++) res_unref(g_srv, job->res[i]);
  CHECK(job->reg_fd < 0);
  free(job->priv[0]);
  free(job->priv[1]);
  free(job);
}

/* After methods_parse returned 0: the job is what its arguments say, and
 * every byte it will touch is somewhere it may. */
static void check_parsed_job(const gkcd_job *job, const gkcd_backend *be, int method,
                             const uint8_t *frame, size_t len) {
  CHECK(job->method == method);
  CHECK(job->nres >= 0 && job->nres <= JOB_MAX_RES);
  for (int i = 0; i < job->nres; i++) {
    CHECK(job->res[i] && !job->res[i]->released && job->res[i]->refs >= 3);
    CHECK(job->res[i]->owner == NULL || job->res[i]->owner == &g_conn);
    for (int j = 0; j < i; j++) CHECK(job->res[i] != job->res[j]);
  }
  if (be->algos[method])
    CHECK(job->algo == GKCD_ALGO_AUTO || (job->algo >= 0 && job->algo < list_len(be->algos[method])));
  switch (method) {
    case PROTO_M_SGEMM: {
      const __typeof__(job->in.sgemm) *s = &job->in.sgemm;
      CHECK(s->m >= 1 && s->n >= 1 && s->k >= 1);
      uint64_t m = (uint64_t)s->m, n = (uint64_t)s->n, k = (uint64_t)s->k;
      check_span(job, &s->a, m * k * 4, DT_F32, frame, len);
      check_span(job, &s->b, k * n * 4, DT_F32, frame, len);
      if (s->beta != 0.0f) {
        CHECK(s->c.ptr != NULL);
        check_span(job, &s->c, m * n * 4, DT_F32, frame, len);
      } else {
        CHECK(s->c.ptr == NULL);
      }
      CHECK(job->out_bytes == m * n * 4 && job->out_bytes <= FUZZ_MAX_BYTES);
      CHECK(s->trans_a == 0 || s->trans_a == 1);
      CHECK(s->trans_b == 0 || s->trans_b == 1);
      CHECK(s->tf32 == 0 || s->tf32 == 1);
      CHECK(s->alpha == s->alpha && s->beta == s->beta); /* not NaN */
      const gkcd_span *in[] = {&s->a, &s->b, &s->c};
      check_out(job, in, 3);
      break;
    }
    case PROTO_M_REDUCE:
      CHECK(job->in.reduce.op >= 0 && job->in.reduce.op <= 2);
      CHECK(job->in.reduce.n >= 1);
      check_span(job, &job->in.reduce.x, (uint64_t)job->in.reduce.n * 4, DT_F32, frame, len);
      break;
    case PROTO_M_SPMV: {
      const __typeof__(job->in.spmv) *s = &job->in.spmv;
      CHECK(s->rows >= 1 && s->cols >= 1 && s->nnz >= 0 && s->nnz <= INT32_MAX);
      if (s->validated) { /* a resident matrix: exactly its three arrays */
        fake_obj *m = &g_obj[FZ_MATRIX];
        CHECK(job_holds(job, m));
        CHECK(s->rows == 4 && s->cols == 5 && s->nnz == 6);
        CHECK(s->row_ptr.ptr == m->mem && s->row_ptr.where == SPAN_RES);
        CHECK(s->col_idx.ptr == (char *)m->mem + 20 && s->col_idx.where == SPAN_RES);
        CHECK(s->values.ptr == (char *)m->mem + 44 && s->values.where == SPAN_RES);
        CHECK(s->row_ptr.bytes == 20 && s->col_idx.bytes == 24 && s->values.bytes == 24);
      } else {
        /* Indices are checked on the host, so they never live on a device. */
        CHECK(s->row_ptr.where == SPAN_HOST && s->col_idx.where == SPAN_HOST);
        check_span(job, &s->row_ptr, ((uint64_t)s->rows + 1) * 4, DT_I32, frame, len);
        check_span(job, &s->col_idx, (uint64_t)s->nnz * 4, DT_I32, frame, len);
        check_span(job, &s->values, (uint64_t)s->nnz * 4, DT_F32, frame, len);
      }
      check_span(job, &s->x, (uint64_t)s->cols * 4, DT_F32, frame, len);
      if (s->beta != 0.0f) {
        CHECK(s->y.ptr != NULL);
        check_span(job, &s->y, (uint64_t)s->rows * 4, DT_F32, frame, len);
      } else {
        CHECK(s->y.ptr == NULL);
      }
      CHECK(job->out_bytes == (uint64_t)s->rows * 4 && job->out_bytes <= FUZZ_MAX_BYTES);
      const gkcd_span *in[] = {&s->row_ptr, &s->col_idx, &s->values, &s->x, &s->y};
      check_out(job, in, 5);
      break;
    }
    case PROTO_M_DOT:
    case PROTO_M_AXPBY: {
      const __typeof__(job->in.vec) *v = &job->in.vec;
      CHECK(v->n >= 1);
      check_span(job, &v->x, (uint64_t)v->n * 4, DT_F32, frame, len);
      check_span(job, &v->y, (uint64_t)v->n * 4, DT_F32, frame, len);
      if (method == PROTO_M_AXPBY) {
        CHECK(job->out_bytes == v->x.bytes && job->out_bytes <= FUZZ_MAX_BYTES);
        const gkcd_span *in[] = {&v->x, &v->y};
        check_out(job, in, 2);
      }
      break;
    }
    case PROTO_M_UPLOAD:
      CHECK(job->in.upload.dtype == DT_F32 || job->in.upload.dtype == DT_I32);
      CHECK(job->in.upload.data.bytes >= 4);
      check_span(job, &job->in.upload.data, UINT64_MAX, job->in.upload.dtype, frame, len);
      CHECK(job->out_bytes == job->in.upload.data.bytes && job->out_kind == OUT_RES_NEW);
      break;
    case PROTO_M_DOWNLOAD: {
      const gkcd_span *d = &job->in.upload.data;
      CHECK(d->where == SPAN_RES);
      fake_obj *o = obj_holding(d->ptr, d->bytes);
      CHECK(o && o->kind == RES_ARRAY && d->ptr == o->mem && d->bytes == o->bytes);
      CHECK(job_holds(job, o) && job->in.upload.dtype == o->dtype);
      CHECK(job->out_bytes == d->bytes && job->out_bytes <= FUZZ_MAX_BYTES);
      CHECK(job->out_kind == OUT_BIN || job->out_kind == OUT_HOST);
      check_out(job, NULL, 0);
      break;
    }
    case PROTO_M_CSR_UPLOAD: {
      const __typeof__(job->in.csr) *s = &job->in.csr;
      CHECK(s->rows >= 1 && s->cols >= 1 && s->nnz >= 0 && s->nnz <= INT32_MAX);
      CHECK(s->row_ptr.where == SPAN_HOST && s->col_idx.where == SPAN_HOST);
      check_span(job, &s->row_ptr, ((uint64_t)s->rows + 1) * 4, DT_I32, frame, len);
      check_span(job, &s->col_idx, (uint64_t)s->nnz * 4, DT_I32, frame, len);
      check_span(job, &s->values, (uint64_t)s->nnz * 4, DT_F32, frame, len);
      CHECK(job->out_bytes == s->row_ptr.bytes + 2 * s->col_idx.bytes);
      CHECK(job->out_kind == OUT_RES_NEW);
      break;
    }
    default: CHECK(0); /* shm_register cannot succeed: no descriptor came */
  }
}

/* rpc.c submit(), methods_parse through the reply, with be's algo lists. */
static void run_job(const proto_request *req, gkcd_backend *be, const uint8_t *frame,
                    size_t len) {
  char msg[320]; /* rpc.c's size */
  msg[0] = 0;
  gkcd_job *job = calloc(1, sizeof *job);
  CHECK(job);
  job->reg_fd = -1;
  g_srv->be = be;
  args_ctx a = {req->params, msg, sizeof msg};
  refs_ctx r = {&a, g_srv, &g_conn, job};
  int rc = methods_parse(req->method, &r, FUZZ_MAX_BYTES);
  if (rc) {
    CHECK(rc == GKC_EINVALID_ARGUMENT || rc == GKC_ETOO_LARGE);
    NOTE("  %s backend: methods_parse: %s: %s\n", be->name, proto_err_wire(rc), msg);
    reply_error(1, req->msgid, rc, msg);
    job_release(job);
    return;
  }
  check_parsed_job(job, be, req->method, frame, len);
  if (req->method == PROTO_M_SGEMM || req->method == PROTO_M_SPMV ||
      req->method == PROTO_M_AXPBY || req->method == PROTO_M_DOWNLOAD)
    check_out_arg(req->params, job);

  /* On a worker, before the backend. */
  CHECK(methods_is_backend(req->method));
  int vrc = validate_job(job);
  int32_t longest;
  if (req->method == PROTO_M_SPMV && !job->in.spmv.validated) {
    const __typeof__(job->in.spmv) *s = &job->in.spmv;
    /* What a client could rewrite was copied out before being checked. */
    CHECK(!s->row_ptr.shared && !s->col_idx.shared);
    check_span(job, &s->row_ptr, ((uint64_t)s->rows + 1) * 4, DT_I32, frame, len);
    check_span(job, &s->col_idx, (uint64_t)s->nnz * 4, DT_I32, frame, len);
    int sound = csr_sound(s->rows, s->cols, s->nnz, s->row_ptr.ptr, s->col_idx.ptr, &longest);
    CHECK((vrc == 0) == sound);
    if (sound) CHECK(s->max_row == longest);
  } else if (req->method == PROTO_M_CSR_UPLOAD) {
    const __typeof__(job->in.csr) *s = &job->in.csr;
    CHECK(!s->row_ptr.shared && !s->col_idx.shared);
    int sound = csr_sound(s->rows, s->cols, s->nnz, s->row_ptr.ptr, s->col_idx.ptr, &longest);
    CHECK((vrc == 0) == sound);
    if (sound) CHECK(s->max_row == longest);
  } else {
    CHECK(vrc == 0);
  }
  if (vrc) {
    NOTE("  %s backend: validate_job: %s\n", be->name, job->errmsg);
    CHECK(job->err == GKC_EINVALID_ARGUMENT && vrc == job->err);
    reply_error(1, req->msgid, job->err, job->errmsg);
    job_release(job);
    return;
  }
  if (req->method == PROTO_M_SPMV) reference_spmv(job);
  NOTE("  %s backend: job accepted, algo %d, out kind %d\n", be->name, job->algo, job->out_kind);

  /* What a backend fills in, varied from the input so both shapes of the
   * result map (with and without copy times) get packed. */
  const char *const *algos = be->algos[req->method];
  job->algo_name = algos ? algos[job->algo >= 0 ? job->algo : 0] : NULL;
  job->kernel_us = 1.5;
  if (len & 1) job->h2d_us = 2.0, job->d2h_us = 0.5;
  job->value = (double)job->in.reduce.n;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_result_head(&pk, req->msgid);
  methods_pack_result(&pk, job, 3.25, 4242);
  int body = job->out_kind == OUT_BIN &&
             (req->method == PROTO_M_SGEMM || req->method == PROTO_M_SPMV ||
              req->method == PROTO_M_AXPBY || req->method == PROTO_M_DOWNLOAD);
  check_reply(&sb, body ? job->out_bytes : 0, req->msgid, 0);
  msgpack_sbuffer_destroy(&sb);
  job_release(job);
}

/* --- one frame, as rpc_handle_frame sees it -------------------------------- */

static void handle_frame(const uint8_t *frame, size_t len, const proto_frame_info *scan_info) {
  msgpack_zone zone;
  CHECK(msgpack_zone_init(&zone, 2048));
  msgpack_object root;
  size_t off = 0;
  /* The scanner vouched for this frame: msgpack-c must take all of it. */
  msgpack_unpack_return ur = msgpack_unpack((const char *)frame, len, &off, &zone, &root);
  CHECK(ur == MSGPACK_UNPACK_SUCCESS);
  CHECK(off == len);

  char msg[320];
  msg[0] = 0;
  proto_request req;
  int rc = proto_request_parse(&root, &req, msg, sizeof msg);
  NOTE("frame of %zu bytes: %s%s%s\n", len, rc ? proto_err_wire(rc) : "request ",
       rc ? ": " : proto_method_name(req.method), rc ? msg : "");
  /* The scanner reads the msgid "as proto_request_parse reads it": what it
   * found, the parser finds too (the parser may know more: it does not
   * need element 0 to be an integer). */
  if (scan_info->msgid_known) CHECK(req.msgid_known && req.msgid == scan_info->msgid);
  if (rc) {
    CHECK(rc == GKC_EINVALID_REQUEST || rc == GKC_EUNKNOWN_METHOD);
    reply_error(req.msgid_known, req.msgid, rc, msg);
    goto done;
  }
  CHECK(req.msgid_known);
  CHECK(req.method >= 0 && req.method < PROTO_M_COUNT);
  CHECK(req.params && req.params->type == MSGPACK_OBJECT_MAP);
  CHECK(inside(req.method_name, req.method_len, frame, len));

  if (req.method == PROTO_M_PING || req.method == PROTO_M_STATUS || req.method == PROTO_M_METRICS) {
    CHECK(!methods_is_compute(req.method));
    if (req.params->via.map.size != 0) {
      snprintf(msg, sizeof msg, "method '%s' takes no arguments", proto_method_name(req.method));
      reply_error(1, req.msgid, GKC_EINVALID_ARGUMENT, msg);
    } else {
      /* status's and metrics' replies need the whole server (status.c,
       * metrics.c): left out. */
      reply_empty_map(req.msgid);
    }
    goto done;
  }
  if (req.method == PROTO_M_SHM_RELEASE || req.method == PROTO_M_RELEASE) {
    CHECK(!methods_is_compute(req.method));
    rc = res_release_request(&g_conn, req.method, req.params, msg, sizeof msg);
    NOTE("  release: %s%s\n", rc ? proto_err_wire(rc) : "done", rc ? msg : "");
    if (rc) {
      CHECK(rc == GKC_EINVALID_ARGUMENT);
      reply_error(1, req.msgid, rc, msg);
    } else {
      reply_empty_map(req.msgid);
    }
    goto done;
  }
  CHECK(methods_is_compute(req.method));
  run_job(&req, &cpu_be, frame, len);
  run_job(&req, &cuda_be, frame, len);
done:
  msgpack_zone_destroy(&zone);
}

/* The daemon does not rescan a partial frame until info.need bytes are in
 * (conn.c c->need).  Walk a complete frame's prefixes the same way: each must
 * be partial, never an error or a frame, and the hint must never point past
 * the frame's end, or the daemon would wait for bytes the client never sends. */
static void check_prefixes(const uint8_t *frame, size_t len) {
  proto_frame_info info;
  size_t p = 1;
  for (int steps = 0; p < len && steps < 64; steps++) {
    ssize_t r = proto_frame_scan(frame, p, &LIM, &info);
    CHECK(r == PROTO_PARTIAL);
    CHECK(info.need > p && info.need <= len);
    p = info.need;
  }
  if (len > 1) {
    /* Missing only the last byte: the hint is exactly the frame. */
    ssize_t r = proto_frame_scan(frame, len - 1, &LIM, &info);
    CHECK(r == PROTO_PARTIAL);
    CHECK(info.need == len);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *v = getenv("GKC_FUZZ_VERBOSE");
  g_verbose = v && *v && strcmp(v, "0") != 0;
  setup_once();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  server_begin(&cpu_be);
  size_t pos = 0;
  while (pos < size) {
    proto_frame_info info;
    size_t left = size - pos;
    ssize_t r = proto_frame_scan(data + pos, left, &LIM, &info);
    if (r == PROTO_PARTIAL) {
      NOTE("%zu bytes left: partial frame (need %zu)\n", left, info.need);
      CHECK(info.need > left);
      CHECK(info.need == left + 1 || info.need <= LIM.max_bytes);
      break;
    }
    if (r < 0) {
      /* rpc_reject_frame: one error reply, then the connection closes. */
      CHECK(r == PROTO_FRAME_EPARSE || r == PROTO_FRAME_ETOOBIG || r == PROTO_FRAME_ECOMPLEX);
      int code = r == PROTO_FRAME_ETOOBIG    ? GKC_ETOO_LARGE
                 : r == PROTO_FRAME_ECOMPLEX ? GKC_EINVALID_REQUEST
                                             : GKC_EPARSE_ERROR;
      NOTE("%zu bytes left: frame rejected by the scanner: %s\n", left, proto_err_wire(code));
      reply_error(info.msgid_known, info.msgid, code, "rejected frame; closing the connection");
      break;
    }
    CHECK((size_t)r <= left);
    /* The daemon hands each frame over in its own allocation. */
    uint8_t *frame = xmalloc((size_t)r);
    memcpy(frame, data + pos, (size_t)r);
    /* The frame alone scans the same as with the bytes that followed it. */
    proto_frame_info alone;
    CHECK(proto_frame_scan(frame, (size_t)r, &LIM, &alone) == r);
    CHECK(alone.msgid_known == info.msgid_known && alone.msgid == info.msgid);
    check_prefixes(frame, (size_t)r);
    handle_frame(frame, (size_t)r, &info);
    free(frame);
    pos += (size_t)r;
  }
  server_end();
  return 0;
}
