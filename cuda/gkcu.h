/* gkcu.h: the CUDA backend's per-stream context.
 *
 * A gkcu_ctx is bound to one CUDA stream on the device that was current
 * when it was created.  It owns what the kernels of gkcu_sgemm.h,
 * gkcu_reduce.h and gkcu_spmv.h need beyond their arguments: the cuBLAS and
 * cuSPARSE handles (set to that stream), a device scratch buffer that grows
 * on demand, a zeroed ticket counter and a pinned host slot for results.
 * Every launcher takes a context and enqueues its work on the context's
 * stream; a context is not thread-safe, so keep one per stream (and one
 * stream per worker thread).
 *
 * All functions return 0 or a negative gkc_error (gkc_errors.h):
 * GKC_EINVALID_ARGUMENT for bad arguments, GKC_EOUT_OF_MEMORY when a device
 * or pinned allocation fails, GKC_EDEVICE_ERROR for any other CUDA, cuBLAS
 * or cuSPARSE failure.  After a failure gkcu_ctx_errmsg() names the call
 * that failed.  Nothing here exits or aborts.
 *
 * Pointers given to launchers are device pointers unless a comment says
 * otherwise.  Launchers only enqueue work: synchronize the stream before
 * reading results (gkcu_reduce() is the one call that synchronizes).
 *
 * Implemented in: gkcu_ctx.cu
 */
#ifndef GKCU_H
#define GKCU_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "gkc_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gkcu_ctx gkcu_ctx;

/* Creates a context for stream (0 is the legacy default stream) on the
 * current device.  On success *out is the new context; on failure *out is
 * NULL and nothing is left allocated. */
int gkcu_ctx_create(gkcu_ctx **out, cudaStream_t stream);

/* Waits for the context's stream, then frees everything it owns.
 * NULL is fine. */
void gkcu_ctx_destroy(gkcu_ctx *ctx);

cudaStream_t gkcu_ctx_stream(const gkcu_ctx *ctx);

/* Tells the context its stream runs on sms multiprocessors only (a green
 * context's partition): the kernels size their grids for that many, and
 * cuBLAS is given the same target (cublasSetSmCountTarget), so that a
 * library that fills "every SM" fills the partition in one wave instead of
 * two.  sms 0 restores the device's count. */
int gkcu_ctx_set_sms(gkcu_ctx *ctx, int sms);

/* Multiprocessor count (the partition's, after gkcu_ctx_set_sms) and L2
 * size of the context's device. */
int gkcu_ctx_sm_count(const gkcu_ctx *ctx);
size_t gkcu_ctx_l2_bytes(const gkcu_ctx *ctx);

/* Bytes of device scratch currently held (it only grows; see trim). */
size_t gkcu_ctx_scratch_bytes(const gkcu_ctx *ctx);

/* Synchronizes the stream and frees the scratch buffer. */
int gkcu_ctx_trim(gkcu_ctx *ctx);

/* Text of the last failure on ctx ("" if none). */
const char *gkcu_ctx_errmsg(const gkcu_ctx *ctx);

/* Fills p[0..n) on the context's stream with uniform floats in [lo, hi)
 * drawn from a counter-based hash of (seed, index): the same seed gives the
 * same data on any device.  For tests and benchmarks. */
int gkcu_fill_uniform(gkcu_ctx *ctx, float *p, size_t n, uint64_t seed,
                      float lo, float hi);

/* The host-side twin of gkcu_fill_uniform: value of element i. */
float gkcu_uniform_at(uint64_t seed, uint64_t i, float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_H */
