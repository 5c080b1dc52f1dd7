/* gpu_test.h: what every GPU test checks a CUDA runtime call with, and its
 * random host arrays. */
#ifndef GPU_TEST_H
#define GPU_TEST_H

#include <cuda_runtime_api.h>

#include "gpu_util.h"
#include "test.h"

/* Fails the test, naming the call and the CUDA error, unless call succeeds. */
#define CUDA_OK(call)                                                         \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) TEST_FAIL("%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

/* n floats uniform in [lo, hi) from g; the test fails when out of memory. */
static inline float *gpu_test_random(gpu_rng *g, size_t n, float lo, float hi) {
  float *p = gpu_host_random(g, n, lo, hi);
  if (!p) TEST_FAIL("out of memory");
  return p;
}

#endif
