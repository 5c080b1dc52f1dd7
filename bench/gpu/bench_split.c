/* bench_split: one GPU whole vs cut in two (--split-device 2), in-process.
 *
 * The CUDA backends are opened as gkcd opens them (cuda_backends_create) and
 * driven the way its workers drive them (be->run on worker threads), with
 * no daemon, socket or client in between, so that the figures are the
 * split's own cost: SMs lost to the partition granularity and to each
 * part's latency lane, and nothing else.
 *
 *  sgemm:  N^3 FP32 (default 4096), operands and result resident on each
 *          device, --bulk-workers threads per device each running jobs back
 *          to back on the bulk lane; TFLOP/s over all devices.
 *  small:  many independent small requests (sgemm 64^3 by value: host
 *          operands in, result out), --small-workers threads in all spread
 *          over the devices, on the latency lane as gkcd routes them
 *          (--small-lane bulk: on the bulk lane); requests/s.
 *
 * --latency-sms N (default 8, as gkcd) sizes each device's latency lane;
 * 0 turns the lanes off, so that a part is one green context of all its SMs.
 *
 * Each figure is the median of --reps timed rounds after one warm-up round;
 * the ratio is split / whole from the same run.  Inputs are random (never
 * zeros).  --json FILE writes the figures.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "backend_host.h"
#include "cuda_multi.h"
#include "gpu_util.h"

static int opt_n = 4096, opt_jobs = 48, opt_small = 4000, opt_bulk_workers = 2, opt_small_workers = 8,
           opt_reps = 3, opt_small_n = 64, opt_latency_sms = 8, opt_small_bulk = 0;
static const char *opt_json;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  gkcd_backend *be;
  int jobs;
  int small;             /* small by-value requests, else resident sgemm */
  const void *a, *b;     /* resident (sgemm) or host (small) */
  void *c;               /* resident result (sgemm) */
  int failed;
  char err[256];
  const char *algo;      /* what the last job ran */
} worker;

static void *work(void *arg) {
  worker *w = arg;
  int n = w->small ? opt_small_n : opt_n;
  size_t bytes = (size_t)n * n * 4;
  for (int j = 0; j < w->jobs && !w->failed; j++) {
    gkcd_job job;
    memset(&job, 0, sizeof job);
    job.method = PROTO_M_SGEMM;
    job.algo = GKCD_ALGO_AUTO;
    job.in.sgemm.m = job.in.sgemm.n = job.in.sgemm.k = n;
    job.in.sgemm.alpha = 1.0f;
    int where = w->small ? SPAN_HOST : SPAN_RES;
    job.in.sgemm.a = (gkcd_span){.ptr = w->a, .bytes = bytes, .where = where};
    job.in.sgemm.b = (gkcd_span){.ptr = w->b, .bytes = bytes, .where = where};
    job.out_bytes = bytes;
    job.out_kind = w->small ? OUT_BIN : OUT_RES;
    job.out_ptr = w->small ? NULL : w->c;
    job.lane = w->small && !opt_small_bulk ? 1 : 0; /* LANE_LATENCY : LANE_BULK */
    job.row = host_row(PROTO_M_SGEMM);
    w->be->run[PROTO_M_SGEMM](w->be, &job);
    if (job.err) {
      w->failed = 1;
      snprintf(w->err, sizeof w->err, "device %d: %.200s", w->be->device, job.errmsg);
    }
    w->algo = job.algo_name;
    free(job.out);
  }
  return NULL;
}

/* Resident copy of n random floats on be. */
static void *resident(gkcd_backend *be, size_t count, gpu_rng *rng, size_t *cap) {
  void *p = NULL;
  char msg[256];
  cuda_where w;
  cuda_backend_where(be, &w);
  if (be->res_alloc(be, count * 4, &p, cap, msg, sizeof msg) != 0) {
    fprintf(stderr, "bench_split: res_alloc: %s\n", msg);
    exit(1);
  }
  float *h = malloc(count * 4);
  for (size_t i = 0; i < count; i++) h[i] = gpu_rng_float(rng, -1.0f, 1.0f);
  if (cudaSetDevice(w.gpu) != cudaSuccess || cudaMemcpy(p, h, count * 4, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "bench_split: filling resident memory failed\n");
    exit(1);
  }
  free(h);
  return p;
}

/* One timed round: nworkers threads over ndev devices, jobs in all;
 * seconds. */
static const char *last_algo[2]; /* sgemm, small: what ran (printed) */

static double round_s(gkcd_backend **be, int ndev, int small, int nworkers, int jobs, void **a,
                      void **b, void **c) {
  worker *w = calloc((size_t)nworkers, sizeof *w);
  pthread_t *t = calloc((size_t)nworkers, sizeof *t);
  for (int i = 0; i < nworkers; i++) {
    int d = i % ndev;
    w[i] = (worker){.be = be[d], .jobs = jobs / nworkers + (i < jobs % nworkers), .small = small,
                    .a = a[small ? 0 : d], .b = b[small ? 0 : d], .c = small ? NULL : c[i]};
  }
  double t0 = now_s();
  for (int i = 0; i < nworkers; i++) pthread_create(&t[i], NULL, work, &w[i]);
  for (int i = 0; i < nworkers; i++) pthread_join(t[i], NULL);
  double dt = now_s() - t0;
  for (int i = 0; i < nworkers; i++)
    if (w[i].failed) {
      fprintf(stderr, "bench_split: %s\n", w[i].err);
      exit(1);
    }
  if (w[0].algo) last_algo[small] = w[0].algo;
  free(w);
  free(t);
  return dt;
}

typedef struct {
  int ndev, sms[16], green;
  double tflops, reqs;
} result;

static void measure(int split, result *r, gpu_rng *rng) {
  gkcd_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.streams = 4;
  cfg.device_cache_bytes = (size_t)4 << 30;
  cfg.latency_sms = opt_latency_sms;
  cfg.slice_us = 100;
  cfg.split_device = split;
  cfg.ndevices = 1; /* GPU 0 */
  cfg.devices[0] = 0;
  gkcd_backend *be[16];
  char msg[256];
  int n = 0;
  if (cuda_backends_create(be, 16, &n, &cfg, msg, sizeof msg) != 0) {
    fprintf(stderr, "bench_split: cuda_backends_create (split %d): %s\n", split, msg);
    exit(1);
  }
  r->ndev = n;
  for (int i = 0; i < n; i++) {
    cuda_where w;
    be[i]->device = i;
    cuda_backend_where(be[i], &w);
    r->sms[i] = w.sms;
    r->green = w.green;
  }
  /* sgemm: A, B per device; a C per worker. */
  size_t elems = (size_t)opt_n * opt_n, caps[64];
  void *a[16], *b[16], *c[64];
  int nbulk = opt_bulk_workers * n, ncap = 0;
  for (int d = 0; d < n; d++) {
    a[d] = resident(be[d], elems, rng, &caps[ncap++]);
    b[d] = resident(be[d], elems, rng, &caps[ncap++]);
  }
  for (int i = 0; i < nbulk; i++) c[i] = resident(be[i % n], elems, rng, &caps[ncap++]);
  double times[16];
  round_s(be, n, 0, nbulk, nbulk, a, b, c); /* warm-up */
  for (int k = 0; k < opt_reps; k++) times[k] = round_s(be, n, 0, nbulk, opt_jobs, a, b, c);
  qsort(times, (size_t)opt_reps, sizeof *times, cmp_d);
  r->tflops = 2.0 * opt_n * (double)opt_n * opt_n * opt_jobs / times[opt_reps / 2] / 1e12;
  /* small: host operands. */
  size_t se = (size_t)opt_small_n * opt_small_n;
  float *ha = malloc(se * 4), *hb = malloc(se * 4);
  for (size_t i = 0; i < se; i++) {
    ha[i] = gpu_rng_float(rng, -1.0f, 1.0f);
    hb[i] = gpu_rng_float(rng, -1.0f, 1.0f);
  }
  void *sa[1] = {ha}, *sb[1] = {hb};
  round_s(be, n, 1, opt_small_workers, opt_small / 4, sa, sb, NULL);
  for (int k = 0; k < opt_reps; k++) times[k] = round_s(be, n, 1, opt_small_workers, opt_small, sa, sb, NULL);
  qsort(times, (size_t)opt_reps, sizeof *times, cmp_d);
  r->reqs = opt_small / times[opt_reps / 2];
  printf("split %d: %d device(s); sgemm ran %s, small requests %s\n", split, n,
         last_algo[0] ? last_algo[0] : "?", last_algo[1] ? last_algo[1] : "?");
  free(ha);
  free(hb);
  ncap = 0;
  for (int d = 0; d < n; d++) {
    be[d]->res_free(be[d], a[d], caps[ncap++]);
    be[d]->res_free(be[d], b[d], caps[ncap++]);
  }
  for (int i = 0; i < nbulk; i++) be[i % n]->res_free(be[i % n], c[i], caps[ncap++]);
  for (int i = 0; i < n; i++) be[i]->destroy(be[i]);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_split [--n N] [--jobs J] [--small S] [--small-n N] [--bulk-workers W]\n"
          "                   [--small-workers W] [--reps R] [--latency-sms N]\n"
          "                   [--small-lane latency|bulk] [--json FILE]\n"
          "GPU 0 whole vs cut in two by SM partition (--split-device 2), in-process:\n"
          "  sgemm N^3 (default 4096) resident, J jobs (48), W bulk workers per device (2);\n"
          "  S small sgemm requests (4000) of N (64) by value from W workers (8) in all.\n"
          "Prints a table; --json FILE writes the figures.\n");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench_split: %s needs a value\n", o);
      usage(stderr);
      return 2;
    }
    const char *v = argv[++i];
    int x = atoi(v);
    if (!strcmp(o, "--json")) opt_json = v;
    else if (!strcmp(o, "--small-lane") && (!strcmp(v, "bulk") || !strcmp(v, "latency")))
      opt_small_bulk = !strcmp(v, "bulk");
    else if (!strcmp(o, "--latency-sms") && x >= 0 && x <= 1024) opt_latency_sms = x;
    else if (x <= 0) {
      fprintf(stderr, "bench_split: %s %s: want a positive number\n", o, v);
      return 2;
    } else if (!strcmp(o, "--n")) opt_n = x;
    else if (!strcmp(o, "--jobs")) opt_jobs = x;
    else if (!strcmp(o, "--small")) opt_small = x;
    else if (!strcmp(o, "--small-n")) opt_small_n = x;
    else if (!strcmp(o, "--bulk-workers") && x <= 16) opt_bulk_workers = x;
    else if (!strcmp(o, "--small-workers")) opt_small_workers = x;
    else if (!strcmp(o, "--reps") && x <= 16) opt_reps = x;
    else {
      fprintf(stderr, "bench_split: unknown option or value out of range: %s %s\n", o, v);
      usage(stderr);
      return 2;
    }
  }
  gpu_require_device();
  gpu_rng rng = {gpu_seed("bench_split")};
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return 1;
  result whole, split;
  measure(1, &whole, &rng);
  measure(2, &split, &rng);
  printf("\nGPU 0: %s, %d SMs; split parts: %d + %d SMs%s; --latency-sms %d, small requests on the %s lane\n",
         prop.name, prop.multiProcessorCount, split.sms[0], split.sms[1],
         split.green ? " (green contexts)" : " (shared: no green contexts)", opt_latency_sms,
         opt_small_bulk ? "bulk" : "latency");
  printf("%-44s %12s %12s %8s\n", "workload", "whole", "split 2", "ratio");
  printf("%-44s %12.2f %12.2f %8.3f\n", "sgemm FP32 resident, TFLOP/s", whole.tflops, split.tflops,
         split.tflops / whole.tflops);
  char label[64];
  snprintf(label, sizeof label, "small sgemm %d^3 by value, requests/s", opt_small_n);
  printf("%-44s %12.0f %12.0f %8.3f\n", label, whole.reqs, split.reqs, split.reqs / whole.reqs);
  if (opt_json) {
    FILE *f = fopen(opt_json, "w");
    if (!f) {
      perror(opt_json);
      return 1;
    }
    fprintf(f,
            "{\"gpu\": \"%s\", \"sms\": %d, \"part_sms\": [%d, %d], \"green\": %s, \"n\": %d,"
            " \"jobs\": %d, \"bulk_workers_per_device\": %d, \"small_n\": %d, \"small\": %d,"
            " \"small_workers\": %d, \"latency_sms\": %d, \"small_lane\": \"%s\",\n"
            " \"sgemm_tflops\": {\"whole\": %.3f, \"split\": %.3f, \"ratio\": %.4f},\n"
            " \"small_rps\": {\"whole\": %.1f, \"split\": %.1f, \"ratio\": %.4f}}\n",
            prop.name, prop.multiProcessorCount, split.sms[0], split.sms[1],
            split.green ? "true" : "false", opt_n, opt_jobs, opt_bulk_workers, opt_small_n, opt_small,
            opt_small_workers, opt_latency_sms, opt_small_bulk ? "bulk" : "latency", whole.tflops,
            split.tflops, split.tflops / whole.tflops, whole.reqs, split.reqs, split.reqs / whole.reqs);
    fclose(f);
  }
  return 0;
}
