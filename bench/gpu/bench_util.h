/* bench_util.h: what the two GPU benchmarks (bench_gpu, bench_direct) share:
 * a CUDA runtime error check, a monotonic clock and the median. */
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

#endif
