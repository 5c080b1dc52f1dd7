/* bench_fair: how long a newcomer waits behind another client's deep queue,
 * and where (issue #26, item 3).
 *
 *   bench_fair --socket PATH [--n 1024] [--depth 60] [--probes 40] [--json FILE]
 *
 * Client A (its own connection, libgkc async) keeps --depth sgemm n^3 in
 * flight on resident A, B into a resident C, for the whole run.  First A
 * runs alone for a second: its job time is the wall time per finished
 * request then (what one job costs the device when the queue is full).
 * Then, while A keeps its queue full, client B (another connection) sends
 * --probes requests one at a time, alternating
 *   tiny   a reduce of 16 floats sent inline;
 *   peer   one sgemm n^3 like A's, on B's own resident operands;
 * and for each the round trip and gkcd's own split of it: queue_us (the
 * scheduler's queue, the memory budget), worker_us (a worker's own time:
 * waiting for a stream, copies, the kernel and what the GPU runs before
 * it), kernel_us.  Waits are printed in job times: (round trip - the same
 * request's round trip on an idle daemon) / job time.  The target:
 * a newcomer waits <= 3 job times.  Results are checked (the reduce
 * against a float64 sum; the sgemm's sampled entries after a download).
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "gkc.h"
#include "gkc_async.h"

static const char *sock_path;
static int n = 1024, depth = 60, probes = 40;
static atomic_int stop_a;
static atomic_long done_a;

typedef struct {
  gkc_async *ac;
  uint32_t a, b, c;
  int inflight, failed;
  char err[256];
} client_a;

static void on_a(gkc_async *ac, const gkc_result *res, void *ud);

/* One request of A's: its out stays valid until its callback. */
typedef struct {
  client_a *ca;
  gkc_out out;
} a_req;

static int send_a(client_a *ca) {
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = s.n = s.k = n;
  s.a = gkc_ref_handle(ca->a, (size_t)n * n * 4);
  s.b = gkc_ref_handle(ca->b, (size_t)n * n * 4);
  a_req *q = malloc(sizeof *q);
  if (!q) bench_die("out of memory");
  *q = (a_req){ca, gkc_out_handle(ca->c)};
  int rc = gkc_async_sgemm(ca->ac, &s, &q->out, on_a, q);
  if (rc == 0)
    ca->inflight++;
  else
    free(q);
  return rc;
}

static void on_a(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  a_req *q = ud;
  client_a *ca = q->ca;
  free(q);
  ca->inflight--;
  if (res->status != 0) {
    if (!ca->failed) snprintf(ca->err, sizeof ca->err, "%s", res->errmsg);
    ca->failed = 1;
    return;
  }
  atomic_fetch_add(&done_a, 1);
  if (!atomic_load(&stop_a)) send_a(ca);
}

static void *a_main(void *arg) {
  client_a *ca = arg;
  for (int i = 0; i < depth; i++)
    if (send_a(ca) != 0) bench_die("client A: %s", gkc_async_errmsg(ca->ac));
  while (ca->inflight > 0 && !ca->failed) gkc_async_poll(ca->ac, 100);
  return NULL;
}

/* A resident copy of x; shared: usable from every connection (A's are
 * made on a blocking connection and used from the async one). */
static uint32_t upload(gkc_conn *c, const float *x, size_t count, int shared) {
  uint32_t h;
  if (gkc_upload(c, gkc_ref_mem(x, count * 4), GKC_F32, shared, &h) != 0) bench_die("upload: %s", gkc_errmsg(c));
  return h;
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

static void fill(float *x, size_t count, unsigned seed) {
  for (size_t i = 0; i < count; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) * (1.0 / 16777216.0) - 0.5);
  }
}

typedef struct {
  double rtt, queue, worker, kernel;
} probe;

static int cmp_probe(const void *x, const void *y) {
  double a = ((const probe *)x)->rtt, b = ((const probe *)y)->rtt;
  return (a > b) - (a < b);
}

/* One request of B's; its figures in microseconds. */
static probe run_probe(gkc_conn *c, int tiny, const float *x16, double want16, uint32_t ha, uint32_t hb,
                       uint32_t hc) {
  gkc_info info;
  double t0 = bench_clock_s();
  if (tiny) {
    double v;
    if (gkc_reduce(c, x16, 16, GKC_SUM, &v, NULL, &info) != 0) bench_die("tiny reduce: %s", gkc_errmsg(c));
    if (fabs(v - want16) > 1e-5) bench_die("tiny reduce: %g, float64 says %g", v, want16);
  } else {
    gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
    s.m = s.n = s.k = n;
    s.a = gkc_ref_handle(ha, (size_t)n * n * 4);
    s.b = gkc_ref_handle(hb, (size_t)n * n * 4);
    gkc_out out = gkc_out_handle(hc);
    if (gkc_sgemm_ref(c, &s, &out, &info) != 0) bench_die("peer sgemm: %s", gkc_errmsg(c));
  }
  double rtt = (bench_clock_s() - t0) * 1e6;
  return (probe){rtt, info.queue_us, info.worker_us, info.kernel_us};
}

static void report(FILE *json, const char *what, probe *p, int np, double idle_us, double job_us) {
  qsort(p, (size_t)np, sizeof *p, cmp_probe);
  probe med = p[np / 2], worst = p[np - 1];
  double w50 = (med.rtt - idle_us) / job_us, wmax = (worst.rtt - idle_us) / job_us;
  printf("| %s | %.0f | %.0f | %.0f | %.2f | %.2f | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f |\n", what,
         idle_us, med.rtt, worst.rtt, w50, wmax, med.queue, med.worker, med.kernel, worst.queue, worst.worker,
         worst.kernel);
  if (json)
    fprintf(json, "{\"probe\": \"%s\", \"idle_us\": %.1f, \"p50_us\": %.1f, \"max_us\": %.1f, \"job_us\": %.1f,"
            " \"wait_jobs_p50\": %.3f, \"wait_jobs_max\": %.3f, \"queue_us_p50\": %.1f, \"worker_us_p50\": %.1f,"
            " \"kernel_us_p50\": %.1f, \"queue_us_max\": %.1f, \"worker_us_max\": %.1f},\n",
            what, idle_us, med.rtt, worst.rtt, job_us, w50, wmax, med.queue, med.worker, med.kernel, worst.queue,
            worst.worker);
}

int main(int argc, char **argv) {
  bench_prog = "bench_fair";
  const char *json_path = NULL;
  static const struct option opts[] = {{"socket", required_argument, 0, 's'}, {"n", required_argument, 0, 'n'},
                                       {"depth", required_argument, 0, 'd'}, {"probes", required_argument, 0, 'p'},
                                       {"json", required_argument, 0, 'j'}, {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (o) {
    case 's': sock_path = optarg; break;
    case 'n': n = (int)bench_parse_long("--n", optarg, 1, 16384); break;
    case 'd': depth = (int)bench_parse_long("--depth", optarg, 1, 4096); break;
    case 'p': probes = (int)bench_parse_long("--probes", optarg, 2, 100000); break;
    case 'j': json_path = optarg; break;
    case 'h':
      printf("usage: bench_fair --socket PATH [--n N] [--depth D] [--probes P] [--json FILE]\n");
      return 0;
    default: return 2;
    }
  }
  if (!sock_path) bench_die("--socket is required (see --help)");
  size_t nn = (size_t)n * n;
  float *m = malloc(nn * sizeof *m), x16[16];
  if (!m) bench_die("out of memory");
  fill(m, nn, 5);
  fill(x16, 16, 9);
  double want16 = 0;
  for (int i = 0; i < 16; i++) want16 += x16[i];

  /* A's operands, and B's own, resident; B's connection is opened now. */
  gkc_conn *setup, *b;
  if (gkc_connect(&b, sock_path) != 0) bench_die("connect: %s", gkc_errmsg(b));
  client_a ca = {0};
  if (gkc_async_connect(&ca.ac, sock_path) != 0) bench_die("connect: %s", gkc_async_errmsg(ca.ac));
  if (gkc_connect(&setup, sock_path) != 0) bench_die("connect: %s", gkc_errmsg(setup));
  float *zero = calloc(nn, sizeof *zero);
  if (!zero) bench_die("out of memory");
  ca.a = upload(setup, m, nn, 1), ca.b = upload(setup, m, nn, 1), ca.c = upload(setup, zero, nn, 1);
  uint32_t ha = upload(b, m, nn, 0), hb = upload(b, m, nn, 0), hc = upload(b, zero, nn, 0);

  /* Idle round trips of B's two probes. */
  enum { IDLE = 15 };
  probe idle_t[IDLE], idle_p[IDLE];
  for (int i = 0; i < IDLE; i++) idle_t[i] = run_probe(b, 1, x16, want16, ha, hb, hc);
  for (int i = 0; i < IDLE; i++) idle_p[i] = run_probe(b, 0, x16, want16, ha, hb, hc);
  qsort(idle_t, IDLE, sizeof *idle_t, cmp_probe);
  qsort(idle_p, IDLE, sizeof *idle_p, cmp_probe);

  pthread_t th;
  if (pthread_create(&th, NULL, a_main, &ca) != 0) bench_die("pthread_create failed");
  sleep_ms(300);
  long d0 = atomic_load(&done_a);
  double t0 = bench_clock_s();
  sleep_ms(1000);
  double job_us = (bench_clock_s() - t0) * 1e6 / (double)(atomic_load(&done_a) - d0 + 1e-9);

  probe *pt = calloc((size_t)probes, sizeof *pt), *pp = calloc((size_t)probes, sizeof *pp);
  if (!pt || !pp) bench_die("out of memory");
  int nt = 0, np = 0;
  for (int i = 0; i < probes; i++) {
    sleep_ms(5);
    if (i % 2 == 0)
      pt[nt++] = run_probe(b, 1, x16, want16, ha, hb, hc);
    else
      pp[np++] = run_probe(b, 0, x16, want16, ha, hb, hc);
  }
  atomic_store(&stop_a, 1);
  pthread_join(th, NULL);
  if (ca.failed) bench_die("client A: %s", ca.err);

  FILE *json = json_path ? fopen(json_path, "w") : NULL;
  if (json_path && !json) bench_die("cannot write %s", json_path);
  if (json) fprintf(json, "[\n");
  printf("client A: %d sgemm %d^3 in flight, resident; job time %.1f us (alone, queue full)\n\n", depth, n, job_us);
  printf("| B's request | idle us | p50 us | max us | wait p50 (job times) | wait max | p50 queue/worker/kernel us |"
         " max queue/worker/kernel us |\n|---|---:|---:|---:|---:|---:|---|---|\n");
  report(json, "tiny reduce", pt, nt, idle_t[IDLE / 2].rtt, job_us);
  report(json, "peer sgemm", pp, np, idle_p[IDLE / 2].rtt, job_us);
  if (json) fprintf(json, "{\"job_us\": %.2f, \"depth\": %d, \"n\": %d}\n]\n", job_us, depth, n), fclose(json);
  gkc_async_close(ca.ac);
  gkc_close(setup);
  gkc_close(b);
  free(m), free(zero), free(pt), free(pp);
  return 0;
}
