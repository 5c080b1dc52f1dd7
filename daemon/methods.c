/* methods.c: see methods.h. */
#include "methods.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "devices.h"
#include "gkc_errors.h"
#include "proto_dtypes.h"
#include "proto_methods.h"
#include "proto_rpc.h"
#include "res_object.h"

int methods_too_large(args_ctx *a, const char *what, uint64_t bytes, size_t max) {
  snprintf(a->msg, a->msglen, "%s would take %" PRIu64 " bytes, over the limit of %zu"
           " (--max-request-bytes)", what, bytes, max);
  return GKC_ETOO_LARGE;
}

/* x*y elements of 4 bytes, or UINT64_MAX when that overflows (or does not
 * fit a size_t, so every later size computation is safe). */
uint64_t methods_f32_bytes(uint64_t x, uint64_t y) {
  uint64_t n;
  if (__builtin_mul_overflow(x, y, &n) || __builtin_mul_overflow(n, 4, &n) || n > SIZE_MAX)
    return UINT64_MAX;
  return n;
}

int methods_scalar(args_ctx *a, const char *key, int dtype, float *f, double *d) {
  int rc;
  if (dtype != DT_F64) {
    if ((rc = args_float(a, key, 0, f))) return rc;
    *d = *f;
    return 0;
  }
  if ((rc = args_double(a, key, 0, d))) return rc;
  /* Nothing that runs f64 reads it, but checks such as beta != 0 may:
   * keep its sign and whether it is zero (a bare cast out of range is UB). */
  *f = fabs(*d) <= FLT_MAX ? (float)*d : (float)copysign(FLT_MAX, *d);
  if (*f == 0.0f && *d != 0) *f = (float)copysign(FLT_MIN, *d);
  return 0;
}

int methods_algo(args_ctx *a, const gkcd_backend *be, int method, int *algo) {
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

int methods_shared(args_ctx *a, gkcd_job *job) { return args_bool(a, "shared", 0, &job->shared); }

/* The optional `device`: run (or keep the object) there.  Whether it is
 * still alive is the scheduler's check (device_lost). */
int methods_device(args_ctx *a, gkcd_job *job) {
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
int methods_where(args_ctx *a, gkcd_job *job) {
  int rc;
  if ((rc = methods_device(a, job)) || (rc = args_bool(a, "replicate", 0, &job->replicate))) return rc;
  if (job->replicate && job->pin_device >= 0) {
    snprintf(a->msg, a->msglen, "arguments 'device' and 'replicate' cannot be given together:"
             " a replicated object lives on every device");
    return GKC_EINVALID_ARGUMENT;
  }
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

/* The three arrays of a CSR matrix given by value (bin or region): row_ptr
 * of rows+1 int32, col_idx of nnz int32, values of as many floats of the
 * request's float dtype (refs_floats, settled before), where
 * nnz = row_ptr[rows]; sets *nnz.  Only that one entry is read here, to
 * say which array has the wrong length; the contents are checked on a
 * worker (validate.c), on a private copy of what a region holds. */
int methods_csr_arrays(refs_ctx *r, int32_t rows, gkcd_span *row_ptr, gkcd_span *col_idx,
                            gkcd_span *values, int64_t *nnz) {
  args_ctx *a = r->a;
  char what[96];
  int rc;
  snprintf(what, sizeof what, "rows+1 = %" PRId64, (int64_t)rows + 1);
  if ((rc = refs_array(r, "row_ptr", 1, methods_f32_bytes((uint64_t)rows + 1, 1), 0, DT_I32, what,
                       row_ptr)) ||
      (rc = refs_array(r, "col_idx", 1, REFS_ANY_LEN, 1, DT_I32, "nnz", col_idx)) ||
      (rc = refs_array(r, "values", 1, REFS_ANY_LEN, 1, REFS_FLOAT, "nnz", values)) ||
      (rc = host_indices(a, row_ptr, col_idx)))
    return rc;
  int32_t last;
  memcpy(&last, (const char *)row_ptr->ptr + 4 * (size_t)rows, 4);
  uint64_t nci = col_idx->bytes / 4, nv = values->bytes / proto_dtype_size(values->dtype);
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
      (rc = refs_check_len(r, "values", values->bytes,
                           proto_dtype_size(values->dtype) * (uint64_t)last, values->dtype, what)))
    return rc;
  *nnz = last;
  return 0;
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

void methods_pack_array(msgpack_packer *pk, const gkcd_job *job, double server_us,
                        uint32_t new_id, const char *name) {
  msgpack_pack_map(pk, METHODS_TIMING_KEYS + 1 + methods_timing_extra(job));
  methods_pack_timing(pk, job, server_us);
  methods_pack_out(pk, job, name, new_id); /* last, so that a bin body can follow the head */
}

void methods_pack_value(msgpack_packer *pk, const gkcd_job *job, double server_us, int64_t n) {
  msgpack_pack_map(pk, METHODS_TIMING_KEYS + 2 + methods_timing_extra(job));
  methods_pack_timing(pk, job, server_us);
  proto_pack_cstr(pk, "value"), msgpack_pack_double(pk, job->value);
  proto_pack_cstr(pk, "n"), msgpack_pack_int64(pk, n);
}

double methods_host_bytes(const gkcd_span *s) {
  return s->ptr && s->where == SPAN_HOST ? (double)s->bytes : 0;
}

int methods_deadline(args_ctx *a, gkcd_job *job) {
  int64_t deadline_ms = 0;
  int rc = args_int(a, "deadline_ms", 0, 1, 24 * 3600 * 1000, &deadline_ms);
  if (rc) return rc;
  job->deadline_ns = (uint64_t)deadline_ms * 1000000u; /* relative; rpc.c adds the start */
  return 0;
}

int methods_release(const method_env *env, int method, const msgpack_object *params,
                    msgpack_packer *pk, char *msg, size_t msglen) {
  int rc = res_release_request(env->res, env->asker, method, params, msg, msglen);
  if (!rc) msgpack_pack_map(pk, 0); /* an empty map: released */
  return rc;
}
