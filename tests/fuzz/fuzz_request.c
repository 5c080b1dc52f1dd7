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
 *   lists and again with the CUDA backend's, then the row's check (validate.h), whose spans
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
 * Not reachable from here: conn.c and pool.c need a libuv loop (job_fail
 * is job.c's); devices.c's devices_count is two devices.  No descriptor
 * ever comes with a frame (refs_ctx.fd is -1, as rpc.c passes for a
 * connection with none waiting), so shm_register always fails and
 * region_map is not run.  release/shm_release go through resident.c's
 * res_release_request, as in rpc.c; the one line of submit() that prepares
 * a job (reg_fd = -1) is copied.  The fake
 * backends hold only algo name lists, which must be kept equal to
 * cpu/cpu_backend.c and cuda/cuda_*.c + cuda/gkcu_*.cu.
 *
 * The fake server is in fuzz_server.c, the invariants on jobs and replies in
 * fuzz_checks.c (fuzz_harness.h); this file handles frames and jobs.
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
#include "fuzz_harness.h"
#include "proto_dtypes.h"
#include "gkc_errors.h"
#include "method.h"
#include "methods.h"
#include "proto_errors.h"
#include "proto_methods.h"
#include "proto_rpc.h"
#include "refs.h"
#include "validate.h"

int g_verbose;

/* --- one job --------------------------------------------------------------- */

/* rpc.c job_free, less the frame (the caller's) and out (never made). */
static void job_release(gkcd_job *job) {
  for (int i = 0; i < job->nres; i++) res_unref(&g_res, job->res[i]);
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
        /* Values float32 or float64, whatever the vectors are (PROTOCOL.md,
         * "Element types"). */
        CHECK(s->values.dtype == DT_F32 || s->values.dtype == DT_F64);
        check_span(job, &s->values, (uint64_t)s->nnz * proto_dtype_size(s->values.dtype),
                   s->values.dtype, frame, len);
      }
      /* x, y and the result: one dtype */
      int xdt = s->x.dtype;
      uint64_t xs = proto_dtype_size(xdt);
      CHECK(xdt == DT_F32 || xdt == DT_F64);
      check_span(job, &s->x, (uint64_t)s->cols * xs, xdt, frame, len);
      if (s->beta != 0.0f) {
        CHECK(s->y.ptr != NULL);
        check_span(job, &s->y, (uint64_t)s->rows * xs, xdt, frame, len);
      } else {
        CHECK(s->y.ptr == NULL);
      }
      CHECK(job->out_bytes == (uint64_t)s->rows * xs && job->out_bytes <= FUZZ_MAX_BYTES);
      const gkcd_span *in[] = {&s->row_ptr, &s->col_idx, &s->values, &s->x, &s->y};
      check_out(job, in, 5);
      break;
    }
    case PROTO_M_DOT:
    case PROTO_M_AXPBY: {
      const __typeof__(job->in.vec) *v = &job->in.vec;
      CHECK(v->n >= 1);
      CHECK(v->x.dtype == DT_F32 || v->x.dtype == DT_F64);
      uint64_t es = proto_dtype_size(v->x.dtype);
      check_span(job, &v->x, (uint64_t)v->n * es, v->x.dtype, frame, len);
      check_span(job, &v->y, (uint64_t)v->n * es, v->x.dtype, frame, len);
      if (method == PROTO_M_AXPBY) {
        CHECK(job->out_bytes == v->x.bytes && job->out_bytes <= FUZZ_MAX_BYTES);
        const gkcd_span *in[] = {&v->x, &v->y};
        check_out(job, in, 2);
      }
      break;
    }
    case PROTO_M_UPLOAD:
      CHECK(job->in.upload.dtype == DT_F32 || job->in.upload.dtype == DT_I32 ||
            job->in.upload.dtype == DT_F64);
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

/* rpc.c submit(), the method row's parse through the reply, with be's algo lists. */
static void run_job(const proto_request *req, gkcd_backend *be, const uint8_t *frame,
                    size_t len) {
  char msg[320]; /* rpc.c's size */
  msg[0] = 0;
  gkcd_job *job = calloc(1, sizeof *job);
  CHECK(job);
  job->reg_fd = -1;
  g_devs.dev[0].be = g_devs.dev[1].be = be;
  args_ctx a = {req->params, msg, sizeof msg};
  refs_ctx r = {.a = &a, .res = &g_res, .asker = &g_conn, .devs = &g_devs, .fd = -1,
                .job = job}; /* no descriptor came */
  const gkcd_method *row = method_row(req->method);
  job->method = req->method;
  job->row = row;
  job->pin_device = -1;
  int rc = methods_deadline(&a, job);
  if (rc == 0) rc = row->parse(&r, FUZZ_MAX_BYTES);
  if (rc) {
    CHECK(rc == GKC_EINVALID_ARGUMENT || rc == GKC_ETOO_LARGE);
    NOTE("  %s backend: parse: %s: %s\n", be->name, proto_err_wire(rc), msg);
    reply_error(1, req->msgid, rc, msg);
    job_release(job);
    return;
  }
  check_parsed_job(job, be, req->method, frame, len);
  if (req->method == PROTO_M_SGEMM || req->method == PROTO_M_SPMV ||
      req->method == PROTO_M_AXPBY || req->method == PROTO_M_DOWNLOAD)
    check_out_arg(req->params, job);

  /* On a worker, before the backend. */
  CHECK(row->where == METHOD_BACKEND);
  int vrc = row->check ? row->check(job) : 0;
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
    NOTE("  %s backend: check: %s\n", be->name, job->errmsg);
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
  row->pack(&pk, job, 3.25, 4242);
  int body = job->out_kind == OUT_BIN &&
             (req->method == PROTO_M_SGEMM || req->method == PROTO_M_SPMV ||
              req->method == PROTO_M_AXPBY || req->method == PROTO_M_DOWNLOAD);
  check_reply(&sb, body ? job->out_bytes : 0, req->msgid, 0);
  msgpack_sbuffer_destroy(&sb);
  job_release(job);
}

static void fuzz_status(void *srv, msgpack_packer *pk) {
  (void)srv;
  msgpack_pack_map(pk, 0);
}

static char *fuzz_metrics(void *srv, size_t *len) {
  (void)srv;
  *len = 0;
  return calloc(1, 1);
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

  const gkcd_method *row = method_row(req.method);
  CHECK(row && row->id == req.method);
  if (row->where == METHOD_LOOP && row->no_args && req.params->via.map.size != 0) {
    snprintf(msg, sizeof msg, "method '%s' takes no arguments", proto_method_name(req.method));
    reply_error(1, req.msgid, GKC_EINVALID_ARGUMENT, msg);
    goto done;
  }
  if (row->where == METHOD_LOOP) {
    /* status's and metrics' replies need the whole server (status.c,
     * metrics.c): stand-ins pack an empty map and an empty text. */
    method_env env = {NULL, cpu_be.name, fuzz_status, fuzz_metrics, &g_res, &g_conn};
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_result_head(&pk, req.msgid);
    void *body = NULL;
    size_t body_len = 0;
    rc = row->answer(&env, req.params, &pk, &body, &body_len, msg, sizeof msg);
    NOTE("  %s: %s%s\n", proto_method_name(req.method), rc ? proto_err_wire(rc) : "done",
         rc ? msg : "");
    if (rc) {
      CHECK(rc == GKC_EINVALID_ARGUMENT);
      reply_error(1, req.msgid, rc, msg);
    } else {
      check_reply(&sb, body_len, req.msgid, 0);
    }
    free(body);
    msgpack_sbuffer_destroy(&sb);
    goto done;
  }
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
