/* bench_shm.c: where libgkc's transparent shared memory starts to pay.
 *
 * For array sizes from --min to --max (powers of two), the same calls on
 * plain pointers through two connections to one gkcd: one sending every
 * array inline (gkc_set_shm(c, GKC_SHM_OFF, 0)), one passing every array
 * through its arena (threshold 1 byte).  Calls alternate between the two,
 * so that drift in a shared machine's load falls on both alike; each
 * cell is the median and the minimum round trip of at least --reps calls
 * and --time seconds (on a loaded machine the minimum shows what each path
 * costs, the median what a caller sees).  The operations:
 *   reduce    one array in, a scalar back
 *   axpby     two arrays in (x, y), one back (y' = 2x + y)
 *   download  one array back (a resident array of that size)
 * The threshold it suggests is the smallest size from which the arena is
 * at least --margin times as fast (default 1.1: clearly, not within the
 * noise) for every operation, at that size and every larger one, by the
 * minimums (which a loaded machine disturbs least); the same rule on the
 * medians is printed beside it.  Results
 * of the two paths are compared: a difference fails the run.
 *
 *   bench_shm --gkcd build/daemon/gkcd     # starts gkcd on a temporary socket
 *   bench_shm --socket PATH                # or measures one already running
 *
 * --csv PATH writes one row per size and operation there ("-": stdout, the
 * table then going to stderr).
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_csv.h"
#include "gkc.h"

enum { OP_REDUCE, OP_AXPBY, OP_DOWNLOAD, NOPS };
static const char *const op_names[NOPS] = {"reduce", "axpby", "download"};

static long min_bytes = 4096, max_bytes = 64L << 20, min_reps = 7;
static double cell_s = 0.3, margin = 1.1;
static int failures;
static FILE *tab; /* the Markdown table: stdout, or stderr when the CSV is there */

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) bench_die("out of memory (%zu bytes)", n);
  return p;
}

static gkc_conn *connect_or_die(const char *sock, int shm) {
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) bench_die("cannot connect to %s: %s", sock, gkc_errmsg(c));
  if (shm)
    gkc_set_shm(c, 1, 0); /* every array, whatever its size */
  else
    gkc_set_shm(c, GKC_SHM_OFF, 0);
  return c;
}

typedef struct {
  float *x, *y, *out;
  size_t n;
  uint32_t handle; /* download: a resident array of n floats on this connection */
  double value;
} work;

/* One call of op; its round trip in microseconds. */
static double call(gkc_conn *c, int op, work *w) {
  uint64_t t0 = bench_clock_ns();
  int rc = 0;
  if (op == OP_REDUCE) {
    rc = gkc_reduce(c, w->x, w->n, GKC_SUM, &w->value, NULL, NULL);
  } else if (op == OP_AXPBY) {
    gkc_out o = gkc_out_mem(w->out, w->n * 4);
    rc = gkc_axpby(c, 2.0f, gkc_ref_mem(w->x, w->n * 4), 1.0f, gkc_ref_mem(w->y, w->n * 4), &o,
                   NULL);
  } else {
    rc = gkc_download(c, w->handle, w->out, w->n * 4);
  }
  double us = (double)(bench_clock_ns() - t0) / 1e3;
  if (rc) bench_die("%s of %zu bytes: %s", op_names[op], w->n * 4, gkc_errmsg(c));
  return us;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Round trips of op at n floats, inline and through the arena: t[0] the
 * median inline, t[1] through the arena; t[2], t[3] the minimums. */
static void cell(gkc_conn *ci, gkc_conn *cs, int op, size_t n, double t[4]) {
  work w[2];
  for (int k = 0; k < 2; k++) {
    w[k].n = n;
    w[k].x = xmalloc(n * 4), w[k].y = xmalloc(n * 4), w[k].out = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) w[k].x[i] = (float)(i % 1000) / 7.0f, w[k].y[i] = 1.0f;
    if (op == OP_DOWNLOAD &&
        gkc_upload(k ? cs : ci, gkc_ref_mem(w[k].x, n * 4), GKC_F32, 0, &w[k].handle) != 0)
      bench_die("upload: %s", gkc_errmsg(k ? cs : ci));
  }
  /* Warm-up: the arena grows to this size here, not in the timed calls. */
  for (int i = 0; i < 2; i++) call(ci, op, &w[0]), call(cs, op, &w[1]);
  int cap = 4096, m = 0;
  double *a = xmalloc(cap * sizeof *a), *b = xmalloc(cap * sizeof *b), spent = 0;
  while (m < cap && (m < min_reps || spent < cell_s)) {
    a[m] = call(ci, op, &w[0]);
    b[m] = call(cs, op, &w[1]);
    spent += (a[m] + b[m]) / 1e6;
    m++;
  }
  if (op == OP_REDUCE ? w[0].value != w[1].value : memcmp(w[0].out, w[1].out, n * 4) != 0) {
    fprintf(stderr, "bench_shm: %s of %zu bytes: the two paths differ\n", op_names[op], n * 4);
    failures++;
  }
  t[0] = median(a, m); /* sorts a and b: the minimum is first */
  t[1] = median(b, m);
  t[2] = a[0];
  t[3] = b[0];
  for (int k = 0; k < 2; k++) {
    if (op == OP_DOWNLOAD) gkc_release(k ? cs : ci, w[k].handle);
    free(w[k].x), free(w[k].y), free(w[k].out);
  }
  free(a), free(b);
}

static void human(char *buf, size_t len, long bytes) {
  if (bytes >= 1 << 20)
    snprintf(buf, len, "%ld MiB", bytes >> 20);
  else
    snprintf(buf, len, "%ld KiB", bytes >> 10);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"gkcd", 1, 0, 'g'}, {"socket", 1, 0, 's'},
                                       {"min", 1, 0, 'a'},  {"max", 1, 0, 'b'},
                                       {"time", 1, 0, 't'}, {"reps", 1, 0, 'r'},
                                       {"margin", 1, 0, 'm'},  {"csv", 1, 0, 'c'},
                                       {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  bench_prog = "bench_shm";
  const char *gkcd = getenv("GKCD_BIN"), *sock = NULL, *csv_path = NULL;
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'g': gkcd = optarg; break;
      case 's': sock = optarg; break;
      case 'a': min_bytes = bench_parse_long("--min", optarg, 4, 1L << 30); break;
      case 'b': max_bytes = bench_parse_long("--max", optarg, 4, 1L << 30); break;
      case 't': cell_s = bench_parse_long("--time", optarg, 1, 60000) / 1000.0; break;
      case 'r': min_reps = bench_parse_long("--reps", optarg, 1, 4096); break;
      case 'c': csv_path = optarg; break;
      case 'm': margin = bench_parse_long("--margin", optarg, 100, 1000) / 100.0; break;
      case 'h':
        printf("usage: bench_shm [--gkcd PATH | --socket PATH] [--min BYTES] [--max BYTES]\n"
               "                 [--time MS] [--reps N]\n"
               "Inline bytes vs libgkc's shared-memory arena for reduce, axpby and download\n"
               "on arrays of --min to --max bytes (powers of two; default 4096 to 64 MiB):\n"
               "median round trips, and the smallest size where the arena wins from there up.\n"
               "  --gkcd PATH    gkcd to start on a temporary socket (default $GKCD_BIN)\n"
               "  --socket PATH  measure a gkcd already running there instead\n"
               "  --time MS      at least this long per cell and path (default 300)\n"
               "  --reps N       and at least N calls (default 7)\n"
               "  --margin PCT   the threshold: where the arena is PCT%% as fast (default 110)\n"
               "  --csv PATH     also one CSV row per size and operation (-: stdout, the\n"
               "                 table then to stderr)\n");
        return 0;
      default: return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  tab = csv_path && !strcmp(csv_path, "-") ? stderr : stdout;
  bench_csv csv = {0};
  if (csv_path && bench_csv_open(&csv, csv_path, "bytes,op,inline_median_us,inline_min_us,"
                                 "arena_median_us,arena_min_us") != 0)
    return 2;
  char path[108];
  volatile pid_t pid = 0;
  if (!sock) {
    if (!gkcd) bench_die("give --gkcd PATH (or $GKCD_BIN) or --socket PATH");
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/gkc-bench-shm-%d.sock", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    const char *args[] = {gkcd, "--socket", path, "--backend", "cpu", "--log-level", "warn",
                          NULL};
    char why[128];
    if (bench_gkcd_start(args, path, NULL, NULL, &pid, why, sizeof why) != 0) {
      bench_stop_child(&pid, 2);
      bench_die("gkcd at %s did not come up: %s", gkcd, why);
    }
    sock = path;
  }
  gkc_conn *ci = connect_or_die(sock, 0), *cs = connect_or_die(sock, 1);
  fprintf(tab, "round trips in microseconds, median (min), inline / through the arena; ratio: inline"
         " over arena, of the medians (of the minimums)\n\n");
  fprintf(tab, "| size |");
  for (int op = 0; op < NOPS; op++) fprintf(tab, " %s inline | %s arena | ratio |", op_names[op], op_names[op]);
  fprintf(tab, "\n|---:|");
  for (int op = 0; op < NOPS; op++) fprintf(tab, "---:|---:|---:|");
  fprintf(tab, "\n");
  int nsizes = 0;
  long sizes[32];
  double ratio[2][32][NOPS]; /* of the medians, of the minimums */
  for (long bytes = min_bytes; bytes <= max_bytes && nsizes < 32; bytes *= 2, nsizes++) {
    char h[32];
    human(h, sizeof h, bytes);
    sizes[nsizes] = bytes;
    fprintf(tab, "| %s |", h);
    for (int op = 0; op < NOPS; op++) {
      double t[4];
      cell(ci, cs, op, (size_t)bytes / 4, t);
      ratio[0][nsizes][op] = t[0] / t[1];
      ratio[1][nsizes][op] = t[2] / t[3];
      fprintf(tab, " %.0f (%.0f) | %.0f (%.0f) | %.2f (%.2f) |", t[0], t[2], t[1], t[3],
              t[0] / t[1], t[2] / t[3]);
      bench_csv_num(&csv, "%ld", bytes);
      bench_csv_str(&csv, op_names[op]);
      bench_csv_num(&csv, "%.1f,%.1f,%.1f,%.1f", t[0], t[2], t[1], t[3]);
      bench_csv_end(&csv);
    }
    fprintf(tab, "\n");
    fflush(tab);
  }
  gkc_shm_info info;
  gkc_shm_state(cs, &info);
  /* From which size up does the arena win, by the margin, for every operation? */
  fprintf(tab, "\n");
  for (int k = 1; k >= 0; k--) {
    int from = nsizes;
    while (from > 0) {
      int wins = 1;
      for (int op = 0; op < NOPS; op++) wins &= ratio[k][from - 1][op] >= margin;
      if (!wins) break;
      from--;
    }
    char h[32] = "none measured";
    if (from < nsizes) human(h, sizeof h, sizes[from]);
    fprintf(tab, "threshold by the %s: %s (the arena at least %.2fx as fast for every operation from"
           " there up)\n", k ? "minimums" : "medians", h, margin);
  }
  fprintf(tab, "arena at the end: %zu bytes in %d region(s), %llu arrays staged, %llu calls inline for"
         " want of room\n", info.arena_bytes, info.regions, (unsigned long long)info.staged,
         (unsigned long long)info.fallbacks);
  gkc_close(ci);
  gkc_close(cs);
  if (bench_csv_close(&csv) != 0) failures++;
  if (pid > 0) {
    bench_stop_child(&pid, 10);
    unlink(path);
  }
  return failures ? 1 : 0;
}
