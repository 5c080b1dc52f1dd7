/* bench_shm.c: where libgkc's transparent shared memory starts to pay.
 *
 * For array sizes from --min to --max (powers of two), the same calls on
 * plain pointers through two connections to one gkcd: one sending every
 * array inline (gkc_set_shm(c, GKC_SHM_OFF, 0)), one passing every array
 * through its arena (threshold 1 byte).  Calls alternate between the two,
 * so that drift in a shared machine's load falls on both alike; each
 * cell is the median round trip of at least --reps calls and --time
 * seconds.  The operations:
 *   reduce    one array in, a scalar back
 *   axpby     two arrays in (x, y), one back (y' = 2x + y)
 *   download  one array back (a resident array of that size)
 * The threshold is the smallest size from which the arena is at least as
 * fast for every operation, at that size and every larger one.  Results
 * of the two paths are compared: a difference fails the run.
 *
 *   bench_shm --gkcd build/daemon/gkcd     # starts gkcd on a temporary socket
 *   bench_shm --socket PATH                # or measures one already running
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "gkc.h"

enum { OP_REDUCE, OP_AXPBY, OP_DOWNLOAD, NOPS };
static const char *const op_names[NOPS] = {"reduce", "axpby", "download"};

static long min_bytes = 4096, max_bytes = 64L << 20, min_reps = 7;
static double cell_s = 0.3;
static int failures;

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

/* Median round trips of op at n floats, inline and through the arena. */
static void cell(gkc_conn *ci, gkc_conn *cs, int op, size_t n, double *t_inline, double *t_shm) {
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
  *t_inline = median(a, m);
  *t_shm = median(b, m);
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
                                       {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  bench_prog = "bench_shm";
  const char *gkcd = getenv("GKCD_BIN"), *sock = NULL;
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'g': gkcd = optarg; break;
      case 's': sock = optarg; break;
      case 'a': min_bytes = bench_parse_long("--min", optarg, 4, 1L << 30); break;
      case 'b': max_bytes = bench_parse_long("--max", optarg, 4, 1L << 30); break;
      case 't': cell_s = bench_parse_long("--time", optarg, 1, 60000) / 1000.0; break;
      case 'r': min_reps = bench_parse_long("--reps", optarg, 1, 4096); break;
      case 'h':
        printf("usage: bench_shm [--gkcd PATH | --socket PATH] [--min BYTES] [--max BYTES]\n"
               "                 [--time MS] [--reps N]\n"
               "Inline bytes vs libgkc's shared-memory arena for reduce, axpby and download\n"
               "on arrays of --min to --max bytes (powers of two; default 4096 to 64 MiB):\n"
               "median round trips, and the smallest size where the arena wins from there up.\n"
               "  --gkcd PATH    gkcd to start on a temporary socket (default $GKCD_BIN)\n"
               "  --socket PATH  measure a gkcd already running there instead\n"
               "  --time MS      at least this long per cell and path (default 300)\n"
               "  --reps N       and at least N calls (default 7)\n");
        return 0;
      default: return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
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
  printf("median round trip in microseconds, inline / through the arena (ratio: inline over arena)\n\n");
  printf("| size |");
  for (int op = 0; op < NOPS; op++) printf(" %s inline | %s arena | ratio |", op_names[op], op_names[op]);
  printf("\n|---:|");
  for (int op = 0; op < NOPS; op++) printf("---:|---:|---:|");
  printf("\n");
  int nsizes = 0;
  long sizes[32];
  double ratio[32][NOPS];
  for (long bytes = min_bytes; bytes <= max_bytes && nsizes < 32; bytes *= 2, nsizes++) {
    char h[32];
    human(h, sizeof h, bytes);
    sizes[nsizes] = bytes;
    printf("| %s |", h);
    for (int op = 0; op < NOPS; op++) {
      double ti, ts;
      cell(ci, cs, op, (size_t)bytes / 4, &ti, &ts);
      ratio[nsizes][op] = ti / ts;
      printf(" %.1f | %.1f | %.2f |", ti, ts, ti / ts);
    }
    printf("\n");
    fflush(stdout);
  }
  gkc_shm_info info;
  gkc_shm_state(cs, &info);
  /* From which size up does the arena win for every operation? */
  int from = nsizes;
  while (from > 0) {
    int wins = 1;
    for (int op = 0; op < NOPS; op++) wins &= ratio[from - 1][op] >= 1.0;
    if (!wins) break;
    from--;
  }
  char h[32] = "none measured";
  if (from < nsizes) human(h, sizeof h, sizes[from]);
  printf("\nthreshold: %s (the arena is as fast or faster for every operation from there up)\n", h);
  printf("arena at the end: %zu bytes in %d region(s), %llu arrays staged, %llu calls inline for"
         " want of room\n", info.arena_bytes, info.regions, (unsigned long long)info.staged,
         (unsigned long long)info.fallbacks);
  gkc_close(ci);
  gkc_close(cs);
  if (pid > 0) {
    bench_stop_child(&pid, 10);
    unlink(path);
  }
  return failures ? 1 : 0;
}
