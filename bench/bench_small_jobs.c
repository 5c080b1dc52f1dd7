/* bench_small_jobs: many connections looping small resident sgemm, from C
 * threads (issue #26: does gkcd's request path cap small jobs, or did the
 * Python clients of the earlier measurement?).
 *
 *   bench_small_jobs --socket PATH [--conns 16] [--n 1024] [--secs 3] [--json FILE]
 *
 * Each of --conns threads opens its own connection, uploads its own A, B
 * and C (no `device`: placement chooses, as for any client), checks one
 * product against float64, then loops sgemm n^3 from A, B into C (all
 * resident: only the request's bytes cross the socket) for --secs seconds.
 * Prints requests/s and TFLOP/s over the common window; run it against a
 * gkcd on one GPU and one on all of them for the scaling ratio.
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "gkc.h"

static const char *sock_path;
static int n = 1024, conns = 16;
static double secs = 3;
static atomic_int go, stop;

typedef struct {
  long done;
  int device;
} worker;

static void fill(float *x, size_t count, unsigned seed) {
  for (size_t i = 0; i < count; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) * (1.0 / 16777216.0) - 0.5);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  size_t nn = (size_t)n * n, bytes = nn * 4;
  float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
  if (!a || !b || !c) bench_die("out of memory");
  fill(a, nn, (unsigned)(uintptr_t)w);
  fill(b, nn, (unsigned)(uintptr_t)w + 7);
  gkc_conn *k;
  if (gkc_connect(&k, sock_path) != 0) bench_die("connect: %s", gkc_errmsg(k));
  uint32_t ha, hb, hc;
  memset(c, 0, bytes);
  if (gkc_upload(k, gkc_ref_mem(a, bytes), GKC_F32, 0, &ha) != 0 ||
      gkc_upload(k, gkc_ref_mem(b, bytes), GKC_F32, 0, &hb) != 0 ||
      gkc_upload(k, gkc_ref_mem(c, bytes), GKC_F32, 0, &hc) != 0)
    bench_die("upload: %s", gkc_errmsg(k));
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = s.n = s.k = n;
  s.a = gkc_ref_handle(ha, bytes);
  s.b = gkc_ref_handle(hb, bytes);
  gkc_out out = gkc_out_handle(hc);
  gkc_info info;
  if (gkc_sgemm_ref(k, &s, &out, &info) != 0) bench_die("sgemm: %s", gkc_errmsg(k));
  w->device = info.device;
  if (gkc_download(k, hc, c, bytes) != 0) bench_die("download: %s", gkc_errmsg(k));
  for (int t = 0; t < 8; t++) { /* sampled entries against float64 */
    int i = (t * 131) % n, j = (t * 977) % n;
    double ref = 0, mag = 0;
    for (int p = 0; p < n; p++) ref += (double)a[(size_t)i * n + p] * b[(size_t)p * n + j],
                                mag += fabs((double)a[(size_t)i * n + p] * b[(size_t)p * n + j]);
    if (fabs(c[(size_t)i * n + j] - ref) > 1e-5 * mag + 1e-6)
      bench_die("C[%d,%d] = %g, float64 says %g", i, j, c[(size_t)i * n + j], ref);
  }
  while (!atomic_load(&go)) bench_clock_ns();
  while (!atomic_load(&stop)) {
    if (gkc_sgemm_ref(k, &s, &out, NULL) != 0) bench_die("sgemm: %s", gkc_errmsg(k));
    w->done++;
  }
  gkc_close(k);
  free(a), free(b), free(c);
  return NULL;
}

int main(int argc, char **argv) {
  bench_prog = "bench_small_jobs";
  const char *json_path = NULL;
  static const struct option opts[] = {{"socket", required_argument, 0, 's'}, {"conns", required_argument, 0, 'c'},
                                       {"n", required_argument, 0, 'n'}, {"secs", required_argument, 0, 't'},
                                       {"json", required_argument, 0, 'j'}, {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (o) {
    case 's': sock_path = optarg; break;
    case 'c': conns = (int)bench_parse_long("--conns", optarg, 1, 512); break;
    case 'n': n = (int)bench_parse_long("--n", optarg, 1, 8192); break;
    case 't': secs = (double)bench_parse_long("--secs", optarg, 1, 600); break;
    case 'j': json_path = optarg; break;
    case 'h':
      printf("usage: bench_small_jobs --socket PATH [--conns N] [--n N] [--secs S] [--json FILE]\n");
      return 0;
    default: return 2;
    }
  }
  if (!sock_path) bench_die("--socket is required (see --help)");
  worker *w = calloc((size_t)conns, sizeof *w);
  pthread_t *th = calloc((size_t)conns, sizeof *th);
  if (!w || !th) bench_die("out of memory");
  for (int i = 0; i < conns; i++)
    if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) bench_die("pthread_create failed");
  /* Every connection set up and checked before the window opens. */
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  long before[512];
  atomic_store(&go, 1);
  nanosleep(&pause, NULL);
  for (int i = 0; i < conns; i++) before[i] = w[i].done;
  double t0 = bench_clock_s();
  while (bench_clock_s() - t0 < secs) nanosleep(&pause, NULL);
  long total = 0;
  for (int i = 0; i < conns; i++) total += w[i].done - before[i];
  double dt = bench_clock_s() - t0;
  atomic_store(&stop, 1);
  for (int i = 0; i < conns; i++) pthread_join(th[i], NULL);
  int per_dev[64] = {0};
  for (int i = 0; i < conns; i++)
    if (w[i].device >= 0 && w[i].device < 64) per_dev[w[i].device]++;
  double rps = total / dt, tflops = rps * 2.0 * n * (double)n * n / 1e12;
  printf("%d connections x resident sgemm %d^3: %.0f requests/s, %.1f TFLOP/s; connections by device:", conns, n,
         rps, tflops);
  for (int d = 0; d < 64; d++)
    if (per_dev[d]) printf(" %d:%d", d, per_dev[d]);
  printf("\n");
  if (json_path) {
    FILE *f = fopen(json_path, "w");
    if (!f) bench_die("cannot write %s", json_path);
    fprintf(f, "{\"conns\": %d, \"n\": %d, \"rps\": %.1f, \"tflops\": %.3f}\n", conns, n, rps, tflops);
    fclose(f);
  }
  free(w), free(th);
  return 0;
}
