/* bench_util.h: what the GPU benchmarks (bench_gpu, bench_sgemm_tc,
 * bench_direct, ...) share: a CUDA runtime error check, a monotonic clock,
 * the median, and the timing of one call between two CUDA events. */
#ifndef GKC_BENCH_UTIL_H
#define GKC_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

/* Prints file:line, the call and CUDA's message, and exits 2, on an error. */
#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

/* Seconds on a monotonic clock. */
double bench_now_s(void);
/* The median of v[0..n) (n > 0); sorts v ascending in place. */
double bench_median(double *v, int n);

/* A call's median and fastest time in milliseconds; ok = 0 when a call
 * failed (failed: 1 in the warm-up, 2 in the timed calls). */
typedef struct {
  double median_ms, min_ms;
  int ok, failed;
} bench_timing;

/* Times f(arg) (0 = success) on stream st: 2 warm-up calls, then reps calls,
 * each between two events, with flush_bytes of flush_buf written just
 * before it (flush_bytes 0: none) so no input starts in L2.  Stops at the
 * first failed call; the caller says why. */
bench_timing bench_time_events(cudaStream_t st, void *flush_buf, size_t flush_bytes, int reps,
                               int (*f)(void *), void *arg);

#endif
