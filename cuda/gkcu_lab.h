/* gkcu_lab.h: knobs for the benchmark and the tests, not for the daemon.
 *
 * These run one rung of a ladder with a configuration forced instead of
 * chosen, so that tuning runs can compare variants in one call.  Same
 * argument rules and return codes as the public launchers.
 *
 * Implemented in: gkcu_reduce.cu, gkcu_sgemm.cu, gkcu_spmv.cu, gkcu_spmv_balanced.cu
 */
#ifndef GKCU_LAB_H
#define GKCU_LAB_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sgemm regblock with a forced tile configuration `tile` (0 ..
 * GKCU_LAB_TILES-1, gkcu_lab_tile_name() says which: BM x BN x BK, /bN
 * registers budgeted for N resident blocks, /ph phased staging, /t16 8x16
 * outputs per thread instead of 8x8) and `splits`
 * slices of K (>= 1; 0: the launcher's choice). */
enum { GKCU_LAB_TILES = 13 };
const char *gkcu_lab_tile_name(int tile);
/* How many blocks (tiles of C) that shape takes for an m x n output. */
size_t gkcu_lab_tile_blocks(int tile, int32_t m, int32_t n);
int gkcu_lab_sgemm_regblock(gkcu_ctx *ctx, int tile, int splits, int32_t m,
                            int32_t n, int32_t k, float alpha, const float *a,
                            int trans_a, const float *b, int trans_b,
                            float beta, float *c);
/* The (tile, splits) that regblock picks for this shape. */
void gkcu_lab_sgemm_regblock_choice(const gkcu_ctx *ctx, int32_t m, int32_t n,
                                    int32_t k, int *tile, int *splits);

/* spmv vector with a forced group width (2, 4, 8, 16 or 32). */
int gkcu_lab_spmv_vector(gkcu_ctx *ctx, int width, int32_t rows, int32_t cols,
                         int64_t nnz, const int32_t *row_ptr,
                         const int32_t *col_idx, const float *values,
                         float alpha, const float *x, float beta, float *y);
/* The width the vector algo picks for this matrix size. */
int gkcu_lab_spmv_vector_width(const gkcu_ctx *ctx, int32_t rows, int64_t nnz);

/* spmv balanced in tile shape `shape` (threads x items, registers for
 * /bN resident blocks, /pdl: launched as a programmatic dependent of the
 * partition kernel, /rowsWxJ: every tile summed row by row, W lanes per
 * row piece, J items per lane per pass, /mixWxJ: the same for tiles of at
 * most threads/W row pieces none longer than W*J and the merge-path walk
 * for the others (in the same kernel), /rowsWxJpP+walk: the same for
 * tiles of at most P*threads/W pieces, the others listed for a second,
 * walk-only launch, /onepass: the walk in one launch, each block finding
 * its own boundaries and split rows carried between blocks (no atomics);
 * gkcu_lab_spmv_balanced_name() names it, NULL past the last); the balanced
 * algo's choice is balanced_shape() in gkcu_spmv_balanced.cu.  _plan makes the tile
 * coordinates for that shape (plan: 16-byte aligned, at least
 * ((rows + nnz) / 512 + 2) * 16 bytes); _planned runs it from them. */
enum { GKCU_LAB_BALANCED_SHAPES = 12 };
const char *gkcu_lab_spmv_balanced_name(int shape);
int gkcu_lab_spmv_balanced(gkcu_ctx *ctx, int shape, int32_t rows, int32_t cols,
                           int64_t nnz, const int32_t *row_ptr, const int32_t *col_idx,
                           const float *values, float alpha, const float *x, float beta,
                           float *y);
int gkcu_lab_spmv_balanced_plan(gkcu_ctx *ctx, int shape, int32_t rows, int64_t nnz,
                                const int32_t *row_ptr, void *plan);
int gkcu_lab_spmv_balanced_planned(gkcu_ctx *ctx, int shape, int32_t rows, int32_t cols,
                                   int64_t nnz, const int32_t *row_ptr,
                                   const int32_t *col_idx, const float *values, float alpha,
                                   const float *x, float beta, float *y, const void *plan);

/* reduce shfl with a forced number of resident blocks per multiprocessor
 * (1..8; 0: the launcher's choice). d_result is a device double. */
int gkcu_lab_reduce_shfl(gkcu_ctx *ctx, int blocks_per_sm, int op,
                         const float *x, int64_t n, double *d_result);
/* The same for one of GKCU_LAB_REDUCE_VARIANTS shfl kernels (loads in
 * flight per thread, cache hint, blocks per SM, /x4: a
 * grid four times what is resident at once: gkcu_lab_reduce_shfl_name()
 * says which, NULL past the last); blocks_per_sm 0: the variant's own. */
enum { GKCU_LAB_REDUCE_VARIANTS = 7 };
const char *gkcu_lab_reduce_shfl_name(int variant);
int gkcu_lab_reduce_shfl_variant(gkcu_ctx *ctx, int variant, int blocks_per_sm,
                                 int op, const float *x, int64_t n,
                                 double *d_result);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_LAB_H */
