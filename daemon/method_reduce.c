/* method_reduce.c: the `reduce` row (PROTOCOL.md, "reduce"): the sum,
 * minimum or maximum of a float32 array, as a float64 value; a long one
 * splits into slices over several devices (split.h). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "methods.h"
#include "proto_rpc.h"
#include "split.h"

static int parse_reduce(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"x", "op", "algo", "deadline_ms", "device", "dtype", NULL};
  static const char *const ops[] = {"sum", "min", "max"}; /* indexed by gkc_reduce_op */
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int rc;
  if ((rc = args_known(a, keys)) || (rc = methods_device(a, job)) ||
      (rc = methods_algo(a, r->devs->dev[0].be, PROTO_M_REDUCE, &job->algo)))
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
  static const char *const arrays[] = {"x", NULL}; /* float32 only, as sgemm */
  if ((rc = refs_floats(r, arrays, 1)) ||
      (rc = refs_array(r, "x", 1, REFS_ANY_LEN, 0, REFS_FLOAT, "reduce", &job->in.reduce.x)))
    return rc;
  job->in.reduce.n = (int64_t)(job->in.reduce.x.bytes / 4);
  (void)max;
  return 0;
}

static void work(const gkcd_job *job, method_work *w) {
  w->flops = (double)job->in.reduce.n;
  w->bytes = 4.0 * (double)job->in.reduce.n;
  w->xfer = methods_host_bytes(&job->in.reduce.x);
}

static int inputs(gkcd_job *job, gkcd_span *out[], int max) {
  (void)max;
  out[0] = &job->in.reduce.x;
  return 1;
}

static void pack(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id) {
  (void)new_id;
  methods_pack_value(pk, job, server_us, job->in.reduce.n);
}

const gkcd_method method_row_REDUCE = {
    .id = PROTO_M_REDUCE, .where = METHOD_BACKEND, .makes = -1, .parse = parse_reduce,
    .work = work, .inputs = inputs, .split = split_rule_reduce, .pack = pack, .scalar = 1,
};
