/* test_metrics: the Prometheus exposition (daemon/metrics.c) rendered from a
 * metrics_view, with the scheduler's figures stubbed and devices whose names
 * need escaping.  Every line is parsed back as a scraper would read it
 * (families, label escapes, values), and the figures are checked against
 * what was counted: requests by code, histograms (cumulative, +Inf = count,
 * sum), kernel seconds by algo, devices up and lost, memory.  With
 * promtool on PATH, `promtool check metrics` must accept it too. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "backend.h"
#include "devices.h"
#include "gkc_errors.h"
#include "job.h"
#include "metrics.h"
#include "proto_errors.h"
#include "proto_methods.h"
#include "scheduler.h"
#include "test.h"

/* --- the scheduler's figures, stubbed --------------------------------------- */

static size_t g_queued[SCHED_MAX_LANES] = {7, 2};
int sched_nlanes(const gkcd_sched *s) { (void)s; return 2; }
size_t sched_queued(const gkcd_sched *s) { (void)s; return g_queued[0] + g_queued[1]; }
void sched_lane_stats_get(gkcd_sched *s, int lane, sched_lane_stats *out) {
  (void)s;
  memset(out, 0, sizeof *out);
  out->queued = g_queued[lane];
}

/* --- devices ------------------------------------------------------------------ */

#define NDEV 2
static const char *const g_names[NDEV] = {"GPU \"zero\" \\ 80GB", "second\nline"};
static const uint64_t g_total[NDEV] = {1000, 500}, g_free[NDEV] = {250, 600}; /* free > total */

static int fake_devices(gkcd_backend *be, gkcd_device_info *out, int max) {
  (void)max;
  snprintf(out->name, sizeof out->name, "%s", g_names[be->device]);
  out->memory_total = g_total[be->device];
  out->memory_free = g_free[be->device];
  out->cached_bytes = 64u * (uint64_t)(be->device + 1);
  return 1;
}

/* --- reading the text back ------------------------------------------------------ */

#define MAX_SAMPLES 4096
typedef struct {
  char name[96];
  char labels[8][2][160]; /* unescaped (name, value) pairs */
  int nlabels;
  double value;
} sample;
static sample g_s[MAX_SAMPLES];
static int g_ns;

static const char *label_of(const sample *s, const char *name) {
  for (int i = 0; i < s->nlabels; i++)
    if (!strcmp(s->labels[i][0], name)) return s->labels[i][1];
  return NULL;
}

/* One sample line; the name must belong to family (with a histogram's
 * suffixes when type is "histogram"). */
static void parse_sample(const char *line, const char *family, const char *type) {
  ASSERT(g_ns < MAX_SAMPLES);
  sample *s = &g_s[g_ns++];
  memset(s, 0, sizeof *s);
  size_t n = strspn(line, "abcdefghijklmnopqrstuvwxyz_0123456789");
  ASSERT(n > 0 && n < sizeof s->name);
  memcpy(s->name, line, n);
  const char *p = line + n;
  size_t fl = strlen(family);
  int ok = !strcmp(s->name, family);
  if (!ok && !strcmp(type, "histogram") && !strncmp(s->name, family, fl))
    ok = !strcmp(s->name + fl, "_bucket") || !strcmp(s->name + fl, "_sum") ||
         !strcmp(s->name + fl, "_count");
  if (!ok) TEST_FAIL("sample %s outside its family %s (%s)", s->name, family, type);
  if (*p == '{') {
    p++;
    while (*p != '}') {
      ASSERT(s->nlabels < 8);
      char *k = s->labels[s->nlabels][0], *v = s->labels[s->nlabels][1];
      size_t kn = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
      ASSERT(kn > 0 && kn < 160);
      memcpy(k, p, kn);
      p += kn;
      if (p[0] != '=' || p[1] != '"') TEST_FAIL("label %s: no =\" in: %s", k, line);
      p += 2;
      size_t o = 0;
      for (; *p != '"'; p++) {
        ASSERT(*p && *p != '\n' && o + 1 < 160);
        if (*p == '\\') {
          p++;
          if (*p == 'n') v[o++] = '\n';
          else if (*p == '\\' || *p == '"') v[o++] = *p;
          else TEST_FAIL("bad escape \\%c in: %s", *p, line);
        } else {
          v[o++] = *p;
        }
      }
      p++;
      s->nlabels++;
      if (*p == ',') p++;
      else ASSERT(*p == '}');
    }
    p++;
  }
  if (*p != ' ') TEST_FAIL("no space before the value in: %s", line);
  char *end;
  s->value = strtod(p + 1, &end);
  if (end == p + 1 || *end != '\n') TEST_FAIL("bad value in: %s", line);
}

/* Every line is a HELP, the TYPE right after it, or a sample of that family. */
static void parse(const char *text, size_t len) {
  ASSERT(len == strlen(text) && len > 0 && text[len - 1] == '\n');
  g_ns = 0;
  char family[96] = "", type[16] = "";
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    ASSERT(nl);
    if (!strncmp(line, "# HELP ", 7)) {
      size_t n = strcspn(line + 7, " ");
      ASSERT(n < sizeof family);
      memcpy(family, line + 7, n);
      family[n] = 0;
      const char *t = nl + 1;
      char want[128];
      snprintf(want, sizeof want, "# TYPE %s ", family);
      if (strncmp(t, want, strlen(want))) TEST_FAIL("HELP %s without its TYPE", family);
      t += strlen(want);
      size_t tn = strcspn(t, "\n");
      ASSERT(tn < sizeof type);
      memcpy(type, t, tn);
      type[tn] = 0;
      ASSERT(!strcmp(type, "counter") || !strcmp(type, "gauge") || !strcmp(type, "histogram"));
      if (!strcmp(type, "counter") && strlen(family) > 6)
        ASSERT(!strcmp(family + strlen(family) - 6, "_total"));
      line = strchr(t, '\n') + 1;
      continue;
    }
    ASSERT(line[0] != '#');
    ASSERT(family[0]);
    parse_sample(line, family, type);
    line = nl + 1;
  }
}

/* The one sample named name whose labels include the given pairs (NULL-ended). */
static const sample *find(const char *name, ...) {
  const sample *hit = NULL;
  for (int i = 0; i < g_ns; i++) {
    if (strcmp(g_s[i].name, name)) continue;
    va_list ap;
    va_start(ap, name);
    int match = 1;
    for (const char *k; match && (k = va_arg(ap, const char *));) {
      const char *v = va_arg(ap, const char *), *have = label_of(&g_s[i], k);
      match = have && !strcmp(have, v);
    }
    va_end(ap);
    if (!match) continue;
    if (hit) TEST_FAIL("two samples of %s match", name);
    hit = &g_s[i];
  }
  if (!hit) TEST_FAIL("no sample of %s with those labels", name);
  return hit;
}

/* --- the test ------------------------------------------------------------------ */

/* A job of method answered with err after seconds in gkcd. */
static void done(gkcd_metrics *m, int method, int err, int lane, double seconds, const char *algo,
                 double kernel_us) {
  gkcd_job j;
  memset(&j, 0, sizeof j);
  j.method = method, j.err = err, j.lane = lane, j.algo_name = algo, j.kernel_us = kernel_us;
  j.t_start_ns = 1000000000ull;
  metrics_job_done(m, &j, j.t_start_ns + (uint64_t)(seconds * 1e9 + 0.5));
}

static void promtool_check(const char *text, size_t len) {
  if (system("command -v promtool >/dev/null 2>&1") != 0) {
    printf("test_metrics: promtool not on PATH, its check not run\n");
    return;
  }
  FILE *p = popen("promtool check metrics", "w");
  ASSERT(p);
  ASSERT(fwrite(text, 1, len, p) == len);
  int st = pclose(p);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) TEST_FAIL("promtool check metrics refused the text");
}

int main(void) {
  static gkcd_metrics m;
  /* sgemm: 3 ok on the bulk lane (two algos), 1 invalid_argument; reduce: 2
   * ok on the latency lane, one past the last bucket. */
  done(&m, PROTO_M_SGEMM, 0, LANE_BULK, 0.0003, "cublas", 200);
  done(&m, PROTO_M_SGEMM, 0, LANE_BULK, 0.002, "regblock", 1500);
  done(&m, PROTO_M_SGEMM, 0, LANE_BULK, 0.004, "cublas", 3000);
  done(&m, PROTO_M_SGEMM, GKC_EINVALID_ARGUMENT, LANE_BULK, 0.00001, "cublas", 0);
  done(&m, PROTO_M_REDUCE, 0, LANE_LATENCY, 0.00004, "shfl", 10);
  done(&m, PROTO_M_REDUCE, 0, LANE_LATENCY, 100.0, "shfl", 20);
  metrics_count(&m, PROTO_M_PING, 0);
  metrics_count(&m, PROTO_M_STATUS, GKC_EINVALID_ARGUMENT);
  metrics_count(&m, PROTO_M_COUNT, 0); /* out of range: ignored */
  metrics_count(&m, PROTO_M_PING, 5);  /* not an error we send: internal */

  static gkcd_devices devs;
  static gkcd_backend be[NDEV];
  devs.n = NDEV;
  for (int d = 0; d < NDEV; d++) {
    be[d].device = d;
    be[d].devices = fake_devices;
    devs.dev[d].be = &be[d];
    devs.dev[d].served = 10u * (uint64_t)(d + 1);
  }
  atomic_store(&be[1].lost, 1);
  gkcd_budget budget = {0};
  budget.limit = 1 << 20;
  budget.used = 4096;

  metrics_view v = {.counted = &m, .devs = &devs, .budget = &budget, .backend = "cu\"da",
                    .connections = 3, .in_flight = 4, .bad_frames = 5, .refused = 6};
  size_t len = 0;
  char *text = metrics_render(&v, &len);
  ASSERT(text);
  parse(text, len);

  /* Requests by method and code. */
  ASSERT_EQ(find("gkcd_requests_total", "method", "sgemm", "code", "ok", NULL)->value, 3);
  ASSERT_EQ(find("gkcd_requests_total", "method", "sgemm", "code", "invalid_argument", NULL)->value, 1);
  ASSERT_EQ(find("gkcd_requests_total", "method", "reduce", "code", "ok", NULL)->value, 2);
  ASSERT_EQ(find("gkcd_requests_total", "method", "ping", "code", "ok", NULL)->value, 1);
  ASSERT_EQ(find("gkcd_requests_total", "method", "ping", "code", "internal", NULL)->value, 1);
  ASSERT_EQ(find("gkcd_requests_total", "method", "status", "code", "invalid_argument", NULL)->value, 1);
  ASSERT_EQ(find("gkcd_requests_total", "method", "spmv", "code", "ok", NULL)->value, 0); /* listed */

  /* Histograms: cumulative, +Inf is the count, the sum adds up. */
  const sample *inf = find("gkcd_request_duration_seconds_bucket", "method", "sgemm", "lane", "bulk",
                           "le", "+Inf", NULL);
  ASSERT_EQ(inf->value, 4);
  ASSERT_EQ(find("gkcd_request_duration_seconds_count", "method", "sgemm", "lane", "bulk", NULL)->value, 4);
  ASSERT_NEAR(find("gkcd_request_duration_seconds_sum", "method", "sgemm", "lane", "bulk", NULL)->value,
              0.0003 + 0.002 + 0.004 + 0.00001, 1e-12);
  ASSERT_EQ(find("gkcd_request_duration_seconds_bucket", "method", "sgemm", "lane", "bulk", "le",
                 "0.0005", NULL)->value, 2);
  ASSERT_EQ(find("gkcd_request_duration_seconds_bucket", "method", "sgemm", "lane", "bulk", "le",
                 "0.0025", NULL)->value, 3);
  ASSERT_EQ(find("gkcd_request_duration_seconds_bucket", "method", "reduce", "lane", "latency", "le",
                 "30", NULL)->value, 1); /* 100 s: only in +Inf */
  ASSERT_EQ(find("gkcd_request_duration_seconds_bucket", "method", "reduce", "lane", "latency", "le",
                 "+Inf", NULL)->value, 2);
  for (int i = 0; i < g_ns; i++) { /* every series: nondecreasing buckets */
    if (strcmp(g_s[i].name, "gkcd_request_duration_seconds_bucket") || i == 0) continue;
    const sample *a = &g_s[i - 1], *b = &g_s[i];
    if (!strcmp(a->name, b->name) && !strcmp(label_of(a, "method"), label_of(b, "method")) &&
        !strcmp(label_of(a, "lane"), label_of(b, "lane")))
      ASSERT(b->value >= a->value);
  }

  /* Kernel seconds by (method, algo); failed requests add none. */
  ASSERT_NEAR(find("gkcd_kernel_seconds_total", "method", "sgemm", "algo", "cublas", NULL)->value,
              3200e-6, 1e-12);
  ASSERT_NEAR(find("gkcd_kernel_seconds_total", "method", "sgemm", "algo", "regblock", NULL)->value,
              1500e-6, 1e-12);
  ASSERT_NEAR(find("gkcd_kernel_seconds_total", "method", "reduce", "algo", "shfl", NULL)->value,
              30e-6, 1e-12);

  /* The state: labels escaped and read back whole. */
  ASSERT_STR_EQ(label_of(find("gkcd_build_info", NULL), "backend"), "cu\"da");
  ASSERT_EQ(find("gkcd_connections", NULL)->value, 3);
  ASSERT_EQ(find("gkcd_in_flight", NULL)->value, 4);
  ASSERT_EQ(find("gkcd_queue_depth", NULL)->value, 9);
  ASSERT_EQ(find("gkcd_lane_queue_depth", "lane", "bulk", NULL)->value, 7);
  ASSERT_EQ(find("gkcd_lane_queue_depth", "lane", "latency", NULL)->value, 2);
  ASSERT_EQ(find("gkcd_memory_budget_bytes", NULL)->value, 1 << 20);
  ASSERT_EQ(find("gkcd_memory_used_bytes", NULL)->value, 4096);
  ASSERT_EQ(find("gkcd_bad_requests_total", NULL)->value, 5);
  ASSERT_EQ(find("gkcd_refused_connections_total", NULL)->value, 6);
  for (int d = 0; d < NDEV; d++) {
    char dev[8];
    snprintf(dev, sizeof dev, "%d", d);
    ASSERT_STR_EQ(label_of(find("gkcd_device_info", "device", dev, NULL), "name"), g_names[d]);
    ASSERT_EQ(find("gkcd_device_up", "device", dev, NULL)->value, d == 0);
    ASSERT_EQ(find("gkcd_device_requests_total", "device", dev, NULL)->value, 10 * (d + 1));
    ASSERT_EQ(find("gkcd_device_memory_bytes", "device", dev, "state", "total", NULL)->value, g_total[d]);
    ASSERT_EQ(find("gkcd_device_memory_bytes", "device", dev, "state", "free", NULL)->value, g_free[d]);
    ASSERT_EQ(find("gkcd_device_memory_bytes", "device", dev, "state", "used", NULL)->value,
              g_total[d] > g_free[d] ? g_total[d] - g_free[d] : 0);
    ASSERT_EQ(find("gkcd_device_memory_bytes", "device", dev, "state", "cached", NULL)->value, 64 * (d + 1));
  }
  promtool_check(text, len);
  free(text);
  printf("test_metrics: ok (%d samples)\n", g_ns);
  return 0;
}
