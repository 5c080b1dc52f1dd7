/* cuda_gpu.c: see cuda_gpu.h. */
#include "cuda_gpu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "log.h"

cuda_gpu *cuda_gpu_new(int ordinal, int nparts, int total_sms) {
  cuda_gpu *gpu = calloc(1, sizeof *gpu);
  if (!gpu) return NULL;
  gpu->ordinal = ordinal;
  gpu->nparts = nparts;
  gpu->total_sms = total_sms;
  pthread_mutex_init(&gpu->mu, NULL);
  atomic_store(&gpu->refs, 1);
  return gpu;
}

void cuda_gpu_release(cuda_gpu *gpu) {
  if (atomic_fetch_sub(&gpu->refs, 1) != 1) return;
  pthread_mutex_destroy(&gpu->mu);
  free(gpu);
}

cudaError_t cuda_gpu_use(cuda_impl *impl, const char *what) {
  cudaError_t e = cudaSetDevice(impl->device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    log_err("GPU %d: cudaSetDevice for %s: %s", impl->device, what, cudaGetErrorString(e));
  }
  return e;
}

void cuda_gpu_where(const cuda_impl *impl, char *buf, size_t len) {
  if (impl->gpu->nparts > 1)
    snprintf(buf, len, "GPU %d, part %d/%d", impl->device, impl->part + 1, impl->gpu->nparts);
  else
    snprintf(buf, len, "GPU %d", impl->device);
}

void cuda_gpu_lost(cuda_impl *impl, const char *fmt, ...) {
  cuda_gpu *gpu = impl->gpu;
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&gpu->mu);
  int first = !atomic_load(&gpu->lost);
  if (first) {
    snprintf(gpu->why, sizeof gpu->why, "%s", why);
    atomic_store(&gpu->lost, 1);
  }
  pthread_mutex_unlock(&gpu->mu);
  if (!first) return;
  log_err("GPU %d: the CUDA context is unusable after: %s; its %d device%s taken out of service",
          gpu->ordinal, why, gpu->nparts, gpu->nparts > 1 ? "s are" : " is");
  for (int p = 0; p < gpu->nparts; p++)
    if (gpu->part[p]) backend_device_lost(gpu->part[p], "GPU %d: %s", gpu->ordinal, why);
}

int cuda_lost(const cuda_impl *impl) {
  return atomic_load(&impl->gpu->lost) || atomic_load(&impl->be->lost);
}

void cuda_gpu_why(cuda_impl *impl, char *buf, size_t len) {
  snprintf(buf, len, "taken out of service by gkcd");
  pthread_mutex_lock(&impl->gpu->mu);
  if (atomic_load(&impl->gpu->lost)) snprintf(buf, len, "%s", impl->gpu->why);
  pthread_mutex_unlock(&impl->gpu->mu);
}
