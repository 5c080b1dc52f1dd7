/* method_blas1.c: the BLAS-1 rows on float32 or float64 vectors
 * (PROTOCOL.md): `dot` (x . y, summed in float64), `axpby` (y = alpha x +
 * beta y) and `nrm2` (||x||_2, its squares summed in float64).  x and y
 * share one dtype (refs_floats), and so does axpby's result. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "methods.h"
#include "proto_dtypes.h"
#include "proto_rpc.h"

/* dot {x, y} and axpby {x, y, alpha, beta, out}. */
static int parse_vec(refs_ctx *r, size_t max) {
  static const char *const dot_keys[] = {"x", "y", "algo", "deadline_ms", "device", "dtype", NULL};
  static const char *const axpby_keys[] = {"x", "y", "alpha", "beta", "algo", "deadline_ms",
                                           "out", "device", "dtype", NULL};
  static const char *const arrays[] = {"x", "y", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int is_dot = job->method == PROTO_M_DOT;
  int rc;
  if ((rc = args_known(a, is_dot ? dot_keys : axpby_keys)) || (rc = methods_device(a, job)) ||
      (rc = methods_algo(a, r->devs->dev[0].be, job->method, &job->algo)) ||
      (rc = refs_floats(r, arrays, 0)) ||
      (rc = refs_array(r, "x", 1, REFS_ANY_LEN, 0, REFS_FLOAT, proto_method_name(job->method), &job->in.vec.x)))
    return rc;
  char what[96];
  snprintf(what, sizeof what, "as many as x");
  if ((rc = refs_array(r, "y", 1, job->in.vec.x.bytes, 0, REFS_FLOAT, what, &job->in.vec.y))) return rc;
  int dt = job->in.vec.x.dtype;
  job->in.vec.n = (int64_t)(job->in.vec.x.bytes / proto_dtype_size(dt));
  if (is_dot) return 0;
  job->in.vec.alpha = 1.0f, job->in.vec.beta = 1.0f;
  job->in.vec.alpha64 = 1.0, job->in.vec.beta64 = 1.0;
  if ((rc = methods_scalar(a, "alpha", dt, &job->in.vec.alpha, &job->in.vec.alpha64)) ||
      (rc = methods_scalar(a, "beta", dt, &job->in.vec.beta, &job->in.vec.beta64)))
    return rc;
  if (job->in.vec.x.bytes > max) return methods_too_large(a, "the result y", job->in.vec.x.bytes, max);
  job->out_bytes = job->in.vec.x.bytes;
  return refs_out(r, "y", job->out_bytes, dt);
}

/* nrm2 {x}: the one vector in in.vec.x (y stays absent). */
static int parse_nrm2(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"x", "algo", "deadline_ms", "device", "dtype", NULL};
  static const char *const arrays[] = {"x", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int rc;
  (void)max;
  if ((rc = args_known(a, keys)) || (rc = methods_device(a, job)) ||
      (rc = methods_algo(a, r->devs->dev[0].be, PROTO_M_NRM2, &job->algo)) ||
      (rc = refs_floats(r, arrays, 0)) ||
      (rc = refs_array(r, "x", 1, REFS_ANY_LEN, 0, REFS_FLOAT, "nrm2", &job->in.vec.x)))
    return rc;
  job->in.vec.n = (int64_t)(job->in.vec.x.bytes / proto_dtype_size(job->in.vec.x.dtype));
  return 0;
}

static void work(const gkcd_job *job, method_work *w) {
  double n = (double)job->in.vec.n, es = (double)proto_dtype_size(job->in.vec.x.dtype);
  w->flops = 2.0 * n;
  w->bytes = (job->method == PROTO_M_AXPBY ? 3.0 : job->method == PROTO_M_DOT ? 2.0 : 1.0) * es * n;
  w->xfer = methods_host_bytes(&job->in.vec.x) + methods_host_bytes(&job->in.vec.y);
}

static int inputs(gkcd_job *job, gkcd_span *out[], int max) {
  (void)max;
  out[0] = &job->in.vec.x, out[1] = &job->in.vec.y;
  return job->method == PROTO_M_NRM2 ? 1 : 2;
}

static void pack_dot(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id) {
  (void)new_id;
  methods_pack_value(pk, job, server_us, job->in.vec.n);
}

static void pack_axpby(msgpack_packer *pk, const gkcd_job *job, double server_us,
                       uint32_t new_id) {
  methods_pack_array(pk, job, server_us, new_id, "y");
}

const gkcd_method method_row_DOT = {
    .id = PROTO_M_DOT, .where = METHOD_BACKEND, .makes = -1, .parse = parse_vec, .work = work,
    .inputs = inputs, .pack = pack_dot, .scalar = 1,
};

const gkcd_method method_row_AXPBY = {
    .id = PROTO_M_AXPBY, .where = METHOD_BACKEND, .makes = -1, .parse = parse_vec, .work = work,
    .inputs = inputs, .pack = pack_axpby,
};

const gkcd_method method_row_NRM2 = {
    .id = PROTO_M_NRM2, .where = METHOD_BACKEND, .makes = -1, .parse = parse_nrm2, .work = work,
    .inputs = inputs, .pack = pack_dot, .scalar = 1,
};
