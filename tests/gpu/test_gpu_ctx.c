/* test_gpu_ctx: the per-stream context: create on a real stream, the test
 * data generator agrees with its host twin bit for bit, scratch grows and
 * trims, errors carry a message, destroy is safe on NULL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu.h"
#include "gkcu_reduce.h"
#include "gkcu_spmv.h"
#include "gpu_util.h"
#include "gpu_test.h"
#include "test.h"

int main(void) {
  gpu_require_device();
  uint64_t seed = gpu_seed("test_gpu_ctx");

  ASSERT_EQ(gkcu_ctx_create(NULL, 0), GKC_EINVALID_ARGUMENT);
  gkcu_ctx_destroy(NULL);

  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  gkcu_ctx *ctx = NULL;
  ASSERT_EQ(gkcu_ctx_create(&ctx, st), 0);
  ASSERT(ctx != NULL);
  ASSERT(gkcu_ctx_stream(ctx) == st);
  ASSERT(gkcu_ctx_sm_count(ctx) >= 1);
  ASSERT(gkcu_ctx_l2_bytes(ctx) > 0);
  ASSERT_EQ(gkcu_ctx_scratch_bytes(ctx), 0);
  ASSERT_STR_EQ(gkcu_ctx_errmsg(ctx), "");
  printf("device: %d SMs, %zu bytes of L2\n", gkcu_ctx_sm_count(ctx), gkcu_ctx_l2_bytes(ctx));

  /* device fill == host twin, bit for bit, including a non-multiple of 4 */
  size_t n = 1000003;
  float *d, *h = malloc(n * sizeof *h);
  ASSERT(h != NULL);
  CUDA_OK(cudaMalloc((void **)&d, n * sizeof(float)));
  ASSERT_EQ(gkcu_fill_uniform(ctx, d, n, seed, -2.0f, 3.0f), 0);
  CUDA_OK(cudaStreamSynchronize(st));
  CUDA_OK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
  size_t mismatches = 0;
  for (size_t i = 0; i < n; i++) {
    float want = gkcu_uniform_at(seed, i, -2.0f, 3.0f);
    if (memcmp(&want, &h[i], sizeof want) != 0) mismatches++;
    if (!(h[i] >= -2.0f && h[i] < 3.0f)) mismatches++;
  }
  ASSERT_EQ(mismatches, 0);
  ASSERT_EQ(gkcu_fill_uniform(ctx, d, 0, seed, 0.0f, 1.0f), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkcu_ctx_errmsg(ctx), "invalid argument");

  /* a reduction on the non-blocking stream uses scratch, which then trims */
  double r = 0.0;
  ASSERT_EQ(gkcu_reduce(ctx, GKCU_REDUCE_CUB, GKCU_SUM, d, (int64_t)n, &r), 0);
  ASSERT(gkcu_ctx_scratch_bytes(ctx) > 0);
  double want = 0.0, mag = 0.0;
  for (size_t i = 0; i < n; i++) {
    want += h[i];
    mag += h[i] < 0 ? -h[i] : h[i];
  }
  ASSERT_NEAR(r, want, 2e-5 * mag);
  ASSERT_EQ(gkcu_ctx_trim(ctx), 0);
  ASSERT_EQ(gkcu_ctx_scratch_bytes(ctx), 0);
  ASSERT_EQ(gkcu_reduce(ctx, GKCU_REDUCE_SHFL, GKCU_MAX, d, (int64_t)n, &r), 0);
  float mx = h[0];
  for (size_t i = 1; i < n; i++) mx = h[i] > mx ? h[i] : mx;
  ASSERT(r == (double)mx);

  /* two contexts on two streams work side by side */
  gkcu_ctx *ctx2 = NULL;
  ASSERT_EQ(gkcu_ctx_create(&ctx2, 0), 0);
  double r2 = 0.0;
  ASSERT_EQ(gkcu_reduce(ctx2, GKCU_REDUCE_SHFL, GKCU_MIN, d, (int64_t)n, &r2), 0);
  ASSERT_EQ(gkcu_reduce(ctx, GKCU_REDUCE_SMEM, GKCU_MIN, d, (int64_t)n, &r), 0);
  ASSERT(r == r2);
  gkcu_ctx_destroy(ctx2);

  cudaFree(d);
  free(h);
  gkcu_ctx_destroy(ctx);
  CUDA_OK(cudaStreamDestroy(st));
  printf("test_gpu_ctx: ok\n");
  return 0;
}
