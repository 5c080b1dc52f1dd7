/* method_resident.c: the rows of data that stays in gkcd (PROTOCOL.md,
 * "Data that stays"): `upload` makes a resident array, `download` reads one
 * back, `csr_upload` makes a resident matrix (on one device, a copy on
 * each, or partitioned by rows over several), `release` frees either. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "methods.h"
#include "proto_dtypes.h"
#include "proto_rpc.h"
#include "devices.h"
#include "part.h"
#include "res_object.h"
#include "resident.h"
#include "split.h"
#include "validate.h"

static int parse_upload(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"data", "dtype", "shared", "device", "replicate", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  const char *dt;
  size_t dlen;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = args_str(a, "dtype", 1, &dt, &dlen)) ||
      (rc = methods_shared(a, job)) || (rc = methods_where(a, job)))
    return rc;
  job->instance = r->res->instance, job->shared_instance = r->res->shared_instance;
  if ((job->in.upload.dtype = proto_dtype_lookup(dt, dlen)) < 0) {
    char echo[40];
    snprintf(a->msg, a->msglen, "argument 'dtype': '%s' is not \"f32\", \"f64\" or \"i32\"",
             proto_echo(echo, sizeof echo, dt, dlen, 32));
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
  if (h->bytes > max) return methods_too_large(r->a, "the downloaded array", h->bytes, max);
  job->in.upload.data = (gkcd_span){h->ptr, h->bytes, SPAN_RES, 0, 0, h->dtype};
  job->in.upload.dtype = h->dtype;
  job->out_bytes = h->bytes;
  if ((rc = refs_out(r, "data", h->bytes, h->dtype))) return rc;
  if (job->out_kind == OUT_RES || job->out_kind == OUT_RES_NEW) {
    snprintf(r->a->msg, r->a->msglen, "argument 'out': download writes to a region, not a handle");
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

static int parse_csr_upload(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"rows", "cols", "row_ptr", "col_idx", "values", "shared",
                                     "device", "replicate", "devices", "dtype", NULL};
  static const char *const arrays[] = {"values", NULL}; /* `dtype`: the values' */
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  __typeof__(job->in.csr) *s = &job->in.csr;
  int64_t rows, cols;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = args_int(a, "rows", 1, 1, INT32_MAX - 1, &rows)) ||
      (rc = args_int(a, "cols", 1, 1, INT32_MAX, &cols)) || (rc = methods_shared(a, job)) ||
      (rc = methods_where(a, job)))
    return rc;
  job->instance = r->res->instance, job->shared_instance = r->res->shared_instance;
  s->rows = (int32_t)rows, s->cols = (int32_t)cols;
  if ((rc = parse_devices(r, s->rows)) || (rc = refs_floats(r, arrays, 0))) return rc;
  if (job->gang_mask && r->fdt != DT_F32) {
    snprintf(a->msg, a->msglen, "argument '%s' is %s, but a partitioned matrix ('devices')"
             " holds float32 values only for now", r->fdt_from ? r->fdt_from : "values",
             refs_type_name(r->fdt));
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = methods_csr_arrays(r, s->rows, &s->row_ptr, &s->col_idx, &s->values, &s->nnz)))
    return rc;
  job->out_bytes = res_values_offset(s->rows, s->nnz, s->values.dtype) + s->values.bytes;
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

static void work_copy(const gkcd_job *job, method_work *w) {
  w->bytes = w->xfer = (double)job->in.upload.data.bytes;
}

static void work_csr(const gkcd_job *job, method_work *w) {
  w->bytes = w->xfer = (double)(job->in.csr.row_ptr.bytes + job->in.csr.col_idx.bytes +
                                job->in.csr.values.bytes);
}

static int inputs_data(gkcd_job *job, gkcd_span *out[], int max) {
  (void)max;
  out[0] = &job->in.upload.data;
  return 1;
}

static int inputs_csr(gkcd_job *job, gkcd_span *out[], int max) {
  (void)max;
  out[0] = &job->in.csr.row_ptr, out[1] = &job->in.csr.col_idx, out[2] = &job->in.csr.values;
  return 3;
}

/* The new object's bytes come from the host: nothing resident to move. */
static int no_operands(gkcd_job *job, const void **out[], int max) {
  (void)job, (void)out, (void)max;
  return 0;
}

/* The reply of an object's creation names the instance that made it and
 * the one whose shared objects it joins (two keys), so that a client can
 * tell after reconnecting whether it survived (PROTOCOL.md, "Instances"). */
static void pack_instances(msgpack_packer *pk, const gkcd_job *job) {
  char hex[17];
  res_instance_hex(job->instance, hex);
  proto_pack_cstr(pk, "instance"), proto_pack_cstr(pk, hex);
  res_instance_hex(job->shared_instance, hex);
  proto_pack_cstr(pk, "shared_instance"), proto_pack_cstr(pk, hex);
}

static void pack_upload(msgpack_packer *pk, const gkcd_job *job, double server_us,
                        uint32_t new_id) {
  (void)server_us;
  msgpack_pack_map(pk, 5);
  pack_instances(pk, job);
  proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, new_id);
  proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, job->out_bytes);
  methods_pack_device(pk, job);
}

static void pack_download(msgpack_packer *pk, const gkcd_job *job, double server_us,
                          uint32_t new_id) {
  (void)server_us, (void)new_id;
  msgpack_pack_map(pk, 2);
  proto_pack_cstr(pk, "dtype"), proto_pack_cstr(pk, proto_dtype_wire(job->in.upload.dtype));
  methods_pack_out(pk, job, "data", 0); /* last: a bin body may follow */
}

static void pack_csr(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id) {
  (void)server_us;
  msgpack_pack_map(pk, 8 + (job->part != NULL));
  if (job->part) part_pack(pk, job->part);
  pack_instances(pk, job);
  methods_pack_device(pk, job);
  proto_pack_cstr(pk, "matrix"), msgpack_pack_uint32(pk, new_id);
  proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, job->in.csr.rows);
  proto_pack_cstr(pk, "cols"), msgpack_pack_int32(pk, job->in.csr.cols);
  proto_pack_cstr(pk, "nnz"), msgpack_pack_int64(pk, job->in.csr.nnz);
  proto_pack_cstr(pk, "algo"), proto_pack_cstr(pk, job->algo_name ? job->algo_name : "?");
}

static int answer_release(const method_env *env, const msgpack_object *params, msgpack_packer *pk,
                          void **body, size_t *body_len, char *msg, size_t msglen) {
  (void)body, (void)body_len;
  return methods_release(env, PROTO_M_RELEASE, params, pk, msg, msglen);
}

const gkcd_method method_row_UPLOAD = {
    .id = PROTO_M_UPLOAD, .where = METHOD_BACKEND, .makes = RES_ARRAY, .parse = parse_upload,
    .work = work_copy, .inputs = inputs_data, .operands = no_operands, .split = split_rule_copies,
    .pack = pack_upload,
};

const gkcd_method method_row_DOWNLOAD = {
    .id = PROTO_M_DOWNLOAD, .where = METHOD_BACKEND, .makes = -1, .parse = parse_download,
    .work = work_copy, .inputs = inputs_data, .pack = pack_download,
};

const gkcd_method method_row_CSR_UPLOAD = {
    .id = PROTO_M_CSR_UPLOAD, .where = METHOD_BACKEND, .makes = RES_MATRIX,
    .parse = parse_csr_upload, .work = work_csr, .inputs = inputs_csr, .operands = no_operands,
    .check = validate_csr_upload, .split = split_rule_copies, .part_run = part_run_upload, .pack = pack_csr,
};

const gkcd_method method_row_RELEASE = {
    .id = PROTO_M_RELEASE, .where = METHOD_LOOP, .makes = -1, .answer = answer_release,
};
