/* methods.c: see methods.h. */
#include "methods.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "proto_methods.h"
#include "proto_rpc.h"

int methods_is_compute(int method) {
  return method == PROTO_M_SGEMM || method == PROTO_M_REDUCE || method == PROTO_M_SPMV;
}

static int too_large(args_ctx *a, const char *what, uint64_t bytes, size_t max) {
  snprintf(a->msg, a->msglen, "%s would take %" PRIu64 " bytes, over the limit of %zu"
           " (--max-request-bytes)", what, bytes, max);
  return GKC_ETOO_LARGE;
}

/* x*y elements of 4 bytes, or UINT64_MAX when that overflows (or does not
 * fit a size_t, so every later size computation is safe). */
static uint64_t f32_bytes(uint64_t x, uint64_t y) {
  uint64_t n;
  if (__builtin_mul_overflow(x, y, &n) || __builtin_mul_overflow(n, 4, &n) || n > SIZE_MAX)
    return UINT64_MAX;
  return n;
}

static int parse_algo(args_ctx *a, const gkcd_backend *be, int method, int *algo) {
  const char *s = "auto";
  size_t len = 4;
  int rc = args_str(a, "algo", 0, &s, &len);
  if (rc) return rc;
  int idx = backend_algo_lookup(be, method, s, len);
  if (idx == -2) {
    char list[256] = "auto";
    for (const char *const *p = be->algos[method]; *p; p++) {
      strncat(list, ", ", sizeof list - strlen(list) - 1);
      strncat(list, *p, sizeof list - strlen(list) - 1);
    }
    int n = len > 32 ? 32 : (int)len;
    snprintf(a->msg, a->msglen, "argument 'algo': '%.*s' is not a %s algo of the %s backend"
             " (one of: %s)", n, s, proto_method_name(method), be->name, list);
    return GKC_EINVALID_ARGUMENT;
  }
  *algo = idx;
  return 0;
}

static int parse_sgemm(const gkcd_backend *be, args_ctx *a, gkcd_job *job, size_t max) {
  static const char *const keys[] = {"m", "n", "k", "a", "b", "c", "alpha", "beta",
                                     "trans_a", "trans_b", "algo", "precision", "deadline_ms", NULL};
  int64_t m, n, k;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = args_int(a, "m", 1, 1, INT32_MAX, &m)) ||
      (rc = args_int(a, "n", 1, 1, INT32_MAX, &n)) ||
      (rc = args_int(a, "k", 1, 1, INT32_MAX, &k)))
    return rc;
  __typeof__(job->in.sgemm) *s = &job->in.sgemm;
  s->m = (int32_t)m, s->n = (int32_t)n, s->k = (int32_t)k;
  s->alpha = 1.0f, s->beta = 0.0f;
  if ((rc = args_float(a, "alpha", 0, &s->alpha)) || (rc = args_float(a, "beta", 0, &s->beta)) ||
      (rc = args_bool(a, "trans_a", 0, &s->trans_a)) ||
      (rc = args_bool(a, "trans_b", 0, &s->trans_b)) ||
      (rc = parse_algo(a, be, PROTO_M_SGEMM, &job->algo)))
    return rc;
  const char *prec = "fp32";
  size_t plen = 4;
  if ((rc = args_str(a, "precision", 0, &prec, &plen))) return rc;
  if (plen == 4 && !memcmp(prec, "tf32", 4)) {
    s->tf32 = 1;
  } else if (!(plen == 4 && !memcmp(prec, "fp32", 4))) {
    int n = plen > 32 ? 32 : (int)plen;
    snprintf(a->msg, a->msglen, "argument 'precision': '%.*s' is not fp32 or tf32", n, prec);
    return GKC_EINVALID_ARGUMENT;
  }

  uint64_t ab = f32_bytes(m, k), bb = f32_bytes(k, n), cb = f32_bytes(m, n);
  if (ab == UINT64_MAX || bb == UINT64_MAX || cb == UINT64_MAX) {
    snprintf(a->msg, a->msglen, "arguments 'm', 'n', 'k': m*k, k*n or m*n float32 overflows"
             " 64 bits (m=%" PRId64 ", n=%" PRId64 ", k=%" PRId64 ")", m, n, k);
    return GKC_EINVALID_ARGUMENT;
  }
  if (cb > max) return too_large(a, "the result c (m*n float32)", cb, max);
  char what[96];
  snprintf(what, sizeof what, "m*k = %" PRId64 "*%" PRId64 " float32", m, k);
  if ((rc = args_bin(a, "a", 1, ab, what, &s->a.ptr, &s->a.bytes))) return rc;
  snprintf(what, sizeof what, "k*n = %" PRId64 "*%" PRId64 " float32", k, n);
  if ((rc = args_bin(a, "b", 1, bb, what, &s->b.ptr, &s->b.bytes))) return rc;
  snprintf(what, sizeof what, "m*n = %" PRId64 "*%" PRId64 " float32", m, n);
  if (s->beta != 0.0f || args_present(a, "c")) {
    if (s->beta != 0.0f && !args_present(a, "c")) {
      snprintf(a->msg, a->msglen, "missing argument 'c' (required when beta != 0)");
      return GKC_EINVALID_ARGUMENT;
    }
    if ((rc = args_bin(a, "c", 1, cb, what, &s->c.ptr, &s->c.bytes))) return rc;
    if (s->beta == 0.0f) s->c.ptr = NULL; /* beta == 0: C is not read */
  }
  job->out_bytes = cb;
  return 0;
}

static int parse_reduce(const gkcd_backend *be, args_ctx *a, gkcd_job *job, size_t max) {
  static const char *const keys[] = {"x", "op", "algo", "deadline_ms", NULL};
  static const char *const ops[] = {"sum", "min", "max"}; /* indexed by gkc_reduce_op */
  int rc;
  if ((rc = args_known(a, keys)) || (rc = parse_algo(a, be, PROTO_M_REDUCE, &job->algo)))
    return rc;
  const char *op = "sum";
  size_t oplen = 3;
  if ((rc = args_str(a, "op", 0, &op, &oplen))) return rc;
  job->in.reduce.op = -1;
  for (int i = 0; i < 3; i++)
    if (strlen(ops[i]) == oplen && memcmp(ops[i], op, oplen) == 0) job->in.reduce.op = i;
  if (job->in.reduce.op < 0) {
    int n = oplen > 32 ? 32 : (int)oplen;
    snprintf(a->msg, a->msglen, "argument 'op': '%.*s' is not one of sum, min, max", n, op);
    return GKC_EINVALID_ARGUMENT;
  }
  const msgpack_object *x = proto_map_get(a->params, "x");
  if (x && x->type == MSGPACK_OBJECT_BIN && (x->via.bin.size % 4 != 0 || x->via.bin.size == 0)) {
    snprintf(a->msg, a->msglen, "argument 'x' holds %u bytes: need a positive multiple of 4"
             " (float32 values)", (unsigned)x->via.bin.size);
    return GKC_EINVALID_ARGUMENT;
  }
  uint64_t want = x && x->type == MSGPACK_OBJECT_BIN ? x->via.bin.size : 4;
  if ((rc = args_bin(a, "x", 1, want, "float32 values", &job->in.reduce.x.ptr,
                     &job->in.reduce.x.bytes)))
    return rc;
  job->in.reduce.n = (int64_t)(job->in.reduce.x.bytes / 4);
  (void)max;
  return 0;
}

static int parse_spmv(const gkcd_backend *be, args_ctx *a, gkcd_job *job, size_t max) {
  static const char *const keys[] = {"rows", "cols", "row_ptr", "col_idx", "values", "x",
                                     "y", "alpha", "beta", "algo", "deadline_ms", NULL};
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  int64_t rows, cols;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = args_int(a, "rows", 1, 1, INT32_MAX - 1, &rows)) ||
      (rc = args_int(a, "cols", 1, 1, INT32_MAX, &cols)))
    return rc;
  s->rows = (int32_t)rows, s->cols = (int32_t)cols;
  s->alpha = 1.0f, s->beta = 0.0f;
  if ((rc = args_float(a, "alpha", 0, &s->alpha)) || (rc = args_float(a, "beta", 0, &s->beta)) ||
      (rc = parse_algo(a, be, PROTO_M_SPMV, &job->algo)))
    return rc;
  uint64_t yb = f32_bytes(rows, 1);
  if (yb > max) return too_large(a, "the result y (rows float32)", yb, max);

  char what[96];
  snprintf(what, sizeof what, "rows+1 = %" PRId64 " int32", rows + 1);
  if ((rc = args_bin(a, "row_ptr", 1, f32_bytes(rows + 1, 1), what, &s->row_ptr.ptr,
                     &s->row_ptr.bytes)))
    return rc;
  const msgpack_object *ci = proto_map_get(a->params, "col_idx");
  if (ci && ci->type == MSGPACK_OBJECT_BIN && ci->via.bin.size % 4 != 0) {
    snprintf(a->msg, a->msglen, "argument 'col_idx' holds %u bytes, not a multiple of 4 (int32)",
             (unsigned)ci->via.bin.size);
    return GKC_EINVALID_ARGUMENT;
  }
  uint64_t nnz_bytes = ci && ci->type == MSGPACK_OBJECT_BIN ? ci->via.bin.size : 0;
  if ((rc = args_bin(a, "col_idx", 1, nnz_bytes, "nnz int32", &s->col_idx.ptr, &s->col_idx.bytes)))
    return rc;
  s->nnz = (int64_t)(nnz_bytes / 4);
  if (s->nnz > INT32_MAX) {
    snprintf(a->msg, a->msglen, "argument 'col_idx': %" PRId64 " nonzeros, more than int32 row_ptr"
             " can index", s->nnz);
    return GKC_EINVALID_ARGUMENT;
  }
  snprintf(what, sizeof what, "nnz = %" PRId64 " float32, as many as col_idx", s->nnz);
  if ((rc = args_bin(a, "values", 1, nnz_bytes, what, &s->values.ptr, &s->values.bytes))) return rc;
  snprintf(what, sizeof what, "cols = %" PRId64 " float32", cols);
  if ((rc = args_bin(a, "x", 1, f32_bytes(cols, 1), what, &s->x.ptr, &s->x.bytes))) return rc;
  snprintf(what, sizeof what, "rows = %" PRId64 " float32", rows);
  if (s->beta != 0.0f || args_present(a, "y")) {
    if (s->beta != 0.0f && !args_present(a, "y")) {
      snprintf(a->msg, a->msglen, "missing argument 'y' (required when beta != 0)");
      return GKC_EINVALID_ARGUMENT;
    }
    if ((rc = args_bin(a, "y", 1, yb, what, &s->y.ptr, &s->y.bytes))) return rc;
    if (s->beta == 0.0f) s->y.ptr = NULL;
  }
  job->out_bytes = yb;
  return 0;
}

int methods_parse(int method, const gkcd_backend *be, args_ctx *a, gkcd_job *job,
                  size_t max_bytes) {
  job->method = method;
  int64_t deadline_ms = 0;
  int rc = args_int(a, "deadline_ms", 0, 1, 24 * 3600 * 1000, &deadline_ms);
  if (rc) return rc;
  job->deadline_ns = (uint64_t)deadline_ms * 1000000u; /* relative; rpc.c adds the start */
  switch (method) {
    case PROTO_M_SGEMM: return parse_sgemm(be, a, job, max_bytes);
    case PROTO_M_REDUCE: return parse_reduce(be, a, job, max_bytes);
    case PROTO_M_SPMV: return parse_spmv(be, a, job, max_bytes);
  }
  snprintf(a->msg, a->msglen, "method '%s' is not a compute method", proto_method_name(method));
  return GKC_EINTERNAL;
}

void methods_pack_result(msgpack_packer *pk, const gkcd_job *job, double server_us) {
  int has_out = job->method != PROTO_M_REDUCE;
  int copies = job->h2d_us > 0 || job->d2h_us > 0;
  msgpack_pack_map(pk, (has_out ? 4 : 5) + (copies ? 2 : 0));
  proto_pack_cstr(pk, "algo");
  proto_pack_cstr(pk, job->algo_name ? job->algo_name : "?");
  proto_pack_cstr(pk, "kernel_us");
  msgpack_pack_double(pk, job->kernel_us);
  proto_pack_cstr(pk, "server_us");
  msgpack_pack_double(pk, server_us);
  if (copies) {
    proto_pack_cstr(pk, "h2d_us");
    msgpack_pack_double(pk, job->h2d_us);
    proto_pack_cstr(pk, "d2h_us");
    msgpack_pack_double(pk, job->d2h_us);
  }
  if (!has_out) {
    proto_pack_cstr(pk, "value");
    msgpack_pack_double(pk, job->value);
    proto_pack_cstr(pk, "n");
    msgpack_pack_int64(pk, job->in.reduce.n);
    return;
  }
  proto_pack_cstr(pk, job->method == PROTO_M_SGEMM ? "c" : "y");
  msgpack_pack_bin(pk, job->out_bytes);
}
