/* bench_async.c: libgkc blocking vs async, small requests, one run.
 *
 * Each shape sends reduces of 16 floats (or pings, --ping) for --duration
 * seconds and reports requests/s and the client-measured latency's p50 and
 * p99 (from the call to the reply in hand):
 *   blocking x1    one gkc_conn, one request at a time
 *   blocking x16   16 gkc_conns, one thread each, one request at a time each
 *   async wN       one gkc_async connection keeping N in flight (1, 8, 64),
 *                  each callback issuing the next request
 * The question it answers: does one async connection reach the throughput
 * of 16 blocking ones?  Every reply's value is checked (the sum of the 16
 * floats); a wrong one fails the run.
 *
 *   bench_async --gkcd build/daemon/gkcd     # starts gkcd on a temporary socket
 *   bench_async --socket PATH                # or measures one already running
 *
 * --json or --csv print the rows machine-readable on stdout instead of the
 * Markdown table.
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
#include "bench_csv.h"
#include "gkc_async.h"

#define N_FLOATS 16
#define MAX_SAMPLES 4000000

static double duration_s = 2.0;
static int use_ping;
static const char *sock;
static float xs[N_FLOATS];
static double want_sum;
static int total_errors;
static enum { OUT_TEXT, OUT_JSON, OUT_CSV } out_mode;
static bench_csv csv;
static int json_rows;

typedef struct {
  double *lat; /* microseconds */
  size_t n, cap;
  int errors;
} samples;

static void *alloc_or_die(void *p, size_t bytes) {
  if (!p) {
    fprintf(stderr, "bench_async: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

static void add(samples *s, double us) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 65536;
    if (cap > MAX_SAMPLES) cap = MAX_SAMPLES;
    if (s->n == cap) return; /* enough for the percentiles */
    s->lat = alloc_or_die(realloc(s->lat, cap * sizeof *s->lat), cap * sizeof *s->lat);
    s->cap = cap;
  }
  s->lat[s->n++] = us;
}

static void report(const char *shape, samples *s, size_t total, double secs) {
  /* No sample: lat is NULL, which qsort must not be given even for 0 elements. */
  if (s->n) qsort(s->lat, s->n, sizeof *s->lat, bench_cmp_double);
  double p50 = s->n ? s->lat[s->n / 2] : NAN, p99 = s->n ? s->lat[(size_t)(s->n * 0.99)] : NAN;
  total_errors += s->errors;
  double rps = (double)total / secs;
  if (out_mode == OUT_TEXT) {
    printf("| %-12s | %10.0f | %8.1f | %8.1f | %d |\n", shape, rps, p50, p99, s->errors);
  } else if (out_mode == OUT_JSON) {
    /* NaN percentiles (no sample) are null. */
    char a[32] = "null", b[32] = "null";
    if (isfinite(p50)) snprintf(a, sizeof a, "%.3f", p50);
    if (isfinite(p99)) snprintf(b, sizeof b, "%.3f", p99);
    printf("%s\n  {\"shape\": \"%s\", \"requests\": %zu, \"seconds\": %.6f, \"rps\": %.1f, "
           "\"p50_us\": %s, \"p99_us\": %s, \"errors\": %d}",
           json_rows++ ? "," : "", shape, total, secs, rps, a, b, s->errors);
  } else {
    bench_csv_str(&csv, shape);
    bench_csv_str(&csv, use_ping ? "ping" : "reduce");
    bench_csv_num(&csv, "%zu", total);
    bench_csv_num(&csv, "%.6f", secs);
    bench_csv_num(&csv, "%.1f", rps);
    if (isfinite(p50)) bench_csv_num(&csv, "%.3f", p50);
    else bench_csv_str(&csv, "");
    if (isfinite(p99)) bench_csv_num(&csv, "%.3f", p99);
    else bench_csv_str(&csv, "");
    bench_csv_num(&csv, "%d", s->errors);
    bench_csv_end(&csv);
  }
  fflush(stdout);
}

/* --- blocking ------------------------------------------------------------------------ */

typedef struct {
  samples s;
  size_t count;
} worker;

static void *blocking_worker(void *arg) {
  worker *w = arg;
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) {
    fprintf(stderr, "bench_async: %s\n", gkc_errmsg(c));
    exit(1);
  }
  double end = bench_clock_s() + duration_s;
  while (bench_clock_s() < end) {
    double t0 = bench_clock_s(), v = 0;
    int rc = use_ping ? gkc_ping(c, NULL) : gkc_reduce(c, xs, N_FLOATS, GKC_SUM, &v, NULL, NULL);
    add(&w->s, (bench_clock_s() - t0) * 1e6);
    if (rc != 0 || (!use_ping && fabs(v - want_sum) > 1e-4)) w->s.errors++;
    w->count++;
  }
  gkc_close(c);
  return NULL;
}

static void run_blocking(int conns) {
  worker *w = alloc_or_die(calloc((size_t)conns, sizeof *w), (size_t)conns * sizeof *w);
  pthread_t *th = alloc_or_die(calloc((size_t)conns, sizeof *th), (size_t)conns * sizeof *th);
  double t0 = bench_clock_s();
  for (int i = 0; i < conns; i++) {
    int e = pthread_create(&th[i], NULL, blocking_worker, &w[i]);
    if (e) {
      fprintf(stderr, "bench_async: pthread_create: %s\n", strerror(e));
      exit(1);
    }
  }
  for (int i = 0; i < conns; i++) pthread_join(th[i], NULL);
  double secs = bench_clock_s() - t0;
  samples all = {0};
  size_t total = 0;
  for (int i = 0; i < conns; i++) {
    for (size_t k = 0; k < w[i].s.n; k++) add(&all, w[i].s.lat[k]);
    all.errors += w[i].s.errors;
    total += w[i].count;
    free(w[i].s.lat);
  }
  char shape[32];
  snprintf(shape, sizeof shape, "blocking x%d", conns);
  report(shape, &all, total, secs);
  free(all.lat), free(w), free(th);
}

/* --- async ---------------------------------------------------------------------------- */

typedef struct {
  samples s;
  size_t count;
  double end;
  int stopping;
} stream;

static void issue(gkc_async *ac, stream *st);

static void on_reply(gkc_async *ac, const gkc_result *res, void *ud) {
  stream *st = ud;
  add(&st->s, res->latency_us);
  if (res->status != 0 || (!use_ping && fabs(res->value - want_sum) > 1e-4)) st->s.errors++;
  st->count++;
  if (!st->stopping && (st->count & 63) == 0 && bench_clock_s() >= st->end) st->stopping = 1;
  if (!st->stopping) issue(ac, st);
}

static void issue(gkc_async *ac, stream *st) {
  gkc_reduce_args a = {gkc_ref_mem(xs, sizeof xs), GKC_SUM, NULL};
  int rc = use_ping ? gkc_async_ping(ac, on_reply, st) : gkc_async_reduce(ac, &a, on_reply, st);
  if (rc) {
    fprintf(stderr, "bench_async: %s\n", gkc_async_errmsg(ac));
    exit(1);
  }
}

static void run_async(int window) {
  gkc_async *ac;
  if (gkc_async_connect(&ac, sock) != 0) {
    fprintf(stderr, "bench_async: %s\n", gkc_async_errmsg(ac));
    exit(1);
  }
  stream st = {0};
  double t0 = bench_clock_s();
  st.end = t0 + duration_s;
  for (int i = 0; i < window; i++) issue(ac, &st);
  int rc;
  while ((rc = gkc_async_poll(ac, 10000)) > 0) {
  }
  double secs = bench_clock_s() - t0;
  if (rc < 0) {
    fprintf(stderr, "bench_async: %s\n", gkc_errname(rc));
    exit(1);
  }
  char shape[32];
  snprintf(shape, sizeof shape, "async w%d", window);
  report(shape, &st.s, st.count, secs);
  free(st.s.lat);
  gkc_async_close(ac);
}

/* --- a gkcd of our own ------------------------------------------------------------------ */

static pid_t start_gkcd(const char *bin, char *path, size_t n) {
  const char *tmp = getenv("TMPDIR");
  snprintf(path, n, "%s/gkc-bench-async-%d.sock", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  const char *argv[] = {bin, "--socket", path, "--backend", "cpu", "--log-level", "warn", NULL};
  volatile pid_t pid = 0;
  char why[128];
  if (bench_gkcd_start(argv, path, NULL, NULL, &pid, why, sizeof why) != 0) {
    fprintf(stderr, "bench_async: gkcd at %s did not come up: %s\n", bin, why);
    bench_stop_child(&pid, 2);
    exit(1);
  }
  return pid;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"gkcd", 1, 0, 'g'}, {"socket", 1, 0, 's'},
                                       {"duration", 1, 0, 'd'}, {"ping", 0, 0, 'p'},
                                       {"json", 0, 0, 'j'}, {"csv", 0, 0, 'c'},
                                       {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  const char *gkcd = getenv("GKCD_BIN");
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'g': gkcd = optarg; break;
      case 's': sock = optarg; break;
      case 'd': duration_s = atof(optarg); break;
      case 'p': use_ping = 1; break;
      case 'j':
      case 'c':
        if (out_mode != OUT_TEXT) {
          fprintf(stderr, "bench_async: --json and --csv: give one of them\n");
          return 2;
        }
        out_mode = o == 'j' ? OUT_JSON : OUT_CSV;
        break;
      case 'h':
        printf("usage: bench_async [--gkcd PATH | --socket PATH] [--duration S] [--ping]\n"
               "                   [--json | --csv]\n"
               "Small requests: blocking x1, blocking x16 (threads), async with 1/8/64 in\n"
               "flight on one connection; requests/s, p50/p99 latency in microseconds.\n"
               "  --gkcd PATH      gkcd to start on a temporary socket (default $GKCD_BIN)\n"
               "  --socket PATH    measure a gkcd already running there instead\n"
               "  --duration S     seconds per shape (default 2)\n"
               "  --ping           send pings instead of reduces of 16 floats\n"
               "  --json           one JSON object on stdout instead of the table\n"
               "  --csv            CSV on stdout instead of the table: a header row, then\n"
               "                   one row per shape\n");
        return 0;
      default: return 2;
    }
  }
  if (duration_s <= 0) {
    fprintf(stderr, "bench_async: --duration must be > 0\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  char path[108];
  pid_t pid = 0;
  if (!sock) {
    if (!gkcd) {
      fprintf(stderr, "bench_async: give --gkcd PATH (or $GKCD_BIN) or --socket PATH\n");
      return 2;
    }
    pid = start_gkcd(gkcd, path, sizeof path);
    sock = path;
  }
  for (int i = 0; i < N_FLOATS; i++) xs[i] = (float)(i + 1) / 8.0f, want_sum += xs[i];
  if (out_mode == OUT_TEXT) {
    printf("%s, %.1f s per shape\n\n", use_ping ? "ping" : "reduce of 16 floats", duration_s);
    printf("| shape        |      req/s | p50 (us) | p99 (us) | errors |\n");
    printf("|---|---|---|---|---|\n");
  } else if (out_mode == OUT_JSON) {
    printf("{\"method\": \"%s\", \"duration_s\": %g, \"results\": [", use_ping ? "ping" : "reduce",
           duration_s);
  } else if (bench_csv_open(&csv, "-", "shape,method,requests,seconds,rps,p50_us,p99_us,errors") != 0) {
    return 2;
  }
  run_blocking(1);
  run_blocking(16);
  run_async(1);
  run_async(8);
  run_async(64);
  if (out_mode == OUT_JSON) printf("\n]}\n");
  if (bench_csv_close(&csv) != 0) total_errors++;
  if (pid > 0) {
    bench_stop_child(&pid, 10);
    unlink(path);
  }
  return total_errors ? 1 : 0;
}
