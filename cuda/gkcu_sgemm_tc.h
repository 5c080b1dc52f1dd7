/* gkcu_sgemm_tc.h: sgemm on the tensor cores at float32 accuracy ("3xTF32"),
 * the kernel behind gkcu_sgemm()'s GKCU_SGEMM_TF32X3 (gkcu_sgemm.h).
 *
 * Each operand element x is split into two TF32 numbers, hi = tf32(x) and
 * lo = tf32(x - hi), so x = hi + lo to about 22 bits (float32 keeps 24).
 * The product takes three TF32 tensor-core products, lo*hi + hi*lo + hi*hi
 * (the small terms first), accumulated in float32; lo*lo (below 2^-22 of
 * the product) is dropped.  The tensor core adds in float32 but truncates,
 * so each group of 8*KF k values (KF = 1, 2 or 4 by configuration) is
 * summed from zero by the tensor core and then added to the running sums
 * with ordinary round-to-nearest float32 additions (chaining the tensor core over all of k was 30-45x less
 * accurate than cuBLAS FP32; see cuda/NOTES.md).
 *
 * Inputs must be finite: an infinity becomes NaN (hi = inf, x - hi = NaN),
 * where float32 arithmetic would give inf or NaN.
 *
 * Configurations (block tile BM x BN x BK, warp tile, cp.async stages,
 * blocks per SM the registers are budgeted for) are listed in the .cu file;
 * gkcu_tc_choice() picks one and a K split for a shape from the lab
 * runs recorded in cuda/NOTES.md.  K splits of up to 8 run as one thread-
 * block cluster per tile, whose blocks add their partial tiles through
 * distributed shared memory; more (or a cluster the launch refuses) write
 * partial sums to the context's scratch for a second kernel.  Either way
 * the slices are added in order: results are the same every run.
 *
 * Internal to cuda/ (C linkage so that the benchmark and the tests, plain C,
 * can force a configuration); the daemon only sees gkcu_sgemm().
 */
#ifndef GKCU_SGEMM_TC_H
#define GKCU_SGEMM_TC_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { GKCU_TC_CFGS = 19 };

/* "128x256x32/w64x64/s3/b1/f1" (block tile, warp tile, stages, blocks per
 * SM, KF), ...; NULL past the last. */
const char *gkcu_tc_cfg_name(int cfg);

/* The configuration and K split tf32x3 runs for this shape on sms SMs. */
void gkcu_tc_choice(int sms, int32_t m, int32_t n, int32_t k, int *cfg, int *splits);

/* tf32x3 with a forced configuration (0 .. GKCU_TC_CFGS-1; -1: the choice
 * above) and K split (1..64; 0: the choice above; -2..-64: that many
 * slices added through scratch and a second kernel even where a cluster
 * would take them).  gkcu_sgemm()'s tf32x3 is this with -1 and 0.  Same
 * arguments and return codes as gkcu_sgemm(). */
int gkcu_lab_sgemm_tf32x3(gkcu_ctx *ctx, int cfg, int splits, int32_t m, int32_t n, int32_t k,
                          float alpha, const float *a, int trans_a, const float *b, int trans_b,
                          float beta, float *c);

/* Checks the kernels' integer TF32 rounding against cvt.rna.tf32.f32 on
 * every finite float32 bit pattern; *mismatches gets the count, *example
 * one pattern that differed.  0 or a gkc error code. */
int gkcu_lab_tf32_round_check(gkcu_ctx *ctx, unsigned long long *mismatches, uint32_t *example);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_SGEMM_TC_H */
