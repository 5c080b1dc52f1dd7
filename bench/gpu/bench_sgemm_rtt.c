/* bench_sgemm_rtt.c: a resident sgemm's round trip against its kernel.
 *
 *   bench_sgemm_rtt --socket PATH [--n 1024] [--calls 200] [--algo auto]
 *
 * A and B (n x n, random) are uploaded once; then --calls sgemm requests,
 * one at a time, each on the resident A and B into the same resident C
 * (no bytes of the operands cross the socket).  Prints the medians of the
 * client's round trip, the reply's server_us and kernel_us, and round
 * trip / kernel, the request path's share (the target is <= 1.15 at
 * 1024^3).  The first 10 calls are not timed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gkc.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n ? v[n / 2] : 0;
}

int main(int argc, char **argv) {
  const char *sock = NULL, *algo = "auto";
  int n = 1024, calls = 200;
  static const struct option opts[] = {{"socket", 1, 0, 's'}, {"n", 1, 0, 'n'},
                                       {"calls", 1, 0, 'c'},  {"algo", 1, 0, 'a'},
                                       {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
  for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
    if (o == 's') sock = optarg;
    else if (o == 'n') n = atoi(optarg);
    else if (o == 'c') calls = atoi(optarg);
    else if (o == 'a') algo = optarg;
    else {
      printf("usage: bench_sgemm_rtt --socket PATH [--n 1024] [--calls 200] [--algo auto]\n"
             "A resident sgemm's round trip against its kernel time (medians).\n");
      return o == 'h' ? 0 : 2;
    }
  }
  if (!sock || n < 1 || n > 16384 || calls < 1 || calls > 100000) {
    fprintf(stderr, "bench_sgemm_rtt: --socket is required; --n in [1, 16384], --calls in"
            " [1, 100000]\n");
    return 2;
  }
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) {
    fprintf(stderr, "bench_sgemm_rtt: connect %s: %s\n", sock, gkc_errmsg(c));
    return 1;
  }
  size_t n2 = (size_t)n * n;
  float *buf = malloc(n2 * sizeof *buf);
  double *rt = malloc((size_t)calls * sizeof(double)), *sv = malloc((size_t)calls * sizeof(double)),
         *kn = malloc((size_t)calls * sizeof(double));
  if (!buf || !rt || !sv || !kn) return 1;
  uint32_t h[2];
  srand(1);
  for (int m = 0; m < 2; m++) {
    for (size_t i = 0; i < n2; i++) buf[i] = (float)rand() / RAND_MAX - 0.5f;
    if (gkc_upload(c, gkc_ref_mem(buf, n2 * 4), GKC_F32, 0, &h[m])) {
      fprintf(stderr, "bench_sgemm_rtt: upload: %s\n", gkc_errmsg(c));
      return 1;
    }
  }
  uint32_t out = 0;
  int k = 0;
  for (int i = 0; i < calls + 10; i++) {
    gkc_sgemm_args a = GKC_SGEMM_ARGS_INIT;
    a.m = a.n = a.k = n;
    a.a = gkc_ref_handle(h[0], 0);
    a.b = gkc_ref_handle(h[1], 0);
    a.algo = algo;
    gkc_out o = out ? gkc_out_handle(out) : gkc_out_new_handle();
    gkc_info info;
    double t0 = now_us();
    if (gkc_sgemm_ref(c, &a, &o, &info)) {
      fprintf(stderr, "bench_sgemm_rtt: sgemm: %s\n", gkc_errmsg(c));
      return 1;
    }
    double t1 = now_us();
    out = o.handle;
    if (i >= 10) rt[k] = t1 - t0, sv[k] = info.server_us, kn[k] = info.kernel_us, k++;
  }
  double r = median(rt, k), s = median(sv, k), kk = median(kn, k);
  printf("sgemm %d^3 resident (%s), %d calls: round trip p50 %.1f us, server_us p50 %.1f us,"
         " kernel_us p50 %.1f us; round trip / kernel = %.3f\n", n, algo, k, r, s, kk, r / kk);
  gkc_close(c);
  free(buf), free(rt), free(sv), free(kn);
  return 0;
}
