/* cuda_amg.h: the CUDA backend's AMG hierarchy for `solve` precond "amg"
 * (issue #27): set up on the host by cpu_amg (smoothed aggregation, the
 * CPU backend's own code, so both backends build the same hierarchy), then
 * uploaded (gkcu_amg.h) to device memory the caller's allocator gives;
 * gkcu_solve runs the V-cycle.  The host hierarchy is freed once uploaded:
 * the object keeps the device copy, which is what a resident matrix keeps
 * between solves (gkcd_res.precond).
 *
 * Setup reads the matrix from the device (the resident copy is the only
 * one), so it costs a download of the matrix besides cpu_amg_setup, the
 * coarsest level's inverse and the upload; all of it is the setup time
 * reported.  The finest level's spectral radius (15 products with A, the
 * largest single step of the host setup) is estimated on the GPU first
 * (gkcu_amg_rho) and handed to cpu_amg_setup (cpu_amg_opts.rho0).
 */
#ifndef CUDA_AMG_H
#define CUDA_AMG_H

#include <stddef.h>
#include <stdint.h>

#include "gkcu.h"
#include "cuda_ring.h"
#include "gkcu_amg.h"

/* Where the hierarchy's device memory comes from (the backend's device
 * cache, or plain cudaMalloc in tests): alloc returns 0 or a negative gkc
 * error with a message. */
typedef struct {
  int (*alloc)(void *arg, size_t bytes, void **ptr, size_t *cap, char *msg, size_t msglen);
  void (*release)(void *arg, void *ptr, size_t cap);
  void *arg;
  int device; /* the CUDA device it belongs to (made current before freeing) */
} cuda_amg_mem;

typedef struct cuda_amg cuda_amg;

/* Builds the hierarchy of the n x n matrix on the device (rp, ci, va: ctx's
 * device, the structure validated when it was uploaded; va float, or double
 * with va_f64, whose level 0 the hierarchy then keeps rounded to float32), cpu_amg's setup on
 * nthreads OpenMP threads (<= 0: all); the copies both ways go through ring
 * (a slot's, on ctx's stream) when given, else through the driver's
 * pageable path.  0 with *out set, or a negative gkc
 * error with msg set:
 *   GKC_EINVALID_ARGUMENT  an empty row or a zero (non-finite) diagonal:
 *                          *bad_row names it;
 *   GKC_EOUT_OF_MEMORY     host or device memory (nothing kept: the matrix
 *                          stays usable);
 *   GKC_EDEVICE_ERROR      a CUDA call failed (ctx's message; the caller
 *                          checks whether the context survived). */
int cuda_amg_build(gkcu_ctx *ctx, const cuda_amg_mem *mem, int32_t n, int64_t nnz,
                   const int32_t *rp, const int32_t *ci, const void *va, int va_f64, int nthreads,
                   cuda_ring *ring, cuda_amg **out, int32_t *bad_row, char *msg, size_t msglen);

const gkcu_amg *cuda_amg_dev(const cuda_amg *h);
int cuda_amg_levels(const cuda_amg *h);
int cuda_amg_device(const cuda_amg *h);
/* What it holds: its device memory and its host description. */
size_t cuda_amg_bytes(const cuda_amg *h);
/* Frees it, device memory included (any thread; NULL is fine).  No solve
 * may still be using it. */
void cuda_amg_free(cuda_amg *h);

#endif
