/* status.c: the daemon's state for those who ask: the "status" method, the
 * metrics exposition, systemd's STATUS= line. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gkc.h"
#include "proto_rpc.h"
#include "server.h"

#define STATUS_MAX_CLIENTS 64 /* the busiest clients listed, so the reply stays small */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void kv_u64(msgpack_packer *pk, const char *k, uint64_t v) {
  proto_pack_cstr(pk, k);
  msgpack_pack_uint64(pk, v);
}

static void kv_dbl(msgpack_packer *pk, const char *k, double v) {
  proto_pack_cstr(pk, k);
  msgpack_pack_double(pk, v);
}

static void pack_lanes(gkcd_server *srv, msgpack_packer *pk) {
  int n = sched_nlanes(srv->sched);
  proto_pack_cstr(pk, "lanes");
  msgpack_pack_array(pk, (size_t)n);
  for (int l = 0; l < n; l++) {
    sched_lane_stats st;
    sched_lane_stats_get(srv->sched, l, &st);
    gkcd_lane_info li = {0};
    if (srv->be->lane_info) srv->be->lane_info(srv->be, l, &li);
    msgpack_pack_map(pk, 9);
    proto_pack_cstr(pk, "name");
    proto_pack_cstr(pk, l == LANE_LATENCY ? "latency" : "bulk");
    kv_u64(pk, "workers", (uint64_t)st.workers);
    kv_u64(pk, "sms", (uint64_t)li.sms);
    kv_u64(pk, "streams", (uint64_t)li.streams);
    kv_u64(pk, "queued", st.queued);
    kv_u64(pk, "running", st.running);
    kv_u64(pk, "served", st.served);
    kv_dbl(pk, "wait_p50_us", st.wait_p50_us);
    kv_dbl(pk, "wait_p99_us", st.wait_p99_us);
  }
}

/* The clients with work queued or running, then the rest, up to a bound;
 * share: their fraction of the measured work served since they connected. */
static void pack_clients(gkcd_server *srv, msgpack_packer *pk) {
  double total = 0;
  size_t n = 0;
  for (gkcd_conn *c = srv->conns.head; c; c = c->next) {
    total += client_of(c)->sc.served_us;
    n++;
  }
  if (n > STATUS_MAX_CLIENTS) n = STATUS_MAX_CLIENTS;
  proto_pack_cstr(pk, "clients");
  msgpack_pack_array(pk, n);
  size_t packed = 0;
  for (int pass = 0; pass < 2; pass++)
    for (gkcd_conn *c = srv->conns.head; c && packed < n; c = c->next) {
      const sched_client *sc = &client_of(c)->sc;
      size_t queued = sc->mem_waiting + (sc->held != NULL);
      for (int l = 0; l < SCHED_MAX_LANES; l++) queued += sc->queued[l];
      int busy = queued || sc->running;
      if (busy != (pass == 0)) continue;
      msgpack_pack_map(pk, 8);
      kv_u64(pk, "id", c->id);
      kv_u64(pk, "pid", (uint64_t)c->pid);
      kv_u64(pk, "uid", (uint64_t)c->uid);
      kv_u64(pk, "queued", queued);
      kv_u64(pk, "running", sc->running);
      kv_u64(pk, "served", sc->served);
      kv_dbl(pk, "served_ms", sc->served_us / 1e3);
      kv_dbl(pk, "share", total > 0 ? sc->served_us / total : 0);
      packed++;
    }
}

static void pack_memory(gkcd_server *srv, msgpack_packer *pk) {
  proto_pack_cstr(pk, "memory");
  msgpack_pack_map(pk, 5 + BUDGET_KINDS);
  kv_u64(pk, "limit", srv->budget.limit);
  kv_u64(pk, "used", srv->budget.used);
  kv_u64(pk, "peak", srv->budget.peak);
  kv_u64(pk, "input_limit", srv->budget.input_limit);
  kv_u64(pk, "input_peak", srv->budget.input_peak);
  for (int k = 0; k < BUDGET_KINDS; k++) kv_u64(pk, budget_kind_name(k), srv->budget.by_kind[k]);
}

/* Every device, lost ones included (PROTOCOL.md, "status"): the names of
 * the multi-device contract, and the single-device keys kept as they were
 * (memory_free, threads; cached_bytes and streams on a GPU). */
static void pack_devices(gkcd_server *srv, msgpack_packer *pk) {
  int n = srv->devs.n;
  proto_pack_cstr(pk, "devices");
  msgpack_pack_array(pk, (size_t)n);
  for (int i = 0; i < n; i++) {
    gkcd_backend *be = srv->devs.dev[i].be;
    gkcd_device_info d;
    memset(&d, 0, sizeof d);
    d.gpu = -1;
    be->devices(be, &d, 1);
    sched_device_stats st;
    sched_device_stats_get(srv->sched, i, &st);
    int lost = atomic_load(&be->lost);
    msgpack_pack_map(pk, 16 + (d.streams ? 3 : 0));
    kv_u64(pk, "index", (uint64_t)i);
    proto_pack_cstr(pk, "name");
    proto_pack_cstr(pk, d.name);
    proto_pack_cstr(pk, "kind");
    proto_pack_cstr(pk, d.kind ? d.kind : be->name);
    proto_pack_cstr(pk, "gpu");
    msgpack_pack_int(pk, d.gpu);
    kv_u64(pk, "sms", (uint64_t)d.sms);
    kv_u64(pk, "memory_total", d.memory_total);
    kv_u64(pk, "memory_used", d.memory_total > d.memory_free ? d.memory_total - d.memory_free : 0);
    kv_u64(pk, "memory_cached", d.cached_bytes);
    kv_u64(pk, "memory_free", d.memory_free);
    kv_u64(pk, "threads", (uint64_t)d.threads);
    kv_u64(pk, "queued", st.queued);
    kv_u64(pk, "running", st.running);
    kv_u64(pk, "served", srv->devs.dev[i].served);
    kv_dbl(pk, "outstanding_us", st.outstanding_us);
    proto_pack_cstr(pk, "lost");
    lost ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    proto_pack_cstr(pk, "lost_reason");
    proto_pack_cstr(pk, backend_lost_reason(be));
    if (d.streams) {
      kv_u64(pk, "cached_bytes", d.cached_bytes);
      kv_u64(pk, "streams", (uint64_t)d.streams);
      kv_u64(pk, "streams_busy", (uint64_t)d.streams_busy);
    }
  }
}

void status_pack(gkcd_server *srv, msgpack_packer *pk) {
  sched_counters sn;
  sched_counters_get(srv->sched, &sn);

  char inst[17], shared[17];
  res_instance_hex(srv->res.instance, inst);
  res_instance_hex(srv->res.shared_instance, shared);
  msgpack_pack_map(pk, 38);
  proto_pack_cstr(pk, "version");
  proto_pack_cstr(pk, GKC_VERSION);
  proto_pack_cstr(pk, "instance");
  proto_pack_cstr(pk, inst);
  proto_pack_cstr(pk, "shared_instance");
  proto_pack_cstr(pk, shared);
  proto_pack_cstr(pk, "backend");
  proto_pack_cstr(pk, srv->be->name);
  kv_dbl(pk, "uptime_s", (double)(now_ns() - srv->start_ns) / 1e9);
  kv_u64(pk, "in_flight", srv->in_flight);
  kv_u64(pk, "queued", sched_queued(srv->sched));
  kv_u64(pk, "connections", srv->conns.n);
  kv_u64(pk, "bad_requests", srv->bad_frames);
  kv_u64(pk, "served", srv->served);
  kv_u64(pk, "refused_connections", srv->conns.refused);
  kv_u64(pk, "refused_no_slot", srv->conns.refused_slots);
  kv_u64(pk, "closed_send_timeout", srv->conns.closed_send_timeout);
  kv_u64(pk, "closed_request_timeout", srv->conns.closed_request_timeout);
  kv_u64(pk, "closed_idle", srv->conns.closed_idle);
  kv_u64(pk, "cancelled", sn.cancelled);
  kv_u64(pk, "expired_deadline", sn.expired_deadline);
  kv_u64(pk, "expired_wait", sn.expired_wait);
  kv_u64(pk, "held", sn.held);
  kv_u64(pk, "budget_used", srv->budget.used);
  kv_u64(pk, "budget_waiting", sched_mem_waiting(srv->sched));
  kv_u64(pk, "budget_used_peak", srv->budget.peak);
  kv_u64(pk, "budget_waiting_peak", sn.mem_waiting_peak);
  kv_u64(pk, "budget_waited", sn.mem_waited);
  kv_u64(pk, "budget_refused", sn.mem_refused);
  kv_u64(pk, "spin_hits", srv->pool ? pool_spin_hits(srv->pool) : 0);
  kv_u64(pk, "loop_spin_hits", srv->loop_spin_hits);
  /* Split work (split.h): how many requests ran as parts on several
   * devices, and the per-part overhead the split rule now believes. */
  kv_u64(pk, "splits", sched_splits(srv->sched));
  kv_dbl(pk, "split_overhead_us", sched_split_overhead_us(srv->sched));
  pack_memory(srv, pk);
  /* Big frames received and big replies sent off the loop (reader.h). */
  const reader_pool *rd = &srv->conns.readers;
  proto_pack_cstr(pk, "readers");
  msgpack_pack_map(pk, 7);
  kv_u64(pk, "threads", (uint64_t)rd->nthreads);
  kv_u64(pk, "receiving", rd->out - rd->out_writes);
  kv_u64(pk, "sending", rd->out_writes);
  kv_u64(pk, "frames", rd->tasks);
  kv_u64(pk, "bytes", rd->bytes);
  kv_u64(pk, "replies", rd->wtasks);
  kv_u64(pk, "reply_bytes", rd->wbytes);
  size_t kept_bytes;
  uint64_t kept_hits;
  pinner_kept(&srv->res.pinner, &kept_bytes, &kept_hits);
  proto_pack_cstr(pk, "resident");
  msgpack_pack_map(pk, 8);
  kv_u64(pk, "arrays", srv->res.live[RES_ARRAY]);
  kv_u64(pk, "matrices", srv->res.live[RES_MATRIX]);
  kv_u64(pk, "regions", srv->res.live[RES_REGION]);
  kv_u64(pk, "region_bytes", srv->res.pinned); /* every connection's, registered */
  kv_u64(pk, "bytes", srv->budget.by_kind[BUDGET_RESIDENT]);
  kv_u64(pk, "precond_bytes", srv->res.precond_bytes); /* AMG hierarchies, within bytes */
  kv_u64(pk, "regions_kept_bytes", kept_bytes); /* released regions kept mapped (pinner.h) */
  kv_u64(pk, "regions_kept_hits", kept_hits);
  proto_pack_cstr(pk, "restored"); /* shared objects brought back from systemd's fd store */
  msgpack_pack_map(pk, 2);
  kv_u64(pk, "objects", srv->res.restored);
  kv_u64(pk, "bytes", srv->res.restored_bytes);
  pack_lanes(srv, pk);
  pack_clients(srv, pk);

  pack_devices(srv, pk);

  proto_pack_cstr(pk, "methods");
  msgpack_pack_map(pk, PROTO_M_COUNT);
  for (int m = 0; m < PROTO_M_COUNT; m++) {
    proto_pack_cstr(pk, proto_method_name(m));
    msgpack_pack_map(pk, 3);
    kv_u64(pk, "requests", srv->requests[m]);
    kv_u64(pk, "errors", srv->errors[m]);
    kv_dbl(pk, "kernel_ms", srv->kernel_us[m] / 1e3);
  }

  const gkcd_config *cfg = &srv->cfg;
  proto_pack_cstr(pk, "limits");
  msgpack_pack_map(pk, 22);
  kv_u64(pk, "max_request_bytes", cfg->max_request_bytes);
  kv_u64(pk, "max_conn_pinned", cfg->max_conn_pinned);
  kv_u64(pk, "max_queue", cfg->max_queue);
  kv_u64(pk, "threads", (uint64_t)cfg->threads);
  kv_u64(pk, "max_objects", srv->limits.max_objects);
  kv_u64(pk, "max_depth", srv->limits.max_depth);
  kv_u64(pk, "max_connections", cfg->max_connections);
  kv_u64(pk, "max_conn_per_user", cfg->max_conn_per_user);
  kv_u64(pk, "max_conn_requests", cfg->max_conn_requests);
  kv_u64(pk, "max_conn_reply_bytes", cfg->max_conn_reply_bytes);
  kv_u64(pk, "memory_budget", cfg->memory_budget);
  kv_u64(pk, "budget_queue", cfg->budget_queue);
  kv_dbl(pk, "idle_timeout_s", cfg->idle_timeout_s);
  kv_dbl(pk, "send_timeout_s", cfg->send_timeout_s);
  kv_dbl(pk, "request_timeout_s", cfg->request_timeout_s);
  kv_dbl(pk, "queue_wait_s", cfg->queue_wait_s);
  kv_u64(pk, "latency_sms", (uint64_t)cfg->latency_sms);
  kv_dbl(pk, "latency_us", cfg->latency_us);
  kv_dbl(pk, "slice_us", cfg->slice_us);
  kv_u64(pk, "streams", (uint64_t)cfg->streams);
  kv_u64(pk, "spin_us", (uint64_t)cfg->spin_us);
  /* 1 when ring_register is answered (--rings, auto resolved) */
  kv_u64(pk, "rings", cfg->rings > 0 || (cfg->rings < 0 && cfg->spin_us > 0));
}

char *status_metrics(void *arg, size_t *len) {
  gkcd_server *srv = arg;
  metrics_view v = {
      .counted = &srv->metrics,
      .sched = srv->sched,
      .devs = &srv->devs,
      .budget = &srv->budget,
      .backend = srv->be->name,
      .start_ns = srv->start_ns,
      .connections = srv->conns.n,
      .in_flight = srv->in_flight,
      .bad_frames = srv->bad_frames,
      .refused = srv->conns.refused,
      .region_bytes = srv->res.pinned,
      .max_conn_pinned = srv->cfg.max_conn_pinned,
  };
  size_t kept_bytes;
  pinner_kept(&srv->res.pinner, &kept_bytes, &v.regions_kept_hits);
  v.regions_kept_bytes = kept_bytes;
  return metrics_render(&v, len);
}

void status_line(void *arg, char *buf, size_t len) {
  const gkcd_server *srv = arg;
  snprintf(buf, len, "%s: %llu connections, %llu requests in flight, %llu served",
           srv->draining ? "stopping" : "serving", (unsigned long long)srv->conns.n,
           (unsigned long long)srv->in_flight, (unsigned long long)srv->served);
}
