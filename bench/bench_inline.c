/* bench_inline.c: how fast big arrays travel inline (issue #25, item 3).
 *
 * Clients that cannot pass descriptors send their arrays in the msgpack
 * frame itself.  For array sizes from --min to --max (powers of two) and
 * for each connection count in --conns (default 1 and 8), that many
 * threads, each on a connection of its own with the arena off
 * (gkc_set_shm(c, GKC_SHM_OFF, 0), as GKC_NO_SHM=1 does), call for --time
 * milliseconds (and at least --reps calls each):
 *   reduce    the array in, a scalar back        (client write, gkcd read)
 *   download  a resident array of that size out  (gkcd write, client read)
 * and the table gives the array bytes moved per second over all of them
 * (GB/s, 10^9 bytes), with the median round trip.  When it started gkcd
 * itself it also reads the CPU time of gkcd's event-loop thread (the one
 * that reads and writes every socket) and prints the rate at which that
 * thread alone would be saturated, "loop max": array bytes over the loop's
 * CPU seconds.  Near the measured rate, the loop is the ceiling.  Every reduce's sum is
 * checked against the client's own, every download's bytes against what
 * was uploaded, on the first call of each thread: a difference fails the
 * run.
 *
 *   bench_inline --gkcd build/daemon/gkcd    # starts gkcd (CPU backend) on a temporary socket
 *   bench_inline --socket PATH               # or measures one already running (any backend)
 *
 * --csv PATH writes one row per size, operation and connection count.
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
#include "gkc.h"

enum { OP_REDUCE, OP_DOWNLOAD, NOPS };
static const char *const op_names[NOPS] = {"reduce", "download"};

static long min_bytes = 1L << 20, max_bytes = 256L << 20, min_reps = 3;
static double cell_s = 1.0;
static int nconns_list[8] = {1, 8}, nlist = 2, ops_mask = 3;
static const char *sock;
static volatile int failures;
static pid_t gkcd_pid; /* ours: its loop thread's CPU time is read */

/* CPU seconds gkcd's main (event-loop) thread has run; -1 when unknown. */
static double loop_cpu_s(void) {
  if (gkcd_pid <= 0) return -1;
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)gkcd_pid, (int)gkcd_pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the fields after the command name */
  unsigned long long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

typedef struct {
  int op;
  size_t n;              /* floats */
  float *x, *out;        /* x: the array (reduce's input, download's reference) */
  double sum;            /* of x, in double, for reduce's check */
  gkc_conn *c;
  uint32_t handle;       /* download: a resident copy of x */
  pthread_barrier_t *go;
  double t_end;          /* when its last call returned */
  long calls;
  double *us;            /* round trips, calls of them */
  int cap;
} worker;

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) bench_die("out of memory (%zu bytes)", n);
  return p;
}

static void *run(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->go);
  double t0 = bench_clock_s();
  for (;;) {
    uint64_t s = bench_clock_ns();
    double value = 0;
    int rc = w->op == OP_REDUCE ? gkc_reduce(w->c, w->x, w->n, GKC_SUM, &value, NULL, NULL)
                                : gkc_download(w->c, w->handle, w->out, w->n * 4);
    if (rc) bench_die("%s of %zu bytes: %s", op_names[w->op], w->n * 4, gkc_errmsg(w->c));
    if (w->calls < w->cap) w->us[w->calls] = (double)(bench_clock_ns() - s) / 1e3;
    if (w->calls == 0) {
      int bad = w->op == OP_REDUCE ? fabs(value - w->sum) > 1e-5 * fabs(w->sum) + 1e-3
                                   : memcmp(w->out, w->x, w->n * 4) != 0;
      if (bad) {
        fprintf(stderr, "bench_inline: %s of %zu bytes: wrong result\n", op_names[w->op], w->n * 4);
        failures++;
      }
    }
    w->calls++;
    w->t_end = bench_clock_s();
    if (w->calls >= min_reps && w->t_end - t0 >= cell_s) break;
  }
  return NULL;
}

/* k connections at once moving n floats per call: GB/s over all of them,
 * and the median round trip in ms. */
static void cell(int op, size_t n, int k, double *gbs, double *med_ms, double *loop_gbs) {
  worker *w = calloc((size_t)k, sizeof *w);
  pthread_t *th = xmalloc((size_t)k * sizeof *th);
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)k + 1);
  for (int i = 0; i < k; i++) {
    w[i].op = op, w[i].n = n, w[i].go = &go;
    w[i].x = xmalloc(n * 4);
    for (size_t j = 0; j < n; j++) w[i].x[j] = (float)((j + (size_t)i) % 1000) / 8.0f, w[i].sum += w[i].x[j];
    if (op == OP_DOWNLOAD) w[i].out = xmalloc(n * 4), memset(w[i].out, 0, n * 4);
    if (gkc_connect(&w[i].c, sock) != 0) bench_die("cannot connect to %s: %s", sock, gkc_errmsg(w[i].c));
    gkc_set_shm(w[i].c, GKC_SHM_OFF, 0);
    if (op == OP_DOWNLOAD &&
        gkc_upload(w[i].c, gkc_ref_mem(w[i].x, n * 4), GKC_F32, 0, &w[i].handle) != 0)
      bench_die("upload: %s", gkc_errmsg(w[i].c));
    w[i].cap = 4096;
    w[i].us = xmalloc((size_t)w[i].cap * sizeof(double));
    double v; /* a warm-up call each: first-touch costs on both sides are not the steady state */
    int rc = op == OP_REDUCE ? gkc_reduce(w[i].c, w[i].x, n, GKC_SUM, &v, NULL, NULL)
                             : gkc_download(w[i].c, w[i].handle, w[i].out, n * 4);
    if (rc) bench_die("warm-up %s: %s", op_names[op], gkc_errmsg(w[i].c));
    if (op == OP_DOWNLOAD) memset(w[i].out, 0, n * 4);
  }
  for (int i = 0; i < k; i++) pthread_create(&th[i], NULL, run, &w[i]);
  pthread_barrier_wait(&go);
  double cpu0 = loop_cpu_s();
  double t0 = bench_clock_s(), t1 = t0, bytes = 0;
  int m = 0;
  double *all = NULL;
  for (int i = 0; i < k; i++) {
    pthread_join(th[i], NULL);
    if (w[i].t_end > t1) t1 = w[i].t_end;
    bytes += (double)w[i].calls * (double)n * 4;
    int got = w[i].calls < w[i].cap ? (int)w[i].calls : w[i].cap;
    all = realloc(all, (size_t)(m + got) * sizeof *all);
    memcpy(all + m, w[i].us, (size_t)got * sizeof *all);
    m += got;
  }
  double cpu1 = loop_cpu_s();
  *loop_gbs = cpu0 >= 0 && cpu1 > cpu0 ? bytes / (cpu1 - cpu0) / 1e9 : NAN;
  qsort(all, (size_t)m, sizeof *all, bench_cmp_double);
  *gbs = bytes / (t1 - t0) / 1e9;
  *med_ms = (m % 2 ? all[m / 2] : (all[m / 2 - 1] + all[m / 2]) / 2) / 1e3;
  for (int i = 0; i < k; i++) {
    if (op == OP_DOWNLOAD) gkc_release(w[i].c, w[i].handle);
    gkc_close(w[i].c);
    free(w[i].x), free(w[i].out), free(w[i].us);
  }
  pthread_barrier_destroy(&go);
  free(all), free(th), free(w);
}

static void parse_conns(const char *s) {
  nlist = 0;
  for (const char *p = s; *p && nlist < 8;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1 || v > 64) bench_die("--conns: expected numbers 1..64 separated by commas");
    nconns_list[nlist++] = (int)v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') bench_die("--conns: expected numbers 1..64 separated by commas");
  }
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"gkcd", 1, 0, 'g'}, {"socket", 1, 0, 's'}, {"min", 1, 0, 'a'},
                                       {"max", 1, 0, 'b'},  {"time", 1, 0, 't'},   {"reps", 1, 0, 'r'},
                                       {"conns", 1, 0, 'k'}, {"op", 1, 0, 'o'},    {"csv", 1, 0, 'c'},
                                       {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
  bench_prog = "bench_inline";
  const char *gkcd = getenv("GKCD_BIN"), *csv_path = NULL;
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'g': gkcd = optarg; break;
      case 's': sock = optarg; break;
      case 'a': min_bytes = bench_parse_long("--min", optarg, 4, 1L << 30); break;
      case 'b': max_bytes = bench_parse_long("--max", optarg, 4, 1L << 30); break;
      case 't': cell_s = bench_parse_long("--time", optarg, 1, 600000) / 1000.0; break;
      case 'r': min_reps = bench_parse_long("--reps", optarg, 1, 4096); break;
      case 'k': parse_conns(optarg); break;
      case 'o':
        ops_mask = !strcmp(optarg, "reduce") ? 1 : !strcmp(optarg, "download") ? 2 : 0;
        if (!ops_mask) bench_die("--op: reduce or download");
        break;
      case 'c': csv_path = optarg; break;
      case 'h':
        printf("usage: bench_inline [--gkcd PATH | --socket PATH] [--min BYTES] [--max BYTES]\n"
               "                    [--conns 1,8] [--op reduce|download] [--time MS] [--reps N]\n"
               "Inline (no shared memory) throughput of reduce (array in) and download (array\n"
               "out), on 1 and on 8 connections at once, arrays of --min to --max bytes\n"
               "(powers of two; default 1 MiB to 256 MiB).\n"
               "  --gkcd PATH    gkcd to start (CPU backend) on a temporary socket ($GKCD_BIN)\n"
               "  --socket PATH  measure a gkcd already running there instead\n"
               "  --conns LIST   connection counts, each its own thread (default 1,8)\n"
               "  --time MS      at least this long per cell (default 1000)\n"
               "  --reps N       and at least N calls per connection (default 3)\n"
               "  --csv PATH     also one CSV row per cell (-: stdout)\n");
        return 0;
      default: return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  bench_csv csv = {0};
  if (csv_path && bench_csv_open(&csv, csv_path, "bytes,op,conns,gb_per_s,median_ms,loop_max_gb_per_s") != 0) return 2;
  FILE *tab = csv_path && !strcmp(csv_path, "-") ? stderr : stdout;
  char path[108];
  volatile pid_t pid = 0;
  if (!sock) {
    if (!gkcd) bench_die("give --gkcd PATH (or $GKCD_BIN) or --socket PATH");
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/gkc-bench-inline-%d.sock", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    /* Room for 8 connections' requests and resident copies of 256 MiB. */
    const char *args[] = {gkcd, "--socket", path, "--backend", "cpu", "--log-level", "warn",
                          "--memory-budget", "8G", NULL};
    char why[128];
    if (bench_gkcd_start(args, path, NULL, NULL, &pid, why, sizeof why) != 0) {
      bench_stop_child(&pid, 2);
      bench_die("gkcd at %s did not come up: %s", gkcd, why);
    }
    sock = path;
    gkcd_pid = pid;
  }
  fprintf(tab, "inline (no shared memory) array bytes per second, GB/s (10^9 B/s), over all connections"
          " (median round trip in ms%s)\n\n| size |", gkcd_pid > 0 ? "; loop max: GB/s at which gkcd's"
          " event-loop thread would be busy all the time" : "");
  for (int op = 0; op < NOPS; op++)
    if (ops_mask & (1 << op))
      for (int j = 0; j < nlist; j++) fprintf(tab, " %s x%d |", op_names[op], nconns_list[j]);
  fprintf(tab, "\n|---:|");
  for (int op = 0; op < NOPS; op++)
    if (ops_mask & (1 << op))
      for (int j = 0; j < nlist; j++) fprintf(tab, "---:|");
  fprintf(tab, "\n");
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    if (bytes >= 1 << 20)
      fprintf(tab, "| %ld MiB |", bytes >> 20);
    else
      fprintf(tab, "| %ld KiB |", bytes >> 10);
    for (int op = 0; op < NOPS; op++) {
      if (!(ops_mask & (1 << op))) continue;
      for (int j = 0; j < nlist; j++) {
        double gbs, med, loop;
        cell(op, (size_t)bytes / 4, nconns_list[j], &gbs, &med, &loop);
        if (isnan(loop))
          fprintf(tab, " %.2f (%.1f) |", gbs, med);
        else
          fprintf(tab, " %.2f (%.1f; %.1f) |", gbs, med, loop);
        fflush(tab);
        bench_csv_num(&csv, "%ld", bytes);
        bench_csv_str(&csv, op_names[op]);
        bench_csv_num(&csv, "%d,%.3f,%.3f,%.3f", nconns_list[j], gbs, med, loop);
        bench_csv_end(&csv);
      }
    }
    fprintf(tab, "\n");
  }
  if (bench_csv_close(&csv) != 0) failures++;
  if (pid > 0) {
    bench_stop_child(&pid, 10);
    unlink(path);
  }
  return failures ? 1 : 0;
}
