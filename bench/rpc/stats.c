/* stats.c: a run's latency statistics, and the table of results that
 * bench_rpc reports: one per placement, server, method and shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "rpc.h"

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

void stats_sort_u32(uint32_t *v, size_t n) { qsort(v, n, sizeof *v, cmp_u32); }

double stats_pct_us(const uint32_t *sorted, uint64_t n, double p) {
  uint64_t k = (uint64_t)ceil(p * (double)n);
  return sorted[k ? k - 1 : 0] / 1e3;
}

void stats_latency(uint32_t *lat, uint64_t n, run_stats *st) {
  if (n == 0) return;
  stats_sort_u32(lat, n);
  double sum = 0;
  for (uint64_t i = 0; i < n; i++) sum += lat[i];
  st->p50_us = stats_pct_us(lat, n, 0.50);
  st->p90_us = stats_pct_us(lat, n, 0.90);
  st->p99_us = stats_pct_us(lat, n, 0.99);
  st->p999_us = stats_pct_us(lat, n, 0.999);
  st->mean_us = sum / (double)n / 1e3;
  st->max_us = lat[n - 1] / 1e3;
}

result g_res[512];
int g_nres;
double g_other_ns, g_steal_ns, g_wall_ns;

result *stats_add_result(int pin, const char *server, const request_tpl *tpl, shape sh) {
  if (g_nres == (int)(sizeof g_res / sizeof g_res[0])) bench_die("too many results");
  result *r = &g_res[g_nres++];
  *r = (result){.pin = pin, .server = server, .method = tpl->method, .sh = sh,
                .req_bytes = tpl->len, .server_us_p50 = -1, .kernel_us_p50 = -1};
  r->reply_bytes = !strcmp(server, "echo") ? tpl->len : tpl->reply_len;
  return r;
}

const result *stats_find_result(int pin, const char *server, const char *method, shape sh) {
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    if (r->pin == pin && !strcmp(r->server, server) && !strcmp(r->method, method) &&
        r->sh.rtt == sh.rtt && r->sh.conns == sh.conns && r->sh.window == sh.window)
      return r;
  }
  return NULL;
}

const char *stats_shape_name(shape sh, char *buf, size_t n) {
  if (sh.rtt) snprintf(buf, n, "RTT, 1 conn seq");
  else if (sh.window > 1) snprintf(buf, n, "%d conn pipelined x%d", sh.conns, sh.window);
  else snprintf(buf, n, "%d conn sequential", sh.conns);
  return buf;
}
