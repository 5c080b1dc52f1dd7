/* gkcu_internal.h: what the .cu files of cuda/ share (C++ only, never
 * installed, never included from C).
 *
 * Error handling: every CUDA, cuBLAS and cuSPARSE call goes through one of
 * the GKCU__TRY macros, which record the failing call in ctx->msg and return
 * the matching gkc_error from the enclosing function.  After each kernel
 * launch GKCU__LAUNCHED(ctx, "name") checks cudaGetLastError().
 *
 * Implemented in: gkcu_ctx.cu
 */
#ifndef GKCU_INTERNAL_H
#define GKCU_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include "gkcu.h"

struct gkcu_ctx {
  cudaStream_t stream;
  int device;
  int sm_count;
  size_t l2_bytes;
  cublasHandle_t cublas;
  cusparseHandle_t cusparse;
  void *scratch;          /* device, scratch_cap bytes, NULL until needed */
  size_t scratch_cap;
  unsigned int *tickets;  /* device, GKCU__NTICKETS counters, kept at zero
                             between launches (each last block resets its) */
  double *dev_result;     /* device slots for gkcu_reduce() (one) and
                             gkcu_part_cg_update() (two) */
  double *host_result;    /* pinned host slots, as dev_result */
  void *solve_host;       /* pinned, gkcu_solve()'s copies of its state; NULL until
                             the first solve (gkcu_solve.cu) */
  unsigned long long *spmv_flags; /* device, GKCU__SPMV_FLAGS words, zero at creation:
                                     the one-pass balanced spmv's carries, each tagged
                                     with the call's epoch (gkcu_spmv_balanced.cu) */
  unsigned int spmv_epoch; /* the last epoch used; 0: none yet */
  char msg[256];
};

enum { GKCU__NTICKETS = 8, GKCU__SPMV_FLAGS = 4096 };

/* Records a message and returns code. */
int gkcu__fail(gkcu_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int gkcu__cuda_fail(gkcu_ctx *ctx, cudaError_t e, const char *what);
int gkcu__cublas_fail(gkcu_ctx *ctx, cublasStatus_t s, const char *what);
int gkcu__cusparse_fail(gkcu_ctx *ctx, cusparseStatus_t s, const char *what);

#define GKCU__TRY_CUDA(ctx, call)                                  \
  do {                                                             \
    cudaError_t e__ = (call);                                      \
    if (e__ != cudaSuccess) return gkcu__cuda_fail((ctx), e__, #call); \
  } while (0)

#define GKCU__TRY_CUBLAS(ctx, call)                                     \
  do {                                                                  \
    cublasStatus_t s__ = (call);                                        \
    if (s__ != CUBLAS_STATUS_SUCCESS) return gkcu__cublas_fail((ctx), s__, #call); \
  } while (0)

#define GKCU__TRY_CUSPARSE(ctx, call)                                       \
  do {                                                                      \
    cusparseStatus_t s__ = (call);                                          \
    if (s__ != CUSPARSE_STATUS_SUCCESS) return gkcu__cusparse_fail((ctx), s__, #call); \
  } while (0)

#define GKCU__LAUNCHED(ctx, name)                                  \
  do {                                                             \
    cudaError_t e__ = cudaGetLastError();                          \
    if (e__ != cudaSuccess) return gkcu__cuda_fail((ctx), e__, "launch " name); \
  } while (0)

#define GKCU__CHECK_ARG(ctx, cond)                                                 \
  do {                                                                             \
    if (!(cond)) return gkcu__fail((ctx), GKC_EINVALID_ARGUMENT, "invalid argument: %s", #cond); \
  } while (0)

/* A carved-up view of the scratch buffer: take() hands out 256-byte aligned
 * pieces of one allocation that is grown (after a stream sync) when the
 * request does not fit.  Only valid until the next call that grows scratch,
 * i.e. within one launcher. */
struct gkcu__carve {
  size_t need[8];
  void **dst[8];
  int n;
};
void gkcu__carve_add(gkcu__carve *c, size_t bytes, void **dst);
int gkcu__carve_commit(gkcu_ctx *ctx, gkcu__carve *c);

static inline unsigned int gkcu__div_up(size_t a, size_t b) {
  return (unsigned int)((a + b - 1) / b);
}

#endif /* GKCU_INTERNAL_H */
