/* output.c: bench_rpc's report: Markdown tables (the default), one JSON
 * document (--json) or CSV rows (--csv), all on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_csv.h"
#include "rpc.h"

static char g_date[64], g_cpu[128];

void output_machine_info(void) {
  time_t t = time(NULL);
  strftime(g_date, sizeof g_date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  snprintf(g_cpu, sizeof g_cpu, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    char *p = strchr(line, ':');
    if (strncmp(line, "model name", 10) || !p) continue;
    p += 1 + strspn(p + 1, " \t");
    p[strcspn(p, "\n")] = 0;
    snprintf(g_cpu, sizeof g_cpu, "%s", p);
    break;
  }
  if (f) fclose(f);
}

/* A table cell: fmt applied to v, or "-" when there is no result. */
static char *cell(char *buf, const result *r, const char *fmt, double v) {
  if (r) snprintf(buf, 32, fmt, v);
  else snprintf(buf, 32, "-");
  return buf;
}

static char *cpu_cell(char *buf, const result *r) {
  if (!r) snprintf(buf, 32, "-");
  else if (r->st.srv_cpu_us < 0) snprintf(buf, 32, "? + %.2f", r->st.cli_cpu_us);
  else snprintf(buf, 32, "%.2f + %.2f", r->st.srv_cpu_us, r->st.cli_cpu_us);
  return buf;
}

void output_table(const options *o, const placement *pls, int npl, const gkc_ping_info *pi) {
  printf("\n## bench_rpc, %s\n\n", g_date);
  printf("- machine: %ld CPUs, %s\n", sysconf(_SC_NPROCESSORS_ONLN), g_cpu);
  if (o->gkcd) printf("- gkcd %s, backend %s: `gkcd %s`\n", pi->version, pi->backend, g_flags);
  for (int p = 0; p < npl; p++)
    printf("- placement `%s`: bench on CPU %s, servers on CPU %s%s\n", pin_names[pls[p].mode],
           pls[p].bench_list, pls[p].server_list, o->socket ? " (gkcd itself not pinned)" : "");
  printf("- RTT: %ld requests after %ld warm-up, one in flight, one connection.\n"
         "- Throughput: %ld requests or %.2f s per run, whichever first, after a warm-up run;\n"
         "  the run with the median req/s of %d; its p50/p99 include queueing when pipelined.\n"
         "- CPU us/req: server process + bench process CPU time per request.\n",
         o->rtt_count, o->rtt_warmup, o->count, o->duration, o->repeat);
  if (g_wall_ns > 0)
    printf("- Quiet machine check: over all timed runs, other processes used %.1f%% of one CPU\n"
           "  and the hypervisor stole %.1f%% (from /proc/stat ticks: +-5%%).\n",
           100 * g_other_ns / g_wall_ns, 100 * g_steal_ns / g_wall_ns);
  printf("\n");
  printf("| pin | method | shape | gkcd p50 us | gkcd p99 us | gkcd req/s | echo p50 us |"
         " echo p99 us | echo req/s | gkcd/echo p50 | gkcd/echo req/s | gkcd CPU us/req |"
         " echo CPU us/req |\n");
  printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    if (strcmp(r->server, o->gkcd ? "gkcd" : "echo")) continue; /* one row per shape */
    const result *g = o->gkcd ? r : NULL, *e = stats_find_result(r->pin, "echo", r->method, r->sh);
    const result *both = g && e ? g : NULL;
    char c[10][32], sh[48];
    printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
           pin_names[r->pin], r->method, stats_shape_name(r->sh, sh, sizeof sh),
           cell(c[0], g, "%.1f", g ? g->st.p50_us : 0), cell(c[1], g, "%.1f", g ? g->st.p99_us : 0),
           cell(c[2], g, "%.0f", g ? g->st.rps : 0), cell(c[3], e, "%.1f", e ? e->st.p50_us : 0),
           cell(c[4], e, "%.1f", e ? e->st.p99_us : 0), cell(c[5], e, "%.0f", e ? e->st.rps : 0),
           cell(c[6], both, "%.2fx", both ? g->st.p50_us / e->st.p50_us : 0),
           cell(c[7], both, "%.2fx", both ? g->st.rps / e->st.rps : 0), cpu_cell(c[8], g),
           cpu_cell(c[9], e));
  }
  if (!o->gkcd) return;
  printf("\nThe same sequential RTT through libgkc (gkc_ping, gkc_reduce) instead of the raw"
         " client:\n\n");
  printf("| pin | method | raw p50 us | raw p99 us | libgkc p50 us | libgkc p99 us |"
         " bench CPU us/req raw | bench CPU us/req libgkc | reply server_us p50 |"
         " reply kernel_us p50 |\n");
  printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int i = 0; i < g_nres; i++) {
    const result *l = &g_res[i], *r;
    if (strcmp(l->server, "libgkc") || !(r = stats_find_result(l->pin, "gkcd", l->method, l->sh)))
      continue;
    char su[32], ku[32];
    const result *has = l->server_us_p50 >= 0 ? l : NULL;
    printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %s | %s |\n", pin_names[l->pin],
           l->method, r->st.p50_us, r->st.p99_us, l->st.p50_us, l->st.p99_us, r->st.cli_cpu_us,
           l->st.cli_cpu_us, cell(su, has, "%.2f", l->server_us_p50),
           cell(ku, has, "%.2f", l->kernel_us_p50));
  }
  printf("\nRequest/reply bytes:");
  for (int i = 0; i < g_nres; i++)
    if (g_res[i].pin == g_res[0].pin && g_res[i].sh.rtt && strcmp(g_res[i].server, "libgkc"))
      printf(" %s %s %zu/%zu;", g_res[i].server, g_res[i].method, g_res[i].req_bytes,
             g_res[i].reply_bytes);
  printf(" (msgid coded as uint32).\n"
         "server_us: gkcd's own clock from the request decoded to the reply packed (queue,\n"
         "worker hand-off, kernel); kernel_us: the kernel alone.\n");
}

void output_json(const options *o, const placement *pls, int npl, const gkc_ping_info *pi) {
  printf("{\"date\":");
  bench_json_str(stdout, g_date);
  printf(",\"nproc\":%ld,\"cpu\":", sysconf(_SC_NPROCESSORS_ONLN));
  bench_json_str(stdout, g_cpu);
  printf(",\"gkcd\":{\"measured\":%s,\"version\":", o->gkcd ? "true" : "false");
  bench_json_str(stdout, pi->version);
  printf(",\"backend\":");
  bench_json_str(stdout, pi->backend);
  printf(",\"flags\":");
  bench_json_str(stdout, g_flags);
  printf(",\"external\":%s},\"placements\":[", o->socket ? "true" : "false");
  for (int p = 0; p < npl; p++)
    printf("%s{\"pin\":\"%s\",\"bench_cpus\":\"%s\",\"server_cpus\":\"%s\"}", p ? "," : "",
           pin_names[pls[p].mode], pls[p].bench_list, pls[p].server_list);
  printf("],\"quiet\":{\"other_cpu_pct\":%.2f,\"steal_pct\":%.2f}",
         g_wall_ns > 0 ? 100 * g_other_ns / g_wall_ns : 0,
         g_wall_ns > 0 ? 100 * g_steal_ns / g_wall_ns : 0);
  printf(",\"config\":{\"rtt_count\":%ld,\"rtt_warmup\":%ld,\"count\":%ld,\"duration_s\":%g,"
         "\"repeat\":%d,\"window\":%d},\"results\":[",
         o->rtt_count, o->rtt_warmup, o->count, o->duration, o->repeat, o->window);
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    printf("%s{\"pin\":\"%s\",\"server\":\"%s\",\"method\":\"%s\",\"test\":\"%s\",\"conns\":%d,"
           "\"window\":%d,\"request_bytes\":%zu,\"reply_bytes\":%zu,\"requests\":%llu,"
           "\"seconds\":%.6f,\"rps\":%.1f,\"rps_min\":%.1f,\"rps_max\":%.1f,\"runs\":%d,"
           "\"p50_us\":%.3f,\"p90_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"mean_us\":%.3f,"
           "\"max_us\":%.3f,\"other_cpu_ms\":%.1f,\"steal_ms\":%.1f,\"bench_cpu_us\":%.3f",
           i ? "," : "", pin_names[r->pin], r->server, r->method,
           r->sh.rtt ? "rtt" : "throughput", r->sh.conns, r->sh.window, r->req_bytes,
           r->reply_bytes, (unsigned long long)r->st.requests, r->st.seconds, r->st.rps,
           r->rps_min, r->rps_max, r->runs, r->st.p50_us, r->st.p90_us, r->st.p99_us,
           r->st.p999_us, r->st.mean_us, r->st.max_us, r->st.other_ns / 1e6, r->st.steal_ns / 1e6,
           r->st.cli_cpu_us);
    const double opt[3] = {r->st.srv_cpu_us, r->server_us_p50, r->kernel_us_p50};
    const char *names[3] = {"server_cpu_us", "reply_server_us_p50", "reply_kernel_us_p50"};
    for (int k = 0; k < 3; k++)
      if (opt[k] >= 0) printf(",\"%s\":%.3f", names[k], opt[k]);
      else printf(",\"%s\":null", names[k]);
    printf("}");
  }
  printf("]}\n");
}

/* The results as CSV: the fields of print_json's results, with the run's
 * gkcd version and backend on every row; an unmeasured value is empty. */
void output_csv(const gkc_ping_info *pi) {
  bench_csv c = {stdout, 0};
  fputs("pin,server,method,test,conns,window,request_bytes,reply_bytes,requests,seconds,rps,"
        "rps_min,rps_max,runs,p50_us,p90_us,p99_us,p999_us,mean_us,max_us,other_cpu_ms,steal_ms,"
        "bench_cpu_us,server_cpu_us,reply_server_us_p50,reply_kernel_us_p50,gkcd_version,backend\n",
        stdout);
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    bench_csv_str(&c, pin_names[r->pin]);
    bench_csv_str(&c, r->server);
    bench_csv_str(&c, r->method);
    bench_csv_str(&c, r->sh.rtt ? "rtt" : "throughput");
    bench_csv_num(&c, "%d", r->sh.conns);
    bench_csv_num(&c, "%d", r->sh.window);
    bench_csv_num(&c, "%zu", r->req_bytes);
    bench_csv_num(&c, "%zu", r->reply_bytes);
    bench_csv_num(&c, "%llu", (unsigned long long)r->st.requests);
    bench_csv_num(&c, "%.6f", r->st.seconds);
    bench_csv_num(&c, "%.1f", r->st.rps);
    bench_csv_num(&c, "%.1f", r->rps_min);
    bench_csv_num(&c, "%.1f", r->rps_max);
    bench_csv_num(&c, "%d", r->runs);
    const double lat[6] = {r->st.p50_us,  r->st.p90_us,  r->st.p99_us,
                           r->st.p999_us, r->st.mean_us, r->st.max_us};
    for (int k = 0; k < 6; k++) bench_csv_num(&c, "%.3f", lat[k]);
    bench_csv_num(&c, "%.1f", r->st.other_ns / 1e6);
    bench_csv_num(&c, "%.1f", r->st.steal_ns / 1e6);
    bench_csv_num(&c, "%.3f", r->st.cli_cpu_us);
    const double opt[3] = {r->st.srv_cpu_us, r->server_us_p50, r->kernel_us_p50};
    for (int k = 0; k < 3; k++)
      if (opt[k] >= 0) bench_csv_num(&c, "%.3f", opt[k]);
      else bench_csv_str(&c, "");
    bench_csv_str(&c, pi->version);
    bench_csv_str(&c, pi->backend);
    bench_csv_end(&c);
  }
  if (bench_csv_close(&c) != 0) exit(1);
}
