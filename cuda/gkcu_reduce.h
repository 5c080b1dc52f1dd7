/* gkcu_reduce.h: sum, min or max of a float32 array on the GPU.
 *
 * The result is a double.  sum accumulates in double per thread (pairs of
 * floats are added in float first) except for cub, which sums in float as
 * cub::DeviceReduce::Sum does.  min and max follow fmin/fmax: NaNs are
 * ignored unless every element is NaN, and then the result is NaN.  Any
 * n >= 1 and any 4-byte aligned x work.
 *
 * Algorithms (each a separate kernel, see NOTES.md):
 *   smem   one element pair per thread into shared memory, a tree per block,
 *          repeated over the block partials until one value is left
 *   shfl   many elements per thread with 128-bit loads (scalar head and tail
 *          for an unaligned start or odd n), warp shuffles, one launch: the
 *          last block to finish (atomic ticket) combines the partials
 *   cub    cub::DeviceReduce (Sum, or Reduce with fmin/fmax)
 *   auto   gkcu_reduce_pick()'s choice
 */
#ifndef GKCU_REDUCE_H
#define GKCU_REDUCE_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GKCU_REDUCE_AUTO = 0,
  GKCU_REDUCE_SMEM,
  GKCU_REDUCE_SHFL,
  GKCU_REDUCE_CUB,
  GKCU_REDUCE_NALGO
} gkcu_reduce_algo;

/* Same values as gkc_reduce_op in gkc.h and CPU_SUM.. in cpu_kernels.h. */
typedef enum { GKCU_SUM = 0, GKCU_MIN = 1, GKCU_MAX = 2 } gkcu_reduce_op;

const char *gkcu_reduce_algo_name(int algo);
int gkcu_reduce_algo_parse(const char *s); /* NULL means auto; -1 if unknown */
int gkcu_reduce_pick(const gkcu_ctx *ctx, int64_t n);

/* Enqueues the reduction of x[0..n) and writes the result to the device
 * double *d_result; returns without waiting. */
int gkcu_reduce_async(gkcu_ctx *ctx, int algo, int op, const float *x, int64_t n,
                      double *d_result);

/* The same, then waits for the stream and stores the result in the host
 * double *result. */
int gkcu_reduce(gkcu_ctx *ctx, int algo, int op, const float *x, int64_t n, double *result);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_REDUCE_H */
