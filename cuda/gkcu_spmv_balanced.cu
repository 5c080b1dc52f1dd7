/* gkcu_spmv_balanced.cu: the balanced (merge-path) rung of the CSR spmv
 * ladder: its kernels (partition, v3 walk, v7 rows, v8 rows first and
 * walk, v9 one pass), their shapes and the rule that picks one, plans
 * (gkcu_spmv_plan) and the lab's entry points; the device pieces they share
 * are in gkcu_spmv_tile.cuh.  gkcu_spmv.cu dispatches to run_balanced
 * (gkcu_spmv_int.h). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "gkcu_internal.h"
#include "gkcu_lab.h"
#include "gkcu_spmv.h"
#include "gkcu_spmv_int.h"
#include "gkcu_spmv_tile.cuh"

using namespace gkspmv;

namespace {

/* --- rung 2: merge-path balanced (the pieces: gkcu_spmv_tile.cuh) --------------- */

/* coords[t] = (rows, nonzeros) consumed before tile t, for t = 0..ntiles,
 * and .z = row_ptr[that row] (where the tile's first row starts, handed to
 * the main kernel so that it need not fetch it on its critical path).
 * A row whose nonzeros straddle a tile boundary ("split row") is summed by
 * several blocks with atomicAdd, so it must hold beta*y (or 0) before the
 * main kernel starts: the warp of the first boundary inside the row sets
 * that (one writer per row: the boundary before it lies at or before the
 * row's first item).  SEARCH_G threads per boundary. */
__global__ void spmv_partition_kernel(int rows, long long nnz, const int *__restrict__ rp, int ntiles, int tile,
                                      int4 *__restrict__ coords, float beta, float *__restrict__ y,
                                      int *__restrict__ walk_count) {
  pdl_launch_dependents();
  if (walk_count && blockIdx.x == 0 && threadIdx.x < 2) walk_count[threadIdx.x] = 0; /* rows-first list */
  const long long t = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / SEARCH_G;
  const bool active = t <= ntiles; /* the whole warp stays for the ballots */
  const long long total = (long long)rows + nnz;
  const long long d = active && t * tile < total ? t * tile : total;
  const int x = merge_search_group(d, active, rows, nnz, rp);
  if (!active || (threadIdx.x % SEARCH_G) != 0) return;
  const int rs = rp[x]; /* row x starts at path item x + rs (x == rows: nnz) */
  coords[t] = make_int4(x, (int)(d - x), rs, 0);
  /* y == NULL: a plan (gkcu_spmv_plan), the split rows are prescaled per call */
  if (y && t > 0 && x < rows && rs < d - x && (t - 1) * tile <= x + rs)
    y[x] = beta == 0.0f ? 0.0f : beta * y[x];
}

/* With a plan: the split rows' beta*y (or 0) from the stored coords, the same
 * rule and the same single writer per row as the partition kernel, without
 * the merge-path search.  One thread per tile boundary t = 1..ntiles. */
__global__ void spmv_prescale_kernel(int rows, int ntiles, int tile, const int4 *__restrict__ coords, float beta,
                                     float *__restrict__ y, int *__restrict__ walk_count) {
  pdl_launch_dependents();
  if (walk_count && blockIdx.x == 0 && threadIdx.x < 2) walk_count[threadIdx.x] = 0;
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (t > ntiles) return;
  const int4 c = coords[t];
  if (c.x < rows && c.z < c.y && (t - 1) * tile <= (long long)c.x + c.z)
    y[c.x] = beta == 0.0f ? 0.0f : beta * y[c.x];
}

/* A matrix of one tile: the same walk without a partition kernel (the
 * coordinates are (0, 0) and (rows, nnz)) and without split rows, so one
 * launch in all.  Small matrices are launch-bound: the partition and the
 * main kernel's launch behind it were most of their time. */
template <int BAL_NT, int BAL_IPT>
__global__ void __launch_bounds__(BAL_NT) spmv_balanced_one_kernel(
    int rows, int nnz, const int *__restrict__ rp, const int *__restrict__ ci, const float *__restrict__ v,
    float alpha, const float *__restrict__ x, float beta, float *__restrict__ y) {
  __shared__ int s_tile[BAL_NT * BAL_IPT + 1];
  __shared__ int s_wflag[BAL_NT / 32];
  __shared__ float s_wval[BAL_NT / 32];
  const int4 c0 = make_int4(0, 0, 0, 0), c1 = make_int4(rows, nnz, nnz, 0);
  int *s_rowend = s_tile;
  float *s_prod = reinterpret_cast<float *>(s_tile + rows + 1);
  stage_tile<BAL_NT, BAL_IPT>(s_rowend, s_prod, rp, ci, v, x, c0, c1);
  __syncthreads();
  balanced_tile_walk<BAL_NT, BAL_IPT>(s_rowend, s_prod, s_wflag, s_wval, rows, c0, c1, alpha, beta, y);
}

/* One tile of BAL_TILE path items per block.  v3: the tile's row ends and
 * products staged through registers with coalesced loads (all of a thread's
 * loads issued before any is used), then balanced_tile_walk.  The first
 * thing it does is wait for the kernel that made the coordinates (a no-op
 * unless launched as its programmatic dependent). */
template <int BAL_NT, int BAL_IPT, int MINB>
__global__ void __launch_bounds__(BAL_NT, MINB) spmv_balanced_kernel(
    int rows, const int *__restrict__ rp, const int *__restrict__ ci, const float *__restrict__ v, float alpha,
    const float *__restrict__ x, float beta, float *__restrict__ y, const int4 *__restrict__ coords) {
  constexpr int BAL_TILE = BAL_NT * BAL_IPT;
  __shared__ int s_tile[BAL_TILE + 1];
  __shared__ int s_wflag[BAL_NT / 32];
  __shared__ float s_wval[BAL_NT / 32];

  pdl_wait();
  const int4 c0 = coords[blockIdx.x], c1 = coords[blockIdx.x + 1];
  const int tile_rows = c1.x - c0.x;
  int *s_rowend = s_tile;                                       /* tile_rows + 1 */
  float *s_prod = reinterpret_cast<float *>(s_tile + tile_rows + 1); /* tile_nnz */

  stage_tile<BAL_NT, BAL_IPT>(s_rowend, s_prod, rp, ci, v, x, c0, c1);
  __syncthreads();
  balanced_tile_walk<BAL_NT, BAL_IPT>(s_rowend, s_prod, s_wflag, s_wval, rows, c0, c1, alpha, beta, y);
}

/* v9, one pass: the walk in a single launch, for matrices of at most
 * GKCU__SPMV_FLAGS - 1 tiles.  Each block finds its own two tile boundaries
 * (the partition kernel's search, one group of 8 lanes each; with a plan
 * it reads them), so there is no partition launch and no prescale: a split
 * row gets no atomics.  Each tile publishes its part of the row open at its
 * end in ctx->spmv_flags[tile], tagged with the call's epoch (one 64-bit
 * word, so value and tag arrive together); the tile where that row ends
 * waits for the parts of the tiles since the row began (earlier blocks,
 * already running: blocks are dispatched in index order, as single-pass
 * scans assume), adds them in tile order and stores y once.  So every row
 * has one writer, and the sums are the same every run. */
template <int NT, int IPT>
__global__ void __launch_bounds__(NT, 8) spmv_balanced_onepass_kernel(
    int rows, long long nnz, const int *__restrict__ rp, const int *__restrict__ ci, const float *__restrict__ v,
    float alpha, const float *__restrict__ x, float beta, float *__restrict__ y, const int4 *__restrict__ plan,
    unsigned long long *__restrict__ flags, unsigned epoch) {
  constexpr int TILE = NT * IPT;
  __shared__ int s_tile[TILE + 1];
  __shared__ int s_wflag[NT / 32];
  __shared__ float s_wval[NT / 32], s_red[NT / 32];
  __shared__ int4 s_c[2];
  __shared__ float s_head;
  const int tid = threadIdx.x;
  int4 c0, c1;
  if (plan) {
    c0 = plan[blockIdx.x];
    c1 = plan[blockIdx.x + 1];
  } else {
    if (tid < 32) { /* groups 0 and 1 of warp 0 search boundaries b and b + 1 */
      const int g = tid / SEARCH_G;
      const long long total = (long long)rows + nnz;
      long long d = ((long long)blockIdx.x + g) * TILE;
      if (d > total) d = total;
      const int xb = merge_search_group(d, g < 2, rows, nnz, rp);
      if (g < 2 && tid % SEARCH_G == 0) s_c[g] = make_int4(xb, (int)(d - xb), rp[xb], 0);
    }
    __syncthreads();
    c0 = s_c[0];
    c1 = s_c[1];
  }
  int *s_rowend = s_tile;
  float *s_prod = reinterpret_cast<float *>(s_tile + (c1.x - c0.x) + 1);
  stage_tile<NT, IPT>(s_rowend, s_prod, rp, ci, v, x, c0, c1);
  __syncthreads();
  balanced_tile_walk<NT, IPT, true>(s_rowend, s_prod, s_wflag, s_wval, rows, c0, c1, alpha, beta, y, &s_head,
                                    flags + blockIdx.x, epoch);
  if (!(c0.z < c0.y && c1.x > c0.x)) return; /* (uniform) the first row did not begin earlier, or does not end here */
  /* this tile ends row x0, begun in tile first: the parts of tiles first .. b-1 */
  __syncthreads(); /* s_head */
  const long long first = ((long long)c0.x + c0.z) / TILE;
  float part = 0.0f;
  for (long long j = first + tid; j < (long long)blockIdx.x; j += NT) {
    unsigned long long w;
    do {
      w = *(volatile unsigned long long *)(flags + j);
    } while ((unsigned)(w >> 32) != epoch);
    part += __uint_as_float((unsigned)w);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) part += __shfl_down_sync(0xffffffffu, part, off);
  if ((tid & 31) == 0) s_red[tid >> 5] = part;
  __syncthreads();
  if (tid == 0) {
    float sum = 0.0f;
    for (int w = 0; w < NT / 32; w++) sum += s_red[w];
    put_y(y, c0.x, alpha, sum + s_head, beta);
  }
}

/* The v7 kernel.  MIXED: a tile of at most NT/W pieces, none longer than
 * W*J (one vote, after the pieces' bounds are loaded: the loads of the row
 * path need them anyway), by rows; the others by v3's staged walk.  Not
 * MIXED: every tile by rows, NT/W pieces a pass.  x1 < rows adds the piece
 * of the row open at the tile's end. */
template <int NT, int IPT, int W, int J, int MINB, bool MIXED>
__global__ void __launch_bounds__(NT, MINB) spmv_balanced_rows_kernel(
    int rows, const int *__restrict__ rp, const int *__restrict__ ci, const float *__restrict__ v, float alpha,
    const float *__restrict__ x, float beta, float *__restrict__ y, const int4 *__restrict__ coords) {
  constexpr int BAL_TILE = NT * IPT, G = NT / W;
  __shared__ int s_tile[MIXED ? BAL_TILE + 1 : 1];
  __shared__ int s_wflag[MIXED ? NT / 32 : 1];
  __shared__ float s_wval[MIXED ? NT / 32 : 1];
  const int tid = threadIdx.x;

  pdl_wait();
  const int4 c0 = coords[blockIdx.x], c1 = coords[blockIdx.x + 1];
  const int tile_rows = c1.x - c0.x;
  const int pieces = tile_rows + (c1.x < rows ? 1 : 0);
  if (!MIXED) {
    for (int base = 0; base < pieces; base += G) { /* uniform over the block */
      int beg, end;
      piece_bounds(rp, c0, c1, pieces, base + tid / W, &beg, &end);
      rows_piece<W, J>(ci, v, alpha, x, beta, y, c0, c1, pieces, base + tid / W, beg, end);
    }
    return;
  }
  if (pieces <= G) {
    int beg, end;
    piece_bounds(rp, c0, c1, pieces, tid / W, &beg, &end);
    if (!__syncthreads_or(end - beg > W * J)) {
      rows_piece<W, J>(ci, v, alpha, x, beta, y, c0, c1, pieces, tid / W, beg, end);
      return;
    }
  }
  int *s_rowend = s_tile;
  float *s_prod = reinterpret_cast<float *>(s_tile + tile_rows + 1);
  stage_tile<NT, IPT>(s_rowend, s_prod, rp, ci, v, x, c0, c1);
  __syncthreads();
  balanced_tile_walk<NT, IPT>(s_rowend, s_prod, s_wflag, s_wval, rows, c0, c1, alpha, beta, y);
}

/* v8, rows first: v7's row path at full occupancy with the walk in a second
 * launch.  The mixed kernel needs more than 32 registers because the walk
 * is compiled into it, and its speed on the 27-point stencil follows
 * resident threads per SM (cuda/NOTES.md); this one has only the row path.
 * A tile of at most P*NT/W pieces none longer than W*J is summed by rows (P
 * passes of NT/W pieces; every piece's bounds are loaded for the vote, a
 * later pass's again for its sums); any other tile's index goes on a list
 * (walk_list, walk_count[0] entries: the partition or prescale kernel
 * zeroes the counts) for spmv_balanced_walk_kernel, launched behind this
 * one.  Larger tiles pay (fewer coordinates, boundaries and split rows per
 * nonzero): the rule's shapes take two passes.  Either kernel writes a row as the walk
 * does, so they may run in any order. */
template <int NT, int W, int J, int MINB, int P>
__global__ void __launch_bounds__(NT, MINB) spmv_balanced_rowsfirst_kernel(
    int rows, const int *__restrict__ rp, const int *__restrict__ ci, const float *__restrict__ v, float alpha,
    const float *__restrict__ x, float beta, float *__restrict__ y, const int4 *__restrict__ coords,
    int *__restrict__ walk_list, int *__restrict__ walk_count) {
  constexpr int G = NT / W;
  const int tid = threadIdx.x;
  pdl_wait();
  pdl_launch_dependents(); /* the walk launch may start as blocks here finish */
  const int4 c0 = coords[blockIdx.x], c1 = coords[blockIdx.x + 1];
  const int pieces = c1.x - c0.x + (c1.x < rows ? 1 : 0);
  if (pieces <= P * G) {
    /* the first pass's bounds are kept, a later pass's loaded again (from
     * L1) rather than held: two passes' bounds did not fit in 32 registers */
    int beg, end;
    piece_bounds(rp, c0, c1, pieces, tid / W, &beg, &end);
    bool long_piece = end - beg > W * J;
#pragma unroll
    for (int k = 1; k < P; k++) {
      int b, e;
      piece_bounds(rp, c0, c1, pieces, k * G + tid / W, &b, &e);
      long_piece |= e - b > W * J;
    }
    if (!__syncthreads_or(long_piece)) {
      rows_piece<W, J>(ci, v, alpha, x, beta, y, c0, c1, pieces, tid / W, beg, end);
#pragma unroll
      for (int k = 1; k < P; k++) {
        if (k * G >= pieces) break; /* uniform over the block */
        piece_bounds(rp, c0, c1, pieces, k * G + tid / W, &beg, &end);
        rows_piece<W, J>(ci, v, alpha, x, beta, y, c0, c1, pieces, k * G + tid / W, beg, end);
      }
      return;
    }
  }
  if (tid == 0) walk_list[atomicAdd(walk_count, 1)] = blockIdx.x;
}

/* The rows-first shapes' second launch: v3's staged walk for the tiles on
 * the list, a grid of a few blocks per SM, each block taking the next
 * listed tile as it finishes one (a counter: on a skewed matrix most tiles
 * are listed and their costs differ).  Waits for the row kernel (its
 * programmatic dependent), so the list is complete.  walk_count[0] is the
 * list's length, walk_count[1] the next entry to take. */
template <int NT, int IPT, int MINB>
__global__ void __launch_bounds__(NT, MINB) spmv_balanced_walk_kernel(int rows, const int *__restrict__ rp,
                                                                const int *__restrict__ ci,
                                                                const float *__restrict__ v, float alpha,
                                                                const float *__restrict__ x, float beta,
                                                                float *__restrict__ y, const int4 *__restrict__ coords,
                                                                const int *__restrict__ walk_list,
                                                                int *__restrict__ walk_count) {
  __shared__ int s_tile[NT * IPT + 1];
  __shared__ int s_wflag[NT / 32];
  __shared__ float s_wval[NT / 32];
  __shared__ int s_next;
  pdl_wait();
  const int n = walk_count[0];
  for (;;) {
    if (threadIdx.x == 0) s_next = atomicAdd(walk_count + 1, 1);
    __syncthreads();
    const int i = s_next;
    if (i >= n) return; /* uniform: s_next is not written again before this barrier pair */
    const int t = walk_list[i];
    const int4 c0 = coords[t], c1 = coords[t + 1];
    int *s_rowend = s_tile;
    float *s_prod = reinterpret_cast<float *>(s_tile + (c1.x - c0.x) + 1);
    stage_tile<NT, IPT>(s_rowend, s_prod, rp, ci, v, x, c0, c1);
    __syncthreads();
    balanced_tile_walk<NT, IPT>(s_rowend, s_prod, s_wflag, s_wval, rows, c0, c1, alpha, beta, y);
    __syncthreads(); /* the next tile restages s_tile, s_wflag and s_wval, and s_next */
  }
}

}  // namespace

namespace gkspmv {

/* Shapes of the balanced kernel: threads, items per thread (a tile is
 * their product), the resident blocks per multiprocessor its registers are
 * budgeted for, and whether the main kernel is launched as a programmatic
 * dependent of the partition (or prescale) kernel; for v7 (w > 0) the lanes
 * per row piece, the items a lane takes per pass and whether tiles that are
 * not row-regular are walked in the same kernel (mixed) or summed by rows
 * anyway; for v8 (passes > 0) the row passes a tile may take before it is
 * left to the walk launch.  The lab times all of them; balanced_shape()
 * picks from the measurements.  Kept for comparison: v3 (0-4), v7 rows
 * only (5: fast on the 27-point stencil, 3-5x slower where a tile holds a
 * long row), v7 mixed 192x6 (6: the rule until v8).  Lost and removed
 * (cuda/NOTES.md has their figures): v7 mixed 160x6 and 256x6, v7 with the
 * walk out of line (__noinline__), v8 with J 8, 8 lanes x 4, one pass only
 * or three passes of 256x18 / 256x15 tiles, one tile of 1024 x 8 (lost to
 * v9 up to 8192 items). */
struct BalancedShape {
  int nt, ipt, minb, pdl;
  int w, j, mixed; /* w > 0: v7 rows kernel, w lanes per row piece, j items each per pass */
  int passes;      /* > 0: v8, rows kernel of up to `passes` passes, the other tiles walked by a second launch */
  int onepass;     /* v9: one launch, split rows carried between blocks (up to GKCU__SPMV_FLAGS - 1 tiles) */
};
constexpr BalancedShape kBalancedShapes[] = {
    {256, 4, 8, 0, 0, 0, 0, 0},  {128, 8, 12, 0, 0, 0, 0, 0}, {256, 8, 6, 0, 0, 0, 0, 0},
    {256, 4, 8, 1, 0, 0, 0, 0},  {128, 8, 12, 1, 0, 0, 0, 0}, {256, 6, 8, 1, 4, 7, 0, 0},
    {192, 6, 8, 1, 4, 8, 1, 0},  {256, 6, 8, 1, 4, 7, 0, 2},  {256, 12, 8, 1, 4, 7, 0, 2},
    {256, 6, 8, 1, 2, 4, 0, 3},  {256, 10, 8, 1, 1, 6, 0, 2}, {256, 4, 8, 0, 0, 0, 0, 0, 1}};
constexpr int kBalancedShapeCount = (int)(sizeof kBalancedShapes / sizeof kBalancedShapes[0]);
static_assert(kBalancedShapeCount == GKCU_LAB_BALANCED_SHAPES, "gkcu_lab.h's shape count");
constexpr bool balanced_tiles_ok() { /* the lab's plan size (gkcu_lab.h) assumes tiles of >= 512 items */
  for (int i = 0; i < kBalancedShapeCount; i++)
    if (kBalancedShapes[i].nt * kBalancedShapes[i].ipt < 512) return false;
  return true;
}
static_assert(balanced_tiles_ok(), "a balanced shape's tile is under 512 items");
constexpr bool onepass_tiles_ok() { /* run_balanced's one-pass launch is <256, 4> */
  for (int i = 0; i < kBalancedShapeCount; i++)
    if (kBalancedShapes[i].onepass && (kBalancedShapes[i].nt != 256 || kBalancedShapes[i].ipt != 4)) return false;
  return true;
}
static_assert(onepass_tiles_ok(), "a one-pass shape's tiles are not 256x4");
constexpr bool rowsfirst_tiles_ok() { /* run_balanced's walk launches */
  for (int i = 0; i < kBalancedShapeCount; i++) {
    const BalancedShape &b = kBalancedShapes[i];
    if (b.passes > 0 && (b.nt != 256 || (b.ipt != 6 && b.ipt != 10 && b.ipt != 12)))
      return false;
  }
  return true;
}
static_assert(rowsfirst_tiles_ok(), "a rows-first shape's tiles have no walk launch");

/* Measured on the H100 (bench/RESULTS.md; the history is in cuda/NOTES.md).
 * Below about 4M path items (rows + nnz) v9, one pass of 256x4 tiles (one
 * launch: each block finds its own boundaries, split rows are carried
 * between blocks; a matrix of one tile takes the walk alone): 1.59-1.97x
 * cuSPARSE per call on the thirteen shared matrices where v3 with its
 * partition launch (the rule until then) gave 1.42-1.81x (10:26 UTC lab);
 * the one tile of west0067 2.1x (v8's second launch costs there).  Above,
 * v8 for regular rows,
 * its lanes per row piece and tile from the mean row length (the launcher
 * does not know the longest row): at >= 16 nonzeros per row 4 lanes x 7
 * items, 256x12 tiles, two passes (27-point stencil 1.042-1.047x per call,
 * 1.067-1.074x from a plan, three calls; 256x6 tiles 0.992-0.997x), at <= 6
 * one lane x 6 items, 256x10 tiles, two passes (5-point stencil
 * 1.136-1.154x; v3 256x4 1.004-1.008x).  Between the two (the power-law
 * matrix, mean 10.5, skewed) v3 256x4: 0.943-0.946x, where v8 would walk
 * nearly every tile in its second launch (0.86-0.89x), and v9's carries
 * would need 40k flag words per context.  A skewed matrix
 * with a mean outside 6..16 gets v8 and pays that: correct, no tile
 * slower than the walk, the whole ~6-9% slower than v3. */
int balanced_shape(int rows, long long nnz) {
  if ((long long)rows + nnz < 4000000) return 11; /* one pass (one tile: one kernel) */
  if ((double)nnz >= 16.0 * (double)rows) return 8;
  if ((double)nnz <= 6.0 * (double)rows) return 10;
  return 3;
}

/* Tiles of the given shape for rows + nnz path items; -1 when too many. */
long long balanced_tiles(int shape, int rows, long long nnz) {
  const int tile = kBalancedShapes[shape].nt * kBalancedShapes[shape].ipt;
  long long ntiles = ((long long)rows + nnz + tile - 1) / tile;
  return ntiles >= 0x7fffffffLL ? -1 : ntiles;
}

/* plan: coords made by gkcu_spmv_plan for this shape (NULL: partition now). */
int run_balanced(gkcu_ctx *ctx, int shape, int rows, long long nnz, const int *rp, const int *ci, const float *v,
                 float alpha, const float *x, float beta, float *y, const int4 *plan) {
  const BalancedShape &bs = kBalancedShapes[shape];
  const int tile = bs.nt * bs.ipt;
  long long ntiles_ll = balanced_tiles(shape, rows, nnz);
  if (ntiles_ll < 0) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "spmv: matrix too large");
  const int ntiles = (int)ntiles_ll; /* >= 1: rows >= 1 */
  cudaStream_t st = ctx->stream;
  if (ntiles == 1 && bs.w == 0) { /* v3, one tile: one launch (a plan has nothing to add) */
    if (bs.ipt == 4)
      spmv_balanced_one_kernel<256, 4><<<1, 256, 0, st>>>(rows, (int)nnz, rp, ci, v, alpha, x, beta, y);
    else if (bs.nt == 128)
      spmv_balanced_one_kernel<128, 8><<<1, 128, 0, st>>>(rows, (int)nnz, rp, ci, v, alpha, x, beta, y);
    else
      spmv_balanced_one_kernel<256, 8><<<1, 256, 0, st>>>(rows, (int)nnz, rp, ci, v, alpha, x, beta, y);
    GKCU__LAUNCHED(ctx, "spmv_balanced_one_kernel");
    return 0;
  }
  if (bs.onepass && ntiles < GKCU__SPMV_FLAGS) {
    static_assert(GKCU__SPMV_FLAGS > 1, "flags");
    unsigned epoch = ++ctx->spmv_epoch;
    if (epoch == 0) { /* wrapped: no word may carry a stale tag equal to a new one */
      GKCU__TRY_CUDA(ctx, cudaMemsetAsync(ctx->spmv_flags, 0, GKCU__SPMV_FLAGS * sizeof(unsigned long long), st));
      epoch = ctx->spmv_epoch = 1;
    }
    spmv_balanced_onepass_kernel<256, 4><<<ntiles, 256, 0, st>>>(rows, nnz, rp, ci, v, alpha, x, beta, y, plan,
                                                                  ctx->spmv_flags, epoch);
    GKCU__LAUNCHED(ctx, "spmv_balanced_onepass_kernel");
    return 0;
  }
  /* scratch: the coordinates unless planned, the rows-first shapes' walk list */
  int4 *coords = NULL;
  int *walk = NULL;
  gkcu__carve cv = {};
  if (!plan) gkcu__carve_add(&cv, (size_t)(ntiles + 1) * sizeof(int4), (void **)&coords);
  if (bs.passes) gkcu__carve_add(&cv, (size_t)(ntiles + 2) * sizeof(int), (void **)&walk);
  if (cv.n > 0) {
    int rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) return rc;
  }
  int *walk_count = walk ? walk + ntiles : NULL;
  if (plan) {
    spmv_prescale_kernel<<<gkcu__div_up((size_t)ntiles, 256), 256, 0, st>>>(rows, ntiles, tile, plan, beta, y,
                                                                            walk_count);
    GKCU__LAUNCHED(ctx, "spmv_prescale_kernel");
    coords = const_cast<int4 *>(plan);
  } else {
    spmv_partition_kernel<<<gkcu__div_up((size_t)(ntiles + 1) * SEARCH_G, 256), 256, 0, st>>>(
        rows, nnz, rp, ntiles, tile, coords, beta, y, walk_count);
    GKCU__LAUNCHED(ctx, "spmv_partition_kernel");
  }
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3((unsigned int)ntiles);
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = bs.pdl ? 1 : 0;
  cudaError_t le = cudaSuccess;
#define GKCU__BAL(NT, IPT, MINB)                                                                              \
  cfg.blockDim = dim3(NT);                                                                                     \
  le = cudaLaunchKernelEx(&cfg, spmv_balanced_kernel<NT, IPT, MINB>, rows, rp, ci, v, alpha, x, beta, y, \
                          (const int4 *)coords)
#define GKCU__ROWS(NT, IPT, W, J, MINB, MIXED)                                                             \
  cfg.blockDim = dim3(NT);                                                                                     \
  le = cudaLaunchKernelEx(&cfg, spmv_balanced_rows_kernel<NT, IPT, W, J, MINB, MIXED>, rows, rp, ci, v, alpha, x, \
                          beta, y, (const int4 *)coords)
#define GKCU__RF(NT, W, J, MINB, P)                                                                     \
  cfg.blockDim = dim3(NT);                                                                                     \
  le = cudaLaunchKernelEx(&cfg, spmv_balanced_rowsfirst_kernel<NT, W, J, MINB, P>, rows, rp, ci, v, alpha, x, beta, \
                          y, (const int4 *)coords, walk, walk_count)
  switch (shape) {
    case 0: case 3: case 11: GKCU__BAL(256, 4, 8); break;
    case 1: case 4: GKCU__BAL(128, 8, 12); break;
    case 2: GKCU__BAL(256, 8, 6); break;
    case 5: GKCU__ROWS(256, 6, 4, 7, 8, false); break;
    case 6: GKCU__ROWS(192, 6, 4, 8, 8, true); break;
    case 7: case 8: GKCU__RF(256, 4, 7, 8, 2); break;
    case 9: GKCU__RF(256, 2, 4, 8, 3); break;
    default: GKCU__RF(256, 1, 6, 8, 2); break;
  }
#undef GKCU__BAL
#undef GKCU__ROWS
#undef GKCU__RF
  if (le != cudaSuccess) return gkcu__cuda_fail(ctx, le, "launch spmv_balanced_kernel");
  GKCU__LAUNCHED(ctx, "spmv_balanced_kernel");
  if (!bs.passes) return 0;
  /* the walk launch: a few blocks per SM loop over the listed tiles (on a
   * stencil a few percent of them, often none) */
  /* a grid of what is resident at once (MINB blocks per SM), taking the
   * listed tiles in turn */
  cfg.blockDim = dim3(bs.nt);
  cfg.numAttrs = 1;
#define GKCU__WALK(IPT, MINB)                                                                                 \
  cfg.gridDim = dim3((unsigned int)(ntiles < (MINB) * ctx->sm_count ? ntiles : (MINB) * ctx->sm_count));      \
  le = cudaLaunchKernelEx(&cfg, spmv_balanced_walk_kernel<256, IPT, MINB>, rows, rp, ci, v, alpha, x, beta, y, \
                          (const int4 *)coords, (const int *)walk, walk_count)
  switch (bs.ipt) {
    case 6: GKCU__WALK(6, 6); break;
    case 10: GKCU__WALK(10, 4); break;
    default: GKCU__WALK(12, 4); break;
  }
#undef GKCU__WALK
  if (le != cudaSuccess) return gkcu__cuda_fail(ctx, le, "launch spmv_balanced_walk_kernel");
  GKCU__LAUNCHED(ctx, "spmv_balanced_walk_kernel");
  return 0;
}

}  // namespace gkspmv

namespace {
int make_plan(gkcu_ctx *ctx, int shape, int rows, long long nnz, const int *row_ptr, void *plan) {
  const int tile = kBalancedShapes[shape].nt * kBalancedShapes[shape].ipt;
  long long ntiles_ll = balanced_tiles(shape, rows, nnz);
  if (ntiles_ll < 0) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "spmv plan: matrix too large");
  int ntiles = (int)ntiles_ll;
  spmv_partition_kernel<<<gkcu__div_up((size_t)(ntiles + 1) * SEARCH_G, 256), 256, 0, ctx->stream>>>(
      rows, nnz, row_ptr, ntiles, tile, (int4 *)plan, 0.0f, NULL, NULL);
  GKCU__LAUNCHED(ctx, "spmv_partition_kernel");
  return 0;
}
}  // namespace

extern "C" size_t gkcu_spmv_plan_bytes(const gkcu_ctx *ctx, int32_t rows, int64_t nnz) {
  (void)ctx;
  if (rows < 1 || nnz < 0 || nnz > INT_MAX) return 0;
  long long ntiles = balanced_tiles(balanced_shape(rows, nnz), rows, nnz);
  return ntiles < 0 ? 0 : (size_t)(ntiles + 1) * sizeof(int4);
}

extern "C" int gkcu_spmv_plan(gkcu_ctx *ctx, int32_t rows, int64_t nnz, const int32_t *row_ptr, void *plan) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, rows >= 1);
  GKCU__CHECK_ARG(ctx, nnz >= 0 && nnz <= INT_MAX);
  GKCU__CHECK_ARG(ctx, row_ptr != NULL && plan != NULL);
  GKCU__CHECK_ARG(ctx, ((uintptr_t)plan & 15) == 0);
  return make_plan(ctx, balanced_shape(rows, nnz), rows, nnz, row_ptr, plan);
}

extern "C" int gkcu_lab_spmv_balanced(gkcu_ctx *ctx, int shape, int32_t rows, int32_t cols, int64_t nnz,
                                      const int32_t *row_ptr, const int32_t *col_idx, const float *values,
                                      float alpha, const float *x, float beta, float *y) {
  int rc = check_args(ctx, rows, cols, nnz, row_ptr, col_idx, values, x, y);
  if (rc != 0) return rc;
  GKCU__CHECK_ARG(ctx, shape >= 0 && shape < kBalancedShapeCount);
  return run_balanced(ctx, shape, rows, nnz, row_ptr, col_idx, values, alpha, x, beta, y);
}

extern "C" int gkcu_lab_spmv_balanced_plan(gkcu_ctx *ctx, int shape, int32_t rows, int64_t nnz,
                                           const int32_t *row_ptr, void *plan) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, rows >= 1 && nnz >= 0 && nnz <= INT_MAX);
  GKCU__CHECK_ARG(ctx, row_ptr != NULL && plan != NULL && ((uintptr_t)plan & 15) == 0);
  GKCU__CHECK_ARG(ctx, shape >= 0 && shape < kBalancedShapeCount);
  return make_plan(ctx, shape, rows, nnz, row_ptr, plan);
}

extern "C" int gkcu_lab_spmv_balanced_planned(gkcu_ctx *ctx, int shape, int32_t rows, int32_t cols, int64_t nnz,
                                              const int32_t *row_ptr, const int32_t *col_idx, const float *values,
                                              float alpha, const float *x, float beta, float *y, const void *plan) {
  int rc = check_args(ctx, rows, cols, nnz, row_ptr, col_idx, values, x, y);
  if (rc != 0) return rc;
  GKCU__CHECK_ARG(ctx, shape >= 0 && shape < kBalancedShapeCount);
  GKCU__CHECK_ARG(ctx, plan != NULL && ((uintptr_t)plan & 15) == 0);
  return run_balanced(ctx, shape, rows, nnz, row_ptr, col_idx, values, alpha, x, beta, y, (const int4 *)plan);
}

extern "C" const char *gkcu_lab_spmv_balanced_name(int shape) {
  static char names[kBalancedShapeCount][32];
  if (shape < 0 || shape >= kBalancedShapeCount) return NULL;
  const BalancedShape &b = kBalancedShapes[shape];
  if (b.passes > 0)
    snprintf(names[shape], sizeof names[shape], "t%dx%d/b%d%s/rows%dx%d%s+walk", b.nt, b.ipt, b.minb,
             b.pdl ? "/pdl" : "", b.w, b.j, b.passes > 1 ? (b.passes > 2 ? "p3" : "p2") : "");
  else if (b.w > 0)
    snprintf(names[shape], sizeof names[shape], "t%dx%d/b%d%s/%s%dx%d", b.nt, b.ipt, b.minb, b.pdl ? "/pdl" : "",
             b.mixed ? "mix" : "rows", b.w, b.j);
  else if (b.onepass)
    snprintf(names[shape], sizeof names[shape], "t%dx%d/b%d/onepass", b.nt, b.ipt, b.minb);
  else
    snprintf(names[shape], sizeof names[shape], "t%dx%d/b%d%s", b.nt, b.ipt, b.minb, b.pdl ? "/pdl" : "");
  return names[shape];
}
