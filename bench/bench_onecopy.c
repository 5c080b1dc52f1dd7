/* bench_onecopy.c: what passing arrays by value costs over the explicit
 * region path, through libgkc (issue #25's CPU-backend target).
 *
 * The target: by value costs at most one copy of the data more than the
 * region path,
 *     t(by value) <= 1.25 * (t(region) + t(memcpy of the same bytes)),
 * for a reduce of 256 MiB (the array in) and an sgemm 2048^3 (A and B in,
 * C out: 48 MiB), all measured in the same run, rounds interleaved so that
 * a shared machine's drift falls on each alike.  Each round times, on
 * connections of one gkcd (CPU backend):
 *   region   the arrays in a region of the caller's (gkc_region_create),
 *            passed as references, sgemm's C written into it;
 *   arena    by value, the transparent arena on (the default);
 *   inline   by value, the arena off (as GKC_NO_SHM=1): through the socket;
 *   memcpy   one plain memcpy of the same bytes, into memory already touched.
 * The table gives medians (and minimums) in ms, the bound, and whether the
 * arena (the normal by-value path) meets it; inline is reported beside it.
 * Results of the three paths are compared: a difference fails the run.
 *
 *   bench_onecopy --gkcd build/daemon/gkcd [--reps 7]
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "gkc.h"

enum { P_REGION, P_ARENA, P_INLINE, P_MEMCPY, NPATHS };
static int reps = 7, failures;

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) bench_die("out of memory (%zu bytes)", n);
  memset(p, 0, n); /* touched: no first-touch cost in any timed copy */
  return p;
}

static gkc_conn *open_conn(const char *sock, size_t threshold) {
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) bench_die("cannot connect to %s: %s", sock, gkc_errmsg(c));
  gkc_set_shm(c, threshold, 0);
  return c;
}

static double ms_since(uint64_t t0) { return (double)(bench_clock_ns() - t0) / 1e6; }

static void check(int rc, gkc_conn *c, const char *what) {
  if (rc) bench_die("%s: %s", what, gkc_errmsg(c));
}

typedef struct {
  const char *name;
  size_t bytes; /* data moved: what memcpy copies */
  double t[NPATHS][64];
} row;

static void summarize(row *r) {
  double med[NPATHS], lo[NPATHS];
  for (int p = 0; p < NPATHS; p++) {
    qsort(r->t[p], (size_t)reps, sizeof(double), bench_cmp_double);
    med[p] = reps % 2 ? r->t[p][reps / 2] : (r->t[p][reps / 2 - 1] + r->t[p][reps / 2]) / 2;
    lo[p] = r->t[p][0];
  }
  double bound = 1.25 * (med[P_REGION] + med[P_MEMCPY]), bound_lo = 1.25 * (lo[P_REGION] + lo[P_MEMCPY]);
  printf("| %s | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.2f (%.2f) | %s | %.1f (%.1f) | %.2f (%.2f) |\n",
         r->name, med[P_REGION], lo[P_REGION], med[P_MEMCPY], lo[P_MEMCPY], bound, bound_lo, med[P_ARENA],
         lo[P_ARENA], med[P_ARENA] / bound, lo[P_ARENA] / bound_lo, med[P_ARENA] <= bound ? "met" : "MISSED",
         med[P_INLINE], lo[P_INLINE], med[P_INLINE] / bound, lo[P_INLINE] / bound_lo);
}

static void bench_reduce(const char *sock, gkc_conn *cr, gkc_conn *ca, gkc_conn *cn) {
  (void)sock;
  const size_t n = (size_t)64 << 20, bytes = n * 4; /* 256 MiB */
  float *x = xmalloc(bytes), *dst = xmalloc(bytes);
  for (size_t i = 0; i < n; i++) x[i] = (float)(i % 4093) / 64.0f - 30.0f;
  gkc_region *reg;
  check(gkc_region_create(cr, bytes, &reg), cr, "region");
  memcpy(gkc_region_data(reg), x, bytes);
  row r = {"reduce 256 MiB", bytes, {{0}}};
  double v[3];
  for (int i = -1; i < reps; i++) { /* round -1: the warm-up */
    uint64_t t0 = bench_clock_ns();
    check(gkc_reduce_ref(cr, gkc_ref_region(reg, 0, bytes), GKC_SUM, &v[0], NULL, NULL, NULL), cr, "reduce region");
    double tr = ms_since(t0);
    t0 = bench_clock_ns();
    check(gkc_reduce(ca, x, n, GKC_SUM, &v[1], NULL, NULL), ca, "reduce arena");
    double ta = ms_since(t0);
    t0 = bench_clock_ns();
    check(gkc_reduce(cn, x, n, GKC_SUM, &v[2], NULL, NULL), cn, "reduce inline");
    double tn = ms_since(t0);
    t0 = bench_clock_ns();
    memcpy(dst, x, bytes);
    double tm = ms_since(t0);
    if (v[0] != v[1] || v[0] != v[2]) {
      fprintf(stderr, "bench_onecopy: reduce: region %.17g, arena %.17g, inline %.17g\n", v[0], v[1], v[2]);
      failures++;
    }
    if (i < 0) continue;
    r.t[P_REGION][i] = tr, r.t[P_ARENA][i] = ta, r.t[P_INLINE][i] = tn, r.t[P_MEMCPY][i] = tm;
  }
  summarize(&r);
  gkc_region_release(cr, reg);
  free(x), free(dst);
}

static void bench_sgemm(gkc_conn *cr, gkc_conn *ca, gkc_conn *cn) {
  const int32_t n = 2048;
  const size_t mat = (size_t)n * n * 4; /* 16 MiB */
  float *a = xmalloc(mat), *b = xmalloc(mat), *c_arena = xmalloc(mat), *c_inline = xmalloc(mat);
  unsigned char *dst = xmalloc(3 * mat);
  for (size_t i = 0; i < (size_t)n * n; i++) a[i] = (float)(i % 61) / 61.0f, b[i] = (float)(i % 53) / 53.0f - 0.5f;
  gkc_region *reg;
  check(gkc_region_create(cr, 3 * mat, &reg), cr, "region");
  unsigned char *rd = gkc_region_data(reg);
  memcpy(rd, a, mat);
  memcpy(rd + mat, b, mat);
  gkc_sgemm_args args = GKC_SGEMM_ARGS_INIT;
  args.m = args.n = args.k = n;
  args.a = gkc_ref_region(reg, 0, mat);
  args.b = gkc_ref_region(reg, mat, mat);
  row r = {"sgemm 2048^3", 3 * mat, {{0}}};
  for (int i = -1; i < reps; i++) {
    gkc_out out = gkc_out_region(reg, 2 * mat);
    uint64_t t0 = bench_clock_ns();
    check(gkc_sgemm_ref(cr, &args, &out, NULL), cr, "sgemm region");
    double tr = ms_since(t0);
    t0 = bench_clock_ns();
    check(gkc_sgemm(ca, n, n, n, 1.0f, a, 0, b, 0, 0.0f, c_arena, NULL, NULL), ca, "sgemm arena");
    double ta = ms_since(t0);
    t0 = bench_clock_ns();
    check(gkc_sgemm(cn, n, n, n, 1.0f, a, 0, b, 0, 0.0f, c_inline, NULL, NULL), cn, "sgemm inline");
    double tn = ms_since(t0);
    t0 = bench_clock_ns();
    memcpy(dst, a, mat); /* A and B in, C out: the bytes by value moves */
    memcpy(dst + mat, b, mat);
    memcpy(dst + 2 * mat, rd + 2 * mat, mat);
    double tm = ms_since(t0);
    if (memcmp(rd + 2 * mat, c_arena, mat) != 0 || memcmp(c_arena, c_inline, mat) != 0) {
      fprintf(stderr, "bench_onecopy: sgemm: the three paths' C differ\n");
      failures++;
    }
    if (i < 0) continue;
    r.t[P_REGION][i] = tr, r.t[P_ARENA][i] = ta, r.t[P_INLINE][i] = tn, r.t[P_MEMCPY][i] = tm;
  }
  summarize(&r);
  gkc_region_release(cr, reg);
  free(a), free(b), free(c_arena), free(c_inline), free(dst);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"gkcd", 1, 0, 'g'}, {"socket", 1, 0, 's'}, {"reps", 1, 0, 'r'},
                                       {"only", 1, 0, 'o'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  bench_prog = "bench_onecopy";
  const char *gkcd = getenv("GKCD_BIN"), *sock = NULL, *only = NULL;
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'g': gkcd = optarg; break;
      case 's': sock = optarg; break;
      case 'r': reps = (int)bench_parse_long("--reps", optarg, 1, 64); break;
      case 'o': only = optarg; break;
      case 'h':
        printf("usage: bench_onecopy [--gkcd PATH | --socket PATH] [--reps N] [--only reduce|sgemm]\n"
               "By value (arena on, and inline) against the region path plus one memcpy:\n"
               "reduce 256 MiB and sgemm 2048^3 (issue #25's CPU-backend target).\n");
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
    snprintf(path, sizeof path, "%s/gkc-bench-byvalue-%d.sock", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    const char *args[] = {gkcd, "--socket", path, "--backend", "cpu", "--log-level", "warn",
                          "--memory-budget", "4G", NULL};
    char why[128];
    if (bench_gkcd_start(args, path, NULL, NULL, &pid, why, sizeof why) != 0) {
      bench_stop_child(&pid, 2);
      bench_die("gkcd at %s did not come up: %s", gkcd, why);
    }
    sock = path;
  }
  gkc_conn *cr = open_conn(sock, GKC_SHM_OFF), *ca = open_conn(sock, 0), *cn = open_conn(sock, GKC_SHM_OFF);
  printf("libgkc, medians (minimums) of %d rounds in ms; bound = 1.25 x (region + memcpy);"
         " ratio = by value / bound (target: <= 1), of the medians (of the minimums);\n"
         "target: met when the ratio of the medians is <= 1\n\n", reps);
  printf("| call | region | memcpy | bound | by value, arena (default) | ratio | target |"
         " by value, GKC_NO_SHM=1 | ratio |\n|---|---:|---:|---:|---:|---:|---|---:|---:|\n");
  fflush(stdout);
  if (!only || !strcmp(only, "reduce")) bench_reduce(sock, cr, ca, cn);
  fflush(stdout);
  if (!only || !strcmp(only, "sgemm")) bench_sgemm(cr, ca, cn);
  gkc_shm_info info;
  gkc_shm_state(ca, &info);
  printf("\narena: %zu bytes in %d region(s), %llu arrays staged, %llu calls inline for want of room\n",
         info.arena_bytes, info.regions, (unsigned long long)info.staged, (unsigned long long)info.fallbacks);
  gkc_close(cr);
  gkc_close(ca);
  gkc_close(cn);
  if (pid > 0) {
    bench_stop_child(&pid, 10);
    unlink(path);
  }
  return failures ? 1 : 0;
}
