/* cuda_rates.c: see cuda_rates.h. */
#include "cuda_rates.h"

#include <cuda_runtime_api.h>

#include "gkcu_sgemm.h"
#include "log.h"

/* The cost model's starting rates, measured on slot s in a few
 * milliseconds: cuBLAS FP32 2048^3 and a 256 MiB device-to-device copy,
 * each the best of three, timed with events on the slot's stream.  Any
 * failure keeps the datasheet figures already in *r (and says why). */
void cuda_measure_rates(cuda_slot *s, cost_rates *r) {
  enum { N = 2048 };
  const size_t copy_bytes = (size_t)256 << 20;
  float *buf = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  cudaError_t e;
  float best_mm = 1e30f, best_cp = 1e30f;
  const char *what = "cudaMalloc";
  if ((e = cudaMalloc((void **)&buf, 3 * (size_t)N * N * 4 + 2 * copy_bytes)) != cudaSuccess) goto fail;
  what = "cudaMemsetAsync";
  if ((e = cudaMemsetAsync(buf, 0, 3 * (size_t)N * N * 4 + 2 * copy_bytes, s->stream)) != cudaSuccess) goto fail;
  what = "cudaEventCreate";
  if ((e = cudaEventCreate(&e0)) != cudaSuccess || (e = cudaEventCreate(&e1)) != cudaSuccess) goto fail;
  int cublas = gkcu_sgemm_algo_parse("cublas");
  for (int t = 0; t < 3; t++) {
    float ms;
    what = "timing sgemm";
    if ((e = cudaEventRecord(e0, s->stream)) != cudaSuccess) goto fail;
    if (gkcu_sgemm(s->ctx, cublas, N, N, N, 1.0f, buf, 0, buf + (size_t)N * N, 0, 0.0f,
                   buf + 2 * (size_t)N * N) != 0) {
      e = cudaErrorUnknown;
      goto fail;
    }
    if ((e = cudaEventRecord(e1, s->stream)) != cudaSuccess || (e = cudaEventSynchronize(e1)) != cudaSuccess ||
        (e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess)
      goto fail;
    if (ms < best_mm) best_mm = ms;
    what = "timing a copy";
    char *src = (char *)(buf + 3 * (size_t)N * N);
    if ((e = cudaEventRecord(e0, s->stream)) != cudaSuccess ||
        (e = cudaMemcpyAsync(src + copy_bytes, src, copy_bytes, cudaMemcpyDeviceToDevice, s->stream)) != cudaSuccess ||
        (e = cudaEventRecord(e1, s->stream)) != cudaSuccess || (e = cudaEventSynchronize(e1)) != cudaSuccess ||
        (e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess)
      goto fail;
    if (ms < best_cp) best_cp = ms;
  }
  r->flops_per_us = 2.0 * N * N * (double)N / (best_mm * 1e3);
  r->bytes_per_us = 2.0 * (double)copy_bytes / (best_cp * 1e3); /* read + write */
  goto done;
fail:
  log_warn("cost model: measuring the GPU's rates failed (%s: %s); starting from datasheet figures", what,
           cudaGetErrorString(e));
  cudaGetLastError();
done:
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (buf) cudaFree(buf);
}
