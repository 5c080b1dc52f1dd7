/* metrics.c: see metrics.h. */
#include "metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gkc.h"
#include "job.h"
#include "proto_errors.h"

/* From 50 us (a small request on the latency lane) to 10 s (a long solve). */
static const double bucket_le[METRICS_BUCKETS] = {
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
    50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    5.0,  10.0,  30.0};

void metrics_count(gkcd_metrics *m, int method, int code) {
  if (method < 0 || method >= PROTO_M_COUNT) return;
  int idx = -code;
  if (idx < 0 || idx >= METRICS_CODES) idx = -GKC_EINTERNAL; /* not a code we send */
  m->requests[method][idx]++;
}

static void observe(metrics_hist *h, double s) {
  h->count++;
  h->sum += s;
  int b = 0;
  while (b < METRICS_BUCKETS && s > bucket_le[b]) b++;
  if (b < METRICS_BUCKETS) h->bucket[b]++; /* else only +Inf (count) holds it */
}

void metrics_job_done(gkcd_metrics *m, const gkcd_job *job, uint64_t now_ns) {
  int method = job->method;
  if (method < 0 || method >= PROTO_M_COUNT) return;
  metrics_count(m, method, job->err);
  int lane = job->lane >= 0 && job->lane < SCHED_MAX_LANES ? job->lane : LANE_BULK;
  double s = now_ns > job->t_start_ns ? (double)(now_ns - job->t_start_ns) / 1e9 : 0;
  observe(&m->lat[method][lane], s);
  if (job->err || !job->algo_name || !(job->kernel_us > 0)) return;
  int i = 0;
  while (i < m->nkernel && !(m->kernel[i].method == method &&
                             strcmp(m->kernel[i].algo, job->algo_name) == 0))
    i++;
  if (i == m->nkernel) {
    if (m->nkernel == METRICS_ALGOS) return; /* cannot happen with static algo names */
    m->kernel[i].method = method;
    m->kernel[i].algo = job->algo_name;
    m->kernel[i].seconds = 0;
    m->nkernel++;
  }
  m->kernel[i].seconds += job->kernel_us / 1e6;
}

/* --- rendering ------------------------------------------------------------- */

typedef struct {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = 1;
      return;
    }
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap * 2 + (size_t)n;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p, b->cap = cap;
  }
}

static void family(sbuf *b, const char *name, const char *type, const char *help) {
  put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newline escaped, as the format requires. */
static const char *label(const char *s, char *out, size_t n) {
  size_t o = 0;
  for (; *s && o + 3 < n; s++) {
    if (*s == '\\' || *s == '"') out[o++] = '\\', out[o++] = *s;
    else if (*s == '\n') out[o++] = '\\', out[o++] = 'n';
    else out[o++] = *s;
  }
  out[o] = 0;
  return out;
}

static const char *lane_name(int l) { return l == LANE_LATENCY ? "latency" : "bulk"; }

static void render_requests(sbuf *b, const gkcd_metrics *m) {
  family(b, "gkcd_requests_total", "counter",
         "Requests answered, by method and result code (ok or the error's wire name).");
  for (int me = 0; me < PROTO_M_COUNT; me++)
    for (int c = 0; c < METRICS_CODES; c++) {
      uint64_t v = m->requests[me][c];
      if (c && !v) continue; /* every method's "ok" is listed, errors once seen */
      put(b, "gkcd_requests_total{method=\"%s\",code=\"%s\"} %llu\n", proto_method_name(me),
          c ? proto_err_wire(-c) : "ok", (unsigned long long)v);
    }
}

static void render_latency(sbuf *b, const gkcd_metrics *m) {
  family(b, "gkcd_request_duration_seconds", "histogram",
         "Time in gkcd of computed requests, from decoded to reply, by method and lane.");
  for (int me = 0; me < PROTO_M_COUNT; me++)
    for (int l = 0; l < SCHED_MAX_LANES; l++) {
      const metrics_hist *h = &m->lat[me][l];
      if (!h->count) continue;
      const char *mn = proto_method_name(me), *ln = lane_name(l);
      uint64_t cum = 0;
      for (int k = 0; k < METRICS_BUCKETS; k++) {
        cum += h->bucket[k];
        put(b, "gkcd_request_duration_seconds_bucket{method=\"%s\",lane=\"%s\",le=\"%g\"} %llu\n",
            mn, ln, bucket_le[k], (unsigned long long)cum);
      }
      put(b, "gkcd_request_duration_seconds_bucket{method=\"%s\",lane=\"%s\",le=\"+Inf\"} %llu\n",
          mn, ln, (unsigned long long)h->count);
      put(b, "gkcd_request_duration_seconds_sum{method=\"%s\",lane=\"%s\"} %.9g\n", mn, ln, h->sum);
      put(b, "gkcd_request_duration_seconds_count{method=\"%s\",lane=\"%s\"} %llu\n", mn, ln,
          (unsigned long long)h->count);
    }
}

static void gauge(sbuf *b, const char *name, const char *help, double v) {
  family(b, name, "gauge", help);
  put(b, "%s %.12g\n", name, v);
}

static void counter(sbuf *b, const char *name, const char *help, uint64_t v) {
  family(b, name, "counter", help);
  put(b, "%s %llu\n", name, (unsigned long long)v);
}

static void render_state(sbuf *b, const metrics_view *v) {
  char esc[300];
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  family(b, "gkcd_build_info", "gauge", "Always 1; the version and the backend in labels.");
  put(b, "gkcd_build_info{version=\"%s\",backend=\"%s\"} 1\n", GKC_VERSION,
      label(v->backend, esc, sizeof esc));
  gauge(b, "gkcd_uptime_seconds", "Seconds since gkcd started.", (double)(now - v->start_ns) / 1e9);
  gauge(b, "gkcd_connections", "Open client connections.", (double)v->connections);
  gauge(b, "gkcd_in_flight", "Requests accepted and not yet answered.", (double)v->in_flight);
  gauge(b, "gkcd_queue_depth", "Requests waiting in the scheduler's queues for a worker.",
        (double)sched_queued(v->sched));
  family(b, "gkcd_lane_queue_depth", "gauge", "Requests waiting for a worker, by lane.");
  int nl = sched_nlanes(v->sched);
  for (int l = 0; l < nl; l++) {
    sched_lane_stats st;
    sched_lane_stats_get(v->sched, l, &st);
    put(b, "gkcd_lane_queue_depth{lane=\"%s\"} %llu\n", lane_name(l), (unsigned long long)st.queued);
  }
  gauge(b, "gkcd_memory_budget_bytes", "Host memory requests in flight may hold (--memory-budget).",
        (double)v->budget->limit);
  gauge(b, "gkcd_memory_used_bytes", "Host memory held now against the budget.",
        (double)v->budget->used);
  gauge(b, "gkcd_region_bytes", "Bytes of clients' shared-memory regions registered now (pinned on a GPU).",
        (double)v->region_bytes);
  gauge(b, "gkcd_max_conn_pinned_bytes", "Region bytes one connection may register (--max-conn-pinned).",
        (double)v->max_conn_pinned);
  gauge(b, "gkcd_regions_kept_bytes",
        "Bytes of released regions kept mapped (and registered) for their process to register again.",
        (double)v->regions_kept_bytes);
  counter(b, "gkcd_regions_kept_hits_total", "Region registrations served by a kept mapping.",
          v->regions_kept_hits);
  counter(b, "gkcd_bad_requests_total", "Frames rejected before they reached a method.",
          v->bad_frames);
  counter(b, "gkcd_refused_connections_total", "Connections closed at once on accept.",
          v->refused);

  /* One series per device the daemon serves from (devices.h), lost ones
   * included: their index goes on naming them. */
  int ndev = v->devs->n;
  gkcd_device_info dev[GKCD_MAX_DEVICES];
  for (int i = 0; i < ndev; i++) {
    memset(&dev[i], 0, sizeof dev[i]);
    gkcd_backend *be = v->devs->dev[i].be;
    be->devices(be, &dev[i], 1);
  }
  family(b, "gkcd_device_info", "gauge", "Always 1; each device's name in a label.");
  for (int i = 0; i < ndev; i++)
    put(b, "gkcd_device_info{device=\"%d\",name=\"%s\"} 1\n", i, label(dev[i].name, esc, sizeof esc));
  family(b, "gkcd_device_up", "gauge", "1 while the device serves, 0 once it was lost.");
  for (int i = 0; i < ndev; i++)
    put(b, "gkcd_device_up{device=\"%d\"} %d\n", i, !atomic_load(&v->devs->dev[i].be->lost));
  family(b, "gkcd_device_requests_total", "counter",
         "Jobs each device finished (each part of a split request counts on its device).");
  for (int i = 0; i < ndev; i++)
    put(b, "gkcd_device_requests_total{device=\"%d\"} %llu\n", i,
        (unsigned long long)v->devs->dev[i].served);
  family(b, "gkcd_device_memory_bytes", "gauge",
         "Device memory by state: total, free, used (total - free), cached (kept for reuse);"
         " the CPU backend reports RAM, or each virtual device's own pool.");
  for (int i = 0; i < ndev; i++) {
    uint64_t t = dev[i].memory_total, f = dev[i].memory_free;
    put(b, "gkcd_device_memory_bytes{device=\"%d\",state=\"total\"} %llu\n", i, (unsigned long long)t);
    put(b, "gkcd_device_memory_bytes{device=\"%d\",state=\"free\"} %llu\n", i, (unsigned long long)f);
    put(b, "gkcd_device_memory_bytes{device=\"%d\",state=\"used\"} %llu\n", i,
        (unsigned long long)(t > f ? t - f : 0));
    put(b, "gkcd_device_memory_bytes{device=\"%d\",state=\"cached\"} %llu\n", i,
        (unsigned long long)dev[i].cached_bytes);
  }
}

char *metrics_render(const metrics_view *v, size_t *len) {
  sbuf b = {malloc(16384), 0, 16384, 0};
  if (!b.p) return NULL;
  const gkcd_metrics *m = v->counted;
  render_requests(&b, m);
  render_latency(&b, m);
  family(&b, "gkcd_kernel_seconds_total", "counter",
         "Kernel time of successful requests, by method and the algo that ran.");
  char esc[200];
  for (int i = 0; i < m->nkernel; i++)
    put(&b, "gkcd_kernel_seconds_total{method=\"%s\",algo=\"%s\"} %.9g\n",
        proto_method_name(m->kernel[i].method), label(m->kernel[i].algo, esc, sizeof esc),
        m->kernel[i].seconds);
  render_state(&b, v);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  *len = b.len;
  return b.p;
}
