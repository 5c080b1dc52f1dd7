/* cuda_fail.c: see cuda_fail.h. */
#include "cuda_fail.h"

#include <stdio.h>

#include "backend.h"
#include "cuda_gpu.h"
#include "gkc_errors.h"

int cuda_is_sticky(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
    case cudaErrorMemoryAllocation:
    case cudaErrorInvalidValue:
    case cudaErrorNotReady:
      return 0;
    default:
      return 1;
  }
}

void cuda_fail(cuda_impl *impl, gkcd_job *job, cudaError_t e, const char *what) {
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    job_fail(job, GKC_EOUT_OF_MEMORY, "%s: %s", what, cudaGetErrorString(e));
    return;
  }
  if (!cuda_is_sticky(e)) {
    job_fail(job, GKC_EDEVICE_ERROR, "%s: %s", what, cudaGetErrorString(e));
    return;
  }
  cuda_gpu_lost(impl, "%s: %s", what, cudaGetErrorString(e));
  cuda_fail_lost(impl, job);
}

void cuda_fail_launch(cuda_impl *impl, cuda_slot *s, gkcd_job *job, int rc) {
  snprintf(job->errmsg, sizeof job->errmsg, "%s", gkcu_ctx_errmsg(s->ctx));
  job->err = rc;
  cudaError_t e = cudaStreamSynchronize(s->stream);
  if (rc == GKC_EDEVICE_ERROR && cuda_is_sticky(e)) {
    cuda_gpu_lost(impl, "%s", job->errmsg);
    cuda_fail_lost(impl, job);
  }
}

void cuda_fail_lost(cuda_impl *impl, gkcd_job *job) {
  char where[64], why[256];
  cuda_gpu_where(impl, where, sizeof where);
  cuda_gpu_why(impl, why, sizeof why);
  job_fail(job, GKC_EDEVICE_LOST, "device %d (%s) was lost: %s", impl->be->device, where, why);
}
