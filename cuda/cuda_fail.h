/* cuda_fail.h: a CUDA error, or a gkcu launcher's, as the failure of the
 * job it hit.
 *
 * Out of memory and invalid arguments leave the context usable: the job
 * fails alone (out_of_memory, device_error).  Any other CUDA error is
 * sticky: the context is unusable for every stream of the GPU, so the GPU
 * is lost (cuda_gpu.h) and the job fails with device_lost.
 */
#ifndef CUDA_FAIL_H
#define CUDA_FAIL_H

#include "cuda_impl.h"
#include "job.h"

/* Whether e leaves the GPU's context unusable for everyone. */
int cuda_is_sticky(cudaError_t e);
/* Fails job for e, met while doing `what`; a sticky e loses the GPU. */
void cuda_fail(cuda_impl *impl, gkcd_job *job, cudaError_t e, const char *what);
/* A launcher on s's context refused or failed with rc: the job fails with
 * the context's message; once the stream has drained, a sticky error
 * means the GPU is lost (and the job fails as device_lost). */
void cuda_fail_launch(cuda_impl *impl, cuda_slot *s, gkcd_job *job, int rc);
/* Fails job with GKC_EDEVICE_LOST: "device N (GPU g) was lost: why". */
void cuda_fail_lost(cuda_impl *impl, gkcd_job *job);

#endif
