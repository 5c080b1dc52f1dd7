/* bench_util.c: see bench_util.h. */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"

#include <time.h>

double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bench_timing bench_time_events(cudaStream_t st, void *flush_buf, size_t flush_bytes, int reps,
                               int (*f)(void *), void *arg) {
  bench_timing t = {0, 0, 0, 0};
  cudaEvent_t e0, e1;
  double *ms = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *ms);
  if (!ms) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int w = 0; w < 2 && !t.failed; w++)
    if (f(arg) != 0) t.failed = 1;
  if (!t.failed) CUDA_OK(cudaStreamSynchronize(st));
  for (int r = 0; r < reps && !t.failed; r++) {
    if (flush_bytes) CUDA_OK(cudaMemsetAsync(flush_buf, r & 0xff, flush_bytes, st));
    CUDA_OK(cudaEventRecord(e0, st));
    if (f(arg) != 0) {
      t.failed = 2;
      break;
    }
    CUDA_OK(cudaEventRecord(e1, st));
    CUDA_OK(cudaEventSynchronize(e1));
    float v;
    CUDA_OK(cudaEventElapsedTime(&v, e0, e1));
    ms[r] = v;
  }
  if (!t.failed && reps > 0) {
    t.median_ms = bench_median(ms, reps); /* sorts ms */
    t.min_ms = ms[0];
    t.ok = 1;
  }
  free(ms);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return t;
}
