/* gpu_test.h: what every GPU test checks a CUDA runtime call with. */
#ifndef GPU_TEST_H
#define GPU_TEST_H

#include <cuda_runtime_api.h>

#include "test.h"

/* Fails the test, naming the call and the CUDA error, unless call succeeds. */
#define CUDA_OK(call)                                                         \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) TEST_FAIL("%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

#endif
