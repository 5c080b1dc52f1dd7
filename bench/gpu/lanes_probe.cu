/* lanes_probe.cu: what the hardware gives when a tiny kernel shares the GPU
 * with cuBLAS FP32 sgemm n^3, without gkcd: the arrangements the daemon's
 * lanes use (cuda/lanes.c, cuda/cuda_slice.c), so that RESULTS.md can set the
 * daemon's figures beside them.
 *
 *   lanes_probe [--n 8192] [--tiny 2000] [--latency-sms 8] [--slice-us 100] [--csv DIR]
 *
 * Arrangements (each: --tiny 1-block kernels timed with CUDA events, one at a
 * time, while the bulk stream keeps two sgemm queued; then the bulk rate):
 *   idle      the tiny kernel alone
 *   default   both streams at the default priority
 *   priority  the tiny stream at the highest priority
 *   sliced    priority, and the sgemm cut into row slices of ~--slice-us
 *             (slice_sgemm, with the backend's napkin rate of 50 TFLOP/s)
 *   green     lanes_open(--latency-sms): tiny in the latency green context,
 *             sgemm in the bulk one (cuBLAS told its SM count)
 * Bulk TFLOP/s: sgemm finished over the tiny phase's wall time (queued
 * work drained at the end and counted); "solo" rows run the bulk alone for
 * 10 calls.  A summary table on stdout; --csv DIR writes DIR/probe.csv.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>

extern "C" {
#include "bench_util.h" /* a C library */
}
#include "cuda_slice.h"
#include "gkcu.h"
#include "gkcu_sgemm.h"
#include "lanes.h"

static int g_n = 8192, g_tiny = 2000, g_lat_sms = 8;
static double g_slice_us = 100;

__global__ void tiny_kernel(float *p, int i) {
  if (threadIdx.x == 0) p[0] = p[0] * 0.5f + (float)i;
}

struct lane_res {
  cudaStream_t s;
  gkcu_ctx *ctx;
};

static lane_res make(cuda_lanes *L, int lane) {
  lane_res r;
  char msg[256];
  if (lanes_enter(L, lane, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); exit(2); }
  CUDA_OK(lanes_stream_create(L, lane, &r.s, msg, sizeof msg));
  if (gkcu_ctx_create(&r.ctx, r.s)) { fprintf(stderr, "gkcu_ctx_create failed\n"); exit(2); }
  if (lanes_green(L) && gkcu_ctx_set_sms(r.ctx, lanes_sms(L, lane))) { fprintf(stderr, "%s\n", gkcu_ctx_errmsg(r.ctx)); exit(2); }
  if (lanes_leave(L, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); exit(2); }
  return r;
}

static void drop(lane_res *r) {
  gkcu_ctx_destroy(r->ctx);
  CUDA_OK(cudaStreamDestroy(r->s));
}

struct row {
  const char *name;
  double p50, p99, tflops, solo;
};

static float *g_a, *g_b, *g_c, *g_tinybuf;

/* Enqueues one sgemm (whole, or in slices). */
static void enqueue_bulk(lane_res *b, int sliced) {
  int algo = GKCU_SGEMM_CUBLAS, ns;
  slice_budget sb = {g_slice_us * 5e7, g_slice_us * 3e6};
  int rc = sliced ? slice_sgemm(b->ctx, &sb, &algo, 0, g_n, g_n, g_n, 1.0f, g_a, 0, g_b, 0, 0.0f, g_c, &ns)
                  : gkcu_sgemm(b->ctx, GKCU_SGEMM_CUBLAS, g_n, g_n, g_n, 1.0f, g_a, 0, g_b, 0, 0.0f, g_c);
  if (rc) { fprintf(stderr, "sgemm: %s\n", gkcu_ctx_errmsg(b->ctx)); exit(2); }
}

static double flops() { return 2.0 * g_n * (double)g_n * g_n; }

/* Bulk alone: 10 calls after one warm-up. */
static double solo(lane_res *b, int sliced) {
  enqueue_bulk(b, sliced);
  CUDA_OK(cudaStreamSynchronize(b->s));
  double t0 = bench_now_s();
  for (int i = 0; i < 10; i++) enqueue_bulk(b, sliced);
  CUDA_OK(cudaStreamSynchronize(b->s));
  return 10 * flops() / (bench_now_s() - t0) / 1e12;
}

/* Tiny kernels on t while (b != NULL) sgemm keeps two calls queued on b. */
static row measure(const char *name, lane_res *t, lane_res *b, int sliced) {
  std::vector<double> s(g_tiny);
  cudaEvent_t e0, e1, done[2];
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int i = 0; i < 2; i++) CUDA_OK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
  int queued = 0, finished = 0, next = 0;
  double t0 = bench_now_s();
  if (b)
    for (; queued < 2; queued++) {
      enqueue_bulk(b, sliced);
      CUDA_OK(cudaEventRecord(done[queued % 2], b->s));
    }
  for (int i = 0; i < g_tiny; i++) {
    if (b && cudaEventQuery(done[next]) == cudaSuccess) { /* one finished: queue another */
      finished++;
      enqueue_bulk(b, sliced);
      CUDA_OK(cudaEventRecord(done[next], b->s));
      next ^= 1;
    }
    CUDA_OK(cudaEventRecord(e0, t->s));
    tiny_kernel<<<1, 32, 0, t->s>>>(g_tinybuf, i);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(e1, t->s));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    s[i] = ms * 1e3;
  }
  row r = {name, 0, 0, 0, 0};
  if (b) {
    CUDA_OK(cudaStreamSynchronize(b->s));
    /* every sgemm enqueued ran inside [t0, now]: the queue at the start and
     * each refill */
    r.tflops = (finished + 2) * flops() / (bench_now_s() - t0) / 1e12;
  }
  std::sort(s.begin(), s.end());
  r.p50 = s[(size_t)(0.50 * g_tiny)];
  r.p99 = s[(size_t)(0.99 * g_tiny)];
  cudaEventDestroy(e0), cudaEventDestroy(e1), cudaEventDestroy(done[0]), cudaEventDestroy(done[1]);
  fprintf(stderr, "%-9s tiny p50 %8.1f us  p99 %8.1f us  bulk %6.2f TFLOP/s\n", name, r.p50, r.p99, r.tflops);
  return r;
}

int main(int argc, char **argv) {
  const char *csv = NULL;
  static const struct option opts[] = {{"n", 1, 0, 'n'}, {"tiny", 1, 0, 't'}, {"latency-sms", 1, 0, 'l'},
                                       {"slice-us", 1, 0, 's'}, {"csv", 1, 0, 'c'}, {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'n': g_n = atoi(optarg); break;
      case 't': g_tiny = atoi(optarg); break;
      case 'l': g_lat_sms = atoi(optarg); break;
      case 's': g_slice_us = atof(optarg); break;
      case 'c': csv = optarg; break;
      default:
        printf("usage: lanes_probe [--n 8192] [--tiny 2000] [--latency-sms 8] [--slice-us 100] [--csv DIR]\n"
               "A 1-block kernel beside cuBLAS FP32 sgemm n^3, on plain streams and on green\n"
               "contexts (see the header of bench/gpu/lanes_probe.cu).\n");
        return o == 'h' ? 0 : 2;
    }
  }
  if (g_n < 1 || g_tiny < 10 || g_lat_sms < 1 || !(g_slice_us > 0)) { fprintf(stderr, "bad arguments\n"); return 2; }
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(0));
  size_t n2 = (size_t)g_n * g_n;
  CUDA_OK(cudaMalloc(&g_a, n2 * 4));
  CUDA_OK(cudaMalloc(&g_b, n2 * 4));
  CUDA_OK(cudaMalloc(&g_c, n2 * 4));
  CUDA_OK(cudaMalloc(&g_tinybuf, 256));
  CUDA_OK(cudaMemset(g_tinybuf, 0, 256));
  std::vector<row> rows;
  double solo_plain, solo_green = 0, solo_sliced;
  {
    cuda_lanes *L; /* streams only: priorities, as the fallback */
    if (lanes_open(&L, 0, g_lat_sms, 1)) return 2;
    lane_res t = make(L, LANES_LATENCY), b = make(L, LANES_BULK);
    /* random inputs (never time on zeros) */
    if (gkcu_fill_uniform(b.ctx, g_a, n2, 1, -1, 1) || gkcu_fill_uniform(b.ctx, g_b, n2, 2, -1, 1)) return 2;
    CUDA_OK(cudaStreamSynchronize(b.s));
    solo_plain = solo(&b, 0);
    solo_sliced = solo(&b, 1);
    rows.push_back(measure("idle", &t, NULL, 0));
    lane_res t0 = make(L, LANES_BULK); /* the default priority, like bulk */
    rows.push_back(measure("default", &t0, &b, 0));
    drop(&t0);
    rows.push_back(measure("priority", &t, &b, 0));
    rows.push_back(measure("sliced", &t, &b, 1));
    rows[1].solo = rows[2].solo = solo_plain;
    rows[3].solo = solo_sliced;
    drop(&t), drop(&b);
    lanes_close(L);
  }
  {
    cuda_lanes *L;
    if (lanes_open(&L, 0, g_lat_sms, 0)) return 2;
    if (lanes_green(L)) {
      lane_res t = make(L, LANES_LATENCY), b = make(L, LANES_BULK);
      solo_green = solo(&b, 0);
      rows.push_back(measure("green", &t, &b, 0));
      rows.back().solo = solo_green;
      char name[64];
      snprintf(name, sizeof name, "green %d+%d SMs", lanes_sms(L, LANES_LATENCY), lanes_sms(L, LANES_BULK));
      rows.back().name = strdup(name);
      drop(&t), drop(&b);
    } else {
      printf("no green contexts: %s\n", lanes_why(L));
    }
    lanes_close(L);
  }
  printf("\nlanes_probe: tiny 1-block kernel beside cuBLAS FP32 sgemm %d^3 (%d samples each)\n", g_n, g_tiny);
  printf("%-18s %10s %10s %12s %12s\n", "arrangement", "p50 us", "p99 us", "bulk TF/s", "bulk solo");
  for (auto &r : rows) printf("%-18s %10.1f %10.1f %12.2f %12.2f\n", r.name, r.p50, r.p99, r.tflops, r.solo);
  if (csv) {
    std::string p = std::string(csv) + "/probe.csv";
    FILE *f = fopen(p.c_str(), "w");
    if (f) {
      fprintf(f, "arrangement,n,tiny,p50_us,p99_us,bulk_tflops,bulk_solo_tflops\n");
      for (auto &r : rows) fprintf(f, "%s,%d,%d,%.2f,%.2f,%.2f,%.2f\n", r.name, g_n, g_tiny, r.p50, r.p99, r.tflops, r.solo);
      fclose(f);
    }
  }
  cudaFree(g_a), cudaFree(g_b), cudaFree(g_c), cudaFree(g_tinybuf);
  return 0;
}
