/* gkc_reply.c: see gkc_reply.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gkc_reply.h"
#include "proto_rpc.h"

void gkc__pack_algo(msgpack_packer *pk, const char *algo) {
  proto_pack_cstr(pk, "algo");
  proto_pack_cstr(pk, algo && *algo ? algo : "auto");
}

void gkc__get_str(const msgpack_object *m, const char *key, char *dst, size_t n) {
  const msgpack_object *o = proto_map_get(m, key);
  dst[0] = 0;
  if (o && o->type == MSGPACK_OBJECT_STR)
    snprintf(dst, n, "%.*s", (int)o->via.str.size, o->via.str.ptr);
}

double gkc__get_num(const msgpack_object *m, const char *key, double dflt) {
  const msgpack_object *o = proto_map_get(m, key);
  if (!o) return dflt;
  switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
    default: return dflt;
  }
}

void gkc__take_info(const msgpack_object *r, gkc_info *info) {
  if (!info) return;
  gkc__get_str(r, "algo", info->algo, sizeof info->algo);
  info->kernel_us = gkc__get_num(r, "kernel_us", NAN);
  info->server_us = gkc__get_num(r, "server_us", NAN);
  info->queue_us = gkc__get_num(r, "queue_us", NAN);
  info->worker_us = gkc__get_num(r, "worker_us", NAN);
  info->h2d_us = gkc__get_num(r, "h2d_us", NAN);
  info->d2h_us = gkc__get_num(r, "d2h_us", NAN);
  info->device = (int)gkc__get_num(r, "device", -1);
  info->ndevices = 0;
  const msgpack_object *d = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "devices") : NULL;
  if (d && d->type == MSGPACK_OBJECT_ARRAY) info->ndevices = (int)d->via.array.size;
  info->peer_bytes = gkc__get_num(r, "peer_bytes", 0);
  info->peer_us = gkc__get_num(r, "peer_us", NAN);
}

int gkc__take_map(gkc_conn *c, const msgpack_object *result, gkc__req *r, gkc_result *res) {
  (void)r, (void)res;
  if (result->type != MSGPACK_OBJECT_MAP)
    return gkc__fail(c, GKC_EPROTOCOL, "%s result is not a map", r->method);
  return 0;
}

int gkc__get_uint(gkc_conn *c, const msgpack_object *m, const char *key, uint64_t max,
                  uint64_t *v) {
  const msgpack_object *o = m->type == MSGPACK_OBJECT_MAP ? proto_map_get(m, key) : NULL;
  if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks an integer '%s'", key);
  *v = o->via.u64;
  return 0;
}
