/* method_sgemm.c: the `sgemm` row (PROTOCOL.md, "sgemm"): C = alpha
 * op(A) op(B) + beta C in float32, by value, from regions or on resident
 * arrays; it splits by row blocks of C over several devices (split.h). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "methods.h"
#include "proto_rpc.h"
#include "split.h"

static int parse_sgemm(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"m", "n", "k", "a", "b", "c", "alpha", "beta", "trans_a",
                                     "trans_b", "algo", "precision", "deadline_ms", "out",
                                     "device", "dtype", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int64_t m, n, k;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = methods_device(a, job)) ||
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
      (rc = methods_algo(a, r->devs->dev[0].be, PROTO_M_SGEMM, &job->algo)))
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
  /* An algo that rounds to TF32 must be asked for with the precision that
   * says so (the backends name it cublas_tf32). */
  const char *const *algos = r->devs->dev[0].be->algos[PROTO_M_SGEMM];
  if (!s->tf32 && job->algo >= 0 && algos && !strcmp(algos[job->algo], "cublas_tf32")) {
    snprintf(a->msg, a->msglen, "argument 'algo': cublas_tf32 rounds inputs to TF32; ask for it"
             " with precision: \"tf32\"");
    return GKC_EINVALID_ARGUMENT;
  }

  uint64_t ab = methods_f32_bytes(m, k), bb = methods_f32_bytes(k, n), cb = methods_f32_bytes(m, n);
  if (ab == UINT64_MAX || bb == UINT64_MAX || cb == UINT64_MAX) {
    snprintf(a->msg, a->msglen, "arguments 'm', 'n', 'k': m*k, k*n or m*n float32 overflows"
             " 64 bits (m=%" PRId64 ", n=%" PRId64 ", k=%" PRId64 ")", m, n, k);
    return GKC_EINVALID_ARGUMENT;
  }
  if (cb > max) return methods_too_large(a, "the result c (m*n float32)", cb, max);
  char what[96];
  snprintf(what, sizeof what, "m*k = %" PRId64 "*%" PRId64, m, k);
  /* float32 only: a float64 operand (a handle, a region's or the request's
   * `dtype`) is refused naming it, never narrowed. */
  static const char *const arrays[] = {"a", "b", "c", NULL};
  if ((rc = refs_floats(r, arrays, 1)) || (rc = refs_array(r, "a", 1, ab, 0, REFS_FLOAT, what, &s->a)))
    return rc;
  snprintf(what, sizeof what, "k*n = %" PRId64 "*%" PRId64, k, n);
  if ((rc = refs_array(r, "b", 1, bb, 0, REFS_FLOAT, what, &s->b))) return rc;
  snprintf(what, sizeof what, "m*n = %" PRId64 "*%" PRId64, m, n);
  if (s->beta != 0.0f && !args_present(a, "c")) {
    snprintf(a->msg, a->msglen, "missing argument 'c' (required when beta != 0)");
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = refs_array(r, "c", 0, cb, 0, REFS_FLOAT, what, &s->c))) return rc;
  if (s->beta == 0.0f) s->c.ptr = NULL; /* beta == 0: C is not read */
  job->out_bytes = cb;
  return refs_out(r, "c", cb, DT_F32);
}

static void work(const gkcd_job *job, method_work *w) {
  const __typeof__(job->in.sgemm) *s = &job->in.sgemm;
  double m = s->m, n = s->n, k = s->k;
  w->flops = 2 * m * n * k;
  w->bytes = 4 * (m * k + k * n + m * n * (s->c.ptr ? 2 : 1));
  w->xfer = methods_host_bytes(&s->a) + methods_host_bytes(&s->b) + methods_host_bytes(&s->c) +
            (job->out_kind == OUT_RES || job->out_kind == OUT_RES_NEW ? 0 : 4 * m * n);
}

static int inputs(gkcd_job *job, gkcd_span *out[], int max) {
  (void)max;
  out[0] = &job->in.sgemm.a, out[1] = &job->in.sgemm.b, out[2] = &job->in.sgemm.c;
  return 3;
}

static void pack(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id) {
  methods_pack_array(pk, job, server_us, new_id, "c");
}

const gkcd_method method_row_SGEMM = {
    .id = PROTO_M_SGEMM, .where = METHOD_BACKEND, .makes = -1, .parse = parse_sgemm,
    .work = work, .inputs = inputs, .split = split_rule_rows, .pack = pack,
};
