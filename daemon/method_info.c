/* method_info.c: the rows the loop answers about gkcd itself (PROTOCOL.md):
 * `ping` (version, protocol, backend), `status` (limits, devices, load) and
 * `metrics` (the Prometheus text).  None takes arguments. */
#include <stdio.h>

#include "gkc.h"
#include "gkc_errors.h"
#include "method.h"
#include "resident.h"
#include "proto_rpc.h"

static int answer_ping(const method_env *env, const msgpack_object *params, msgpack_packer *pk,
                       void **body, size_t *body_len, char *msg, size_t msglen) {
  (void)body, (void)body_len;
  (void)params, (void)msg, (void)msglen; /* no arguments: rpc.c checked */
  char inst[17], shared[17];
  res_instance_hex(env->res->instance, inst);
  res_instance_hex(env->res->shared_instance, shared);
  msgpack_pack_map(pk, 5);
  proto_pack_cstr(pk, "version"), proto_pack_cstr(pk, GKC_VERSION);
  proto_pack_cstr(pk, "protocol"), msgpack_pack_int(pk, GKC_PROTOCOL);
  proto_pack_cstr(pk, "backend"), proto_pack_cstr(pk, env->backend_name);
  /* What a client checks its objects against after reconnecting. */
  proto_pack_cstr(pk, "instance"), proto_pack_cstr(pk, inst);
  proto_pack_cstr(pk, "shared_instance"), proto_pack_cstr(pk, shared);
  return 0;
}

static int answer_status(const method_env *env, const msgpack_object *params, msgpack_packer *pk,
                         void **body, size_t *body_len, char *msg, size_t msglen) {
  (void)body, (void)body_len;
  (void)params, (void)msg, (void)msglen; /* no arguments: rpc.c checked */
  env->status(env->srv, pk);
  return 0;
}

static int answer_metrics(const method_env *env, const msgpack_object *params, msgpack_packer *pk,
                          void **body, size_t *body_len, char *msg, size_t msglen) {
  (void)params; /* no arguments: rpc.c checked */
  size_t len = 0;
  char *text = env->metrics(env->srv, &len);
  if (!text) {
    snprintf(msg, msglen, "out of memory rendering the metrics");
    return GKC_EOUT_OF_MEMORY;
  }
  msgpack_pack_str(pk, len);
  *body = text, *body_len = len; /* the text follows as the reply's body, without another copy */
  return 0;
}

const gkcd_method method_row_PING = {.id = PROTO_M_PING, .where = METHOD_LOOP, .makes = -1, .no_args = 1,
                                     .answer = answer_ping};
const gkcd_method method_row_STATUS = {.id = PROTO_M_STATUS, .where = METHOD_LOOP, .makes = -1, .no_args = 1,
                                       .answer = answer_status};
const gkcd_method method_row_METRICS = {.id = PROTO_M_METRICS, .where = METHOD_LOOP, .makes = -1, .no_args = 1,
                                        .answer = answer_metrics};
