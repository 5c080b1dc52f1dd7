/* methods.c: see methods.h. */
#include "methods.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "proto_methods.h"
#include "proto_rpc.h"
#include "devices.h"
#include "part.h"

/* How each method runs: on the loop, or as a job run by the backend or by
 * the daemon itself (shm_register maps and pins, which can take a while). */
static const char method_kind[PROTO_M_COUNT] = {
    [PROTO_M_PING] = 'L',        [PROTO_M_STATUS] = 'L',     [PROTO_M_SHM_RELEASE] = 'L',
    [PROTO_M_RELEASE] = 'L',     [PROTO_M_SGEMM] = 'B',      [PROTO_M_REDUCE] = 'B',
    [PROTO_M_SPMV] = 'B',        [PROTO_M_DOT] = 'B',        [PROTO_M_AXPBY] = 'B',
    [PROTO_M_UPLOAD] = 'B',      [PROTO_M_DOWNLOAD] = 'B',   [PROTO_M_CSR_UPLOAD] = 'B',
    [PROTO_M_SOLVE] = 'B',       [PROTO_M_BATCH] = 'B',      [PROTO_M_SHM_REGISTER] = 'D',
    [PROTO_M_METRICS] = 'L',
};

int methods_is_compute(int method) { return method_kind[method] != 'L'; }
int methods_is_backend(int method) { return method_kind[method] == 'B'; }

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
    for (const char *const *p = be->algos[method]; p && *p; p++) {
      strncat(list, ", ", sizeof list - strlen(list) - 1);
      strncat(list, *p, sizeof list - strlen(list) - 1);
    }
    char name[40];
    snprintf(a->msg, a->msglen, "argument 'algo': '%s' is not a %s algo of the %s backend"
             " (one of: %s)", proto_echo(name, sizeof name, s, len, 32), proto_method_name(method),
             be->name, list);
    return GKC_EINVALID_ARGUMENT;
  }
  *algo = idx;
  return 0;
}

/* CSR indices are checked on the host before anything reads them, so they
 * must come by value or in a region, not as resident arrays. */
static int host_indices(args_ctx *a, const gkcd_span *row_ptr, const gkcd_span *col_idx) {
  if (row_ptr->where == SPAN_RES || col_idx->where == SPAN_RES) {
    snprintf(a->msg, a->msglen, "arguments 'row_ptr' and 'col_idx' must be sent (bin or region),"
             " not handles: keep a matrix resident with csr_upload");
    return GKC_EINVALID_ARGUMENT;
  }
  return 0;
}

static int parse_shared(args_ctx *a, gkcd_job *job) { return args_bool(a, "shared", 0, &job->shared); }

/* The optional `device`: run (or keep the object) there.  Whether it is
 * still alive is the scheduler's check (device_lost). */
static int parse_device(args_ctx *a, gkcd_job *job) {
  if (!args_present(a, "device")) return 0;
  int n = devices_count();
  int64_t d;
  int rc = args_int(a, "device", 0, INT64_MIN, INT64_MAX, &d);
  if (rc) return rc;
  if (d < 0 || d >= n) {
    snprintf(a->msg, a->msglen, "argument 'device': %" PRId64 " is not a device of this gkcd,"
             " which has %d (0 to %d)", d, n, n - 1);
    return GKC_EINVALID_ARGUMENT;
  }
  job->pin_device = (int)d;
  return 0;
}

/* upload, csr_upload: `device`, or `replicate` (a copy on every device). */
static int parse_where(args_ctx *a, gkcd_job *job) {
  int rc;
  if ((rc = parse_device(a, job)) || (rc = args_bool(a, "replicate", 0, &job->replicate))) return rc;
  if (job->replicate && job->pin_device >= 0) {
    snprintf(a->msg, a->msglen, "arguments 'device' and 'replicate' cannot be given together:"
             " a replicated object lives on every device");
    return GKC_EINVALID_ARGUMENT;
  }
  return 0;
}

/* csr_upload's `devices`: "all" (every live device) or a list of distinct
 * device indices; the matrix is partitioned by rows over them (part.h).
 * Whether the listed ones still serve is the scheduler's check. */
static int parse_devices(refs_ctx *r, int32_t rows) {
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  const msgpack_object *o = proto_map_get(a->params, "devices");
  if (!o) return 0;
  int n = devices_count();
  uint64_t mask = 0;
  if (o->type == MSGPACK_OBJECT_STR && o->via.str.size == 3 && !memcmp(o->via.str.ptr, "all", 3)) {
    mask = devices_live(r->devs);
  } else if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size > 0) {
    for (uint32_t i = 0; i < o->via.array.size; i++) {
      const msgpack_object *e = &o->via.array.ptr[i];
      int64_t d = e->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (e->via.u64 > INT64_MAX ? -1 : (int64_t)e->via.u64)
                  : e->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? e->via.i64 : INT64_MIN;
      if (d == INT64_MIN) {
        snprintf(a->msg, a->msglen, "argument 'devices': element %u is not an integer", i);
        return GKC_EINVALID_ARGUMENT;
      }
      if (d < 0 || d >= n) {
        snprintf(a->msg, a->msglen, "argument 'devices': %" PRId64 " is not a device of this"
                 " gkcd, which has %d (0 to %d)", d, n, n - 1);
        return GKC_EINVALID_ARGUMENT;
      }
      if (mask & (1ull << d)) {
        snprintf(a->msg, a->msglen, "argument 'devices': device %" PRId64 " is listed twice", d);
        return GKC_EINVALID_ARGUMENT;
      }
      mask |= 1ull << d;
    }
  } else {
    snprintf(a->msg, a->msglen, "argument 'devices' must be \"all\" or a non-empty array of"
             " device indices");
    return GKC_EINVALID_ARGUMENT;
  }
  if (job->pin_device >= 0 || job->replicate) {
    snprintf(a->msg, a->msglen, "argument 'devices' cannot be given with '%s': a partitioned"
             " matrix has one row block on each of its devices",
             job->replicate ? "replicate" : "device");
    return GKC_EINVALID_ARGUMENT;
  }
  int k = __builtin_popcountll(mask);
  if (!mask) {
    snprintf(a->msg, a->msglen, "argument 'devices': no device is left serving");
    return GKC_EDEVICE_LOST;
  }
  for (int d = 0; d < n; d++)
    if ((mask & (1ull << d)) && !devices_backend(d)->part) {
      snprintf(a->msg, a->msglen, "argument 'devices': the %s backend of device %d does not"
               " support partitioned matrices yet", devices_backend(d)->name, d);
      return GKC_EINVALID_ARGUMENT;
    }
  if (rows < k) {
    snprintf(a->msg, a->msglen, "argument 'devices': a matrix of %" PRId32 " rows cannot be cut"
             " into %d row blocks, one per device", rows, k);
    return GKC_EINVALID_ARGUMENT;
  }
  job->gang_mask = mask;
  return 0;
}

static int parse_sgemm(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"m", "n", "k", "a", "b", "c", "alpha", "beta", "trans_a",
                                     "trans_b", "algo", "precision", "deadline_ms", "out",
                                     "device", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int64_t m, n, k;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = parse_device(a, job)) ||
      (rc = args_int(a, "m", 1, 1, INT32_MAX, &m)) ||
      (rc = args_int(a, "n", 1, 1, INT32_MAX, &n)) ||
      (rc = args_int(a, "k", 1, 1, INT32_MAX, &k)))
    return rc;
  __typeof__(job->in.sgemm) *s = &job->in.sgemm;
  s->m = (int32_t)m, s->n = (int32_t)n, s->k = (int32_t)k;
  s->alpha = 1.0f, s->beta = 0.0f;
  if ((rc = args_float(a, "alpha", 0, &s->alpha)) || (rc = args_float(a, "beta", 0, &s->beta)) ||
      (rc = args_bool(a, "trans_a", 0, &s->trans_a)) ||
      (rc = args_bool(a, "trans_b", 0, &s->trans_b)) ||
      (rc = parse_algo(a, r->devs->dev[0].be, PROTO_M_SGEMM, &job->algo)))
    return rc;
  const char *prec = "fp32";
  size_t plen = 4;
  if ((rc = args_str(a, "precision", 0, &prec, &plen))) return rc;
  if (plen == 4 && !memcmp(prec, "tf32", 4)) {
    s->tf32 = 1;
  } else if (!(plen == 4 && !memcmp(prec, "fp32", 4))) {
    char name[40];
    snprintf(a->msg, a->msglen, "argument 'precision': '%s' is not fp32 or tf32",
             proto_echo(name, sizeof name, prec, plen, 32));
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
  snprintf(what, sizeof what, "m*k = %" PRId64 "*%" PRId64, m, k);
  if ((rc = refs_array(r, "a", 1, ab, 0, DT_F32, what, &s->a))) return rc;
  snprintf(what, sizeof what, "k*n = %" PRId64 "*%" PRId64, k, n);
  if ((rc = refs_array(r, "b", 1, bb, 0, DT_F32, what, &s->b))) return rc;
  snprintf(what, sizeof what, "m*n = %" PRId64 "*%" PRId64, m, n);
  if (s->beta != 0.0f && !args_present(a, "c")) {
    snprintf(a->msg, a->msglen, "missing argument 'c' (required when beta != 0)");
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = refs_array(r, "c", 0, cb, 0, DT_F32, what, &s->c))) return rc;
  if (s->beta == 0.0f) s->c.ptr = NULL; /* beta == 0: C is not read */
  job->out_bytes = cb;
  return refs_out(r, "c", cb);
}

static int parse_reduce(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"x", "op", "algo", "deadline_ms", "device", NULL};
  static const char *const ops[] = {"sum", "min", "max"}; /* indexed by gkc_reduce_op */
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = parse_device(a, job)) ||
      (rc = parse_algo(a, r->devs->dev[0].be, PROTO_M_REDUCE, &job->algo)))
    return rc;
  const char *op = "sum";
  size_t oplen = 3;
  if ((rc = args_str(a, "op", 0, &op, &oplen))) return rc;
  job->in.reduce.op = -1;
  for (int i = 0; i < 3; i++)
    if (strlen(ops[i]) == oplen && memcmp(ops[i], op, oplen) == 0) job->in.reduce.op = i;
  if (job->in.reduce.op < 0) {
    char name[40];
    snprintf(a->msg, a->msglen, "argument 'op': '%s' is not one of sum, min, max",
             proto_echo(name, sizeof name, op, oplen, 32));
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = refs_array(r, "x", 1, REFS_ANY_LEN, 0, DT_F32, "reduce", &job->in.reduce.x)))
    return rc;
  job->in.reduce.n = (int64_t)(job->in.reduce.x.bytes / 4);
  (void)max;
  return 0;
}

/* The three arrays of a CSR matrix given by value (bin or region): row_ptr
 * of rows+1 int32, col_idx of nnz int32, values of as many float32, where
 * nnz = row_ptr[rows]; sets *nnz.  Only that one entry is read here, to
 * say which array has the wrong length; the contents are checked on a
 * worker (validate.c), on a private copy of what a region holds. */
static int parse_csr_arrays(refs_ctx *r, int32_t rows, gkcd_span *row_ptr, gkcd_span *col_idx,
                            gkcd_span *values, int64_t *nnz) {
  args_ctx *a = r->a;
  char what[96];
  int rc;
  snprintf(what, sizeof what, "rows+1 = %" PRId64, (int64_t)rows + 1);
  if ((rc = refs_array(r, "row_ptr", 1, f32_bytes((uint64_t)rows + 1, 1), 0, DT_I32, what,
                       row_ptr)) ||
      (rc = refs_array(r, "col_idx", 1, REFS_ANY_LEN, 1, DT_I32, "nnz", col_idx)) ||
      (rc = refs_array(r, "values", 1, REFS_ANY_LEN, 1, DT_F32, "nnz", values)) ||
      (rc = host_indices(a, row_ptr, col_idx)))
    return rc;
  int32_t last;
  memcpy(&last, (const char *)row_ptr->ptr + 4 * (size_t)rows, 4);
  uint64_t nci = col_idx->bytes / 4, nv = values->bytes / 4;
  if (last < 0) {
    snprintf(a->msg, a->msglen, "argument 'row_ptr': row_ptr[rows] = %" PRId32 " nonzeros is"
             " negative", last);
    return GKC_EINVALID_ARGUMENT;
  }
  /* col_idx and values agree with each other: row_ptr is the odd one out. */
  if (nci == nv && nci != (uint64_t)last) {
    snprintf(a->msg, a->msglen, "argument 'row_ptr': row_ptr[rows] = %" PRId32 " nonzeros, but"
             " col_idx and values hold %" PRIu64 " each", last, nci);
    return GKC_EINVALID_ARGUMENT;
  }
  snprintf(what, sizeof what, "row_ptr[rows] = %" PRId32 " nonzeros", last);
  if ((rc = refs_check_len(r, "col_idx", col_idx->bytes, 4 * (uint64_t)last, DT_I32, what)) ||
      (rc = refs_check_len(r, "values", values->bytes, 4 * (uint64_t)last, DT_F32, what)))
    return rc;
  *nnz = last;
  return 0;
}

/* spmv by value (rows, cols, row_ptr, col_idx, values) or on a resident
 * matrix (matrix). */
static int parse_spmv(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"rows", "cols", "row_ptr", "col_idx", "values", "matrix", "x",
                                     "y", "alpha", "beta", "algo", "deadline_ms", "out", "device",
                                     NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = parse_device(a, job))) return rc;
  if (args_present(a, "matrix")) {
    static const char *const byval[] = {"rows", "cols", "row_ptr", "col_idx", "values"};
    for (int i = 0; i < 5; i++)
      if (args_present(a, byval[i])) {
        snprintf(a->msg, a->msglen, "argument '%s' cannot be given with 'matrix'", byval[i]);
        return GKC_EINVALID_ARGUMENT;
      }
    gkcd_res *m;
    if ((rc = refs_object(r, "matrix", RES_MATRIX, &m))) return rc;
    s->rows = m->rows, s->cols = m->cols, s->nnz = m->nnz, s->max_row = m->max_row;
    if (m->part) {
      if (job->pin_device >= 0) {
        snprintf(a->msg, a->msglen, "argument 'device': matrix %" PRIu32 " is partitioned over"
                 " several devices, and spmv on it runs on all of them", m->id);
        return GKC_EINVALID_ARGUMENT;
      }
      job->part = m->part; /* its blocks are on its devices: nothing here reads them */
      job->gang_mask = m->part->mask;
    }
    if (!m->part) {
      size_t rp = ((size_t)m->rows + 1) * 4, nz = (size_t)m->nnz * 4;
      s->row_ptr = (gkcd_span){m->ptr, rp, SPAN_RES, 0, 0};
      s->col_idx = (gkcd_span){(char *)m->ptr + rp, nz, SPAN_RES, 0, 0};
      s->values = (gkcd_span){(char *)m->ptr + rp + nz, nz, SPAN_RES, 0, 0};
      s->plan = m->plan_off ? (const char *)m->ptr + m->plan_off : NULL;
    }
    s->validated = 1;
  } else {
    int64_t rows, cols;
    if ((rc = args_int(a, "rows", 1, 1, INT32_MAX - 1, &rows)) ||
        (rc = args_int(a, "cols", 1, 1, INT32_MAX, &cols)))
      return rc;
    s->rows = (int32_t)rows, s->cols = (int32_t)cols;
    if ((rc = parse_csr_arrays(r, s->rows, &s->row_ptr, &s->col_idx, &s->values, &s->nnz)))
      return rc;
  }
  s->alpha = 1.0f, s->beta = 0.0f;
  if ((rc = args_float(a, "alpha", 0, &s->alpha)) || (rc = args_float(a, "beta", 0, &s->beta)) ||
      (rc = parse_algo(a, r->devs->dev[0].be, PROTO_M_SPMV, &job->algo)))
    return rc;
  uint64_t yb = f32_bytes((uint64_t)s->rows, 1);
  if (yb > max) return too_large(a, "the result y (rows float32)", yb, max);
  char what[96];
  snprintf(what, sizeof what, "cols = %" PRId32, s->cols);
  if ((rc = refs_array(r, "x", 1, f32_bytes((uint64_t)s->cols, 1), 0, DT_F32, what, &s->x)))
    return rc;
  snprintf(what, sizeof what, "rows = %" PRId32, s->rows);
  if (s->beta != 0.0f && !args_present(a, "y")) {
    snprintf(a->msg, a->msglen, "missing argument 'y' (required when beta != 0)");
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = refs_array(r, "y", 0, yb, 0, DT_F32, what, &s->y))) return rc;
  if (s->beta == 0.0f) s->y.ptr = NULL;
  job->out_bytes = yb;
  return refs_out(r, "y", yb);
}

/* dot {x, y} and axpby {x, y, alpha, beta, out}. */
static int parse_vec(refs_ctx *r, size_t max) {
  static const char *const dot_keys[] = {"x", "y", "algo", "deadline_ms", "device", NULL};
  static const char *const axpby_keys[] = {"x", "y", "alpha", "beta", "algo", "deadline_ms",
                                           "out", "device", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int is_dot = job->method == PROTO_M_DOT;
  int rc;
  if ((rc = args_known(a, is_dot ? dot_keys : axpby_keys)) || (rc = parse_device(a, job)) ||
      (rc = parse_algo(a, r->devs->dev[0].be, job->method, &job->algo)) ||
      (rc = refs_array(r, "x", 1, REFS_ANY_LEN, 0, DT_F32, proto_method_name(job->method), &job->in.vec.x)))
    return rc;
  char what[96];
  snprintf(what, sizeof what, "as many as x");
  if ((rc = refs_array(r, "y", 1, job->in.vec.x.bytes, 0, DT_F32, what, &job->in.vec.y))) return rc;
  job->in.vec.n = (int64_t)(job->in.vec.x.bytes / 4);
  if (is_dot) return 0;
  job->in.vec.alpha = 1.0f, job->in.vec.beta = 1.0f;
  if ((rc = args_float(a, "alpha", 0, &job->in.vec.alpha)) ||
      (rc = args_float(a, "beta", 0, &job->in.vec.beta)))
    return rc;
  if (job->in.vec.x.bytes > max) return too_large(a, "the result y", job->in.vec.x.bytes, max);
  job->out_bytes = job->in.vec.x.bytes;
  return refs_out(r, "y", job->out_bytes);
}

static int parse_upload(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"data", "dtype", "shared", "device", "replicate", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  const char *dt;
  size_t dlen;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = args_str(a, "dtype", 1, &dt, &dlen)) ||
      (rc = parse_shared(a, job)) || (rc = parse_where(a, job)))
    return rc;
  if (dlen == 3 && !memcmp(dt, "f32", 3)) {
    job->in.upload.dtype = DT_F32;
  } else if (dlen == 3 && !memcmp(dt, "i32", 3)) {
    job->in.upload.dtype = DT_I32;
  } else {
    snprintf(a->msg, a->msglen, "argument 'dtype' must be \"f32\" or \"i32\"");
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = refs_array(r, "data", 1, REFS_ANY_LEN, 0, job->in.upload.dtype, "upload",
                       &job->in.upload.data)))
    return rc;
  job->out_bytes = job->in.upload.data.bytes;
  job->out_kind = OUT_RES_NEW;
  (void)max;
  return 0;
}

static int parse_download(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"handle", "out", NULL};
  gkcd_job *job = r->job;
  gkcd_res *h;
  int rc;
  if ((rc = args_known(r->a, keys)) || (rc = refs_object(r, "handle", RES_ARRAY, &h))) return rc;
  if (h->bytes > max) return too_large(r->a, "the downloaded array", h->bytes, max);
  job->in.upload.data = (gkcd_span){h->ptr, h->bytes, SPAN_RES, 0, 0};
  job->in.upload.dtype = h->dtype;
  job->out_bytes = h->bytes;
  if ((rc = refs_out(r, "data", h->bytes))) return rc;
  if (job->out_kind == OUT_RES || job->out_kind == OUT_RES_NEW) {
    snprintf(r->a->msg, r->a->msglen, "argument 'out': download writes to a region, not a handle");
    return GKC_EINVALID_ARGUMENT;
  }
  return 0;
}

static int parse_csr_upload(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"rows", "cols", "row_ptr", "col_idx", "values", "shared",
                                     "device", "replicate", "devices", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  __typeof__(job->in.csr) *s = &job->in.csr;
  int64_t rows, cols;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = args_int(a, "rows", 1, 1, INT32_MAX - 1, &rows)) ||
      (rc = args_int(a, "cols", 1, 1, INT32_MAX, &cols)) || (rc = parse_shared(a, job)) ||
      (rc = parse_where(a, job)))
    return rc;
  s->rows = (int32_t)rows, s->cols = (int32_t)cols;
  if ((rc = parse_devices(r, s->rows)) ||
      (rc = parse_csr_arrays(r, s->rows, &s->row_ptr, &s->col_idx, &s->values, &s->nnz)))
    return rc;
  job->out_bytes = s->row_ptr.bytes + 2 * s->col_idx.bytes;
  if (job->gang_mask) {
    /* Partitioned (part.c): at most, beside the arrays, a row_ptr entry and
     * 8 bytes of padding per block, a send list (<= nnz indices) and, when
     * square, the inverse diagonal in float64.  All of it fits size_t:
     * the arrays came in one request. */
    size_t k = (size_t)__builtin_popcountll(job->gang_mask);
    job->out_bytes += 12 * k + s->col_idx.bytes + (s->rows == s->cols ? 8 * (size_t)s->rows : 0);
  }
  job->out_kind = OUT_RES_NEW;
  (void)max;
  return 0;
}

static int parse_shm_register(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"bytes", NULL};
  /* rpc.c took the connection's oldest descriptor for this request; the job
   * owns it before anything is checked, so that a refused request still
   * consumes its own (job_free closes it): the next shm_register must never
   * map a file that was sent for an earlier one. */
  r->job->reg_fd = r->fd;
  r->fd = -1;
  int64_t bytes;
  int rc;
  if ((rc = args_known(r->a, keys)) || (rc = args_int(r->a, "bytes", 1, 1, (int64_t)max, &bytes)))
    return rc;
  if ((rc = res_room(r->res, r->asker, RES_REGION, r->a->msg, r->a->msglen))) return rc;
  if (r->job->reg_fd < 0) {
    snprintf(r->a->msg, r->a->msglen, "no file descriptor came with this request (send the memfd"
             " as SCM_RIGHTS ancillary data with its bytes)");
    return GKC_EINVALID_ARGUMENT;
  }
  r->job->out_bytes = (size_t)bytes;
  return 0;
}

int methods_parse(int method, refs_ctx *r, size_t max_bytes) {
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  job->method = method;
  job->pin_device = -1;
  int64_t deadline_ms = 0;
  int rc = args_int(a, "deadline_ms", 0, 1, 24 * 3600 * 1000, &deadline_ms);
  if (rc) return rc;
  job->deadline_ns = (uint64_t)deadline_ms * 1000000u; /* relative; rpc.c adds the start */
  switch (method) {
    case PROTO_M_SGEMM: return parse_sgemm(r, max_bytes);
    case PROTO_M_REDUCE: return parse_reduce(r, max_bytes);
    case PROTO_M_SPMV: return parse_spmv(r, max_bytes);
    case PROTO_M_DOT:
    case PROTO_M_AXPBY: return parse_vec(r, max_bytes);
    case PROTO_M_UPLOAD: return parse_upload(r, max_bytes);
    case PROTO_M_DOWNLOAD: return parse_download(r, max_bytes);
    case PROTO_M_CSR_UPLOAD: return parse_csr_upload(r, max_bytes);
    case PROTO_M_SHM_REGISTER: return parse_shm_register(r, max_bytes);
    case PROTO_M_SOLVE: return methods_parse_solve(r, max_bytes);
    case PROTO_M_BATCH: return methods_parse_batch(r, max_bytes);
  }
  snprintf(a->msg, a->msglen, "method '%s' is not run as a job", proto_method_name(method));
  return GKC_EINTERNAL;
}

/* How the array result is reported: bin header (the body follows), or a
 * reference to where it was written. */
void methods_pack_out(msgpack_packer *pk, const gkcd_job *job, const char *name, uint32_t new_id) {
  proto_pack_cstr(pk, name);
  switch (job->out_kind) {
    case OUT_BIN: msgpack_pack_bin(pk, job->out_bytes); return;
    case OUT_HOST:
      msgpack_pack_map(pk, 3);
      proto_pack_cstr(pk, "region"), msgpack_pack_uint32(pk, job->out_res->id);
      proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, job->out_offset);
      break;
    default:
      msgpack_pack_map(pk, 2);
      proto_pack_cstr(pk, "handle");
      msgpack_pack_uint32(pk, job->out_kind == OUT_RES ? job->out_res->id : new_id);
  }
  proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, job->out_bytes);
}

int methods_timing_extra(const gkcd_job *job) {
  return (job->h2d_us > 0 || job->d2h_us > 0 ? 2 : 0) + (job->peer_bytes > 0 ? 2 : 0);
}

void methods_pack_device(msgpack_packer *pk, const gkcd_job *job) {
  if (!job->split_mask) {
    proto_pack_cstr(pk, "device");
    msgpack_pack_int(pk, job->device);
    return;
  }
  proto_pack_cstr(pk, "devices");
  msgpack_pack_array(pk, (size_t)__builtin_popcountll(job->split_mask));
  for (int d = 0; d < 64; d++)
    if (job->split_mask & (1ull << d)) msgpack_pack_int(pk, d);
}

void methods_pack_timing(msgpack_packer *pk, const gkcd_job *job, double server_us) {
  methods_pack_device(pk, job);
  proto_pack_cstr(pk, "algo");
  proto_pack_cstr(pk, job->algo_name ? job->algo_name : "?");
  proto_pack_cstr(pk, "kernel_us");
  msgpack_pack_double(pk, job->kernel_us);
  proto_pack_cstr(pk, "server_us");
  msgpack_pack_double(pk, server_us);
  /* server_us split: waiting (memory budget, a free worker), then the
   * worker's own time; the rest is handing the result back to the loop. */
  proto_pack_cstr(pk, "queue_us");
  msgpack_pack_double(pk, (double)(job->t_run_ns - job->t_start_ns) / 1e3);
  proto_pack_cstr(pk, "worker_us");
  msgpack_pack_double(pk, (double)(job->t_done_ns - job->t_run_ns) / 1e3);
  /* What the scheduler decided from: the lane and its prediction of worker_us. */
  proto_pack_cstr(pk, "lane");
  proto_pack_cstr(pk, job->lane == 1 ? "latency" : "bulk");
  proto_pack_cstr(pk, "predicted_us");
  msgpack_pack_double(pk, job->cost_us);
  if (job->peer_bytes > 0) { /* operands moved from other devices first (move.h) */
    proto_pack_cstr(pk, "peer_bytes");
    msgpack_pack_uint64(pk, (uint64_t)job->peer_bytes);
    proto_pack_cstr(pk, "peer_us");
    msgpack_pack_double(pk, job->peer_us);
  }
  if (job->h2d_us > 0 || job->d2h_us > 0) {
    proto_pack_cstr(pk, "h2d_us");
    msgpack_pack_double(pk, job->h2d_us);
    proto_pack_cstr(pk, "d2h_us");
    msgpack_pack_double(pk, job->d2h_us);
  }
}

void methods_pack_result(msgpack_packer *pk, const gkcd_job *job, double server_us,
                         uint32_t new_id) {
  int copies = methods_timing_extra(job);
  switch (job->method) {
    case PROTO_M_REDUCE:
    case PROTO_M_DOT:
      msgpack_pack_map(pk, METHODS_TIMING_KEYS + 2 + copies);
      methods_pack_timing(pk, job, server_us);
      proto_pack_cstr(pk, "value"), msgpack_pack_double(pk, job->value);
      proto_pack_cstr(pk, "n");
      msgpack_pack_int64(pk, job->method == PROTO_M_DOT ? job->in.vec.n : job->in.reduce.n);
      return;
    case PROTO_M_SGEMM:
    case PROTO_M_SPMV:
    case PROTO_M_AXPBY:
      msgpack_pack_map(pk, METHODS_TIMING_KEYS + 1 + copies);
      methods_pack_timing(pk, job, server_us);
      /* last, so that a bin body can follow the packed head directly */
      methods_pack_out(pk, job, job->method == PROTO_M_SGEMM ? "c" : "y", new_id);
      return;
    case PROTO_M_UPLOAD:
      msgpack_pack_map(pk, 3);
      proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, new_id);
      proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, job->out_bytes);
      methods_pack_device(pk, job);
      return;
    case PROTO_M_DOWNLOAD:
      msgpack_pack_map(pk, 1);
      methods_pack_out(pk, job, "data", 0);
      return;
    case PROTO_M_CSR_UPLOAD:
      msgpack_pack_map(pk, 6 + (job->part != NULL));
      if (job->part) part_pack(pk, job->part);
      methods_pack_device(pk, job);
      proto_pack_cstr(pk, "matrix"), msgpack_pack_uint32(pk, new_id);
      proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, job->in.csr.rows);
      proto_pack_cstr(pk, "cols"), msgpack_pack_int32(pk, job->in.csr.cols);
      proto_pack_cstr(pk, "nnz"), msgpack_pack_int64(pk, job->in.csr.nnz);
      proto_pack_cstr(pk, "algo"), proto_pack_cstr(pk, job->algo_name ? job->algo_name : "?");
      return;
    case PROTO_M_SOLVE: methods_pack_solve(pk, job, server_us, new_id); return;
    case PROTO_M_BATCH: methods_pack_batch(pk, job, server_us); return;
    case PROTO_M_SHM_REGISTER:
      msgpack_pack_map(pk, 2);
      proto_pack_cstr(pk, "region"), msgpack_pack_uint32(pk, new_id);
      proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, job->out_bytes);
      return;
  }
  msgpack_pack_map(pk, 0);
}
