/* measure.c: one shape measured against one server, raw or through
 * libgkc, and added to the results. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "rpc.h"

static int cmp_rps(const void *a, const void *b) {
  double x = ((const run_stats *)a)->rps, y = ((const run_stats *)b)->rps;
  return (x > y) - (x < y);
}

void measure_raw(const options *o, int pin, const server *sv, const request_tpl *tpl, shape sh) {
  int echo = !strcmp(sv->name, "echo");
  int runs = sh.rtt ? 1 : o->repeat;
  uint64_t count = (uint64_t)(sh.rtt ? o->rtt_count : o->count);
  uint64_t warm = sh.rtt ? (uint64_t)o->rtt_warmup : (uint64_t)o->count / 10;
  double cap = sh.rtt ? 3600 : o->duration;
  if (count == 0) return;
  int *fds = malloc((size_t)sh.conns * sizeof *fds);
  run_stats *st = calloc((size_t)runs, sizeof *st);
  if (!fds || !st) bench_die("out of memory");
  for (int i = 0; i < sh.conns; i++) fds[i] = client_connect(sv->sock);
  if (warm > 0) {
    run_stats ws;
    if (warm < (uint64_t)sh.conns) warm = (uint64_t)sh.conns;
    client_run(fds, sh.conns, tpl, echo, sh.window, warm, cap / 5, 0, &ws);
  }
  for (int i = 0; i < runs; i++) {
    client_run(fds, sh.conns, tpl, echo, sh.window, count, cap, sv->pid, &st[i]);
    g_other_ns += st[i].other_ns;
    g_steal_ns += st[i].steal_ns;
    g_wall_ns += st[i].seconds * 1e9;
    if (st[i].seconds >= 0.5 && st[i].other_ns > 0.1 * st[i].seconds * 1e9)
      fprintf(stderr, "bench_rpc: warning: other processes used %.0f%% of a CPU during this run\n",
              st[i].other_ns / st[i].seconds / 1e7);
  }
  for (int i = 0; i < sh.conns; i++) close(fds[i]);
  qsort(st, (size_t)runs, sizeof *st, cmp_rps);
  result *r = stats_add_result(pin, sv->name, tpl, sh);
  r->st = st[(runs - 1) / 2];
  r->rps_min = st[0].rps;
  r->rps_max = st[runs - 1].rps;
  r->runs = runs;
  char name[48];
  fprintf(stderr, "  %-5s %-4s %-6s %-22s %9.0f req/s  p50 %7.1f us  p99 %7.1f us\n",
          pin_names[pin], sv->name, tpl->method, stats_shape_name(sh, name, sizeof name), r->st.rps,
          r->st.p50_us, r->st.p99_us);
  free(fds);
  free(st);
}

void measure_libgkc(const options *o, int pin, const char *sock, const request_tpl *tpl) {
  if (o->rtt_count == 0) return;
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) bench_die("libgkc: %s", gkc_errmsg(c));
  size_t n = (size_t)o->rtt_count;
  uint32_t *lat = malloc(n * sizeof *lat), *srv = malloc(n * sizeof *srv),
           *kern = malloc(n * sizeof *kern);
  if (!lat || !srv || !kern) bench_die("out of memory");
  int is_ping = !strcmp(tpl->method, "ping");
  double v, total = 0;
  uint64_t cpu0 = 0;
  gkc_info info;
  for (long i = -o->rtt_warmup; i < o->rtt_count; i++) {
    if (i == 0) cpu0 = cputime_self_ns();
    uint64_t t = bench_clock_ns();
    int rc = is_ping ? gkc_ping(c, NULL)
                     : gkc_reduce(c, g_reduce_x, REDUCE_N, GKC_SUM, &v, NULL, &info);
    uint64_t d = bench_clock_ns() - t;
    if (rc) bench_die("libgkc %s: %s", tpl->method, gkc_errmsg(c));
    if (i < 0) continue;
    lat[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    total += (double)d;
    if (!is_ping) { /* NAN (an older gkcd) turns into 0 */
      srv[i] = info.server_us > 0 ? (uint32_t)(info.server_us * 1e3) : 0;
      kern[i] = info.kernel_us > 0 ? (uint32_t)(info.kernel_us * 1e3) : 0;
    }
  }
  uint64_t cpu1 = cputime_self_ns();
  gkc_close(c);
  result *r = stats_add_result(pin, "libgkc", tpl, (shape){1, 1, 1});
  r->runs = 1;
  r->st.requests = (uint64_t)o->rtt_count;
  r->st.seconds = total / 1e9;
  r->st.rps = r->rps_min = r->rps_max = o->rtt_count / r->st.seconds;
  stats_latency(lat, (uint64_t)o->rtt_count, &r->st);
  r->st.cli_cpu_us = (double)(cpu1 - cpu0) / 1e3 / (double)o->rtt_count;
  r->st.srv_cpu_us = -1;
  if (!is_ping) {
    stats_sort_u32(srv, n);
    stats_sort_u32(kern, n);
    r->server_us_p50 = stats_pct_us(srv, n, 0.5);
    r->kernel_us_p50 = stats_pct_us(kern, n, 0.5);
  }
  fprintf(stderr, "  %-5s %-4s %-6s %-22s %9.0f req/s  p50 %7.1f us  p99 %7.1f us\n",
          pin_names[pin], "lib", tpl->method, "RTT via libgkc", r->st.rps, r->st.p50_us,
          r->st.p99_us);
  free(lat);
  free(srv);
  free(kern);
}
