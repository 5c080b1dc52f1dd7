/* gkcu_sgemm_wg.h: tf32x3 on Hopper's warpgroup tensor-core instructions
 * (wgmma, sm_90a), the fast path behind gkcu_sgemm()'s GKCU_SGEMM_TF32X3
 * on compute capability 9.0 exactly; the mma.sync kernels of
 * gkcu_sgemm_tc.h run everywhere else and on the shapes it declines.
 *
 * Same arithmetic as gkcu_sgemm_tc.h: x = hi + lo in TF32; lo*hi + hi*lo +
 * hi*hi; each group of 32 k values summed from zero by the tensor core
 * (which truncates), then added to the running sums in float32 -- here
 * with Kahan's compensated addition (a plain float32 chain of k/32
 * additions was up to 2.5x cuBLAS FP32's error at k = 8192; with it the
 * error is 0.3x cuBLAS FP32's: cuda/NOTES.md).  Two kernels:
 *
 *   1. a split pre-pass writes hi and lo of B as n x kp (kp = k rounded up
 *      to 32, zero-padded: whole 128-byte rows), K contiguous, and of A as
 *      m x kp, into the context's scratch (8 (m + n) kp bytes; at most 4
 *      GiB, else declined).  Transposes and unaligned operands are absorbed
 *      here; TF32 wgmma needs both operands K-major.  The "ra"
 *      configurations split A in registers instead and read it in place
 *      (row-major, k a multiple of 32, 16-byte aligned; else from a plain
 *      copy), for shapes bound by reading A.
 *   2. the product: one producer thread loads BK = 32 k-slices with the
 *      bulk tensor copy engine (TMA, 128-byte swizzle, out-of-range rows
 *      and columns zero-filled) into a ring of shared-memory stages guarded
 *      by mbarriers; one or two consumer warpgroups each multiply a 64-row
 *      slice with wgmma m64nNk8 (two take turns issuing, so that one's
 *      float32 additions overlap the other's products) and keep the sums in
 *      registers; alpha/beta in the epilogue (C never read when beta = 0).
 *
 * Internal to cuda/ (C linkage for the benchmark and the tests).
 */
#ifndef GKCU_SGEMM_WG_H
#define GKCU_SGEMM_WG_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { GKCU_WG_CFGS = 6 };

/* Returned by gkcu_wg_sgemm() when it ran nothing because this path cannot
 * serve the call here (not a cc 9.0 device, no driver entry point for
 * tensor maps, scratch not to be had, no configuration wanted for the
 * shape): the caller runs the mma.sync kernels instead.  Positive, so
 * never confused with a gkc_error. */
enum { GKCU_WG_DECLINED = 1 };

/* "128x128/2wg/s3/g32" (block tile, consumer warpgroups, stages, k values
 * per tensor-core group sum, /db: two group sums in flight), ...; NULL past
 * the last. */
const char *gkcu_wg_cfg_name(int cfg);

/* Whether the device of ctx can run the wgmma kernels (cc 9.0). */
int gkcu_wg_supported(const gkcu_ctx *ctx);

/* The configuration gkcu_sgemm()'s tf32x3 uses for this shape, or -1 for
 * the mma.sync kernels (from the lab runs in bench/RESULTS.md). */
int gkcu_wg_choice(int sms, int32_t m, int32_t n, int32_t k);

/* tf32x3 through wgmma with configuration cfg (0 .. GKCU_WG_CFGS-1; -1:
 * gkcu_wg_choice()).  Arguments as gkcu_sgemm().  Returns 0, a negative
 * gkc_error, or GKCU_WG_DECLINED (nothing ran, ctx's message empty). */
int gkcu_wg_sgemm(gkcu_ctx *ctx, int cfg, int32_t m, int32_t n, int32_t k, float alpha, const float *a,
                  int trans_a, const float *b, int trans_b, float beta, float *c);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_SGEMM_WG_H */
