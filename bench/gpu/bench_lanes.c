/* bench_lanes.c: tiny requests beside bulk sgemm, through one gkcd.
 *
 *   bench_lanes --socket PATH --label NAME --csv DIR [--n 8192] [--tiny 2000]
 *               [--matrix west0067.mtx] [--bulk-secs 2]
 *
 * Two bulk clients (threads, each its own connection) loop sgemm n^3 on
 * resident A and B into a resident C; a third client sends --tiny requests
 * one after another, alternating a reduce of 1000 floats sent inline and an
 * spmv on a small resident matrix (x resident, y returned).  Phases:
 *   idle    the tiny requests alone;
 *   solo    the bulk clients alone for --bulk-secs;
 *   loaded  the tiny requests while both bulk clients loop.
 * Tiny latency is the client's round trip (send to reply decoded), p50 and
 * p99; bulk TFLOP/s is 2 n^3 per finished call, each call's flops spread
 * over its own wall time and counted inside the phase's window.  Inputs are
 * random; every tiny result is checked against a float64 reference (errors
 * counted and reported, the figures then mean nothing).
 *
 * Appends one row to DIR/lanes.csv and writes DIR/tiny_NAME_{idle,loaded}.csv
 * (one round trip per line, microseconds).  Progress on stderr.
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gkc.h"
#include "mtx.h"

static const char *g_sock, *g_label = "run", *g_dir = ".", *g_matrix = "tests/data/west0067.mtx";
static int g_n = 8192, g_tiny = 2000;
static double g_bulk_secs = 2.0;

#define DIE(...)                      \
  do {                                \
    fprintf(stderr, "bench_lanes: "); \
    fprintf(stderr, __VA_ARGS__);     \
    fprintf(stderr, "\n");            \
    exit(1);                          \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float rnd(void) { /* splitmix64 -> [-1, 1) */
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)((z >> 40) * (2.0 / 16777216.0) - 1.0);
}

static gkc_conn *connect_or_die(void) {
  gkc_conn *c;
  if (gkc_connect(&c, g_sock) != 0) DIE("connect %s: %s", g_sock, gkc_errmsg(c));
  return c;
}

/* --- bulk clients --------------------------------------------------------------- */

typedef struct {
  gkc_conn *c;
  uint32_t a, b, out;
  pthread_t th;
  atomic_int run;   /* loop while set */
  atomic_int done;  /* calls finished */
  double *t0, *t1;  /* each call's wall interval */
  int ncalls, cap;
  char err[256];
} bulk;

static void bulk_setup(bulk *b) {
  b->c = connect_or_die();
  size_t n2 = (size_t)g_n * g_n;
  float *buf = malloc(n2 * sizeof *buf);
  if (!buf) DIE("out of memory");
  for (int m = 0; m < 2; m++) {
    for (size_t i = 0; i < n2; i++) buf[i] = rnd();
    if (gkc_upload(b->c, gkc_ref_mem(buf, n2 * 4), GKC_F32, 0, m ? &b->b : &b->a))
      DIE("upload: %s", gkc_errmsg(b->c));
  }
  free(buf);
  b->cap = 100000;
  b->t0 = malloc(b->cap * sizeof(double));
  b->t1 = malloc(b->cap * sizeof(double));
  if (!b->t0 || !b->t1) DIE("out of memory");
  b->out = 0;
}

static int bulk_call(bulk *b) {
  gkc_sgemm_args args = GKC_SGEMM_ARGS_INIT;
  args.m = args.n = args.k = g_n;
  args.a = gkc_ref_handle(b->a, 0);
  args.b = gkc_ref_handle(b->b, 0);
  gkc_out out = b->out ? gkc_out_handle(b->out) : gkc_out_new_handle();
  int rc = gkc_sgemm_ref(b->c, &args, &out, NULL);
  if (rc) snprintf(b->err, sizeof b->err, "sgemm: %s", gkc_errmsg(b->c));
  else b->out = out.handle;
  return rc;
}

static void *bulk_main(void *arg) {
  bulk *b = arg;
  while (atomic_load(&b->run)) {
    double t0 = now_s();
    if (bulk_call(b)) break;
    if (b->ncalls < b->cap) {
      b->t0[b->ncalls] = t0;
      b->t1[b->ncalls] = now_s();
      b->ncalls++;
    }
    atomic_fetch_add(&b->done, 1);
  }
  return NULL;
}

static void bulk_start(bulk *bs, int nb) {
  for (int i = 0; i < nb; i++) {
    bs[i].ncalls = 0;
    atomic_store(&bs[i].done, 0);
    atomic_store(&bs[i].run, 1);
    if (pthread_create(&bs[i].th, NULL, bulk_main, &bs[i])) DIE("pthread_create");
  }
}

static void bulk_stop(bulk *bs, int nb) {
  for (int i = 0; i < nb; i++) atomic_store(&bs[i].run, 0);
  for (int i = 0; i < nb; i++) {
    pthread_join(bs[i].th, NULL);
    if (bs[i].err[0]) DIE("bulk client %d: %s", i, bs[i].err);
  }
}

/* TFLOP/s inside [w0, w1]: each call's 2n^3 spread evenly over its interval. */
static double bulk_rate(bulk *bs, int nb, double w0, double w1) {
  double flops = 2.0 * g_n * (double)g_n * g_n, sum = 0;
  for (int i = 0; i < nb; i++)
    for (int j = 0; j < bs[i].ncalls; j++) {
      double s = bs[i].t0[j], e = bs[i].t1[j];
      double lo = s > w0 ? s : w0, hi = e < w1 ? e : w1;
      if (hi > lo && e > s) sum += flops * (hi - lo) / (e - s);
    }
  return sum / (w1 - w0) / 1e12;
}

/* --- the tiny client ---------------------------------------------------------------- */

typedef struct {
  gkc_conn *c;
  mtx_csr A;
  uint32_t mat, xh;
  float *x, *y, v[1000];
  double *ref; /* A x in double */
  double *mag;
  int errors;
} tiny;

static void tiny_setup(tiny *t) {
  t->c = connect_or_die();
  char err[256];
  if (mtx_read_csr(g_matrix, &t->A, err, sizeof err)) DIE("%s", err);
  gkc_csr A = {t->A.rows, t->A.cols, t->A.nnz, t->A.row_ptr, t->A.col_idx, t->A.values};
  if (gkc_csr_upload(t->c, &A, 0, &t->mat, NULL)) DIE("csr_upload: %s", gkc_errmsg(t->c));
  t->x = malloc((size_t)A.cols * 4);
  t->y = malloc((size_t)A.rows * 4);
  t->ref = malloc((size_t)A.rows * 8);
  t->mag = malloc((size_t)A.rows * 8);
  if (!t->x || !t->y || !t->ref || !t->mag) DIE("out of memory");
  for (int i = 0; i < A.cols; i++) t->x[i] = rnd();
  for (int r = 0; r < A.rows; r++) {
    double s = 0, m = 0;
    for (int j = A.row_ptr[r]; j < A.row_ptr[r + 1]; j++) {
      s += (double)A.values[j] * t->x[A.col_idx[j]];
      m += fabs((double)A.values[j] * t->x[A.col_idx[j]]);
    }
    t->ref[r] = s, t->mag[r] = m;
  }
  if (gkc_upload(t->c, gkc_ref_mem(t->x, (size_t)A.cols * 4), GKC_F32, 0, &t->xh))
    DIE("upload: %s", gkc_errmsg(t->c));
  for (int i = 0; i < 1000; i++) t->v[i] = rnd();
}

/* One tiny request, i even: reduce, odd: spmv; returns its round trip in us. */
static double tiny_one(tiny *t, int i) {
  double t0 = now_s();
  if (i & 1) {
    gkc_spmv_args a = GKC_SPMV_ARGS_INIT;
    a.use_matrix = 1, a.matrix = t->mat;
    a.x = gkc_ref_handle(t->xh, 0);
    gkc_out out = gkc_out_mem(t->y, (size_t)t->A.rows * 4);
    if (gkc_spmv_ref(t->c, &a, &out, NULL)) DIE("spmv: %s", gkc_errmsg(t->c));
    double us = (now_s() - t0) * 1e6;
    for (int r = 0; r < t->A.rows; r++)
      if (!(fabs(t->y[r] - t->ref[r]) <= 1e-5 * t->mag[r] + 1e-30)) {
        t->errors++;
        break;
      }
    return us;
  }
  t->v[i % 1000] = rnd(); /* fresh input each time */
  double v;
  if (gkc_reduce(t->c, t->v, 1000, GKC_SUM, &v, NULL, NULL)) DIE("reduce: %s", gkc_errmsg(t->c));
  double us = (now_s() - t0) * 1e6, s = 0, m = 0;
  for (int k = 0; k < 1000; k++) s += t->v[k], m += fabs(t->v[k]);
  if (!(fabs(v - s) <= 1e-5 * m)) t->errors++;
  return us;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double p) {
  int i = (int)ceil(p / 100.0 * n) - 1;
  return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void tiny_phase(tiny *t, const char *phase, double *p50, double *p99) {
  double *s = malloc((size_t)g_tiny * sizeof *s);
  if (!s) DIE("out of memory");
  for (int i = 0; i < g_tiny; i++) s[i] = tiny_one(t, i);
  char path[1024];
  snprintf(path, sizeof path, "%s/tiny_%s_%s.csv", g_dir, g_label, phase);
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "i,kind,round_trip_us\n");
    for (int i = 0; i < g_tiny; i++) fprintf(f, "%d,%s,%.2f\n", i, i & 1 ? "spmv" : "reduce", s[i]);
    fclose(f);
  }
  qsort(s, (size_t)g_tiny, sizeof *s, cmp);
  *p50 = pct(s, g_tiny, 50), *p99 = pct(s, g_tiny, 99);
  fprintf(stderr, "%s %s: tiny p50 %.1f us, p99 %.1f us\n", g_label, phase, *p50, *p99);
  free(s);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"socket", 1, 0, 's'}, {"label", 1, 0, 'l'},
                                       {"csv", 1, 0, 'c'},    {"n", 1, 0, 'n'},
                                       {"tiny", 1, 0, 't'},   {"matrix", 1, 0, 'm'},
                                       {"bulk-secs", 1, 0, 'b'}, {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 's': g_sock = optarg; break;
      case 'l': g_label = optarg; break;
      case 'c': g_dir = optarg; break;
      case 'n': g_n = atoi(optarg); break;
      case 't': g_tiny = atoi(optarg); break;
      case 'm': g_matrix = optarg; break;
      case 'b': g_bulk_secs = atof(optarg); break;
      default:
        printf("usage: bench_lanes --socket PATH --label NAME --csv DIR [--n 8192] [--tiny 2000]\n"
               "                   [--matrix west0067.mtx] [--bulk-secs 2]\n"
               "Tiny requests beside two clients looping resident sgemm n^3 through one gkcd\n"
               "(see the header of bench/gpu/bench_lanes.c).\n");
        return o == 'h' ? 0 : 2;
    }
  }
  if (!g_sock || g_n < 1 || g_tiny < 2 || !(g_bulk_secs > 0)) DIE("--socket is required; sizes must be positive");
  tiny t = {0};
  tiny_setup(&t);
  enum { NB = 2 };
  bulk bs[NB];
  memset(bs, 0, sizeof bs);
  for (int i = 0; i < NB; i++) bulk_setup(&bs[i]);
  for (int i = 0; i < 50; i++) tiny_one(&t, i); /* warm: caches, cost model, lanes */
  for (int i = 0; i < NB; i++)
    if (bulk_call(&bs[i])) DIE("%s", bs[i].err);

  double idle50, idle99, load50, load99;
  tiny_phase(&t, "idle", &idle50, &idle99);

  bulk_start(bs, NB);
  double w0 = now_s();
  while (now_s() - w0 < g_bulk_secs) {
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  double w1 = now_s();
  bulk_stop(bs, NB);
  double solo = bulk_rate(bs, NB, w0, w1);
  fprintf(stderr, "%s solo: bulk %.2f TFLOP/s\n", g_label, solo);

  bulk_start(bs, NB);
  for (int i = 0; i < NB; i++) /* both bulk clients have work on the GPU */
    while (atomic_load(&bs[i].done) < 1) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  w0 = now_s();
  tiny_phase(&t, "loaded", &load50, &load99);
  w1 = now_s();
  bulk_stop(bs, NB);
  double loaded = bulk_rate(bs, NB, w0, w1);
  fprintf(stderr, "%s loaded: bulk %.2f TFLOP/s over %.2f s\n", g_label, loaded, w1 - w0);

  char path[1024];
  snprintf(path, sizeof path, "%s/lanes.csv", g_dir);
  FILE *f = fopen(path, "a");
  if (!f) DIE("cannot write %s", path);
  if (ftell(f) == 0)
    fprintf(f, "label,n,tiny,tiny_idle_p50_us,tiny_idle_p99_us,tiny_loaded_p50_us,tiny_loaded_p99_us,"
               "bulk_solo_tflops,bulk_loaded_tflops,loaded_window_s,tiny_errors\n");
  fprintf(f, "%s,%d,%d,%.1f,%.1f,%.1f,%.1f,%.2f,%.2f,%.2f,%d\n", g_label, g_n, g_tiny, idle50, idle99,
          load50, load99, solo, loaded, w1 - w0, t.errors);
  fclose(f);
  printf("%s: tiny idle p50 %.1f p99 %.1f us, loaded p50 %.1f p99 %.1f us; bulk solo %.2f, loaded "
         "%.2f TFLOP/s; tiny errors %d\n",
         g_label, idle50, idle99, load50, load99, solo, loaded, t.errors);
  for (int i = 0; i < NB; i++) gkc_close(bs[i].c);
  gkc_close(t.c);
  mtx_free(&t.A);
  return t.errors ? 1 : 0;
}
