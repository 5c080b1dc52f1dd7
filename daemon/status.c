/* status.c: the "status" method's reply. */
#include <time.h>

#include "gkc.h"
#include "proto_rpc.h"
#include "server.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void kv_u64(msgpack_packer *pk, const char *k, uint64_t v) {
  proto_pack_cstr(pk, k);
  msgpack_pack_uint64(pk, v);
}

void status_pack(gkcd_server *srv, msgpack_packer *pk) {
  gkcd_device_info dev[8];
  int ndev = srv->be->devices(srv->be, dev, 8);

  msgpack_pack_map(pk, 21);
  proto_pack_cstr(pk, "version");
  proto_pack_cstr(pk, GKC_VERSION);
  proto_pack_cstr(pk, "backend");
  proto_pack_cstr(pk, srv->be->name);
  proto_pack_cstr(pk, "uptime_s");
  msgpack_pack_double(pk, (double)(now_ns() - srv->start_ns) / 1e9);
  kv_u64(pk, "in_flight", srv->in_flight);
  kv_u64(pk, "queued", pool_waiting(srv->pool));
  kv_u64(pk, "connections", srv->nconns);
  kv_u64(pk, "bad_requests", srv->bad_frames);
  kv_u64(pk, "served", srv->served);
  kv_u64(pk, "refused_connections", srv->refused);
  kv_u64(pk, "budget_used", srv->budget_used);
  kv_u64(pk, "budget_waiting", srv->budget_waiting);
  kv_u64(pk, "budget_used_peak", srv->budget_used_peak);
  kv_u64(pk, "budget_waiting_peak", srv->budget_waiting_peak);
  kv_u64(pk, "budget_waited", srv->budget_waited);
  kv_u64(pk, "budget_refused", srv->budget_refused);
  kv_u64(pk, "spin_hits", pool_spin_hits(srv->pool));
  kv_u64(pk, "loop_spin_hits", srv->loop_spin_hits);
  proto_pack_cstr(pk, "resident");
  msgpack_pack_map(pk, 4);
  kv_u64(pk, "arrays", srv->res_live[RES_ARRAY]);
  kv_u64(pk, "matrices", srv->res_live[RES_MATRIX]);
  kv_u64(pk, "regions", srv->res_live[RES_REGION]);
  kv_u64(pk, "bytes", srv->resident_bytes);

  proto_pack_cstr(pk, "devices");
  msgpack_pack_array(pk, (size_t)ndev);
  for (int i = 0; i < ndev; i++) {
    msgpack_pack_map(pk, dev[i].streams ? 7 : 4);
    proto_pack_cstr(pk, "name");
    proto_pack_cstr(pk, dev[i].name);
    kv_u64(pk, "memory_total", dev[i].memory_total);
    kv_u64(pk, "memory_free", dev[i].memory_free);
    kv_u64(pk, "threads", (uint64_t)dev[i].threads);
    if (dev[i].streams) {
      kv_u64(pk, "cached_bytes", dev[i].cached_bytes);
      kv_u64(pk, "streams", (uint64_t)dev[i].streams);
      kv_u64(pk, "streams_busy", (uint64_t)dev[i].streams_busy);
    }
  }

  proto_pack_cstr(pk, "methods");
  msgpack_pack_map(pk, PROTO_M_COUNT);
  for (int m = 0; m < PROTO_M_COUNT; m++) {
    proto_pack_cstr(pk, proto_method_name(m));
    msgpack_pack_map(pk, 3);
    kv_u64(pk, "requests", srv->requests[m]);
    kv_u64(pk, "errors", srv->errors[m]);
    proto_pack_cstr(pk, "kernel_ms");
    msgpack_pack_double(pk, srv->kernel_us[m] / 1e3);
  }

  const gkcd_config *cfg = &srv->cfg;
  proto_pack_cstr(pk, "limits");
  msgpack_pack_map(pk, 13);
  kv_u64(pk, "max_request_bytes", cfg->max_request_bytes);
  kv_u64(pk, "max_queue", cfg->max_queue);
  kv_u64(pk, "threads", (uint64_t)cfg->threads);
  kv_u64(pk, "max_objects", srv->limits.max_objects);
  kv_u64(pk, "max_depth", srv->limits.max_depth);
  kv_u64(pk, "max_connections", cfg->max_connections);
  kv_u64(pk, "max_conn_requests", cfg->max_conn_requests);
  kv_u64(pk, "max_conn_reply_bytes", cfg->max_conn_reply_bytes);
  kv_u64(pk, "memory_budget", cfg->memory_budget);
  kv_u64(pk, "budget_queue", cfg->budget_queue);
  proto_pack_cstr(pk, "idle_timeout_s");
  msgpack_pack_double(pk, cfg->idle_timeout_s);
  kv_u64(pk, "streams", (uint64_t)cfg->streams);
  kv_u64(pk, "spin_us", (uint64_t)cfg->spin_us);
}
