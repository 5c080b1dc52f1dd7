/* method_spmv.c: the `spmv` row (PROTOCOL.md, "spmv"): y = alpha A x +
 * beta y for a CSR matrix sent by value or kept resident (csr_upload), in
 * float32 or float64 (x, y and the result share one dtype; a resident
 * matrix's values keep their own, a matrix sent by value shares x's); on a
 * matrix partitioned over several devices it runs on all of them (part.h),
 * in float32 only for now. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "methods.h"
#include "proto_dtypes.h"
#include "proto_rpc.h"
#include "part.h"
#include "res_object.h"
#include "validate.h"

/* spmv by value (rows, cols, row_ptr, col_idx, values) or on a resident
 * matrix (matrix). */
static int parse_spmv(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"rows", "cols", "row_ptr", "col_idx", "values", "matrix", "x",
                                     "y", "alpha", "beta", "algo", "deadline_ms", "out", "device",
                                     "dtype", NULL};
  static const char *const byval_arrays[] = {"values", "x", "y", NULL};
  static const char *const res_arrays[] = {"x", "y", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = methods_device(a, job)) ||
      (rc = refs_floats(r, args_present(a, "matrix") ? res_arrays : byval_arrays, 0)))
    return rc;
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
      if (r->fdt != DT_F32) {
        snprintf(a->msg, a->msglen, "argument '%s' is %s, but spmv on a partitioned matrix"
                 " (matrix %" PRIu32 ") runs in float32 only for now",
                 r->fdt_from ? r->fdt_from : "x", refs_type_name(r->fdt), m->id);
        return GKC_EINVALID_ARGUMENT;
      }
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
      s->row_ptr = (gkcd_span){m->ptr, rp, SPAN_RES, 0, 0, DT_I32};
      s->col_idx = (gkcd_span){(char *)m->ptr + rp, nz, SPAN_RES, 0, 0, DT_I32};
      s->values = (gkcd_span){(char *)m->ptr + res_values_offset(m->rows, m->nnz, m->dtype),
                              (size_t)m->nnz * proto_dtype_size(m->dtype),
                              SPAN_RES, 0, 0, m->dtype};
      s->plan = m->plan_off ? (const char *)m->ptr + m->plan_off : NULL;
    }
    s->validated = 1;
  } else {
    int64_t rows, cols;
    if ((rc = args_int(a, "rows", 1, 1, INT32_MAX - 1, &rows)) ||
        (rc = args_int(a, "cols", 1, 1, INT32_MAX, &cols)))
      return rc;
    s->rows = (int32_t)rows, s->cols = (int32_t)cols;
    if ((rc = methods_csr_arrays(r, s->rows, &s->row_ptr, &s->col_idx, &s->values, &s->nnz)))
      return rc;
  }
  int dt = r->fdt; /* x's, y's and the result's */
  s->alpha = 1.0f, s->beta = 0.0f, s->alpha64 = 1.0, s->beta64 = 0.0;
  if ((rc = methods_scalar(a, "alpha", dt, &s->alpha, &s->alpha64)) ||
      (rc = methods_scalar(a, "beta", dt, &s->beta, &s->beta64)) ||
      (rc = methods_algo(a, r->devs->dev[0].be, PROTO_M_SPMV, &job->algo)))
    return rc;
  uint64_t yb = refs_bytes((uint64_t)s->rows, 1, dt);
  if (yb > max) {
    char what[64];
    snprintf(what, sizeof what, "the result y (rows %s)", proto_dtype_name(dt));
    return methods_too_large(a, what, yb, max);
  }
  char what[96];
  snprintf(what, sizeof what, "cols = %" PRId32, s->cols);
  if ((rc = refs_array(r, "x", 1, refs_bytes((uint64_t)s->cols, 1, dt), 0, REFS_FLOAT, what, &s->x)))
    return rc;
  snprintf(what, sizeof what, "rows = %" PRId32, s->rows);
  if (s->beta != 0.0f && !args_present(a, "y")) {
    snprintf(a->msg, a->msglen, "missing argument 'y' (required when beta != 0)");
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = refs_array(r, "y", 0, yb, 0, REFS_FLOAT, what, &s->y))) return rc;
  if (s->beta == 0.0f) s->y.ptr = NULL;
  job->out_bytes = yb;
  return refs_out(r, "y", yb, dt);
}

static void work(const gkcd_job *job, method_work *w) {
  const __typeof__(job->in.spmv) *s = &job->in.spmv;
  w->flops = 2.0 * (double)s->nnz;
  double vs = (double)proto_dtype_size(s->values.dtype), es = (double)proto_dtype_size(s->x.dtype);
  w->bytes = (4.0 + vs) * (double)s->nnz + 4.0 * s->rows + es * s->rows * (s->y.ptr ? 2 : 1) +
             es * s->cols;
  w->xfer = methods_host_bytes(&s->row_ptr) + methods_host_bytes(&s->col_idx) +
            methods_host_bytes(&s->values) + methods_host_bytes(&s->x) + methods_host_bytes(&s->y);
}

static int inputs(gkcd_job *job, gkcd_span *out[], int max) {
  (void)max;
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  out[0] = &s->row_ptr, out[1] = &s->col_idx, out[2] = &s->values, out[3] = &s->x, out[4] = &s->y;
  return 5;
}

/* The inputs, and the resident matrix's spmv plan past its arrays. */
static int operands(gkcd_job *job, const void **out[], int max) {
  (void)max;
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  out[0] = &s->row_ptr.ptr, out[1] = &s->col_idx.ptr, out[2] = &s->values.ptr;
  out[3] = &s->x.ptr, out[4] = &s->y.ptr, out[5] = &s->plan;
  return 6;
}

static void pack(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id) {
  methods_pack_array(pk, job, server_us, new_id, "y");
}

const gkcd_method method_row_SPMV = {
    .id = PROTO_M_SPMV, .where = METHOD_BACKEND, .makes = -1, .parse = parse_spmv, .work = work,
    .inputs = inputs, .operands = operands, .check = validate_spmv, .part_run = part_run_spmv, .pack = pack,
};
