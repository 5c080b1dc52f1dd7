/* bench_byvalue: big arrays by value from C (libgkc's plain-pointer calls),
 * what a caller sees end to end (issue #25).
 *
 *   bench_byvalue --socket PATH [--sizes LIST] [--repeat N] [--conns N] [--json FILE] [--trace]
 *   bench_byvalue --gkcd PATH [--backend B] ...   starts its own gkcd on a temporary socket
 *
 * For each size of --sizes (default sgemm:2048,sgemm:4096,sgemm:8192,
 * reduce:64,reduce:256; reduce sizes in MiB of float32) and each path:
 *   arena    libgkc's transparent shared memory (its default);
 *   inline   gkc_set_shm(c, GKC_SHM_OFF, 0): every byte in the frames;
 *   next     the arena on a new connection made after arena's closed: its
 *            first call takes the region arena's left to the process
 *            (GKC_SHM_KEEP), pages and all, what a program that connects
 *            again sees;
 *   reserved the arena, after gkc_shm_reserve for the call's bytes (timed
 *            on its own): the first call without the arena's set-up;
 * it times the first call on a fresh connection (what a new size costs:
 * the arena's first use, the daemon's first sight of the size; arena's in a
 * process that keeps no region of an earlier one: only arena's connection
 * keeps its regions, GKC_SHM_KEEP as the environment says, the others
 * run with GKC_SHM_KEEP=0) and the
 * median of --repeat calls after it, and prints the effective bandwidth
 * (bytes in plus bytes out over the round trip).  Then, with --conns N > 1,
 * N connections at once each send --conn-calls sgemm 4096^3 by value
 * (arena), and the aggregate GB/s over the wall time is printed.
 * Every result is checked (sgemm entries sampled against float64, the sum
 * against a float64 sum), so a fast wrong answer never counts.
 *
 * --trace: where a first call's time goes.  It sets GKC_SHM_TRACE=1 (libgkc
 * prints the arena's status round trip, region set-up, population and
 * shm_register, and each staged call that met fresh pages, on stderr) and
 * prints, for the first call and the first repeated one of each path, the
 * round trip beside gkcd's share (server, of it queued and the worker's,
 * of that the kernel; h2d/d2h on a GPU) and what is left to the client and
 * the socket.
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "gkc.h"

static const char *sock_path;
static long repeat = 5, conns = 8, conn_calls = 4;
static FILE *json;
static int failures, trace;

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) bench_die("out of memory (%zu bytes)", n);
  return p;
}

static void fill(float *x, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) * (1.0 / 16777216.0) - 0.5);
  }
}

static const char *env_keep; /* GKC_SHM_KEEP as the bench was started with */

/* keep: the connection keeps its regions for the next (GKC_SHM_KEEP as
 * given), else it keeps none (0), which each connection reads as it is made. */
static gkc_conn *connect_plain(void) {
  gkc_conn *c;
  if (gkc_connect(&c, sock_path) != 0) bench_die("cannot connect to %s: %s", sock_path, gkc_errmsg(c));
  return c;
}

/* Single-threaded only: it changes the environment. */
static gkc_conn *open_conn(int inline_only, int keep) {
  gkc_conn *c;
  if (keep && env_keep) setenv("GKC_SHM_KEEP", env_keep, 1);
  else if (keep) unsetenv("GKC_SHM_KEEP");
  else setenv("GKC_SHM_KEEP", "0", 1);
  if (gkc_connect(&c, sock_path) != 0) bench_die("cannot connect to %s: %s", sock_path, gkc_errmsg(c));
  if (inline_only) gkc_set_shm(c, GKC_SHM_OFF, 0);
  return c;
}

typedef struct {
  int sgemm;
  int32_t n;      /* sgemm: n^3 */
  size_t count;   /* reduce: floats */
  float *a, *b, *out;
  double want, mag; /* reduce: the float64 sum, and of magnitudes */
} work;

static void check_sgemm(const work *w, const char *path) {
  int32_t n = w->n;
  unsigned s = 12345;
  for (int t = 0; t < 16; t++) {
    s = s * 1664525u + 1013904223u;
    int32_t i = (int32_t)(s % (unsigned)n), j = (int32_t)((s >> 7) % (unsigned)n);
    double ref = 0, mag = 0;
    for (int32_t p = 0; p < n; p++) {
      ref += (double)w->a[(size_t)i * n + p] * w->b[(size_t)p * n + j];
      mag += fabs((double)w->a[(size_t)i * n + p] * w->b[(size_t)p * n + j]);
    }
    double got = w->out[(size_t)i * n + j];
    if (fabs(got - ref) > 1e-5 * mag + 1e-6) {
      fprintf(stderr, "bench_byvalue: sgemm %d^3 (%s): C[%d,%d] = %g, float64 says %g\n", n, path, i, j,
              got, ref);
      failures++;
      return;
    }
  }
}

/* end: when the call returned (bench_clock_s, CLOCK_MONOTONIC): gkcd's log
 * says when it registered the region for DMA on the same clock. */
static void print_trace(const char *label, const char *path, const char *which, double t,
                        double end, const gkc_info *in) {
  fprintf(stderr, "trace %s %s %s: round trip %.2f ms; gkcd %.2f (queued %.2f, worker %.2f, kernel %.2f,"
          " h2d %.2f, d2h %.2f); client and socket %.2f (monotonic %.1f to %.1f ms)\n", label, path, which,
          t * 1e3, in->server_us / 1e3, in->queue_us / 1e3, in->worker_us / 1e3, in->kernel_us / 1e3,
          in->h2d_us / 1e3, in->d2h_us / 1e3, t * 1e3 - in->server_us / 1e3, (end - t) * 1e3,
          end * 1e3);
}

static double run_once_info(gkc_conn *c, work *w, const char *path, gkc_info *info) {
  double t0 = bench_clock_s();
  int rc;
  if (w->sgemm) {
    memset(w->out, 0, (size_t)w->n * w->n * sizeof(float));
    t0 = bench_clock_s();
    rc = gkc_sgemm(c, w->n, w->n, w->n, 1.0f, w->a, 0, w->b, 0, 0.0f, w->out, NULL, info);
  } else {
    double v = 0;
    rc = gkc_reduce(c, w->a, w->count, GKC_SUM, &v, NULL, info);
    /* float32 sums in any order stay within ~eps32 * log2(n) * sum|x| */
    if (rc == 0 && fabs(v - w->want) > 1e-6 * w->mag + 1e-3) {
      fprintf(stderr, "bench_byvalue: reduce (%s): %.6f, float64 says %.6f\n", path, v, w->want);
      failures++;
    }
  }
  double t = bench_clock_s() - t0;
  if (rc != 0) bench_die("%s (%s): %s", w->sgemm ? "sgemm" : "reduce", path, gkc_errmsg(c));
  if (w->sgemm) check_sgemm(w, path);
  return t;
}

static double run_once(gkc_conn *c, work *w, const char *path) { return run_once_info(c, w, path, NULL); }

static size_t moved(const work *w) {
  return w->sgemm ? 3 * (size_t)w->n * w->n * sizeof(float) : w->count * sizeof(float);
}

static void measure(work *w, const char *label) {
  static const char *const paths[] = {"arena", "next", "inline", "reserved"};
  for (int p = 0; p < 4; p++) {
    gkc_conn *c = open_conn(p == 2, p == 0);
    double reserve = 0;
    if (p == 3) {
      /* The call's slices, each on a cache line: gkc_shm_reserve first. */
      double t0 = bench_clock_s();
      if (gkc_shm_reserve(c, moved(w) + 3 * 64) != 0) bench_die("gkc_shm_reserve: %s", gkc_errmsg(c));
      reserve = bench_clock_s() - t0;
    }
    gkc_info info;
    double first = run_once_info(c, w, paths[p], &info);
    if (trace) print_trace(label, paths[p], "first", first, bench_clock_s(), &info);
    double *ts = xmalloc((size_t)repeat * sizeof *ts);
    for (long r = 0; r < repeat; r++) {
      ts[r] = run_once_info(c, w, paths[p], &info);
      if (trace && r == 0) print_trace(label, paths[p], "repeated", ts[r], bench_clock_s(), &info);
    }
    qsort(ts, (size_t)repeat, sizeof *ts, bench_cmp_double);
    double med = ts[repeat / 2];
    free(ts);
    gkc_close(c);
    double gbs = (double)moved(w) / med / 1e9;
    char note[64] = "";
    if (p == 3) snprintf(note, sizeof note, "gkc_shm_reserve before: %.2f ms", reserve * 1e3);
    printf("| %s | %s | %.2f | %.2f | %.2fx | %.1f | %s |\n", label, paths[p], first * 1e3, med * 1e3,
           first / med, gbs, note);
    fflush(stdout);
    if (json)
      fprintf(json, "{\"op\": \"%s\", \"path\": \"%s\", \"first_ms\": %.4f, \"median_ms\": %.4f, \"gbs\": %.3f, \"reserve_ms\": %.4f},\n",
              label, paths[p], first * 1e3, med * 1e3, gbs, reserve * 1e3);
  }
}

/* --- N connections at once --------------------------------------------------- */

typedef struct {
  work w;
  pthread_barrier_t *go;
  double t;
} conn_job;

static void *conn_main(void *arg) {
  conn_job *j = arg;
  gkc_conn *c = connect_plain();
  run_once(c, &j->w, "arena"); /* each connection's arena made before the clock */
  pthread_barrier_wait(j->go);
  double t0 = bench_clock_s();
  for (long i = 0; i < conn_calls; i++) run_once(c, &j->w, "arena");
  j->t = bench_clock_s() - t0;
  gkc_close(c);
  return NULL;
}

static void many(int32_t n) {
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)conns + 1);
  setenv("GKC_SHM_KEEP", "0", 1); /* before the threads: they read it */
  conn_job *jobs = calloc((size_t)conns, sizeof *jobs);
  pthread_t *th = calloc((size_t)conns, sizeof *th);
  if (!jobs || !th) bench_die("out of memory");
  size_t nn = (size_t)n * n;
  for (long i = 0; i < conns; i++) {
    work *w = &jobs[i].w;
    *w = (work){.sgemm = 1, .n = n, .a = xmalloc(nn * 4), .b = xmalloc(nn * 4), .out = xmalloc(nn * 4)};
    fill(w->a, nn, 7u + (unsigned)i);
    fill(w->b, nn, 99u + (unsigned)i);
    jobs[i].go = &go;
    if (pthread_create(&th[i], NULL, conn_main, &jobs[i]) != 0) bench_die("pthread_create failed");
  }
  pthread_barrier_wait(&go);
  double t0 = bench_clock_s();
  for (long i = 0; i < conns; i++) pthread_join(th[i], NULL);
  double wall = bench_clock_s() - t0;
  double bytes = (double)conns * conn_calls * 3.0 * (double)nn * 4;
  printf("\n%ld connections x %ld sgemm %d^3 by value (arena): %.1f ms wall, %.2f requests/s, %.1f GB/s"
         " aggregate in + out\n",
         conns, conn_calls, n, wall * 1e3, conns * conn_calls / wall, bytes / wall / 1e9);
  if (json)
    fprintf(json, "{\"op\": \"many sgemm %d\", \"conns\": %ld, \"calls\": %ld, \"wall_ms\": %.3f,"
            " \"gbs\": %.3f},\n", n, conns, conn_calls, wall * 1e3, bytes / wall / 1e9);
  for (long i = 0; i < conns; i++) free(jobs[i].w.a), free(jobs[i].w.b), free(jobs[i].w.out);
  free(jobs);
  free(th);
  pthread_barrier_destroy(&go);
}

static volatile pid_t child;
static void stop_child(void) { bench_stop_child(&child, 5); }
static void on_signal(int sig) {
  if (child > 0) kill(child, SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_byvalue (--socket PATH | --gkcd PATH [--backend B]) [--sizes LIST]\n"
             "                     [--repeat N] [--conns N] [--conn-calls N] [--many-n N] [--json FILE] [--trace]\n"
             "  --sizes LIST   comma-separated sgemm:N (N^3) and reduce:MiB\n"
             "                 (default sgemm:2048,sgemm:4096,sgemm:8192,reduce:64,reduce:256)\n"
             "  --conns N      connections at once for the aggregate run (default 8; 1: skip it)\n"
             "  --many-n N     its sgemm size (default 4096)\n"
             "  --trace        where the first call's time goes, on stderr (GKC_SHM_TRACE=1)\n");
}

int main(int argc, char **argv) {
  bench_prog = "bench_byvalue";
  env_keep = getenv("GKC_SHM_KEEP");
  if (env_keep && !(env_keep = strdup(env_keep))) bench_die("out of memory");
  const char *gkcd = NULL, *backend = "auto", *sizes = "sgemm:2048,sgemm:4096,sgemm:8192,reduce:64,reduce:256";
  const char *json_path = NULL;
  long many_n = 4096;
  static const struct option opts[] = {
      {"socket", required_argument, 0, 's'}, {"gkcd", required_argument, 0, 'g'},
      {"backend", required_argument, 0, 'b'}, {"sizes", required_argument, 0, 'z'},
      {"repeat", required_argument, 0, 'r'}, {"conns", required_argument, 0, 'c'},
      {"conn-calls", required_argument, 0, 'k'}, {"many-n", required_argument, 0, 'n'},
      {"json", required_argument, 0, 'j'}, {"trace", no_argument, 0, 't'},
      {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (o) {
    case 's': sock_path = optarg; break;
    case 'g': gkcd = optarg; break;
    case 'b': backend = optarg; break;
    case 'z': sizes = optarg; break;
    case 'r': repeat = bench_parse_long("--repeat", optarg, 1, 1000); break;
    case 'c': conns = bench_parse_long("--conns", optarg, 1, 256); break;
    case 'k': conn_calls = bench_parse_long("--conn-calls", optarg, 1, 100000); break;
    case 'n': many_n = bench_parse_long("--many-n", optarg, 1, 32768); break;
    case 'j': json_path = optarg; break;
    case 't': trace = 1; setenv("GKC_SHM_TRACE", "1", 1); break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (!sock_path == !gkcd) {
    usage(stderr);
    return 2;
  }
  char tmp_sock[64];
  if (gkcd) {
    snprintf(tmp_sock, sizeof tmp_sock, "/tmp/bench_byvalue.%d.sock", (int)getpid());
    sock_path = tmp_sock;
    const char *argv_d[] = {gkcd, "--socket", tmp_sock, "--backend", backend, NULL};
    char why[256];
    atexit(stop_child);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (bench_gkcd_start(argv_d, tmp_sock, NULL, NULL, &child, why, sizeof why) != 0)
      bench_die("gkcd did not start: %s", why);
  }
  if (json_path && !(json = fopen(json_path, "w"))) bench_die("cannot write %s", json_path);
  if (json) fprintf(json, "[\n");
  printf("| op | path | first call ms | repeated ms (median of %ld) | first / repeated | GB/s | |\n"
         "|---|---|---:|---:|---:|---:|---|\n", repeat);
  char *list = strdup(sizes);
  if (!list) bench_die("out of memory");
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    work w = {0};
    char label[64];
    if (!strncmp(tok, "sgemm:", 6)) {
      w.sgemm = 1;
      w.n = (int32_t)bench_parse_long("--sizes sgemm", tok + 6, 1, 32768);
      size_t nn = (size_t)w.n * w.n;
      w.a = xmalloc(nn * 4), w.b = xmalloc(nn * 4), w.out = xmalloc(nn * 4);
      fill(w.a, nn, 1), fill(w.b, nn, 2);
      snprintf(label, sizeof label, "sgemm %d^3", w.n);
    } else if (!strncmp(tok, "reduce:", 7)) {
      long mib = bench_parse_long("--sizes reduce", tok + 7, 1, 65536);
      w.count = (size_t)mib << 18;
      w.a = xmalloc(w.count * 4);
      fill(w.a, w.count, 3);
      for (size_t i = 0; i < w.count; i++) w.want += w.a[i], w.mag += fabs(w.a[i]);
      snprintf(label, sizeof label, "reduce %ld MiB", mib);
    } else {
      bench_die("--sizes: '%s' is neither sgemm:N nor reduce:MiB", tok);
    }
    measure(&w, label);
    free(w.a), free(w.b), free(w.out);
  }
  free(list);
  if (conns > 1) many((int32_t)many_n);
  if (json) fprintf(json, "{\"failures\": %d}\n]\n", failures), fclose(json);
  if (failures) fprintf(stderr, "bench_byvalue: %d wrong results\n", failures);
  return failures ? 1 : 0;
}
