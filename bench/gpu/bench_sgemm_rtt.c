/* bench_sgemm_rtt.c: a resident sgemm's round trip against its kernel.
 *
 *   bench_sgemm_rtt --socket PATH [--n 1024] [--calls 200] [--algo auto] [--spin]
 *
 * A and B (n x n, random) are uploaded once; then --calls sgemm requests,
 * one at a time, each on the resident A and B into the same resident C
 * (no bytes of the operands cross the socket).  Prints the medians of the
 * client's round trip, the reply's server_us and kernel_us, and round
 * trip / kernel, the request path's share (the target is <= 1.15 at
 * 1024^3); then where the rest goes, from the reply's timing fields
 * (PROTOCOL.md): queue_us (loop to worker), worker_us - kernel_us (launch,
 * events, the wait for the stream), server_us - queue_us - worker_us
 * (worker back to the loop, the reply packed), and round trip - server_us
 * (the socket both ways, gkcd's decoding, the client).  The first 10 calls
 * are not timed.
 *
 * --spin: the same requests through the asynchronous library, the client
 * polling its socket without sleeping (gkc_async_poll with no wait)
 * instead of blocking in recv: the difference is the cost of waking a
 * sleeping client, which a client that can spare a core need not pay.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gkc.h"
#include "gkc_async.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) (sorts v). */
static double quantile(double *v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n ? v[(int)(q * (n - 1) + 0.5)] : 0;
}
static double median(double *v, int n) { return quantile(v, n, 0.5); }

/* Prints the part of the status JSON that starts at key (an array or a
 * number): which lane the requests ran on, how many a polling thread caught. */
static void print_status_part(const char *json, const char *key) {
  const char *p = strstr(json, key);
  if (!p) return;
  int depth = 0;
  const char *q = p + strlen(key);
  for (; *q; q++) {
    if (*q == '[' || *q == '{') depth++;
    else if (*q == ']' || *q == '}') {
      if (--depth < 0) break;
      if (depth == 0) {
        q++;
        break;
      }
    } else if (*q == ',' && depth == 0) break;
  }
  printf("  status %.*s\n", (int)(q - p), p);
}

/* One sgemm on the resident a and b into out (a new handle the first time):
 * its round trip and the reply's timings.  ac: through the async library,
 * polling without sleeping; else the blocking call on c. */
typedef struct {
  int done, status;
  gkc_info info;
  char err[200];
} reply;

static void on_reply(gkc_async *ac, const gkc_result *res, void *data) {
  (void)ac;
  reply *r = data;
  r->done = 1;
  r->status = res->status;
  r->info = res->info;
  snprintf(r->err, sizeof r->err, "%s", res->errmsg);
}

static int spin_wait(gkc_async *ac, reply *r) {
  while (!r->done)
    if (gkc_async_poll(ac, 0) < 0 && !r->done) return -1;
  return r->status;
}

static int one_call(gkc_conn *c, gkc_async *ac, const gkc_sgemm_args *a, gkc_out *o,
                    gkc_info *info, double *rtt) {
  double t0 = now_us();
  if (!ac) {
    if (gkc_sgemm_ref(c, a, o, info)) {
      fprintf(stderr, "bench_sgemm_rtt: sgemm: %s\n", gkc_errmsg(c));
      return -1;
    }
    *rtt = now_us() - t0;
    return 0;
  }
  reply r = {0};
  if (gkc_async_sgemm(ac, a, o, on_reply, &r) != 0 || spin_wait(ac, &r) != 0) {
    fprintf(stderr, "bench_sgemm_rtt: sgemm: %s\n", r.done ? r.err : gkc_async_errmsg(ac));
    return -1;
  }
  *rtt = now_us() - t0;
  *info = r.info;
  return 0;
}

static void on_upload(gkc_async *ac, const gkc_result *res, void *data) {
  (void)ac;
  if (res->status == 0) *(uint32_t *)data = res->id;
  else fprintf(stderr, "bench_sgemm_rtt: upload: %s\n", res->errmsg);
}

static int upload(gkc_conn *c, gkc_async *ac, const float *buf, size_t n2, uint32_t *h) {
  if (!ac) {
    if (gkc_upload(c, gkc_ref_mem(buf, n2 * 4), GKC_F32, 0, h) == 0) return 0;
    fprintf(stderr, "bench_sgemm_rtt: upload: %s\n", gkc_errmsg(c));
    return -1;
  }
  gkc_upload_args u = {gkc_ref_mem(buf, n2 * 4), GKC_F32, 0};
  if (gkc_async_upload(ac, &u, on_upload, h) != 0) {
    fprintf(stderr, "bench_sgemm_rtt: upload: %s\n", gkc_async_errmsg(ac));
    return -1;
  }
  while (gkc_async_pending(ac) > 0)
    if (gkc_async_poll(ac, -1) < 0) break;
  if (!*h) {
    fprintf(stderr, "bench_sgemm_rtt: upload failed\n");
    return -1;
  }
  return 0;
}

enum { NF = 7 }; /* round trip, server, kernel, queue, worker - kernel, hand-back, outside */
static const char *const fname[NF] = {"round trip", "server_us", "kernel_us", "queue_us",
                                      "worker_us - kernel_us", "hand-back",
                                      "round trip - server_us"};

int main(int argc, char **argv) {
  const char *sock = NULL, *algo = "auto";
  int n = 1024, calls = 200, spin = 0;
  static const struct option opts[] = {{"socket", 1, 0, 's'}, {"n", 1, 0, 'n'},
                                       {"calls", 1, 0, 'c'},  {"algo", 1, 0, 'a'},
                                       {"spin", 0, 0, 'p'},   {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
  for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
    if (o == 's') sock = optarg;
    else if (o == 'n') n = atoi(optarg);
    else if (o == 'c') calls = atoi(optarg);
    else if (o == 'a') algo = optarg;
    else if (o == 'p') spin = 1;
    else {
      printf("usage: bench_sgemm_rtt --socket PATH [--n 1024] [--calls 200] [--algo auto]"
             " [--spin]\n"
             "A resident sgemm's round trip against its kernel time (medians), and where\n"
             "the rest goes.  --spin: the client polls its socket instead of sleeping.\n");
      return o == 'h' ? 0 : 2;
    }
  }
  if (!sock || n < 1 || n > 16384 || calls < 1 || calls > 100000) {
    fprintf(stderr, "bench_sgemm_rtt: --socket is required; --n in [1, 16384], --calls in"
            " [1, 100000]\n");
    return 2;
  }
  gkc_conn *c = NULL;
  gkc_async *ac = NULL;
  if (spin ? gkc_async_connect(&ac, sock) != 0 : gkc_connect(&c, sock) != 0) {
    fprintf(stderr, "bench_sgemm_rtt: connect %s: %s\n", sock,
            spin ? gkc_async_errmsg(ac) : gkc_errmsg(c));
    return 1;
  }
  size_t n2 = (size_t)n * n;
  float *buf = malloc(n2 * sizeof *buf);
  double *v[NF];
  for (int f = 0; f < NF; f++)
    if (!(v[f] = malloc((size_t)calls * sizeof(double)))) return 1;
  if (!buf) return 1;
  uint32_t h[2] = {0, 0};
  srand(1);
  for (int m = 0; m < 2; m++) {
    for (size_t i = 0; i < n2; i++) buf[i] = (float)rand() / RAND_MAX - 0.5f;
    if (upload(c, ac, buf, n2, &h[m])) return 1;
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
    gkc_info in;
    double rtt;
    if (one_call(c, ac, &a, &o, &in, &rtt)) return 1;
    out = o.handle;
    if (i < 10) continue;
    double row[NF] = {rtt, in.server_us, in.kernel_us, in.queue_us, in.worker_us - in.kernel_us,
                      in.server_us - in.queue_us - in.worker_us, rtt - in.server_us};
    for (int f = 0; f < NF; f++) v[f][k] = row[f];
    k++;
  }
  double med[NF];
  for (int f = 0; f < NF; f++) med[f] = median(v[f], k);
  printf("sgemm %d^3 resident (%s%s), %d calls: round trip p50 %.1f us, server_us p50 %.1f us,"
         " kernel_us p50 %.1f us; round trip / kernel = %.3f\n", n, algo,
         spin ? ", client spinning" : "", k, med[0], med[1], med[2], med[0] / med[2]);
  printf("  medians:");
  for (int f = 3; f < NF; f++) printf(" %s %.1f%s", fname[f], med[f], f + 1 < NF ? "," : "\n");
  printf("  p10/p90: round trip %.1f/%.1f us, kernel_us %.1f/%.1f us\n", quantile(v[0], k, 0.1),
         quantile(v[0], k, 0.9), quantile(v[2], k, 0.1), quantile(v[2], k, 0.9));
  char *json = NULL;
  if (c && gkc_status_json(c, &json) == 0) { /* where they ran: the lanes' counts */
    print_status_part(json, "\"lanes\":");
    print_status_part(json, "\"spin_hits\":");
    print_status_part(json, "\"loop_spin_hits\":");
    free(json);
  }
  gkc_close(c);
  if (ac) gkc_async_close(ac);
  free(buf);
  for (int f = 0; f < NF; f++) free(v[f]);
  return 0;
}
