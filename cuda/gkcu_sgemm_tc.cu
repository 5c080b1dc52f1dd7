/* gkcu_sgemm_tc.cu: tf32x3, sgemm on the tensor cores at float32 accuracy
 * (see gkcu_sgemm_tc.h for the arithmetic).
 *
 * Kernel shape: one block computes a BM x BN tile of C with warps laid out
 * (BM/WM) x (BN/WN), each warp a WM x WN tile made of m16n8k8 TF32
 * mma.sync instructions.  Tiles of A and B (BK deep) go from global to
 * shared memory with cp.async, STAGES deep, so the loads of tile t+S-1 fly
 * while tile t is multiplied; one barrier per tile.  Shared memory keeps
 * each operand in its stored layout (no transposing copies), padded so that
 * the fragment reads of a warp hit 32 distinct banks:
 *
 *   A untransposed  [BM][BK+8]   fragment pair (k, k+1) is one 8-byte read
 *   A transposed    [BK][BM+4]
 *   B untransposed  [BK][BN+4]
 *   B transposed    [BN][BK+8]   fragment pair (k, k+1) is one 8-byte read
 *
 * The k order inside each group of 8 is permuted the same way for A and B
 * (fragment slot t reads k = 2t, slot t+4 reads k = 2t+1), which a dot
 * product does not notice and which makes the pairs adjacent.
 *
 * Edges: out-of-range elements are zero-filled by cp.async (source size
 * 0), so any m, n, k works.  16-byte copies need every stored row of the
 * operand 16-byte aligned (base aligned, row length a multiple of 4);
 * otherwise that operand is copied 4 bytes at a time.
 */
#include <stdint.h>

#include <cooperative_groups.h>

#include "gkcu_internal.h"
#include "gkcu_sgemm_tc.h"

namespace {

/* --- PTX wrappers ------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* Copies bytes (0 or 16) from g to shared s and zero-fills the rest. */
__device__ __forceinline__ void cp_async16(float *s, const float *g, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(s)), "l"(g), "r"(bytes));
}

__device__ __forceinline__ void cp_async4(float *s, const float *g, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(s)), "l"(g), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* x rounded to TF32 (10 mantissa bits) to nearest, ties away from zero:
 * what cvt.rna.tf32.f32 gives for every finite x (a carry out of the
 * mantissa moves up the exponent, as rounding should), in two integer
 * instructions where the cvt takes three (ncu: the small shapes are
 * issue-bound, and splitting operands was most of what they issued).
 * test_gpu_sgemm_tc checks the equality on all 2^32 bit patterns
 * (gkcu_lab_tf32_round_check). */
__device__ __forceinline__ uint32_t tf32_rna(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }

/* x = hi + lo, both TF32.  hi has its low 13 bits cleared (x - hi must be
 * exact); lo only gets half a TF32 ulp added: mma.sync reads the upper 19
 * bits of a TF32 operand, so its truncation of lo + half an ulp is lo
 * rounded to nearest with one instruction.  A split is 4 instructions
 * (it was 7 with cvt.rna).  Were the low bits used instead, lo would only
 * be more precise. */
__device__ __forceinline__ void split_tf32(float x, uint32_t &hi, uint32_t &lo) {
  hi = tf32_rna(x);
  lo = __float_as_uint(x - __uint_as_float(hi)) + 0x1000u;
}

/* d += a * b for one 16x8x8 TF32 tile (PTX fragment layouts). */
__device__ __forceinline__ void mma_tf32(float *d, const uint32_t *a, const uint32_t *b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* --- the kernel --------------------------------------------------------------------- */

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int MINB_, int KF_>
struct TcCfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr int MINB = MINB_, KF = KF_;
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int NT = WARPS_M * WARPS_N * 32;
  static constexpr int MT = WM / 16, NTL = WN / 8; /* mma tiles per warp */
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "warp tiling");
  static_assert(BK % 8 == 0 && BK >= 8, "BK is a multiple of 8");
  static_assert((BK / 8) % KF == 0, "KF steps divide a stage");
};

/* Shared-memory geometry of one stage for a transpose case. */
template <class C, bool TA, bool TB>
struct TcSmem {
  static constexpr int SA = TA ? C::BM + 4 : C::BK + 8; /* row stride of the A tile */
  static constexpr int SB = TB ? C::BK + 8 : C::BN + 4;
  static constexpr int A_FLOATS = TA ? C::BK * SA : C::BM * SA;
  static constexpr int B_FLOATS = TB ? C::BN * SB : C::BK * SB;
  static constexpr int STAGE = A_FLOATS + B_FLOATS;
  static constexpr size_t BYTES = (size_t)C::STAGES * STAGE * sizeof(float);
};

/* K splits up to this many are added in a thread-block cluster (portable
 * cluster size); more go through scratch and a second kernel. */
constexpr int kClusterMax = 8;

/* The partial tile a block of a K-split cluster leaves in its shared
 * memory: rows padded by 8 floats so that a half-warp's 8-byte stores of
 * fragment pairs (4 rows x 4 column pairs) hit 32 distinct banks, rows
 * 16-byte aligned for the float4 reads of the reduction. */
template <class C>
struct TcPart {
  static constexpr int STRIDE = C::BN + 8;
  static constexpr size_t BYTES = (size_t)C::BM * STRIDE * sizeof(float);
};

/* Copies a ROWS x COLS window of a row-major matrix (row stride ld) whose
 * first element is g into shared memory (row stride SS).  Rows at or past
 * rows_ok and columns at or past cols_ok are zero-filled; base stands in as
 * the (unread) source address for them. */
template <int ROWS, int COLS, int SS, int NT>
__device__ __forceinline__ void copy_tile(float *s, const float *g, const float *base, size_t ld, int rows_ok,
                                          int cols_ok, bool vec, int tid) {
  if (vec) {
    constexpr int CH = ROWS * COLS / 4;
#pragma unroll
    for (int i = 0; i < (CH + NT - 1) / NT; i++) {
      int c = tid + i * NT;
      if (CH % NT != 0 && c >= CH) break;
      int r = c / (COLS / 4), cc = (c % (COLS / 4)) * 4;
      bool ok = r < rows_ok && cc < cols_ok;
      cp_async16(s + r * SS + cc, ok ? g + r * ld + cc : base, ok ? 16 : 0);
    }
  } else {
    constexpr int EL = ROWS * COLS;
#pragma unroll 4
    for (int i = 0; i < (EL + NT - 1) / NT; i++) {
      int e = tid + i * NT;
      if (EL % NT != 0 && e >= EL) break;
      int r = e / COLS, cc = e % COLS;
      bool ok = r < rows_ok && cc < cols_ok;
      cp_async4(s + r * SS + cc, ok ? g + r * ld + cc : base, ok ? 4 : 0);
    }
  }
}

template <class C, bool TA, bool TB>
__global__ void __launch_bounds__(C::NT, C::MINB)
    sgemm_tf32x3_kernel(int m, int n, int k, float alpha, const float *__restrict__ a,
                        const float *__restrict__ b, float beta, float *__restrict__ c,
                        float *__restrict__ ws, int kps, int csplit, bool vec_a, bool vec_b,
                        int tiles_m, int tiles_n) {
  using S = TcSmem<C, TA, TB>;
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm0 = (warp / C::WARPS_N) * C::WM, wn0 = (warp % C::WARPS_N) * C::WN;

  /* Grouped tile order: 8 block-rows at a time walk across n, so blocks
   * resident together share panels of A and B in L2. */
  int tm, tn;
  {
    const int pid = blockIdx.x, per_group = 8 * tiles_n;
    const int first = (pid / per_group) * 8;
    const int gsize = min(tiles_m - first, 8);
    tm = first + (pid % per_group) % gsize;
    tn = (pid % per_group) / gsize;
  }
  const int m0 = tm * C::BM, n0 = tn * C::BN;
  const int kbeg = blockIdx.z * kps;
  const int kend = min(k, kbeg + kps);
  const int ntiles = kend > kbeg ? (kend - kbeg + C::BK - 1) / C::BK : 0;

  auto load_stage = [&](int slot, int k0) {
    float *sa = smem + slot * S::STAGE;
    float *sb = sa + S::A_FLOATS;
    const int kv = kend - k0; /* valid k in this tile */
    if (!TA)                  /* A is m x k: rows m, columns k */
      copy_tile<C::BM, C::BK, S::SA, C::NT>(sa, a + (size_t)m0 * k + k0, a, (size_t)k, m - m0, kv, vec_a, tid);
    else /* A is k x m */
      copy_tile<C::BK, C::BM, S::SA, C::NT>(sa, a + (size_t)k0 * m + m0, a, (size_t)m, kv, m - m0, vec_a, tid);
    if (!TB) /* B is k x n */
      copy_tile<C::BK, C::BN, S::SB, C::NT>(sb, b + (size_t)k0 * n + n0, b, (size_t)n, kv, n - n0, vec_b, tid);
    else /* B is n x k */
      copy_tile<C::BN, C::BK, S::SB, C::NT>(sb, b + (size_t)n0 * k + k0, b, (size_t)k, n - n0, kv, vec_b, tid);
  };

  float acc[C::MT][C::NTL][4];
#pragma unroll
  for (int i = 0; i < C::MT; i++)
#pragma unroll
    for (int j = 0; j < C::NTL; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;

  /* acc += this stage's tile product.  The three TF32 products of KF
   * consecutive 16x8x8 steps go into a fresh sum (tmp), which is then
   * added to acc with round-to-nearest float32 additions: the tensor core
   * truncates when it accumulates, and chaining it over all of k made the
   * error 30-45x cuBLAS FP32's (NOTES.md); this way the truncation only
   * touches sums of 8*KF products.  tmp is 4 registers per fragment, live
   * one at a time; KF > 1 trades registers (A fragments of KF steps) for
   * fewer float32 additions. */
  auto multiply = [&](const float *sa, const float *sb) {
#pragma unroll
    for (int kg = 0; kg < C::BK / 8; kg += C::KF) {
      /* A fragments (hi, lo) of KF consecutive 16x8x8 steps */
      uint32_t ah[C::KF][C::MT][4], al[C::KF][C::MT][4];
#pragma unroll
      for (int f = 0; f < C::KF; f++)
#pragma unroll
        for (int i = 0; i < C::MT; i++) {
          const int kk = (kg + f) * 8 + 2 * t, r = wm0 + i * 16 + g;
          float x0, x1, x2, x3;
          if (!TA) {
            float2 p = *reinterpret_cast<const float2 *>(&sa[r * S::SA + kk]);
            float2 q = *reinterpret_cast<const float2 *>(&sa[(r + 8) * S::SA + kk]);
            x0 = p.x, x2 = p.y, x1 = q.x, x3 = q.y;
          } else {
            x0 = sa[kk * S::SA + r];
            x2 = sa[(kk + 1) * S::SA + r];
            x1 = sa[kk * S::SA + r + 8];
            x3 = sa[(kk + 1) * S::SA + r + 8];
          }
          split_tf32(x0, ah[f][i][0], al[f][i][0]);
          split_tf32(x1, ah[f][i][1], al[f][i][1]);
          split_tf32(x2, ah[f][i][2], al[f][i][2]);
          split_tf32(x3, ah[f][i][3], al[f][i][3]);
        }
#pragma unroll
      for (int j = 0; j < C::NTL; j++) {
        const int col = wn0 + j * 8 + g;
        uint32_t bh[C::KF][2], bl[C::KF][2];
#pragma unroll
        for (int f = 0; f < C::KF; f++) {
          const int kk = (kg + f) * 8 + 2 * t;
          float y0, y1;
          if (!TB) {
            y0 = sb[kk * S::SB + col];
            y1 = sb[(kk + 1) * S::SB + col];
          } else {
            float2 p = *reinterpret_cast<const float2 *>(&sb[col * S::SB + kk]);
            y0 = p.x, y1 = p.y;
          }
          split_tf32(y0, bh[f][0], bl[f][0]);
          split_tf32(y1, bh[f][1], bl[f][1]);
        }
#pragma unroll
        for (int i = 0; i < C::MT; i++) {
          float tmp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int f = 0; f < C::KF; f++) {
            mma_tf32(tmp, al[f][i], bh[f]); /* the small terms first */
            mma_tf32(tmp, ah[f][i], bl[f]);
            mma_tf32(tmp, ah[f][i], bh[f]);
          }
#pragma unroll
          for (int q = 0; q < 4; q++) acc[i][j][q] += tmp[q];
        }
      }
    }
  };

#pragma unroll
  for (int s = 0; s < C::STAGES - 1; s++) {
    if (s < ntiles) load_stage(s, kbeg + s * C::BK);
    cp_async_commit(); /* empty groups keep the counting uniform */
  }

  for (int it = 0; it < ntiles; it++) {
    cp_async_wait<C::STAGES - 2>();
    __syncthreads(); /* tile it is in for every thread; slot (it-1)%S is free */
    {
      int nx = it + C::STAGES - 1;
      if (nx < ntiles) load_stage(nx % C::STAGES, kbeg + nx * C::BK);
      cp_async_commit();
    }
    const float *sa = smem + (it % C::STAGES) * S::STAGE;
    const float *sb = sa + S::A_FLOATS;

    multiply(sa, sb);
  }
  cp_async_wait<0>(); /* nothing may be in flight into shared memory at exit */

  if (csplit <= 1) {
    /* Epilogue: split-K slices store raw sums, else alpha and beta
     * apply.  Fragment (i, j) holds rows r, r+8, columns col, col+1. */
    float *out = ws ? ws + (size_t)blockIdx.z * m * n : c;
    const float al = ws ? 1.0f : alpha;
    const float be = ws ? 0.0f : beta;
    const bool pair = (n % 2 == 0) && (((uintptr_t)out & 7u) == 0);
#pragma unroll
    for (int i = 0; i < C::MT; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = m0 + wm0 + i * 16 + g + h * 8;
        if (row >= m) continue;
#pragma unroll
        for (int j = 0; j < C::NTL; j++) {
          const int col = n0 + wn0 + j * 8 + 2 * t;
          if (col >= n) continue;
          float *o = out + (size_t)row * n + col;
          float v0 = al * acc[i][j][2 * h], v1 = al * acc[i][j][2 * h + 1];
          if (pair) { /* col + 1 < n too: n is even and col is */
            if (be != 0.0f) {
              float2 old = *reinterpret_cast<const float2 *>(o);
              v0 = fmaf(be, old.x, v0);
              v1 = fmaf(be, old.y, v1);
            }
            *reinterpret_cast<float2 *>(o) = make_float2(v0, v1);
          } else {
            o[0] = be != 0.0f ? fmaf(be, o[0], v0) : v0;
            if (col + 1 < n) o[1] = be != 0.0f ? fmaf(be, o[1], v1) : v1;
          }
        }
      }
    return;
  }

  /* K split across a cluster of csplit blocks (grid z): each block puts
   * its partial tile in its own shared memory, then each adds a share of
   * the tile over all csplit blocks in rank order (the same order every
   * run) through distributed shared memory and writes C.  Four columns
   * at a time, every slice's load issued before the first addition: the
   * scalar loop this replaces waited on one remote read after another
   * (64x64 tiles split 4: 32 dependent DSMEM round trips per thread). */
  constexpr int PS = TcPart<C>::STRIDE;
  __syncthreads(); /* the pipeline's buffers are free */
  float *part = smem; /* [BM][PS] */
#pragma unroll
  for (int i = 0; i < C::MT; i++)
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int j = 0; j < C::NTL; j++) {
        const int e = (wm0 + i * 16 + g + h * 8) * PS + wn0 + j * 8 + 2 * t;
        *reinterpret_cast<float2 *>(&part[e]) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  cl.sync(); /* every partial written, visible cluster-wide */
  const int rank = (int)cl.block_rank();
  constexpr int Q = C::BM * C::BN / 4, QR = C::BN / 4; /* float4 groups, per row */
  const bool vec_c = (n % 4 == 0) && (((uintptr_t)c & 15u) == 0);
  const int q1 = (rank + 1) * Q / csplit;
  for (int q = rank * Q / csplit + tid; q < q1; q += C::NT) {
    const int r = q / QR, cc = (q % QR) * 4;
    const int row = m0 + r, col = n0 + cc;
    if (row >= m || col >= n) continue;
    float4 v[kClusterMax];
#pragma unroll
    for (int z = 0; z < kClusterMax; z++)
      if (z < csplit) v[z] = *reinterpret_cast<const float4 *>(cl.map_shared_rank(part, z) + r * PS + cc);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int z = 0; z < kClusterMax; z++)
      if (z < csplit) s[0] += v[z].x, s[1] += v[z].y, s[2] += v[z].z, s[3] += v[z].w;
    float *o = c + (size_t)row * n + col;
    if (vec_c) { /* col + 3 < n: n and col are multiples of 4 */
      float4 w = make_float4(alpha * s[0], alpha * s[1], alpha * s[2], alpha * s[3]);
      if (beta != 0.0f) {
        const float4 old = *reinterpret_cast<const float4 *>(o);
        w.x = fmaf(beta, old.x, w.x), w.y = fmaf(beta, old.y, w.y);
        w.z = fmaf(beta, old.z, w.z), w.w = fmaf(beta, old.w, w.w);
      }
      *reinterpret_cast<float4 *>(o) = w;
    } else {
#pragma unroll
      for (int x = 0; x < 4; x++)
        if (col + x < n) o[x] = beta == 0.0f ? alpha * s[x] : fmaf(beta, o[x], alpha * s[x]);
    }
  }
  cl.sync(); /* no block leaves while others still read its partial */
}

/* C = alpha * sum_z ws[z] + beta * C, slices added in order (deterministic). */
__global__ void tf32x3_splitk_reduce_kernel(size_t mn, int splits, const float *__restrict__ ws, float alpha,
                                            float beta, float *__restrict__ c) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < mn; i += stride) {
    float s = 0.0f;
    for (int z = 0; z < splits; z++) s += ws[(size_t)z * mn + i];
    c[i] = beta == 0.0f ? alpha * s : fmaf(beta, c[i], alpha * s);
  }
}

/* --- configurations ------------------------------------------------------------------ */

/* X(index, name, BM, BN, BK, WM, WN, STAGES, MINB, KF); shared memory
 * stays under 227 KB for every transpose case. */
#define GKCU__TC_CFGS(X)                                                \
  X(0, "128x256x32/w64x64/s3/b1/f1", 128, 256, 32, 64, 64, 3, 1, 1)     \
  X(1, "128x256x32/w64x64/s3/b1/f2", 128, 256, 32, 64, 64, 3, 1, 2)     \
  X(2, "256x128x32/w64x64/s3/b1/f1", 256, 128, 32, 64, 64, 3, 1, 1)     \
  X(3, "256x128x32/w64x64/s3/b1/f2", 256, 128, 32, 64, 64, 3, 1, 2)     \
  X(4, "128x128x32/w64x32/s4/b1/f2", 128, 128, 32, 64, 32, 4, 1, 2)     \
  X(5, "128x64x32/w32x32/s4/b2/f2", 128, 64, 32, 32, 32, 4, 2, 2)       \
  X(6, "64x128x32/w32x32/s4/b2/f2", 64, 128, 32, 32, 32, 4, 2, 2)       \
  X(7, "64x64x32/w32x32/s4/b3/f2", 64, 64, 32, 32, 32, 4, 3, 2)         \
  X(8, "64x64x32/w32x32/s6/b2/f4", 64, 64, 32, 32, 32, 6, 2, 4)         \
  X(9, "32x64x32/w16x32/s6/b4/f2", 32, 64, 32, 16, 32, 6, 4, 2)         \
  X(10, "32x32x32/w16x16/s4/b6/f1", 32, 32, 32, 16, 16, 4, 6, 1)        \
  X(11, "32x32x32/w16x16/s8/b6/f2", 32, 32, 32, 16, 16, 8, 6, 2)        \
  X(12, "64x32x64/w32x16/s2/b4/f2", 64, 32, 64, 32, 16, 2, 4, 2)        \
  X(13, "64x32x64/w32x16/s2/b3/f4", 64, 32, 64, 32, 16, 2, 3, 4)        \
  X(14, "64x32x32/w32x16/s4/b4/f2", 64, 32, 32, 32, 16, 4, 4, 2)        \
  X(15, "64x64x32/w16x32/s4/b2/f4", 64, 64, 32, 16, 32, 4, 2, 4)        \
  X(16, "64x32x64/w16x16/s2/b2/f4", 64, 32, 64, 16, 16, 2, 2, 4)        \
  X(17, "32x64x32/w16x32/s4/b3/f4", 32, 64, 32, 16, 32, 4, 3, 4)        \
  X(18, "32x32x32/w16x16/s4/b6/f4", 32, 32, 32, 16, 16, 4, 6, 4)

struct CfgInfo {
  const char *name;
  int bm, bn;
};
#define GKCU__TC_INFO(idx, name, BM, BN, BK, WM, WN, ST, MINB, KF) {name, BM, BN},
const CfgInfo kCfgs[GKCU_TC_CFGS] = {GKCU__TC_CFGS(GKCU__TC_INFO)};
#undef GKCU__TC_INFO

size_t tc_tiles(int cfg, int m, int n) {
  return (size_t)gkcu__div_up(m, kCfgs[cfg].bm) * gkcu__div_up(n, kCfgs[cfg].bn);
}

struct Launch {
  int m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c, *ws;
  int kps, splits;
  bool va, vb;
  bool cluster; /* splits > 1 added up in a cluster (ws unused) */
};

template <class C, bool TA, bool TB>
cudaError_t launch_t(cudaStream_t st, const Launch &L) {
  using S = TcSmem<C, TA, TB>;
  const int tiles_m = (int)gkcu__div_up(L.m, C::BM), tiles_n = (int)gkcu__div_up(L.n, C::BN);
  const size_t tiles = (size_t)tiles_m * tiles_n;
  if (tiles > 0x7fffffffu || L.splits > 65535) return cudaErrorInvalidConfiguration;
  auto kern = sgemm_tf32x3_kernel<C, TA, TB>;
  if (S::BYTES > 48 * 1024) {
    /* Once per device: the attribute stays set for the process. */
    static unsigned long long done; /* bit d: set on device d (d < 64) */
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    unsigned long long bit = dev < 64 ? 1ull << dev : 0;
    if (!bit || !(__atomic_load_n(&done, __ATOMIC_ACQUIRE) & bit)) {
      e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)S::BYTES);
      if (e != cudaSuccess) return e;
      __atomic_fetch_or(&done, bit, __ATOMIC_ACQ_REL);
    }
  }
  dim3 grid((unsigned int)tiles, 1, (unsigned int)L.splits);
  if (L.cluster) {
    static_assert(S::BYTES >= TcPart<C>::BYTES, "the partial tile fits in the pipeline's shared memory");
    cudaLaunchConfig_t lc = {};
    lc.gridDim = grid;
    lc.blockDim = dim3(C::NT);
    lc.dynamicSmemBytes = S::BYTES;
    lc.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 1;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = (unsigned int)L.splits;
    lc.attrs = at;
    lc.numAttrs = 1;
    return cudaLaunchKernelEx(&lc, kern, L.m, L.n, L.k, L.alpha, L.a, L.b, L.beta, L.c, (float *)NULL, L.kps,
                              L.splits, L.va, L.vb, tiles_m, tiles_n);
  }
  kern<<<grid, C::NT, S::BYTES, st>>>(L.m, L.n, L.k, L.alpha, L.a, L.b, L.beta, L.c, L.ws, L.kps, 0, L.va, L.vb,
                                      tiles_m, tiles_n);
  return cudaGetLastError();
}

template <class C>
cudaError_t launch_cfg(cudaStream_t st, int ta, int tb, const Launch &L) {
  if (!ta && !tb) return launch_t<C, false, false>(st, L);
  if (ta && !tb) return launch_t<C, true, false>(st, L);
  if (!ta && tb) return launch_t<C, false, true>(st, L);
  return launch_t<C, true, true>(st, L);
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

cudaError_t launch_any(gkcu_ctx *ctx, int cfg, int ta, int tb, const Launch &L) {
  cudaError_t e = cudaErrorInvalidValue;
  switch (cfg) {
#define GKCU__TC_CASE(idx, name, BM, BN, BK, WM, WN, ST, MINB, KF) \
  case idx:                                                        \
    e = launch_cfg<TcCfg<BM, BN, BK, WM, WN, ST, MINB, KF>>(ctx->stream, ta, tb, L); \
    break;
    GKCU__TC_CFGS(GKCU__TC_CASE)
#undef GKCU__TC_CASE
  }
  return e;
}

int run_tf32x3(gkcu_ctx *ctx, int cfg, int splits, bool scratch, int m, int n, int k, float alpha,
               const float *a, int ta, const float *b, int tb, float beta, float *c) {
  Launch L = {m, n, k, alpha, beta, a, b, c, NULL, k, 1, false, false, false};
  L.va = aligned16(a) && ((ta ? m : k) % 4 == 0);
  L.vb = aligned16(b) && ((tb ? k : n) % 4 == 0);
  if (splits > 1) {
    L.kps = (int)(((size_t)gkcu__div_up(k, splits) + 31) / 32 * 32); /* whole BK tiles */
    splits = (int)gkcu__div_up(k, L.kps);                            /* no empty slices */
  }
  if (splits < 1) splits = 1;
  L.splits = splits;
  cudaError_t e;
  if (splits > 1 && splits <= kClusterMax && !scratch) {
    L.cluster = true;
    e = launch_any(ctx, cfg, ta, tb, L);
    if (e == cudaSuccess) return 0;
    /* Refused at launch (a partition without room for the cluster, say):
     * nothing ran; clear the error and take the scratch path. */
    (void)cudaGetLastError();
    L.cluster = false;
  }
  if (splits > 1) {
    gkcu__carve cv = {};
    gkcu__carve_add(&cv, (size_t)splits * m * n * sizeof(float), (void **)&L.ws);
    int rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) return rc;
  }
  e = launch_any(ctx, cfg, ta, tb, L);
  if (e != cudaSuccess) return gkcu__cuda_fail(ctx, e, "launch sgemm_tf32x3_kernel");
  if (splits > 1) {
    size_t mn = (size_t)m * n;
    unsigned int blocks = gkcu__div_up(mn, 256);
    unsigned int cap = (unsigned int)ctx->sm_count * 8;
    if (blocks > cap) blocks = cap;
    tf32x3_splitk_reduce_kernel<<<blocks, 256, 0, ctx->stream>>>(mn, splits, L.ws, alpha, beta, c);
    GKCU__LAUNCHED(ctx, "tf32x3_splitk_reduce_kernel");
  }
  return 0;
}

}  // namespace

namespace {

/* Counts the finite x (bit patterns base + i) where tf32_rna differs from
 * cvt.rna.tf32.f32; remembers one of them. */
__global__ void tf32_round_check_kernel(uint32_t base, uint32_t count, unsigned long long *bad,
                                        uint32_t *example) {
  const uint32_t stride = gridDim.x * blockDim.x;
  unsigned int mine = 0;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint32_t bits = base + i;
    if ((bits & 0x7f800000u) == 0x7f800000u) continue; /* inf, NaN: outside the contract */
    const float x = __uint_as_float(bits);
    uint32_t ref;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(ref) : "f"(x));
    if (ref != tf32_rna(x)) {
      mine++;
      *example = bits;
    }
  }
  if (mine) atomicAdd(bad, (unsigned long long)mine);
}

}  // namespace

extern "C" int gkcu_lab_tf32_round_check(gkcu_ctx *ctx, unsigned long long *mismatches, uint32_t *example) {
  if (!ctx || !mismatches || !example) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  unsigned long long *d_bad = NULL;
  uint32_t *d_ex = NULL;
  int rc = 0;
  cudaError_t e = cudaMalloc((void **)&d_bad, sizeof *d_bad + sizeof *d_ex);
  if (e != cudaSuccess) return gkcu__cuda_fail(ctx, e, "cudaMalloc (tf32 round check)");
  d_ex = (uint32_t *)(d_bad + 1);
  e = cudaMemsetAsync(d_bad, 0, sizeof *d_bad + sizeof *d_ex, ctx->stream);
  if (e != cudaSuccess) {
    rc = gkcu__cuda_fail(ctx, e, "cudaMemsetAsync (tf32 round check)");
    goto cleanup;
  }
  for (int half = 0; half < 2; half++) { /* 2^31 patterns per launch */
    tf32_round_check_kernel<<<(unsigned int)ctx->sm_count * 16, 256, 0, ctx->stream>>>(
        half ? 0x80000000u : 0u, 0x80000000u, d_bad, d_ex);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
      rc = gkcu__cuda_fail(ctx, e, "launch tf32_round_check_kernel");
      goto cleanup;
    }
  }
  e = cudaMemcpyAsync(mismatches, d_bad, sizeof *mismatches, cudaMemcpyDeviceToHost, ctx->stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(example, d_ex, sizeof *example, cudaMemcpyDeviceToHost, ctx->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
  if (e != cudaSuccess) rc = gkcu__cuda_fail(ctx, e, "tf32 round check");
cleanup:
  cudaFree(d_bad);
  return rc;
}

extern "C" const char *gkcu_tc_cfg_name(int cfg) {
  return cfg >= 0 && cfg < GKCU_TC_CFGS ? kCfgs[cfg].name : NULL;
}

/* From the lab runs of 2026-11-25 (H100, 132 SMs; bench/RESULTS.md),
 * x = cuBLAS FP32 time / this time:
 *   - 256x128 tiles (f2) once they give ~every SM one: 2048^3 0.98-1.09,
 *     4096^3 1.02-1.085, 8192^3 1.03-1.065 (f1 within +-2% of it, the order
 *     flipping between runs; 128x256 and 128x128 tiles up to 8% slower);
 *   the rest from the small-shape runs (07:46 and 07:51 UTC, after the
 *   integer TF32 split):
 *   - 128x128 tiles K-split 2 in a cluster when that gives ~one block per
 *     SM and k is long: 1024^3 1.37 (64x64 unsplit 1.26-1.28);
 *   - 64x64 tiles (6 stages, f4) when there are an SM's worth;
 *   - n <= 64 with long k: 64x64 tiles (4 stages, f2), K split to ~2
 *     blocks per SM: 8192x64x8192 k2 1.11 (k2 through scratch 1.10);
 *   - 64x32 tiles, all of a 64-deep k tile in one stage, f4, unsplit, when
 *     they give ~every SM one and k >= 256: 512^3 1.29-1.31 (k2 1.23-1.26;
 *     the 32x64 tiles of the previous rule 1.11-1.13);
 *   - 32x64 tiles (f4) unsplit when they give half the SMs a block:
 *     64x8192x64 1.16 (the best of 18 configurations; 32x64/f2 1.15);
 *   - otherwise 32x32 tiles with K split in a cluster to >= 2 blocks per
 *     SM, slices of >= 64: 256^3 k4 1.41-1.43 (k2 1.44-1.50),
 *     127x257x511 k8 1.38 (k6 1.32). */
extern "C" void gkcu_tc_choice(int sms, int32_t m, int32_t n, int32_t k, int *cfg, int *splits) {
  const size_t s = (size_t)sms;
  *splits = 1;
  /* (only where a 256x128 tile is full: 100000x64x64 would leave half of
   * every one empty) */
  if (m >= 256 && n >= 128 && tc_tiles(3, m, n) * 10 >= s * 9) {
    *cfg = 3;
    return;
  }
  if (n <= 64 && k >= 2048) {
    *cfg = 7;
    size_t want = 2 * s / tc_tiles(7, m, n), most = ((size_t)k + 127) / 128;
    if (want > most) want = most;
    if (want > 8) want = 8;
    *splits = want < 1 ? 1 : (int)want;
    return;
  }
  /* only where the 128x128 tiles are full (8192x64x8192 fell to 0.66 on
   * them: half of every tile empty) */
  const size_t t4 = tc_tiles(4, m, n);
  if (m >= 512 && n >= 512 && k >= 1024 && t4 * 2 * 10 >= s * 9 && t4 * 2 <= s * 2) {
    *cfg = 4;
    *splits = 2;
    return;
  }
  if (tc_tiles(8, m, n) >= s) {
    *cfg = 8;
    return;
  }
  const size_t t13 = tc_tiles(13, m, n);
  if (k >= 256 && t13 * 10 >= s * 9 && t13 < 2 * s) {
    *cfg = 13;
    return;
  }
  if (tc_tiles(17, m, n) * 2 >= s) {
    *cfg = 17;
    return;
  }
  *cfg = 10;
  if (k <= 128) return;
  const size_t t10 = tc_tiles(10, m, n);
  size_t want = (2 * s + t10 - 1) / t10, most = ((size_t)k + 63) / 64;
  if (want > most) want = most;
  if (want > 8) want = 8; /* a portable cluster */
  *splits = want < 1 ? 1 : (int)want;
}

extern "C" int gkcu_lab_sgemm_tf32x3(gkcu_ctx *ctx, int cfg, int splits, int32_t m, int32_t n, int32_t k,
                                     float alpha, const float *a, int trans_a, const float *b, int trans_b,
                                     float beta, float *c) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, m >= 1 && n >= 1 && k >= 1);
  GKCU__CHECK_ARG(ctx, a != NULL && b != NULL && c != NULL);
  GKCU__CHECK_ARG(ctx, cfg >= -1 && cfg < GKCU_TC_CFGS);
  GKCU__CHECK_ARG(ctx, splits >= -64 && splits <= 64 && splits != -1);
  const bool scratch = splits < 0;
  if (scratch) splits = -splits;
  if (cfg < 0 || splits == 0) {
    int t, sp;
    gkcu_tc_choice(ctx->sm_count, m, n, k, &t, &sp);
    if (cfg < 0) cfg = t;
    if (splits == 0) splits = sp;
  }
  return run_tf32x3(ctx, cfg, splits, scratch, m, n, k, alpha, a, trans_a != 0, b, trans_b != 0, beta, c);
}
