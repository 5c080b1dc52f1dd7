/* gkcu_spmv_tile.cuh: the device pieces of the balanced (merge-path) spmv
 * that its kernels share (C++, cuda/ only, included by
 * gkcu_spmv_balanced.cu alone): the merge-path search for a tile boundary,
 * programmatic dependent launch, v3's staging and walk of one tile, and
 * v7's row pieces.  The kernels, their shapes and the launcher are in
 * gkcu_spmv_balanced.cu. */
#ifndef GKCU_SPMV_TILE_CUH
#define GKCU_SPMV_TILE_CUH

#include <limits.h>

#include "gkcu_spmv_int.h"

namespace gkspmv {

/* The merge path walks two lists at once: the row ends (row_ptr[1..rows])
 * and the nonzero indices 0..nnz-1.  At (row r, nonzero q) it takes the
 * nonzero when q < row_ptr[r+1], else it ends row r.  Every step is one
 * item, rows + nnz in all; cutting the path into equal pieces gives every
 * thread the same work however the nonzeros are spread over rows. */
/* A tile is BAL_NT threads x BAL_IPT items (kBalancedShapes in gkcu_spmv_balanced.cu). */

/* Where diagonal d crosses the path: the number of row ends consumed, found
 * by a group of SEARCH_G lanes with SEARCH_G-way search.  pred(p) = "row end
 * p comes before item d" is true for p < answer and false after.  Groups of
 * 8 (four boundaries per warp, log8(rows) rounds) rather than whole warps
 * (log32(rows) rounds): every probe of a round is a separate sector, and
 * with a warp per boundary the 32-way rounds made the partition L1-bound
 * (76% L1 throughput under ncu on the 27-point stencil, 31 us) and several
 * waves deep.  Inactive groups (past the last boundary) take part in the
 * ballots with an empty range. */
constexpr int SEARCH_G = 8;
__device__ int merge_search_group(long long d, bool active, int rows, long long nnz, const int *__restrict__ rp) {
  const int lane = threadIdx.x & 31, gl = lane % SEARCH_G, first = lane - gl;
  const unsigned gmask = (1u << SEARCH_G) - 1u;
  long long lo = d - nnz > 0 ? d - nnz : 0;
  long long hi = d < rows ? d : rows;
  if (!active) lo = hi = 0;
  while (__any_sync(0xffffffffu, hi - lo > SEARCH_G)) {
    const bool go = hi - lo > SEARCH_G;
    const long long step = (hi - lo + SEARCH_G - 1) / SEARCH_G;
    const long long p = lo + gl * step;
    const bool t = go && p < hi && (long long)rp[p + 1] <= d - p - 1;
    const int k = __popc((__ballot_sync(0xffffffffu, t) >> first) & gmask);
    if (go) {
      const long long nlo = k == 0 ? lo : lo + (k - 1) * step + 1;
      const long long nhi = lo + k * step < hi ? lo + k * step : hi;
      lo = nlo;
      hi = nhi;
    }
  }
  const long long p = lo + gl;
  const bool t = p < hi && (long long)rp[p + 1] <= d - p - 1;
  return (int)(lo + __popc((__ballot_sync(0xffffffffu, t) >> first) & gmask));
}

/* Programmatic dependent launch (sm_90): the kernel that makes the tile
 * coordinates (partition or prescale) lets the main kernel be launched as
 * soon as all its blocks have started, and the main kernel's blocks wait at
 * griddepcontrol.wait until it has finished and its writes are visible.
 * That hides the main kernel's launch and block dispatch behind the
 * partition instead of after it.  Both are no-ops when the main kernel is
 * launched without cudaLaunchAttributeProgrammaticStreamSerialization. */
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/* The second half of a tile (factored out of the kernel: the lab has tried
 * other ways of staging a tile, see NOTES.md): the tile's
 * row ends (s_rowend, tile_rows + 1 of them, the last INT_MAX) and its
 * products values[q]*x[col[q]] (s_prod) are in shared memory.  Each thread
 * finds its own start by binary search and walks BAL_IPT items.  A thread
 * writes y for every row it ends except the first, whose earlier part may
 * belong to the threads before it: a block-wide segmented scan of the
 * threads' trailing partial sums supplies that carry.  Rows that cross a
 * tile boundary (at most the tile's first and last) are added with
 * atomicAdd onto the beta*y that the partition (or prescale) kernel left
 * there; every other row is stored once, by one thread.  Has one barrier
 * (the warp totals); the caller must put another before s_wflag/s_wval or
 * the staged arrays are written again. */
template <int BAL_NT, int BAL_IPT, bool ONEPASS = false>
__device__ __forceinline__ void balanced_tile_walk(const int *s_rowend, const float *s_prod, int *s_wflag,
                                                   float *s_wval, int rows, int4 c0, int4 c1, float alpha,
                                                   float beta, float *__restrict__ y, float *s_head = nullptr,
                                                   unsigned long long *pub = nullptr, unsigned epoch = 0) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int x0 = c0.x, y0 = c0.y;
  const int first_start = c0.z; /* row_ptr[x0] */
  const int tile_rows = c1.x - c0.x, tile_nnz = c1.y - c0.y;
  const int tile_items = tile_rows + tile_nnz;

  const int d = min(tid * BAL_IPT, tile_items);
  int lo = max(0, d - tile_nnz), hi = min(d, tile_rows);
  while (lo < hi) {
    int p = (lo + hi) >> 1;
    if (s_rowend[p] <= y0 + d - p - 1) lo = p + 1;
    else hi = p;
  }
  int r = lo, z = d - lo;
  const int n_items = min(BAL_IPT, tile_items - d);

  float sum = 0.0f, first_sum = 0.0f;
  int first_row = -1;
#pragma unroll
  for (int it = 0; it < BAL_IPT; it++) {
    if (it < n_items) {
      if (y0 + z < s_rowend[r]) {
        sum += s_prod[z];
        z++;
      } else {
        if (first_row < 0) {
          first_row = r;
          first_sum = sum;
        } else {
          put_y(y, x0 + r, alpha, sum, beta);
        }
        sum = 0.0f;
        r++;
      }
    }
  }

  /* Segmented inclusive scan of (ended a row?, trailing sum): a flag
   * restarts the sum.  (f1,v1) then (f2,v2) = (f1|f2, f2 ? v2 : v1+v2). */
  int flag = first_row >= 0;
  float val = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    int fu = __shfl_up_sync(0xffffffffu, flag, off);
    float vu = __shfl_up_sync(0xffffffffu, val, off);
    if (lane >= off) {
      if (!flag) val += vu;
      flag |= fu;
    }
  }
  if (lane == 31) {
    s_wflag[warp] = flag;
    s_wval[warp] = val;
  }
  __syncthreads();
  int ef = __shfl_up_sync(0xffffffffu, flag, 1);
  float ev = __shfl_up_sync(0xffffffffu, val, 1);
  if (lane == 0) {
    ef = 0;
    ev = 0.0f;
  }
  float pv = 0.0f; /* what the warps before this one carry in */
  for (int w = 0; w < warp; w++) pv = s_wflag[w] ? s_wval[w] : pv + s_wval[w];
  const float carry_in = ef ? ev : pv + ev;
  if (first_row >= 0) {
    /* only the tile's first row can have begun in an earlier tile */
    if (first_row == 0 && first_start < y0) {
      if (ONEPASS) *s_head = first_sum + carry_in; /* the caller adds the earlier tiles' parts */
      else atomicAdd(y + x0, alpha * (first_sum + carry_in));
    } else {
      put_y(y, x0 + first_row, alpha, first_sum + carry_in, beta);
    }
  }
  if (tid == BAL_NT - 1 && c1.x < rows) {
    /* the row open at the tile's end, if this tile holds some of it */
    const int last_start = c1.z; /* row_ptr[c1.x] */
    if (last_start < c1.y) {
      const float part = flag ? val : pv + val;
      if (ONEPASS) /* published with the call's epoch in one 64-bit word */
        atomicExch(pub, ((unsigned long long)epoch << 32) | __float_as_uint(part));
      else
        atomicAdd(y + c1.x, alpha * part);
    }
  }
}

/* The first half of a tile, v3: its row ends (s_rowend, the last INT_MAX:
 * past the last row the walk takes nonzeros) and its products
 * values[q]*x[col[q]] (s_prod) staged into shared memory through registers
 * with coalesced loads, all of a thread's loads issued before any is used.
 * The caller puts a barrier between this and the walk. */
template <int NT, int IPT>
__device__ __forceinline__ void stage_tile(int *s_rowend, float *s_prod, const int *__restrict__ rp,
                                           const int *__restrict__ ci, const float *__restrict__ v,
                                           const float *__restrict__ x, int4 c0, int4 c1) {
  const int tid = threadIdx.x, x0 = c0.x, y0 = c0.y;
  const int tile_rows = c1.x - c0.x, tile_nnz = c1.y - c0.y;
  int ends[IPT], cols[IPT];
  float vals[IPT];
#pragma unroll
  for (int k = 0; k < IPT; k++) {
    int i = tid + k * NT;
    if (i < tile_rows) ends[k] = rp[x0 + 1 + i];
    if (i < tile_nnz) {
      cols[k] = ci[y0 + i];
      vals[k] = v[y0 + i];
    }
  }
#pragma unroll
  for (int k = 0; k < IPT; k++) {
    int i = tid + k * NT;
    if (i < tile_nnz) vals[k] *= __ldg(x + cols[k]);
  }
#pragma unroll
  for (int k = 0; k < IPT; k++) {
    int i = tid + k * NT;
    if (i < tile_rows) s_rowend[i] = ends[k];
    if (i < tile_nnz) s_prod[i] = vals[k];
  }
  if (tid == 0) s_rowend[tile_rows] = INT_MAX;
}

/* v7, rows: the same tiles, summed row by row straight from global memory
 * (no staging, no walk).  A tile's row pieces are p = 0..pieces-1 (row
 * x0 + p; the first may begin before the tile, at y0, and the last, the
 * row open at the tile's end, stops at y1).  W lanes take a piece, NT/W
 * pieces at a time; lane l of a group takes the piece's items l, l+W, ...,
 * J at a time with all J loads issued before the gathers.  Neighbouring
 * groups hold neighbouring rows, so on a stencil one gather request reads
 * 32/W consecutive rows at W nearby offsets (a few sectors) where the
 * merge-path layout puts 32 consecutive nonzeros of one or two rows (one
 * sector per column group).  Any row lengths give the right answer; the
 * time is only even across lanes when the pieces are alike (a long piece
 * keeps its warp looping), so the MIXED kernels take this path only for
 * tiles of at most NT/W pieces none longer than W*J (one pass, at most J
 * items a lane, as the walk's IPT) and walk the others as v3 does.  Pieces
 * are written as the walk writes rows: atomicAdd onto the prescaled beta*y
 * for the tile's first row when it began in an earlier tile and for the row
 * open at the tile's end, put_y for the others (each ended in this tile). */
__device__ __forceinline__ void piece_bounds(const int *__restrict__ rp, int4 c0, int4 c1, int pieces, int p,
                                             int *beg, int *end) {
  *beg = *end = 0;
  if (p < pieces) {
    const int r = c0.x + p;
    *beg = p == 0 ? c0.y : rp[r];
    *end = r < c1.x ? rp[r + 1] : c1.y;
  }
}

/* Piece p's sum over its W lanes and its write; called by whole warps. */
template <int W, int J>
__device__ __forceinline__ void rows_piece(const int *__restrict__ ci, const float *__restrict__ v, float alpha,
                                           const float *__restrict__ x, float beta, float *__restrict__ y, int4 c0,
                                           int4 c1, int pieces, int p, int beg, int end) {
  const int gl = threadIdx.x % W;
  float s = 0.0f;
  for (int q0 = beg + gl; __any_sync(0xffffffffu, q0 < end); q0 += W * J) {
    int cols[J];
    float vals[J];
#pragma unroll
    for (int k = 0; k < J; k++) {
      const int q = q0 + k * W;
      if (q < end) {
        cols[k] = ci[q];
        vals[k] = v[q];
      }
    }
#pragma unroll
    for (int k = 0; k < J; k++)
      if (q0 + k * W < end) s = fmaf(vals[k], __ldg(x + cols[k]), s);
  }
#pragma unroll
  for (int off = W / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (gl == 0 && p < pieces) {
    const int r = c0.x + p;
    if (r == c1.x) {
      if (c1.z < c1.y) atomicAdd(y + r, alpha * s); /* open at the tile's end: split */
    } else if (p == 0 && c0.z < c0.y) {
      atomicAdd(y + r, alpha * s); /* began in an earlier tile */
    } else {
      put_y(y, r, alpha, s, beta);
    }
  }
}

}  // namespace gkspmv

#endif /* GKCU_SPMV_TILE_CUH */
