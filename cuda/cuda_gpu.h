/* cuda_gpu.h: one GPU, shared by the backends it is cut into, and its
 * loss.
 *
 * An error that poisons the CUDA context (an illegal address, say) cannot
 * be recovered in-process, and the parts of a GPU share its context: the
 * first such error loses the GPU, once, for every part (each through
 * backend_device_lost, which has the daemon go on from its other devices,
 * or exit non-zero when none is left).  Every later job of those backends
 * fails as device_lost, naming the device and the error.
 */
#ifndef CUDA_GPU_H
#define CUDA_GPU_H

#include <stddef.h>

#include "cuda_impl.h"

/* A GPU to be cut into nparts backends, holding one reference (the
 * caller's); NULL when out of memory. */
cuda_gpu *cuda_gpu_new(int ordinal, int nparts, int total_sms);
/* A reference given back; the last frees gpu. */
void cuda_gpu_release(cuda_gpu *gpu);

/* Takes impl's whole GPU out of service (each part through
 * backend_device_lost), once; the message says what failed.  Any thread. */
void cuda_gpu_lost(cuda_impl *impl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Nonzero once impl's device is lost (its GPU, or the daemon took it out). */
int cuda_lost(const cuda_impl *impl);
/* Why impl's device was lost: the GPU's error, or "taken out of service by
 * gkcd" when the daemon took it out. */
void cuda_gpu_why(cuda_impl *impl, char *buf, size_t len);
/* Makes impl's device the calling thread's current one: cudaSuccess, or
 * the error, logged (what: the operation it was for) and cleared. */
cudaError_t cuda_gpu_use(cuda_impl *impl, const char *what);
/* "GPU 0" or "GPU 0, part 1/2": how messages name a backend's device. */
void cuda_gpu_where(const cuda_impl *impl, char *buf, size_t len);

#endif
