/* gkc_objects.c: resident arrays and matrices (gkc.h, "Regions and
 * resident data"): upload, download, csr_upload (placed, replicated or
 * partitioned) and release.  The compute calls that use them, and the
 * array references they share, are gkc_resident.c.
 */
#include <stdio.h>
#include <string.h>

#include "gkc_internal.h"
#include "gkc_reply.h"
#include "gkc_shm.h"
#include "proto_dtypes.h"
#include "proto_rpc.h"

/* --- resident arrays and matrices ------------------------------------------------------- */

static void pack_upload(msgpack_packer *pk, const gkc__req *r) {
  const gkc_upload_args *u = &r->a.upload;
  msgpack_pack_map(pk, 3 + gkc__where_keys(r->pinned, r->replicate));
  gkc__pack_where(pk, r->pinned, r->device, r->replicate);
  proto_pack_cstr(pk, "dtype"), proto_pack_cstr(pk, proto_dtype_wire(u->dtype));
  proto_pack_cstr(pk, "shared"), u->shared ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  gkc__pack_ref(pk, "data", &u->data);
}

static int take_handle(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  uint64_t v = 0;
  int rc = gkc__get_uint(c, r, "handle", UINT32_MAX, &v);
  res->id = (uint32_t)v;
  if (rc == 0) gkc__obj_made(c, GKC__OBJ_ARRAY, res->id, req->a.upload.shared != 0, r);
  gkc__take_info(r, &res->info);
  return rc;
}

int gkc__prep_upload(gkc_conn *c, gkc__req *r, const gkc_upload_args *a) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_ref(c, &a->data, "data", 0))) return rc;
  if (a->dtype != GKC_F32 && a->dtype != GKC_I32 && a->dtype != GKC_F64)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "dtype must be GKC_F32, GKC_F64 or GKC_I32");
  int mark = GKC_REF_DTYPE(a->data.kind);
  if (mark != GKC_F32 && mark != (int)a->dtype)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "data: marked %s, but dtype is %s",
                     proto_dtype_name(mark), proto_dtype_name(a->dtype));
  r->a.upload = *a;
  r->a.upload.data.kind = GKC_REF_KIND(a->data.kind);
  r->method = "upload", r->pack = pack_upload, r->take = take_handle;
  gkc_ref *const refs[] = {&r->a.upload.data};
  gkc__shm_stage(c, r, refs, 1, NULL, 0, NULL);
  return 0;
}

int gkc_upload(gkc_conn *c, gkc_ref data, gkc_dtype dtype, int shared, uint32_t *handle) {
  gkc_upload_args a = {data, dtype, shared};
  GKC__BLOCKING(gkc__prep_upload(c, &r, &a));
  rc = gkc__run_info(c, &r, rc, &res, NULL);
  if (rc == 0 && handle) *handle = res.id;
  return rc;
}

static void pack_download(msgpack_packer *pk, const gkc__req *r) {
  msgpack_pack_map(pk, 1 + gkc__out_keys(gkc__wire_out(r)));
  proto_pack_cstr(pk, "handle"), gkc__pack_id(pk, r->a.download.handle);
  gkc__pack_out(pk, "data", gkc__wire_out(r));
}

static int take_download(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)res;
  const msgpack_object *o = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "data") : NULL;
  /* The handle's size, from the bin or from the arena slice's reference. */
  const msgpack_object *n = o && o->type == MSGPACK_OBJECT_BIN ? NULL
                            : o && o->type == MSGPACK_OBJECT_MAP && req->out_staged
                                ? proto_map_get(o, "bytes") : NULL;
  uint64_t got = req->delivered ? req->delivered
                 : o && o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size
                 : n && n->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? n->via.u64 : req->out->bytes;
  if (req->out->kind == GKC_OUT_MEM && got != req->out->bytes)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "handle %u holds %llu bytes, not the %zu asked for",
                     req->a.download.handle, (unsigned long long)got, req->out->bytes);
  return gkc__take_out(c, r, "data", req);
}

int gkc__prep_download(gkc_conn *c, gkc__req *r, const gkc_download_args *a, gkc_out *out) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_out(c, out))) return rc;
  r->a.download = *a;
  r->method = "download", r->pack = pack_download, r->take = take_download, r->out = out,
  r->direct_key = "data";
  gkc__shm_stage(c, r, NULL, 0, out, 0, "data");
  return 0;
}

int gkc_download(gkc_conn *c, uint32_t handle, void *dst, size_t bytes) {
  gkc_download_args a = {handle};
  gkc_out out = gkc_out_mem(dst, bytes);
  GKC__BLOCKING(gkc__prep_download(c, &r, &a, &out));
  return gkc__run_info(c, &r, rc, &res, NULL);
}

int gkc_download_region(gkc_conn *c, uint32_t handle, const gkc_region *reg, uint64_t offset,
                        size_t *bytes) {
  gkc_download_args a = {handle};
  gkc_out out = gkc_out_region(reg, offset);
  GKC__BLOCKING(gkc__prep_download(c, &r, &a, &out));
  rc = gkc__run_info(c, &r, rc, &res, NULL);
  if (rc == 0 && bytes) *bytes = out.bytes;
  return rc;
}

static void pack_csr(msgpack_packer *pk, const gkc__req *r) {
  const gkc_csr *A = &r->a.csr_upload.A;
  msgpack_pack_map(pk, 6 + gkc__where_keys(r->pinned, r->replicate) + (r->partition != 0) +
                          gkc__dtype_keys(r));
  gkc__pack_where(pk, r->pinned, r->device, r->replicate);
  gkc__pack_dtype(pk, r); /* the values' */
  if (r->partition == GKC_DEVICES_ALL) {
    proto_pack_cstr(pk, "devices"), proto_pack_cstr(pk, "all");
  } else if (r->partition) {
    proto_pack_cstr(pk, "devices");
    msgpack_pack_array(pk, (size_t)__builtin_popcountll(r->partition));
    for (int d = 0; d < 64; d++)
      if (r->partition & (1ull << d)) msgpack_pack_int(pk, d);
  }
  proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, A->rows);
  proto_pack_cstr(pk, "cols"), msgpack_pack_int32(pk, A->cols);
  proto_pack_cstr(pk, "shared"),
      r->a.csr_upload.shared ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  gkc__pack_ref(pk, "row_ptr", &r->csr[0]);
  gkc__pack_ref(pk, "col_idx", &r->csr[1]);
  gkc__pack_ref(pk, "values", &r->csr[2]);
}

static int take_csr(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  gkc__take_info(r, &res->info);
  gkc__get_str(r, "algo", res->info.algo, sizeof res->info.algo);
  uint64_t v = 0;
  int rc = gkc__get_uint(c, r, "matrix", UINT32_MAX, &v);
  res->id = (uint32_t)v;
  if (rc == 0) gkc__obj_made(c, GKC__OBJ_MATRIX, res->id, req->a.csr_upload.shared != 0, r);
  return rc;
}

/* csr_upload of values of dtype (r->dtype), float32 or float64. */
static int prep_csr(gkc_conn *c, gkc__req *r, const gkc_csr_upload_args *a, const void *values) {
  const gkc_csr *A = &a->A;
  if (!A->row_ptr || (A->nnz > 0 && (!A->col_idx || !values)))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A and its arrays must not be NULL");
  if (A->rows < 1 || A->cols < 1 || A->nnz < 0 || A->nnz > INT32_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "need rows, cols >= 1 and 0 <= nnz <= INT32_MAX");
  r->a.csr_upload = *a;
  r->method = "csr_upload", r->pack = pack_csr, r->take = take_csr;
  size_t nnz = (size_t)A->nnz;
  r->csr[0] = gkc_ref_mem(A->row_ptr, ((size_t)A->rows + 1) * 4);
  r->csr[1] = gkc_ref_mem(A->col_idx, nnz * 4);
  r->csr[2] = gkc_ref_mem(values, nnz * proto_dtype_size(r->dtype));
  gkc_ref *const refs[] = {&r->csr[0], &r->csr[1], &r->csr[2]};
  gkc__shm_stage(c, r, refs, 3, NULL, 0, NULL);
  return 0;
}

int gkc__prep_csr_upload(gkc_conn *c, gkc__req *r, const gkc_csr_upload_args *a) {
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  r->dtype = GKC_F32;
  return prep_csr(c, r, a, a->A.values);
}

int gkc_csr_upload_f64(gkc_conn *c, const gkc_csr_f64 *A, int shared, uint32_t *matrix,
                       char algo[32]) {
  if (algo) algo[0] = 0;
  if (!A) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A and its arrays must not be NULL");
  /* The float32 struct carries the shape and indices; the values go apart. */
  gkc_csr_upload_args a = {{A->rows, A->cols, A->nnz, A->row_ptr, A->col_idx, NULL}, shared};
  GKC__BLOCKING((r.dtype = GKC_F64, prep_csr(c, &r, &a, A->values)));
  rc = gkc__run_info(c, &r, rc, &res, NULL);
  if (rc == 0) {
    if (matrix) *matrix = res.id;
    if (algo) memcpy(algo, res.info.algo, 32);
  }
  return rc;
}

int gkc_csr_upload(gkc_conn *c, const gkc_csr *A, int shared, uint32_t *matrix, char algo[32]) {
  if (algo) algo[0] = 0;
  if (!A) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A and its arrays must not be NULL");
  gkc_csr_upload_args a = {*A, shared};
  GKC__BLOCKING(gkc__prep_csr_upload(c, &r, &a));
  rc = gkc__run_info(c, &r, rc, &res, NULL);
  if (rc == 0) {
    if (matrix) *matrix = res.id;
    if (algo) memcpy(algo, res.info.algo, 32);
  }
  return rc;
}

/* A placement as the request's arguments. */
static int placement_args(gkc_conn *c, const gkc_placement *w, int *pinned, int *device,
                          int *replicate, int *shared) {
  *pinned = *device = *replicate = *shared = 0;
  if (!w) return 0;
  if (w->device < GKC_DEVICE_AUTO)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "placement: device %d is neither a device number"
                     " nor GKC_DEVICE_AUTO", w->device);
  if (w->device >= 0 && w->replicate)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "placement: a replicated object lives on every"
                     " device; give device GKC_DEVICE_AUTO with replicate");
  *pinned = w->device >= 0;
  *device = w->device >= 0 ? w->device : 0;
  *replicate = w->replicate != 0;
  *shared = w->shared != 0;
  return 0;
}

int gkc_upload_placed(gkc_conn *c, gkc_ref data, gkc_dtype dtype, const gkc_placement *where,
                      uint32_t *handle, int *device) {
  gkc_upload_args a = {data, dtype, 0};
  int pinned, dev, replicate;
  int prc = placement_args(c, where, &pinned, &dev, &replicate, &a.shared);
  if (prc) return prc;
  GKC__BLOCKING(gkc__prep_upload(c, &r, &a));
  r.pinned = pinned, r.device = dev, r.replicate = replicate;
  rc = gkc__run_info(c, &r, rc, &res, NULL);
  if (rc == 0 && handle) *handle = res.id;
  if (rc == 0 && device) *device = res.info.device;
  return rc;
}

int gkc_csr_upload_placed(gkc_conn *c, const gkc_csr *A, const gkc_placement *where,
                          uint32_t *matrix, int *device) {
  if (!A) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A and its arrays must not be NULL");
  gkc_csr_upload_args a = {*A, 0};
  int pinned, dev, replicate;
  int prc = placement_args(c, where, &pinned, &dev, &replicate, &a.shared);
  if (prc) return prc;
  GKC__BLOCKING(gkc__prep_csr_upload(c, &r, &a));
  r.pinned = pinned, r.device = dev, r.replicate = replicate;
  rc = gkc__run_info(c, &r, rc, &res, NULL);
  if (rc == 0 && matrix) *matrix = res.id;
  if (rc == 0 && device) *device = res.info.device;
  return rc;
}

int gkc_csr_upload_partitioned(gkc_conn *c, const gkc_csr *A, uint64_t devices, int shared,
                               uint32_t *matrix) {
  if (!A) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A and its arrays must not be NULL");
  if (!devices)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "devices: an empty mask (GKC_DEVICES_ALL for"
                     " every device)");
  gkc_csr_upload_args a = {*A, shared};
  GKC__BLOCKING(gkc__prep_csr_upload(c, &r, &a));
  r.partition = devices;
  rc = gkc__run_info(c, &r, rc, &res, NULL);
  if (rc == 0 && matrix) *matrix = res.id;
  return rc;
}

static void pack_release(msgpack_packer *pk, const gkc__req *r) {
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, r->a.release.matrix ? "matrix" : "handle");
  gkc__pack_id(pk, r->a.release.id);
}

static int take_release(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  gkc__obj_gone(c, req->a.release.id);
  return gkc__take_map(c, r, req, res);
}

int gkc__prep_release(gkc_conn *c, gkc__req *r, const gkc_release_args *a) {
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  r->a.release = *a;
  r->method = "release", r->pack = pack_release, r->take = take_release;
  return 0;
}

static int release(gkc_conn *c, uint32_t id, int matrix) {
  gkc_release_args a = {id, matrix};
  GKC__BLOCKING(gkc__prep_release(c, &r, &a));
  return gkc__run_info(c, &r, rc, &res, NULL);
}

/* gkcd wants the key that names the object's kind; the id alone does not
 * say which, so an id that is no array is tried as a matrix. */
int gkc_release(gkc_conn *c, uint32_t id) {
  int rc = release(c, id, 0);
  if (rc != GKC_EINVALID_ARGUMENT) return rc;
  char first[256];
  snprintf(first, sizeof first, "%s", gkc_errmsg(c));
  rc = release(c, id, 1);
  if (rc == GKC_EINVALID_ARGUMENT) {
    char second[256];
    snprintf(second, sizeof second, "%s", gkc_errmsg(c));
    return gkc__fail(c, rc, "release %u: neither a resident array nor a matrix this connection "
                     "may release (%s; %s)", id, first, second);
  }
  return rc;
}

int gkc_release_matrix(gkc_conn *c, uint32_t matrix) { return release(c, matrix, 1); }
