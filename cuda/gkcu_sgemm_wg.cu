/* gkcu_sgemm_wg.cu: tf32x3 with wgmma and the bulk tensor copy engine
 * (sm_90a only; see gkcu_sgemm_wg.h for the design).
 *
 * Shared memory of one stage, each tile BK = 32 floats (128 bytes) wide,
 * rows K-contiguous, written by TMA with the 128-byte swizzle (the 16-byte
 * chunks of row r XOR-ed with r % 8), which is the canonical K-major
 * layout wgmma reads through a descriptor with an 8-row group stride of
 * 1024 bytes:
 *
 *   A hi [BM][32] | A lo [BM][32] | B hi [BN][32] | B lo [BN][32]
 *
 * (RA configurations: one A tile, A as stored, split by the consumers.)
 *
 * Each tile starts on a 1024-byte boundary (a swizzle atom), so a k8 step
 * inside the stage is the descriptor's start address + 32 bytes.
 *
 * Pipeline: full[s] (count 1: the producer's expect_tx, then the copy
 * engine's bytes) says stage s holds data; empty[s] (count 4 per consumer
 * warpgroup: each warp once its products of the stage are done) says it
 * may be overwritten.  The producer waits empty with the parity one phase
 * behind, so its first pass through the ring does not wait.
 */
#include <stdint.h>

#include <cuda.h> /* CUtensorMap and its enums (types only: the encoder comes from the runtime) */

#include "gkcu_internal.h"
#include "gkcu_sgemm_wg.h"
#include "gkcu_wgmma.cuh" /* the PTX wrappers */

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gkcu_sgemm_wg.cu is built for sm_90a only (cuda/CMakeLists.txt)"
#endif

namespace {

constexpr int BK = 32; /* floats per stage row: one 128-byte swizzle span */

/* --- the split pre-pass ------------------------------------------------------------- */

/* hi, lo: rows x kp, row-major, from element (r, p) of the source, which
 * is src[r * ld + p] (T false) or src[p * ld + r] (T true); columns k..kp-1
 * are zero.  32 x 32 tiles, the transposed case through shared memory so
 * that reads and writes are both coalesced; blocks of 32 x 8 threads loop
 * over the tiles. */
template <bool T, bool RAW>
__global__ void __launch_bounds__(256) wg_split_kernel(int rows, int k, int kp, const float *__restrict__ src,
                                                       size_t ld, float *__restrict__ hi, float *__restrict__ lo) {
  __shared__ float tile[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long tiles_k = (kp + 31) / 32, tiles = (long long)((rows + 31) / 32) * tiles_k;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int r0 = (int)(t / tiles_k) * 32, p0 = (int)(t % tiles_k) * 32;
    if (T) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int p = p0 + ty + 8 * i, r = r0 + tx;
        tile[ty + 8 * i][tx] = (p < k && r < rows) ? src[(size_t)p * ld + r] : 0.0f;
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int r = r0 + ty + 8 * i, p = p0 + tx;
      if (r >= rows || p >= kp) continue;
      float x;
      if (T)
        x = tile[tx][ty + 8 * i];
      else
        x = p < k ? src[(size_t)r * ld + p] : 0.0f;
      if (RAW) { /* the copy alone (RA configurations split in registers) */
        hi[(size_t)r * kp + p] = x;
        continue;
      }
      float h, l;
      split_tf32(x, h, l);
      hi[(size_t)r * kp + p] = h;
      lo[(size_t)r * kp + p] = l;
    }
    if (T) __syncthreads(); /* the tile is free for the next one */
  }
}

/* --- the product --------------------------------------------------------------------- */

/* How the group sums are added up in float32. */
enum { SUM_PLAIN, SUM_KAHAN, SUM_TWO_LEVEL };

template <int BN_, int WGS_, int ST_, int KG_, bool DB_, int SUM_, bool PP_, bool RA_>
struct WgCfg {
  /* RA: A comes as stored (float32, one tile) and is split into hi and lo
   * in registers, wgmma taking A from registers; no pre-pass over A */
  static constexpr bool RA = RA_;
  static constexpr int A_TILES = RA ? 1 : 2;
  static constexpr bool PP = PP_; /* the two consumer warpgroups take turns issuing */
  static constexpr int SUM = SUM_; /* SUM_PLAIN, SUM_KAHAN or SUM_TWO_LEVEL */
  static constexpr int BN = BN_, WGS = WGS_, ST = ST_;
  static constexpr int KG = KG_;       /* k8 steps per group summed from zero by the tensor core */
  static constexpr int G = BK / 8 / KG; /* groups per stage */
  static constexpr bool DB = DB_;      /* two group sums in flight (registers permitting) */
  static constexpr int BM = 64 * WGS;
  static constexpr int NCH = BN > 128 ? BN / 128 : 1; /* column chunks, one product batch each */
  static constexpr int CN = BN / NCH;                 /* 64 or 128 */
  static constexpr int A_BYTES = BM * BK * 4;         /* one of hi, lo */
  static constexpr int B_BYTES = BN * BK * 4;
  static constexpr int STAGE = A_TILES * A_BYTES + 2 * B_BYTES;
  static constexpr int NT = 128 * (WGS + 1); /* consumers, then the producer warpgroup */
  /* stages, 1024 bytes of alignment slack, the barriers */
  static constexpr size_t SMEM = (size_t)ST * STAGE + 1024 + 2 * ST * sizeof(uint64_t);
  static_assert(CN == 64 || CN == 128, "chunk width");
  static_assert(KG == 1 || KG == 2 || KG == 4, "group of 8, 16 or 32 k");
  static_assert(!DB || (NCH == 1 && G % 2 == 0), "double buffering: one chunk, an even number of groups");
  static_assert(!PP || (WGS == 2 && !DB), "turns: two consumer warpgroups, one group sum at a time");
  static_assert(SMEM <= 227 * 1024, "shared memory");
};

template <class C>
__global__ void __launch_bounds__(C::NT, 1)
    sgemm_wg_kernel(const __grid_constant__ CUtensorMap map_ahi, const __grid_constant__ CUtensorMap map_alo,
                    const __grid_constant__ CUtensorMap map_bhi, const __grid_constant__ CUtensorMap map_blo, int m,
                    int n, int kp, float alpha, float beta, float *__restrict__ c, int tiles_m, int tiles_n) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023u)) & 1023u);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + (size_t)C::ST * C::STAGE);
  uint64_t *empty = full + C::ST;
  const int tid = threadIdx.x, wg = tid / 128;

  if (tid == 0) {
    for (int s = 0; s < C::ST; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 4 * C::WGS);
    }
    /* make the initialised barriers visible to the copy engine */
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

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
  const int ktiles = (kp + BK - 1) / BK;

  if (wg == C::WGS) { /* producer */
    if (C::WGS == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == C::WGS * 128) {
      for (int it = 0; it < ktiles; it++) {
        const int slot = it % C::ST;
        mbar_wait(&empty[slot], ((it / C::ST) & 1) ^ 1);
        mbar_expect_tx(&full[slot], C::STAGE);
        uint8_t *s = smem + (size_t)slot * C::STAGE;
        const int k0 = it * BK;
        tma_load(s, &map_ahi, &full[slot], k0, m0);
        if (!C::RA) tma_load(s + C::A_BYTES, &map_alo, &full[slot], k0, m0);
        tma_load(s + C::A_TILES * C::A_BYTES, &map_bhi, &full[slot], k0, n0);
        tma_load(s + C::A_TILES * C::A_BYTES + C::B_BYTES, &map_blo, &full[slot], k0, n0);
      }
    }
    return;
  }

  /* consumers: warpgroup wg multiplies rows wg*64 .. wg*64+63 of the tile */
  if (C::WGS == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int lane = tid & 31;
  /* acc: the running sums.  SUM_KAHAN: aux holds the compensation (the
   * low-order part acc lost, negated); SUM_TWO_LEVEL: acc sums the groups
   * of ~sqrt(stages) stages, aux those partial sums (fewer additions in
   * a row onto one large sum). */
  constexpr int NAUX = C::SUM == SUM_PLAIN ? 1 : C::NCH;
  float acc[C::NCH][C::CN / 2], aux[NAUX][C::CN / 2];
#pragma unroll
  for (int ch = 0; ch < C::NCH; ch++)
#pragma unroll
    for (int i = 0; i < C::CN / 2; i++) acc[ch][i] = 0.0f;
#pragma unroll
  for (int ch = 0; ch < NAUX; ch++)
#pragma unroll
    for (int i = 0; i < C::CN / 2; i++) aux[ch][i] = 0.0f;

  /* The 3 KG products of one group, into d (overwritten by the first). */
  auto group = [&](float *d, uint32_t a_hi, uint32_t a_lo, uint32_t b_hi, uint32_t b_lo, int j) {
    if constexpr (C::RA) {
      /* A fragment of m64k8 (as mma.sync's m16n8k8 per warp): element e
       * is row g + 8 (e & 1), column q + 4 (e >> 1) of the warp's 16 rows;
       * in the swizzled tile, 16-byte chunk (column / 4) ^ (row % 8). */
      (void)a_lo;
      const int g = lane >> 2, q = lane & 3, rw = (tid / 32 & 3) * 16;
      uint32_t ah[C::KG][4], al[C::KG][4];
#pragma unroll
      for (int f = 0; f < C::KG; f++) {
        const int kk = j * C::KG + f;
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = rw + g + 8 * (e & 1);
          const float x = lds_f32(a_hi + r * 128 + (((2 * kk + (e >> 1)) ^ g) << 4) + q * 4);
          float h, l;
          split_tf32(x, h, l);
          ah[f][e] = __float_as_uint(h);
          al[f][e] = __float_as_uint(l);
        }
      }
      wg_fence(); /* the A registers were written by ordinary instructions */
#pragma unroll
      for (int f = 0; f < C::KG; f++) {
        const uint32_t o = (j * C::KG + f) * 32;
        wgmma_rs<C::CN>(d, al[f], sdesc(b_hi + o), f != 0);
        wgmma_rs<C::CN>(d, ah[f], sdesc(b_lo + o), 1);
        wgmma_rs<C::CN>(d, ah[f], sdesc(b_hi + o), 1);
      }
      wg_commit();
      return;
    }
    wg_fence();
#pragma unroll
    for (int f = 0; f < C::KG; f++) {
      const uint32_t o = (j * C::KG + f) * 32; /* k8 step: 32 bytes along the swizzled row */
      wgmma_n<C::CN>(d, sdesc(a_lo + o), sdesc(b_hi + o), f != 0); /* the small terms first */
      wgmma_n<C::CN>(d, sdesc(a_hi + o), sdesc(b_lo + o), 1);
      wgmma_n<C::CN>(d, sdesc(a_hi + o), sdesc(b_hi + o), 1);
    }
    wg_commit();
  };
  auto add = [&](int ch, float *d) {
#pragma unroll
    for (int i = 0; i < C::CN / 2; i++) reg_fence(d[i]);
#pragma unroll
    for (int i = 0; i < C::CN / 2; i++) {
      if constexpr (C::SUM == SUM_KAHAN) {
        const float y = d[i] - aux[ch][i], t = acc[ch][i] + y;
        aux[ch][i] = (t - acc[ch][i]) - y;
        acc[ch][i] = t;
      } else {
        acc[ch][i] += d[i];
      }
    }
  };
  /* SUM_TWO_LEVEL: after every F-th stage, acc moves into aux; F ~
   * sqrt(stages) balances the two chains of additions. */
  int flush_every = 4, since_flush = 0;
  while (flush_every * flush_every < ktiles) flush_every *= 2;
  if (flush_every > 4) flush_every /= 2;
  auto flush = [&](int it) {
    if constexpr (C::SUM == SUM_TWO_LEVEL) {
      if (++since_flush == flush_every || it == ktiles - 1) {
        since_flush = 0;
#pragma unroll
        for (int ch = 0; ch < C::NCH; ch++)
#pragma unroll
          for (int i = 0; i < C::CN / 2; i++) {
            aux[ch][i] += acc[ch][i];
            acc[ch][i] = 0.0f;
          }
      }
    }
  };

  if constexpr (C::DB) {
    /* Group j of a stage goes into sum[j % 2] while group j-1's sum (the
     * other one) is added to acc, so the tensor core works through the
     * float32 additions; the stage ends with every group in (a group left
     * in flight across the loop's back edge made ptxas serialise the
     * products, warning C7514). */
    for (int it = 0; it < ktiles; it++) {
      const int slot = it % C::ST;
      mbar_wait(&full[slot], (it / C::ST) & 1);
      const uint32_t base = smem_u32(smem + (size_t)slot * C::STAGE);
      const uint32_t a_hi = base + wg * 64 * 128, a_lo = a_hi + C::A_BYTES;
      const uint32_t b_hi = base + C::A_TILES * C::A_BYTES, b_lo = b_hi + C::B_BYTES;
      float s0[C::CN / 2], s1[C::CN / 2];
#pragma unroll
      for (int j = 0; j < C::G; j++) {
        float *cur = j % 2 == 0 ? s0 : s1, *prv = j % 2 == 0 ? s1 : s0;
        group(cur, a_hi, a_lo, b_hi, b_lo, j);
        if (j > 0) {
          wg_wait<1>(); /* the group before this one is in */
          add(0, prv);
        }
      }
      wg_wait<0>();
      if (lane == 0) mbar_arrive(&empty[slot]);
      add(0, s1); /* G is even: the last group went into s1 */
      flush(it);
    }
  } else {
    for (int it = 0; it < ktiles; it++) {
      const int slot = it % C::ST;
      mbar_wait(&full[slot], (it / C::ST) & 1);
      const uint32_t base = smem_u32(smem + (size_t)slot * C::STAGE);
      const uint32_t a_hi = base + wg * 64 * 128, a_lo = a_hi + C::A_BYTES;
      const uint32_t b_hi = base + C::A_TILES * C::A_BYTES, b_lo = b_hi + C::B_BYTES;
#pragma unroll
      for (int ch = 0; ch < C::NCH; ch++)
#pragma unroll
        for (int j = 0; j < C::G; j++) {
          float sum[C::CN / 2];
          const uint32_t bo = ch * C::CN * 128;
          /* With turns, warpgroup 0 issues a group, then 1, then 0 ...:
           * the tensor core runs them in that order, so one warpgroup's
           * float32 additions overlap the other's products instead of
           * both waiting and adding at once. */
          const bool first = it == 0 && ch == 0 && j == 0;
          const bool last = it == ktiles - 1 && ch == C::NCH - 1 && j == C::G - 1;
          if (C::PP && wg == 0 && !first) bar_sync(2, 256);
          if (C::PP && wg == 1) bar_sync(1, 256);
          group(sum, a_hi, a_lo, b_hi + bo, b_lo + bo, j);
          if (C::PP && wg == 0) bar_arrive(1, 256);
          if (C::PP && wg == 1 && !last) bar_arrive(2, 256);
          wg_wait<0>();
          if (ch == C::NCH - 1 && j == C::G - 1 && lane == 0) mbar_arrive(&empty[slot]);
          add(ch, sum);
        }
      flush(it);
    }
  }

  /* Epilogue.  Accumulator layout of m64nN: warp w of the warpgroup holds
   * rows 16w..16w+15; register 4j+2h+e is row g + 8h, column 8j + 2q + e
   * (g = lane / 4, q = lane % 4). */
  const int w = (tid / 32) & 3, g = lane >> 2, q = lane & 3;
  const bool pair = (n % 2 == 0) && (((uintptr_t)c & 7u) == 0);
  if constexpr (C::SUM != SUM_PLAIN) {
#pragma unroll
    for (int ch = 0; ch < C::NCH; ch++)
#pragma unroll
      for (int i = 0; i < C::CN / 2; i++)
        acc[ch][i] = C::SUM == SUM_KAHAN ? acc[ch][i] - aux[ch][i] : aux[ch][i];
  }
#pragma unroll
  for (int ch = 0; ch < C::NCH; ch++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = m0 + wg * 64 + w * 16 + g + 8 * h;
      if (row >= m) continue;
#pragma unroll
      for (int j = 0; j < C::CN / 8; j++) {
        const int col = n0 + ch * C::CN + 8 * j + 2 * q;
        if (col >= n) continue;
        float *o = c + (size_t)row * n + col;
        float v0 = alpha * acc[ch][4 * j + 2 * h], v1 = alpha * acc[ch][4 * j + 2 * h + 1];
        if (pair) { /* col + 1 < n too: n is even and col is */
          if (beta != 0.0f) {
            float2 old = *reinterpret_cast<const float2 *>(o);
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
          }
          *reinterpret_cast<float2 *>(o) = make_float2(v0, v1);
        } else {
          o[0] = beta != 0.0f ? fmaf(beta, o[0], v0) : v0;
          if (col + 1 < n) o[1] = beta != 0.0f ? fmaf(beta, o[1], v1) : v1;
        }
      }
    }
}

/* --- configurations ------------------------------------------------------------------ */

/* X(index, name, BN, consumer warpgroups, stages, KG, DB, SUM, PP, RA):
 * block tile, stages, group of 8 KG k values, how group sums are added
 * (/kahan, /2lvl), /pp the consumer warpgroups take turns, /ra A split in
 * registers; 192 KB of stages each.  0-2 are gkcu_wg_choice()'s; 3-5 lab
 * rows (bench/RESULTS.md, "tf32x3 on wgmma"). */
#define GKCU__WG_CFGS(X)                                                                 \
  X(0, "128x128/2wg/s3/g32/kahan/pp", 128, 2, 3, 4, false, SUM_KAHAN, true, false)       \
  X(1, "128x64/2wg/s4/g32/kahan/pp", 64, 2, 4, 4, false, SUM_KAHAN, true, false)         \
  X(2, "64x64/1wg/s8/g32/kahan/ra", 64, 1, 8, 4, false, SUM_KAHAN, false, true)          \
  X(3, "128x128/2wg/s3/g32/2lvl/pp", 128, 2, 3, 4, false, SUM_TWO_LEVEL, true, false)    \
  X(4, "64x64/1wg/s8/g32/2lvl/ra", 64, 1, 8, 4, false, SUM_TWO_LEVEL, false, true)       \
  X(5, "128x128/2wg/s4/g32/kahan/pp/ra", 128, 2, 4, 4, false, SUM_KAHAN, true, true)

struct CfgInfo {
  const char *name;
  int bm, bn;
  bool ra; /* A split in registers */
};
#define GKCU__WG_INFO(idx, name, BN, WGS, ST, KG, DB, SUM, PP, RA) {name, 64 * WGS, BN, RA},
const CfgInfo kCfgs[GKCU_WG_CFGS] = {GKCU__WG_CFGS(GKCU__WG_INFO)};
#undef GKCU__WG_INFO

typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled, looked up once (NULL: not there). */
EncodeTiledFn encoder(void) {
  static EncodeTiledFn fn;
  static int looked; /* 0: not yet, 1: done */
  if (__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) return fn;
  void *p = NULL;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    p = NULL;
  }
  fn = (EncodeTiledFn)p; /* benign race: every thread stores the same value */
  __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
  return fn;
}

/* rows x kp floats, row-major, boxes of box_rows x 32, 128-byte swizzle. */
int make_map(gkcu_ctx *ctx, EncodeTiledFn enc, CUtensorMap *map, float *base, int rows, int kp, int box_rows) {
  cuuint64_t dims[2] = {(cuuint64_t)kp, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)kp * sizeof(float)};
  cuuint32_t box[2] = {(cuuint32_t)BK, (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, estr,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return gkcu__fail(ctx, GKC_EINTERNAL, "cuTensorMapEncodeTiled failed (%d)", (int)r);
  return 0;
}

struct Maps {
  CUtensorMap ahi, alo, bhi, blo;
};

template <class C>
cudaError_t launch_t(gkcu_ctx *ctx, const Maps &mp, int m, int n, int kp, float alpha, float beta, float *c) {
  const int tiles_m = (int)gkcu__div_up(m, C::BM), tiles_n = (int)gkcu__div_up(n, C::BN);
  const size_t tiles = (size_t)tiles_m * tiles_n;
  if (tiles > 0x7fffffffu) return cudaErrorInvalidConfiguration;
  auto kern = sgemm_wg_kernel<C>;
  /* Once per device: the attribute stays set for the process. */
  static unsigned long long done; /* bit d: set on device d (d < 64) */
  unsigned long long bit = ctx->device < 64 ? 1ull << ctx->device : 0;
  if (!bit || !(__atomic_load_n(&done, __ATOMIC_ACQUIRE) & bit)) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
    if (e != cudaSuccess) return e;
    __atomic_fetch_or(&done, bit, __ATOMIC_ACQ_REL);
  }
  kern<<<(unsigned int)tiles, C::NT, C::SMEM, ctx->stream>>>(mp.ahi, mp.alo, mp.bhi, mp.blo, m, n, kp, alpha, beta,
                                                             c, tiles_m, tiles_n);
  return cudaGetLastError();
}

cudaError_t launch_any(gkcu_ctx *ctx, int cfg, const Maps &mp, int m, int n, int kp, float alpha, float beta,
                       float *c) {
  switch (cfg) {
#define GKCU__WG_CASE(idx, name, BN, WGS, ST, KG, DB, SUM, PP, RA) \
  case idx: return launch_t<WgCfg<BN, WGS, ST, KG, DB, SUM, PP, RA>>(ctx, mp, m, n, kp, alpha, beta, c);
    GKCU__WG_CFGS(GKCU__WG_CASE)
#undef GKCU__WG_CASE
  }
  return cudaErrorInvalidValue;
}

/* Scratch for the split operands: 8 (m + n) kp bytes; beyond this the
 * path declines rather than hold that much device memory. */
constexpr double kMaxScratch = 4.0 * (1ull << 30);

int split(gkcu_ctx *ctx, bool trans, bool raw, int rows, int k, int kp, const float *src, size_t ld, float *hi,
          float *lo) {
  const size_t tiles = (size_t)gkcu__div_up(rows, 32) * gkcu__div_up(kp, 32);
  size_t blocks = (size_t)ctx->sm_count * 8;
  if (blocks > tiles) blocks = tiles;
  dim3 blk(32, 8);
  auto kern = trans ? (raw ? wg_split_kernel<true, true> : wg_split_kernel<true, false>)
                    : (raw ? wg_split_kernel<false, true> : wg_split_kernel<false, false>);
  kern<<<(unsigned int)blocks, blk, 0, ctx->stream>>>(rows, k, kp, src, ld, hi, lo);
  GKCU__LAUNCHED(ctx, "wg_split_kernel");
  return 0;
}

}  // namespace

extern "C" const char *gkcu_wg_cfg_name(int cfg) {
  return cfg >= 0 && cfg < GKCU_WG_CFGS ? kCfgs[cfg].name : NULL;
}

extern "C" int gkcu_wg_supported(const gkcu_ctx *ctx) {
  /* per device: 0 unknown, 1 yes, 2 no */
  static int known[64];
  if (!ctx) return 0;
  int d = ctx->device;
  if (d >= 0 && d < 64) {
    int v = __atomic_load_n(&known[d], __ATOMIC_ACQUIRE);
    if (v) return v == 1;
  }
  int major = 0, minor = 0;
  bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) == cudaSuccess;
  if (!ok) (void)cudaGetLastError();
  /* sm_90a machine code runs on compute capability 9.0 and nothing else */
  ok = ok && major == 9 && minor == 0 && encoder() != NULL;
  if (d >= 0 && d < 64) __atomic_store_n(&known[d], ok ? 1 : 2, __ATOMIC_RELEASE);
  return ok;
}

/* From the lab runs of 2026-11-25 (H100, 132 SMs; bench/RESULTS.md,
 * "tf32x3 on wgmma"), x = cuBLAS FP32 time / this time:
 *   - 128x128 tiles once they give every SM one: 4096^3 2.00, 8192^3 2.00,
 *     2048^3 1.87, 2048x8192x1024 1.79, 4095x4097x4099 1.38 (before rows
 *     were padded to 128 bytes);
 *   - else 128x64 tiles when they give ~every SM one: 1024^3 1.48 (mma.sync
 *     1.15);
 *   - n <= 64 with long k and rows for half the SMs: 64x64 tiles with A
 *     split in registers: 8192x64x8192 1.35 (cuBLAS FP32 was faster than
 *     every mma.sync configuration there);
 *   - nothing smaller: 512^3 0.95 at best (mma.sync 1.01), 256^3 0.91,
 *     64x8192x64 0.78, 127x257x511 0.57. */
extern "C" int gkcu_wg_choice(int sms, int32_t m, int32_t n, int32_t k) {
  if (m < 1 || n < 1 || k < 512) return -1;
  const size_t t128 = (size_t)gkcu__div_up(m, 128) * gkcu__div_up(n, 128);
  const size_t t64 = (size_t)gkcu__div_up(m, 128) * gkcu__div_up(n, 64);
  if (n <= 64) return k >= 2048 && (size_t)gkcu__div_up(m, 64) * 2 >= (size_t)sms ? 2 : -1;
  if (t128 >= (size_t)sms) return 0;
  if (t64 * 10 >= (size_t)sms * 9) return 1;
  return -1;
}

extern "C" int gkcu_wg_sgemm(gkcu_ctx *ctx, int cfg, int32_t m, int32_t n, int32_t k, float alpha, const float *a,
                             int trans_a, const float *b, int trans_b, float beta, float *c) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, m >= 1 && n >= 1 && k >= 1);
  GKCU__CHECK_ARG(ctx, a != NULL && b != NULL && c != NULL);
  GKCU__CHECK_ARG(ctx, cfg >= -1 && cfg < GKCU_WG_CFGS);
  if (cfg < 0) cfg = gkcu_wg_choice(ctx->sm_count, m, n, k);
  if (cfg < 0 || !gkcu_wg_supported(ctx)) return GKCU_WG_DECLINED;
  /* k padded to whole 128-byte rows (the copy engine was 1.5x slower on
   * rows off 128-byte boundaries: 4095x4097x4099); k0 < kp stays an int */
  const int64_t kp = ((int64_t)k + BK - 1) / BK * BK;
  if (kp > 0x7fffffff) return GKCU_WG_DECLINED;
  /* RA configurations read A in place when the copy engine can (row-major
   * m x k, k a multiple of 4, 16-byte aligned), else from a plain copy. */
  const bool ra = kCfgs[cfg].ra;
  const bool a_direct = ra && !trans_a && k % BK == 0 && ((uintptr_t)a & 15u) == 0;
  const int a_parts = a_direct ? 0 : ra ? 1 : 2;
  const double need = 4.0 * ((double)a_parts * m + 2.0 * n) * (double)kp;
  if (need > kMaxScratch) return GKCU_WG_DECLINED;
  float *ahi = NULL, *alo = NULL, *bhi, *blo;
  gkcu__carve cv = {};
  if (a_parts >= 1) gkcu__carve_add(&cv, (size_t)m * kp * sizeof(float), (void **)&ahi);
  if (a_parts == 2) gkcu__carve_add(&cv, (size_t)m * kp * sizeof(float), (void **)&alo);
  gkcu__carve_add(&cv, (size_t)n * kp * sizeof(float), (void **)&bhi);
  gkcu__carve_add(&cv, (size_t)n * kp * sizeof(float), (void **)&blo);
  int rc = gkcu__carve_commit(ctx, &cv);
  if (rc == GKC_EOUT_OF_MEMORY) { /* no room: the mma.sync kernels need none */
    (void)cudaGetLastError();
    ctx->msg[0] = '\0';
    return GKCU_WG_DECLINED;
  }
  if (rc != 0) return rc;
  if (a_direct) ahi = const_cast<float *>(a);
  if (!alo) alo = ahi; /* a valid map the RA kernel never reads */
  Maps mp;
  EncodeTiledFn enc = encoder();
  const int bm = kCfgs[cfg].bm, bn = kCfgs[cfg].bn;
  if ((rc = make_map(ctx, enc, &mp.ahi, ahi, m, (int)kp, bm)) || (rc = make_map(ctx, enc, &mp.alo, alo, m, (int)kp, bm)) ||
      (rc = make_map(ctx, enc, &mp.bhi, bhi, n, (int)kp, bn)) || (rc = make_map(ctx, enc, &mp.blo, blo, n, (int)kp, bn)))
    return rc;
  /* A: m x k as stored (lda k), or stored k x m (lda m).  B wanted n x k:
   * stored k x n is the transposing case (ldb n), stored n x k is not. */
  if (!a_direct &&
      (rc = split(ctx, trans_a != 0, ra, m, k, (int)kp, a, trans_a ? (size_t)m : (size_t)k, ahi, alo)))
    return rc;
  if ((rc = split(ctx, trans_b == 0, false, n, k, (int)kp, b, trans_b ? (size_t)k : (size_t)n, bhi, blo))) return rc;
  cudaError_t e = launch_any(ctx, cfg, mp, m, n, (int)kp, alpha, beta, c);
  if (e != cudaSuccess) return gkcu__cuda_fail(ctx, e, "launch sgemm_wg_kernel");
  return 0;
}
