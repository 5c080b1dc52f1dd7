/* gkcu_sgemm.cu: the sgemm ladder (naive, smem, regblock) and cuBLAS.
 *
 * Row-major C (m x n) = alpha * op(A) * op(B) + beta * C.  Element (i, p) of
 * op(A) is A[i*k + p], or A[p*m + i] when transposed; element (p, j) of
 * op(B) is B[p*n + j], or B[j*k + p] when transposed.
 */
#include <string.h>

#include "gkcu_internal.h"
#include "gkcu_lab.h"
#include "gkcu_sgemm.h"
#include "gkcu_sgemm_tc.h"
#include "gkcu_sgemm_wg.h"

namespace {

/* out = alpha*acc (+ beta*out when beta != 0: out is not read otherwise). */
__device__ __forceinline__ float axpby(float alpha, float acc, float beta, const float *out) {
  return beta == 0.0f ? alpha * acc : fmaf(beta, *out, alpha * acc);
}

/* --- rung 0: one thread per output ----------------------------------------- */

/* Strides make one kernel serve all four transpose cases:
 * op(A)(i,p) = a[i*sai + p*sap], op(B)(p,j) = b[p*sbp + j*sbj]. */
__global__ void sgemm_naive_kernel(int m, int n, int k, float alpha, const float *__restrict__ a,
                                   long long sai, long long sap, const float *__restrict__ b,
                                   long long sbp, long long sbj, float beta, float *__restrict__ c) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= n) return;
  for (int row = blockIdx.y * blockDim.y + threadIdx.y; row < m; row += gridDim.y * blockDim.y) {
    float acc = 0.0f;
    for (int p = 0; p < k; p++) acc = fmaf(a[row * sai + p * sap], b[p * sbp + col * sbj], acc);
    float *out = c + (size_t)row * n + col;
    *out = axpby(alpha, acc, beta, out);
  }
}

/* --- rung 1: 32x32 shared-memory tiles -------------------------------------- */

/* 32x32 threads, one output each.  Loads are coalesced along the stored row
 * whatever the transpose (a transposed operand is written to the tile
 * transposed); the +1 column of padding keeps those writes conflict-free.
 * Out-of-range elements load as zero, so any m, n, k works. */
template <bool TA, bool TB>
__global__ void __launch_bounds__(1024) sgemm_smem_kernel(int m, int n, int k, float alpha,
                                                          const float *__restrict__ a,
                                                          const float *__restrict__ b, float beta,
                                                          float *__restrict__ c) {
  __shared__ float as[32][33];
  __shared__ float bs[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int n0 = blockIdx.x * 32;
  for (int m0 = blockIdx.y * 32; m0 < m; m0 += gridDim.y * 32) {
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += 32) {
      if (!TA) {
        int r = m0 + ty, p = k0 + tx;
        as[ty][tx] = (r < m && p < k) ? a[(size_t)r * k + p] : 0.0f;
      } else {
        int r = m0 + tx, p = k0 + ty;
        as[tx][ty] = (r < m && p < k) ? a[(size_t)p * m + r] : 0.0f;
      }
      if (!TB) {
        int p = k0 + ty, j = n0 + tx;
        bs[ty][tx] = (p < k && j < n) ? b[(size_t)p * n + j] : 0.0f;
      } else {
        int p = k0 + tx, j = n0 + ty;
        bs[tx][ty] = (p < k && j < n) ? b[(size_t)j * k + p] : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int p = 0; p < 32; p++) acc = fmaf(as[ty][p], bs[p][tx], acc);
      __syncthreads();
    }
    int row = m0 + ty, col = n0 + tx;
    if (row < m && col < n) {
      float *out = c + (size_t)row * n + col;
      *out = axpby(alpha, acc, beta, out);
    }
  }
}

/* --- rung 2: block tiles + 8x8 register blocking ---------------------------- */

/* One block computes a BM x BN tile of C with BM*BN/(8*TN) threads, 8 x TN
 * outputs per thread as 4x4 quadrants (rows ty*4 and ty*4+BM/2, columns
 * tx*4 + q*BN/(TN/4)), so that each k-step reads two float4s of A and TN/4
 * of B from shared memory per 8*TN FMAs.  A warp is 4 (ty) x 8 (tx)
 * threads: its B reads are 8 distinct float4s per quarter-warp (conflict-
 * free) and its A reads are broadcasts.  A 128-bit shared load costs four
 * wavefronts whatever the addresses, so 8x16 (6 loads per 128 FMAs) leaves
 * the shared-memory pipe more slack than 8x8 (4 per 64); see NOTES.md.
 *
 * Shared memory holds A transposed (as[k][m]) and B as is (bs[k][n]), two
 * buffers each: tile t+1 is loaded from global memory into registers while
 * tile t is multiplied, then stored to the other buffer; one barrier per
 * tile.  Global loads are float4 when the operand's stored rows are 16-byte
 * aligned (vec_a / vec_b) and the float4 is in range, else scalar with zero
 * padding, so edges, odd k and unaligned pointers all work.  Rows are
 * padded by 4 floats: the transposing scalar stores then spread over all 32
 * banks and float4 reads stay 16-byte aligned.
 *
 * With ws != NULL the block handles k in [z*kps, min(k, (z+1)*kps)) for
 * z = blockIdx.z and writes its raw sums to ws + z*m*n (split-K); a second
 * kernel adds the slices and applies alpha and beta.
 *
 * MINB is the resident blocks per SM the registers are budgeted for
 * (65536 / (threads * MINB) each); PH selects phased staging (below). */
template <int BM, int BN, int BK, int TN, int MINB, bool PH, bool TA, bool TB>
struct Regblock {
  static constexpr int NT = BM * BN / (8 * TN);
  static constexpr int NQ = TN / 4; /* 4-column quadrants per thread */
  static constexpr int A_LOADS = BM * BK / 4 / NT;
  static constexpr int B_LOADS = BN * BK / 4 / NT;
  static constexpr int AS = BM + 4;
  static constexpr int BS = BN + 4;
  static_assert(BM % 32 == 0 && BN % (8 * TN) == 0, "warp layout needs BM%32, BN%(8*TN)");
  static_assert(TN == 8 || TN == 16, "thread tile is 8x8 or 8x16");
  static_assert(A_LOADS >= 1 && B_LOADS >= 1, "tile too small for its threads");
  static_assert(BK == 8 || BK == 16, "BK is 8 or 16");
};

template <int BM, int BN, int BK, int TN, int MINB, bool PH, bool TA, bool TB>
__global__ void __launch_bounds__(BM * BN / (8 * TN), MINB)
    sgemm_regblock_kernel(int m, int n, int k, float alpha, const float *__restrict__ a,
                          const float *__restrict__ b, float beta, float *__restrict__ c,
                          float *__restrict__ ws, int kps, bool vec_a, bool vec_b, bool vec_c,
                          int tiles_n) {
  using R = Regblock<BM, BN, BK, TN, MINB, PH, TA, TB>;
  /* dynamic: 128x256x16 needs 50 KB, past the 48 KB of static shared memory */
  extern __shared__ __align__(16) float smem[];
  float(*as)[BK * R::AS] = reinterpret_cast<float(*)[BK * R::AS]>(smem);
  float(*bs)[BK * R::BS] = reinterpret_cast<float(*)[BK * R::BS]>(smem + 2 * BK * R::AS);

  const int tid = threadIdx.x;
  const int m0 = (blockIdx.x / tiles_n) * BM;
  const int n0 = (blockIdx.x % tiles_n) * BN;
  const int kbeg = blockIdx.z * kps;
  const int kend = min(k, kbeg + kps);

  const int lane = tid & 31, warp = tid >> 5;
  constexpr int WX = BN / (8 * TN); /* warps across a row of the tile */
  const int ty = (warp / WX) * 4 + (lane >> 3);
  const int tx = (warp % WX) * 8 + (lane & 7);

  float4 ra[R::A_LOADS], rb[R::B_LOADS];

  /* Interior blocks with aligned operands take unconditional float4 loads
   * from per-thread base pointers (a few instructions per tile instead of
   * the bounds-checked path, which only edge blocks and the k tail need). */
  const bool interior = vec_a && vec_b && m0 + BM <= m && n0 + BN <= n;
  const float *pa[R::A_LOADS];
  const float *pb[R::B_LOADS];
#pragma unroll
  for (int l = 0; l < R::A_LOADS; l++) {
    int f = tid + l * R::NT;
    pa[l] = !TA ? a + (size_t)(m0 + f / (BK / 4)) * k + (f % (BK / 4)) * 4
                : a + (size_t)(f / (BM / 4)) * m + m0 + (f % (BM / 4)) * 4;
  }
#pragma unroll
  for (int l = 0; l < R::B_LOADS; l++) {
    int f = tid + l * R::NT;
    pb[l] = !TB ? b + (size_t)(f / (BN / 4)) * n + n0 + (f % (BN / 4)) * 4
                : b + (size_t)(n0 + f / (BK / 4)) * k + (f % (BK / 4)) * 4;
  }

  auto load_global_a = [&](int k0) {
    if (interior && k0 + BK <= kend) {
      const size_t oa = !TA ? (size_t)k0 : (size_t)k0 * m;
#pragma unroll
      for (int l = 0; l < R::A_LOADS; l++) ra[l] = *reinterpret_cast<const float4 *>(pa[l] + oa);
      return;
    }
#pragma unroll
    for (int l = 0; l < R::A_LOADS; l++) {
      int f = tid + l * R::NT;
      if (!TA) {
        int gm = m0 + f / (BK / 4), gk = k0 + (f % (BK / 4)) * 4;
        const float *p = a + (size_t)gm * k + gk;
        if (vec_a && gm < m && gk < kend) {
          ra[l] = *reinterpret_cast<const float4 *>(p);
        } else {
          bool rok = gm < m;
          ra[l].x = (rok && gk + 0 < kend) ? p[0] : 0.0f;
          ra[l].y = (rok && gk + 1 < kend) ? p[1] : 0.0f;
          ra[l].z = (rok && gk + 2 < kend) ? p[2] : 0.0f;
          ra[l].w = (rok && gk + 3 < kend) ? p[3] : 0.0f;
        }
      } else {
        int gk = k0 + f / (BM / 4), gm = m0 + (f % (BM / 4)) * 4;
        const float *p = a + (size_t)gk * m + gm;
        if (vec_a && gk < kend && gm < m) {
          ra[l] = *reinterpret_cast<const float4 *>(p);
        } else {
          bool kok = gk < kend;
          ra[l].x = (kok && gm + 0 < m) ? p[0] : 0.0f;
          ra[l].y = (kok && gm + 1 < m) ? p[1] : 0.0f;
          ra[l].z = (kok && gm + 2 < m) ? p[2] : 0.0f;
          ra[l].w = (kok && gm + 3 < m) ? p[3] : 0.0f;
        }
      }
    }
  };

  auto load_global_b = [&](int k0) {
    if (interior && k0 + BK <= kend) {
      const size_t ob = !TB ? (size_t)k0 * n : (size_t)k0;
#pragma unroll
      for (int l = 0; l < R::B_LOADS; l++) rb[l] = *reinterpret_cast<const float4 *>(pb[l] + ob);
      return;
    }
#pragma unroll
    for (int l = 0; l < R::B_LOADS; l++) {
      int f = tid + l * R::NT;
      if (!TB) {
        int gk = k0 + f / (BN / 4), gn = n0 + (f % (BN / 4)) * 4;
        const float *p = b + (size_t)gk * n + gn;
        if (vec_b && gk < kend && gn < n) {
          rb[l] = *reinterpret_cast<const float4 *>(p);
        } else {
          bool kok = gk < kend;
          rb[l].x = (kok && gn + 0 < n) ? p[0] : 0.0f;
          rb[l].y = (kok && gn + 1 < n) ? p[1] : 0.0f;
          rb[l].z = (kok && gn + 2 < n) ? p[2] : 0.0f;
          rb[l].w = (kok && gn + 3 < n) ? p[3] : 0.0f;
        }
      } else {
        int gn = n0 + f / (BK / 4), gk = k0 + (f % (BK / 4)) * 4;
        const float *p = b + (size_t)gn * k + gk;
        if (vec_b && gn < n && gk < kend) {
          rb[l] = *reinterpret_cast<const float4 *>(p);
        } else {
          bool nok = gn < n;
          rb[l].x = (nok && gk + 0 < kend) ? p[0] : 0.0f;
          rb[l].y = (nok && gk + 1 < kend) ? p[1] : 0.0f;
          rb[l].z = (nok && gk + 2 < kend) ? p[2] : 0.0f;
          rb[l].w = (nok && gk + 3 < kend) ? p[3] : 0.0f;
        }
      }
    }
  };

  auto store_shared_a = [&](int buf) {
#pragma unroll
    for (int l = 0; l < R::A_LOADS; l++) {
      int f = tid + l * R::NT;
      if (!TA) {
        int r = f / (BK / 4), kq = (f % (BK / 4)) * 4;
        float *s = &as[buf][kq * R::AS + r];
        s[0 * R::AS] = ra[l].x;
        s[1 * R::AS] = ra[l].y;
        s[2 * R::AS] = ra[l].z;
        s[3 * R::AS] = ra[l].w;
      } else {
        int kr = f / (BM / 4), mq = (f % (BM / 4)) * 4;
        *reinterpret_cast<float4 *>(&as[buf][kr * R::AS + mq]) = ra[l];
      }
    }
  };

  auto store_shared_b = [&](int buf) {
#pragma unroll
    for (int l = 0; l < R::B_LOADS; l++) {
      int f = tid + l * R::NT;
      if (!TB) {
        int kr = f / (BN / 4), nq = (f % (BN / 4)) * 4;
        *reinterpret_cast<float4 *>(&bs[buf][kr * R::BS + nq]) = rb[l];
      } else {
        int col = f / (BK / 4), kq = (f % (BK / 4)) * 4;
        float *s = &bs[buf][kq * R::BS + col];
        s[0 * R::BS] = rb[l].x;
        s[1 * R::BS] = rb[l].y;
        s[2 * R::BS] = rb[l].z;
        s[3 * R::BS] = rb[l].w;
      }
    }
  };

  float acc[8][TN];
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

  auto multiply = [&](const float *sa, const float *sb, int kk0, int kk1) {
#pragma unroll
    for (int kk = kk0; kk < kk1; kk++) {
      float4 a0 = *reinterpret_cast<const float4 *>(&sa[kk * R::AS + ty * 4]);
      float4 a1 = *reinterpret_cast<const float4 *>(&sa[kk * R::AS + ty * 4 + BM / 2]);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      float bv[TN];
#pragma unroll
      for (int q = 0; q < R::NQ; q++) {
        float4 bq = *reinterpret_cast<const float4 *>(&sb[kk * R::BS + tx * 4 + q * (BN / R::NQ)]);
        bv[4 * q + 0] = bq.x;
        bv[4 * q + 1] = bq.y;
        bv[4 * q + 2] = bq.z;
        bv[4 * q + 3] = bq.w;
      }
#pragma unroll
      for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  };

  const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
  if (ntiles > 0) {
    load_global_a(kbeg);
    load_global_b(kbeg);
    store_shared_a(0);
    store_shared_b(0);
  }
  __syncthreads();

  for (int t = 0; t < ntiles; t++) {
    const int cur = t & 1;
    const bool more = t + 1 < ntiles;
    const int knext = kbeg + (t + 1) * BK;
    if (PH) {
      /* phased: the next A is fetched during the first half of the tile and
       * stored before the second half, which overlaps B's fetch, so only
       * one operand's staging registers are live at a time */
      if (more) load_global_a(knext);
      multiply(as[cur], bs[cur], 0, BK / 2);
      if (more) {
        store_shared_a(cur ^ 1);
        load_global_b(knext);
      }
      multiply(as[cur], bs[cur], BK / 2, BK);
      if (more) store_shared_b(cur ^ 1);
    } else {
      if (more) {
        load_global_a(knext);
        load_global_b(knext);
      }
      multiply(as[cur], bs[cur], 0, BK);
      if (more) {
        store_shared_a(cur ^ 1);
        store_shared_b(cur ^ 1);
      }
    }
    __syncthreads();
  }

  /* Epilogue: split-K slices are raw sums; otherwise apply alpha, beta. */
  float *out = ws ? ws + (size_t)blockIdx.z * m * n : c;
  const float al = ws ? 1.0f : alpha;
  const float be = ws ? 0.0f : beta;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    int row = m0 + ty * 4 + (i < 4 ? i : BM / 2 + i - 4);
    if (row >= m) continue;
#pragma unroll
    for (int h = 0; h < R::NQ; h++) {
      int col = n0 + tx * 4 + h * (BN / R::NQ);
      float *o = out + (size_t)row * n + col;
      const float *v = &acc[i][h * 4];
      if (vec_c && col < n) {
        float4 r;
        if (be == 0.0f) {
          r = make_float4(al * v[0], al * v[1], al * v[2], al * v[3]);
        } else {
          float4 old = *reinterpret_cast<const float4 *>(o);
          r = make_float4(fmaf(be, old.x, al * v[0]), fmaf(be, old.y, al * v[1]),
                          fmaf(be, old.z, al * v[2]), fmaf(be, old.w, al * v[3]));
        }
        *reinterpret_cast<float4 *>(o) = r;
      } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
          if (col + j < n) o[j] = axpby(al, v[j], be, o + j);
      }
    }
  }
}

/* C = alpha * sum_z ws[z] + beta * C, slices added in order (deterministic). */
__global__ void sgemm_splitk_reduce_kernel(size_t mn, int splits, const float *__restrict__ ws,
                                           float alpha, float beta, float *__restrict__ c) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < mn; i += stride) {
    float s = 0.0f;
    for (int z = 0; z < splits; z++) s += ws[(size_t)z * mn + i];
    c[i] = axpby(alpha, s, beta, c + i);
  }
}

struct TileShape {
  int bm, bn;
};
constexpr TileShape kTiles[GKCU_LAB_TILES] = {{128, 128}, {128, 64},  {64, 128},  {64, 64},   {64, 128},
                                              {64, 128},  {128, 128}, {128, 128}, {128, 128}, {128, 128},
                                              {128, 256}, {64, 256},  {128, 256}};
const char *const kTileNames[GKCU_LAB_TILES] = {
    "128x128x8",     "128x64x8",         "64x128x8",      "64x64x8",      "64x128x16",         "64x128x16/ph",
    "128x128x16/b1", "128x128x16/b1/ph", "128x128x16/ph", "128x128x8/ph", "128x256x8/t16/b1", "64x256x8/t16/b2", "128x256x16/t16/b1/ph"};

size_t tiles_for(int tile, int m, int n) {  /* tiles of C for a shape */
  return (size_t)gkcu__div_up(m, kTiles[tile].bm) * gkcu__div_up(n, kTiles[tile].bn);
}

/* Tile configuration and K slices for a shape, from the lab runs recorded
 * in bench/RESULTS.md (H200, 132 SMs):
 *   - enough 128x256 tiles for ~every SM (one resident each): 128x256x8
 *     with 8x16 outputs per thread, the fastest at 2048..8192 (0.88x cuBLAS);
 *   - otherwise fill the chip by splitting K (k >= 512) over a smaller tile:
 *     128x64 when n <= 64 (8192x64x8192: 4 slices, 0.86x), 64x128 when
 *     m <= 64, 128x128x16 when a quarter of the SMs get a tile (1024^3:
 *     2 slices, 1.0x), else 64x128x16 (512^3: 2 slices). */
void regblock_choice(int sms, int m, int n, int k, int *tile, int *splits) {
  *splits = 1;
  if (tiles_for(10, m, n) * 10 >= (size_t)sms * 9) {
    *tile = 10;
    return;
  }
  int t;
  size_t per_sm; /* blocks per SM the split count aims for */
  if (n <= 64) {
    t = 1;
    per_sm = 2;
  } else if (m <= 64) {
    t = 4;
    per_sm = 2;
  } else if (tiles_for(6, m, n) * 4 >= (size_t)sms) {
    t = 6;
    per_sm = 1;
  } else {
    t = 4;
    per_sm = 2;
  }
  *tile = t;
  if (k < 512) return;
  size_t want = per_sm * (size_t)sms / tiles_for(t, m, n);
  size_t most = (size_t)k / 256;
  if (want > most) want = most;
  if (want > 16) want = 16;
  if (want < 1) want = 1;
  *splits = (int)want;
}

template <int BM, int BN, int BK, int TN, int MINB, bool PH, bool TA, bool TB>
cudaError_t launch_regblock_t(cudaStream_t st, int m, int n, int k, float alpha, const float *a,
                              const float *b, float beta, float *c, float *ws, int splits, int kps,
                              bool va, bool vb, bool vc) {
  using R = Regblock<BM, BN, BK, TN, MINB, PH, TA, TB>;
  int tiles_n = (int)gkcu__div_up(n, BN);
  size_t tiles = (size_t)gkcu__div_up(m, BM) * tiles_n;
  if (tiles > 0x7fffffffu) return cudaErrorInvalidConfiguration;
  dim3 grid((unsigned int)tiles, 1, (unsigned int)splits);
  const size_t smem = 2 * (size_t)BK * (R::AS + R::BS) * sizeof(float);
  if (smem > 48 * 1024) {
    /* per call (cheap, and right for whichever device is current) */
    cudaError_t e = cudaFuncSetAttribute(sgemm_regblock_kernel<BM, BN, BK, TN, MINB, PH, TA, TB>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
  }
  sgemm_regblock_kernel<BM, BN, BK, TN, MINB, PH, TA, TB>
      <<<grid, R::NT, smem, st>>>(m, n, k, alpha, a, b, beta, c, ws, kps, va, vb, vc, tiles_n);
  return cudaGetLastError();
}

template <int BM, int BN, int BK, int TN, int MINB, bool PH>
cudaError_t launch_regblock_shape(cudaStream_t st, int m, int n, int k, float alpha, const float *a,
                                  int ta, const float *b, int tb, float beta, float *c, float *ws,
                                  int splits, int kps, bool va, bool vb, bool vc) {
  if (!ta && !tb)
    return launch_regblock_t<BM, BN, BK, TN, MINB, PH, false, false>(st, m, n, k, alpha, a, b, beta, c, ws, splits, kps, va, vb, vc);
  if (ta && !tb)
    return launch_regblock_t<BM, BN, BK, TN, MINB, PH, true, false>(st, m, n, k, alpha, a, b, beta, c, ws, splits, kps, va, vb, vc);
  if (!ta && tb)
    return launch_regblock_t<BM, BN, BK, TN, MINB, PH, false, true>(st, m, n, k, alpha, a, b, beta, c, ws, splits, kps, va, vb, vc);
  return launch_regblock_t<BM, BN, BK, TN, MINB, PH, true, true>(st, m, n, k, alpha, a, b, beta, c, ws, splits, kps, va, vb, vc);
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

int run_regblock(gkcu_ctx *ctx, int tile, int splits, int m, int n, int k, float alpha,
                 const float *a, int ta, const float *b, int tb, float beta, float *c) {
  /* A float4 of a stored row is usable when every stored row starts 16-byte
   * aligned: base aligned and row length a multiple of 4. */
  bool va = aligned16(a) && ((ta ? m : k) % 4 == 0);
  bool vb = aligned16(b) && ((tb ? k : n) % 4 == 0);
  bool vc = aligned16(c) && (n % 4 == 0);

  int kps = k;
  float *ws = NULL;
  if (splits > 1) {
    kps = (int)(((size_t)gkcu__div_up(k, splits) + 15) / 16 * 16); /* a multiple of every BK */
    splits = (int)gkcu__div_up(k, kps); /* no empty slices */
  }
  if (splits > 1) {
    gkcu__carve cv = {};
    gkcu__carve_add(&cv, (size_t)splits * m * n * sizeof(float), (void **)&ws);
    int rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) return rc;
  } else {
    splits = 1;
  }

  cudaError_t e;
  switch (tile) {
#define GKCU__RB(BM, BN, BK, TN, MINB, PH)                                                              \
  launch_regblock_shape<BM, BN, BK, TN, MINB, PH>(ctx->stream, m, n, k, alpha, a, ta, b, tb, beta, c, ws, splits, \
                                                  kps, va, vb, vc)
    case 0: e = GKCU__RB(128, 128, 8, 8, 2, false); break;
    case 1: e = GKCU__RB(128, 64, 8, 8, 3, false); break;
    case 2: e = GKCU__RB(64, 128, 8, 8, 3, false); break;
    case 3: e = GKCU__RB(64, 64, 8, 8, 6, false); break;
    case 4: e = GKCU__RB(64, 128, 16, 8, 3, false); break;
    case 5: e = GKCU__RB(64, 128, 16, 8, 3, true); break;
    case 6: e = GKCU__RB(128, 128, 16, 8, 1, false); break;
    case 7: e = GKCU__RB(128, 128, 16, 8, 1, true); break;
    case 8: e = GKCU__RB(128, 128, 16, 8, 2, true); break;
    case 9: e = GKCU__RB(128, 128, 8, 8, 2, true); break;
    case 10: e = GKCU__RB(128, 256, 8, 16, 1, false); break;
    case 11: e = GKCU__RB(64, 256, 8, 16, 2, false); break;
    default: e = GKCU__RB(128, 256, 16, 16, 1, true); break;
#undef GKCU__RB
  }
  if (e != cudaSuccess) return gkcu__cuda_fail(ctx, e, "launch sgemm_regblock_kernel");
  if (splits > 1) {
    size_t mn = (size_t)m * n;
    unsigned int blocks = gkcu__div_up(mn, 256);
    unsigned int cap = (unsigned int)ctx->sm_count * 8;
    if (blocks > cap) blocks = cap;
    sgemm_splitk_reduce_kernel<<<blocks, 256, 0, ctx->stream>>>(mn, splits, ws, alpha, beta, c);
    GKCU__LAUNCHED(ctx, "sgemm_splitk_reduce_kernel");
  }
  return 0;
}

int run_naive(gkcu_ctx *ctx, int m, int n, int k, float alpha, const float *a, int ta,
              const float *b, int tb, float beta, float *c) {
  long long sai = ta ? 1 : k, sap = ta ? m : 1;
  long long sbp = tb ? 1 : n, sbj = tb ? k : 1;
  dim3 block(16, 16);
  unsigned int gy = gkcu__div_up(m, 16);
  dim3 grid(gkcu__div_up(n, 16), gy > 65535 ? 65535 : gy);
  sgemm_naive_kernel<<<grid, block, 0, ctx->stream>>>(m, n, k, alpha, a, sai, sap, b, sbp, sbj, beta, c);
  GKCU__LAUNCHED(ctx, "sgemm_naive_kernel");
  return 0;
}

int run_smem(gkcu_ctx *ctx, int m, int n, int k, float alpha, const float *a, int ta,
             const float *b, int tb, float beta, float *c) {
  dim3 block(32, 32);
  unsigned int gy = gkcu__div_up(m, 32);
  dim3 grid(gkcu__div_up(n, 32), gy > 65535 ? 65535 : gy);
  cudaStream_t st = ctx->stream;
  if (!ta && !tb) sgemm_smem_kernel<false, false><<<grid, block, 0, st>>>(m, n, k, alpha, a, b, beta, c);
  else if (ta && !tb) sgemm_smem_kernel<true, false><<<grid, block, 0, st>>>(m, n, k, alpha, a, b, beta, c);
  else if (!ta && tb) sgemm_smem_kernel<false, true><<<grid, block, 0, st>>>(m, n, k, alpha, a, b, beta, c);
  else sgemm_smem_kernel<true, true><<<grid, block, 0, st>>>(m, n, k, alpha, a, b, beta, c);
  GKCU__LAUNCHED(ctx, "sgemm_smem_kernel");
  return 0;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: hand
 * cuBLAS B first.  A row-major stored matrix is the column-major view of its
 * transpose, so each operand keeps its own transpose flag and its stored row
 * length as leading dimension. */
int run_cublas(gkcu_ctx *ctx, bool tf32, int m, int n, int k, float alpha, const float *a, int ta,
               const float *b, int tb, float beta, float *c) {
  cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ldb = tb ? k : n;
  int lda = ta ? m : k;
  cublasComputeType_t ct = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  GKCU__TRY_CUBLAS(ctx, cublasGemmEx(ctx->cublas, opb, opa, n, m, k, &alpha, b, CUDA_R_32F, ldb, a,
                                     CUDA_R_32F, lda, &beta, c, CUDA_R_32F, n, ct,
                                     CUBLAS_GEMM_DEFAULT));
  return 0;
}

int check_args(gkcu_ctx *ctx, int m, int n, int k, const float *a, const float *b, const float *c) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, m >= 1 && n >= 1 && k >= 1);
  GKCU__CHECK_ARG(ctx, a != NULL && b != NULL && c != NULL);
  return 0;
}

const char *const kNames[GKCU_SGEMM_NALGO] = {"auto",   "naive",       "smem",  "regblock",
                                              "cublas", "cublas_tf32", "tf32x3"};

}  // namespace

extern "C" const char *gkcu_sgemm_algo_name(int algo) {
  return (algo >= 0 && algo < GKCU_SGEMM_NALGO) ? kNames[algo] : NULL;
}

extern "C" int gkcu_sgemm_algo_parse(const char *s) {
  if (!s) return GKCU_SGEMM_AUTO;
  for (int i = 0; i < GKCU_SGEMM_NALGO; i++)
    if (strcmp(s, kNames[i]) == 0) return i;
  return -1;
}

/* The auto rule, from the measured tables in bench/RESULTS.md (tf32x3
 * runs, H100, 2026-11-25): tf32x3 (float32-accurate, see gkcu_sgemm_tc.h)
 * wherever it was not measurably slower than cuBLAS FP32 -- squares 256^3
 * to 8192^3 (1.02-1.45x), 64x8192x64 (1.16x), 8192x64x8192 (1.10-1.11x
 * once TF32 rounding took two integer instructions; 0.97-0.99x before),
 * 127x257x511 (1.32-1.38x) -- and cuBLAS FP32 for shapes whose rows cannot
 * take 16-byte copies (one of m, n, k not a multiple of 4) beyond 2^25
 * multiply-adds: the 4-byte copy path was only measured on the small,
 * latency-bound 127x257x511.  regblock is never picked (0.93x at
 * 2048..8192); plain TF32 never implicitly. */
extern "C" int gkcu_sgemm_pick(const gkcu_ctx *ctx, int32_t m, int32_t n, int32_t k) {
  /* On cc 9.0, tf32x3 on wgmma wherever it has a configuration: 1.35-2.0x
   * cuBLAS FP32 on every shape gkcu_wg_choice() takes (gkcu_sgemm_wg.cu),
   * unaligned and n <= 64 ones included. */
  if (ctx && gkcu_wg_choice(ctx->sm_count, m, n, k) >= 0 && gkcu_wg_supported(ctx)) return GKCU_SGEMM_TF32X3;
  if ((m % 4 || n % 4 || k % 4) && (double)m * n * k > 33554432.0) return GKCU_SGEMM_CUBLAS;
  return GKCU_SGEMM_TF32X3;
}

extern "C" int gkcu_sgemm(gkcu_ctx *ctx, int algo, int32_t m, int32_t n, int32_t k, float alpha,
                          const float *a, int trans_a, const float *b, int trans_b, float beta,
                          float *c) {
  int rc = check_args(ctx, m, n, k, a, b, c);
  if (rc != 0) return rc;
  GKCU__CHECK_ARG(ctx, algo >= 0 && algo < GKCU_SGEMM_NALGO);
  if (algo == GKCU_SGEMM_AUTO) algo = gkcu_sgemm_pick(ctx, m, n, k);
  int ta = trans_a != 0, tb = trans_b != 0;
  switch (algo) {
    case GKCU_SGEMM_NAIVE: return run_naive(ctx, m, n, k, alpha, a, ta, b, tb, beta, c);
    case GKCU_SGEMM_SMEM: return run_smem(ctx, m, n, k, alpha, a, ta, b, tb, beta, c);
    case GKCU_SGEMM_REGBLOCK: {
      int tile, splits;
      regblock_choice(ctx->sm_count, m, n, k, &tile, &splits);
      return run_regblock(ctx, tile, splits, m, n, k, alpha, a, ta, b, tb, beta, c);
    }
    case GKCU_SGEMM_CUBLAS: return run_cublas(ctx, false, m, n, k, alpha, a, ta, b, tb, beta, c);
    case GKCU_SGEMM_CUBLAS_TF32: return run_cublas(ctx, true, m, n, k, alpha, a, ta, b, tb, beta, c);
    case GKCU_SGEMM_TF32X3: {
      /* wgmma (cc 9.0) where its lab runs were faster, else mma.sync */
      int wrc = gkcu_wg_sgemm(ctx, -1, m, n, k, alpha, a, ta, b, tb, beta, c);
      if (wrc != GKCU_WG_DECLINED) return wrc;
      return gkcu_lab_sgemm_tf32x3(ctx, -1, 0, m, n, k, alpha, a, ta, b, tb, beta, c);
    }
  }
  return gkcu__fail(ctx, GKC_EINTERNAL, "sgemm: unhandled algo %d", algo);
}

extern "C" const char *gkcu_lab_tile_name(int tile) {
  return (tile >= 0 && tile < GKCU_LAB_TILES) ? kTileNames[tile] : NULL;
}

extern "C" size_t gkcu_lab_tile_blocks(int tile, int32_t m, int32_t n) {
  return (tile >= 0 && tile < GKCU_LAB_TILES && m >= 1 && n >= 1) ? tiles_for(tile, m, n) : 0;
}

extern "C" void gkcu_lab_sgemm_regblock_choice(const gkcu_ctx *ctx, int32_t m, int32_t n, int32_t k,
                                               int *tile, int *splits) {
  regblock_choice(ctx ? ctx->sm_count : 132, m, n, k, tile, splits);
}

extern "C" int gkcu_lab_sgemm_regblock(gkcu_ctx *ctx, int tile, int splits, int32_t m, int32_t n,
                                       int32_t k, float alpha, const float *a, int trans_a,
                                       const float *b, int trans_b, float beta, float *c) {
  int rc = check_args(ctx, m, n, k, a, b, c);
  if (rc != 0) return rc;
  GKCU__CHECK_ARG(ctx, tile >= 0 && tile < GKCU_LAB_TILES);
  GKCU__CHECK_ARG(ctx, splits >= 0 && splits <= 64);
  if (splits == 0) {
    int t;
    regblock_choice(ctx->sm_count, m, n, k, &t, &splits);
  }
  return run_regblock(ctx, tile, splits, m, n, k, alpha, a, trans_a != 0, b, trans_b != 0, beta, c);
}
