/* gkcu_amg.cu: gkcu_amg_upload (see gkcu_amg.h): one pass that lays the
 * hierarchy out in the caller's device memory (sizing and carving are the
 * same walk, so they cannot disagree), then the copies, double values
 * rounded to float32 on the host on the way.  And gkcu_amg_rho, the
 * finest level's power iterations for the host's setup. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gkcu_amg.cuh"
#include "gkcu_internal.h"
#include "gkcu_width.h"

namespace {

inline size_t up256(size_t b) { return (b + 255) & ~(size_t)255; }

/* Walks the layout: each piece's offset from the start (at = running
 * total); with base set, the pointers too. */
struct carver {
  char *base;
  size_t at;
  bool overflow;
  int sm_count; /* for the operators' row widths (0 when only sizing) */
  template <typename T>
  T *take(size_t count) {
    size_t b = count * sizeof(T);
    if (count && b / count != sizeof(T)) overflow = true;
    T *p = base ? (T *)(base + at) : nullptr;
    size_t nb = at + up256(b ? b : 1);
    if (nb < at) overflow = true;
    at = nb;
    return p;
  }
};

bool csr_ok(const gkcu_amg_csr *m) {
  return m->rows >= 1 && m->cols >= 1 && m->nnz >= 0 && m->nnz <= INT32_MAX && m->row_ptr &&
         (m->nnz == 0 || (m->col_idx && m->values));
}

bool desc_ok(const gkcu_amg_desc *d) {
  if (!d || d->nlev < 1 || d->nlev > GKCU_AMG_MAX_LEVELS || d->cheb_degree < 1) return false;
  for (int l = 0; l < d->nlev; l++) {
    const gkcu_amg_level_desc *L = &d->lev[l];
    if (L->A.rows < 1 || !L->dinv || !L->dl1inv) return false;
    if (l > 0 && (!csr_ok(&L->A) || L->A.cols != L->A.rows)) return false;
    if (l < d->nlev - 1) {
      int32_t nc = d->lev[l + 1].A.rows;
      if (!csr_ok(&L->P) || !csr_ok(&L->R) || L->P.rows != L->A.rows || L->P.cols != nc ||
          L->R.rows != nc || L->R.cols != L->A.rows)
        return false;
    }
  }
  if (d->coarse_inv && d->nc != d->lev[d->nlev - 1].A.rows) return false;
  return true;
}

void carve_mat(carver &c, gkcu_amg_mat *m, const gkcu_amg_csr *h) {
  m->rows = h->rows, m->cols = h->cols, m->nnz = h->nnz;
  m->rp = c.take<int>((size_t)h->rows + 1);
  m->ci = c.take<int>((size_t)h->nnz);
  m->va = c.take<float>((size_t)h->nnz);
  int32_t mr = 0;
  for (int32_t i = 0; i < h->rows; i++)
    if (h->row_ptr[i + 1] - h->row_ptr[i] > mr) mr = h->row_ptr[i + 1] - h->row_ptr[i];
  m->w = gkcu__row_width(c.sm_count, h->rows, h->nnz, mr);
}

/* The layout of d from base (NULL: sizes only); total bytes in c.at. */
void carve(carver &c, const gkcu_amg_desc *d, gkcu_amg *h) {
  memset(h, 0, sizeof *h);
  h->nlev = d->nlev;
  h->smoother = d->smoother, h->cheb_degree = d->cheb_degree, h->cheb_ratio = d->cheb_ratio;
  for (int l = 0; l < d->nlev; l++) {
    const gkcu_amg_level_desc *D = &d->lev[l];
    gkcu_amg_lev *L = &h->lev[l];
    size_t n = (size_t)D->A.rows;
    L->n = D->A.rows;
    L->rho = D->rho;
    if (l > 0 || D->A.values) carve_mat(c, &L->A, &D->A);
    if (l < d->nlev - 1) carve_mat(c, &L->P, &D->P), carve_mat(c, &L->R, &D->R);
    L->dinv = c.take<float>(n), L->dl1inv = c.take<float>(n);
    if (l > 0) L->b = c.take<float>(n), L->x = c.take<float>(n);
    L->r = c.take<float>(n), L->d = c.take<float>(n), L->dn = c.take<float>(n), L->q = c.take<float>(n);
  }
  if (d->coarse_inv) {
    h->nc = d->nc;
    h->cinv = c.take<float>((size_t)d->nc * (size_t)d->nc);
  }
}

/* The upload's copies, through the caller's h2d or cudaMemcpyAsync. */
struct copier {
  cudaStream_t s;
  gkcu_amg_h2d_fn h2d;
  void *arg;
  cudaError_t put(void *dst, const void *src, size_t n) const {
    if (!n) return cudaSuccess;
    if (h2d) return (cudaError_t)h2d(arg, dst, src, n);
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s);
  }
};

cudaError_t put_mat(const copier &cp, const gkcu_amg_mat *m, const gkcu_amg_csr *h) {
  cudaError_t e = cp.put(m->rp, h->row_ptr, ((size_t)h->rows + 1) * sizeof(int));
  if (e == cudaSuccess) e = cp.put(m->ci, h->col_idx, (size_t)h->nnz * sizeof(int));
  if (e == cudaSuccess) e = cp.put(m->va, h->values, (size_t)h->nnz * sizeof(float));
  return e;
}

}  // namespace

extern "C" size_t gkcu_amg_device_bytes(const gkcu_amg_desc *d) {
  if (!desc_ok(d)) return 0;
  gkcu_amg h;
  carver c = {nullptr, 0, false, 0};
  carve(c, d, &h);
  return c.overflow ? 0 : c.at;
}

extern "C" int gkcu_amg_upload(gkcu_ctx *ctx, const gkcu_amg_desc *d, gkcu_amg_h2d_fn h2d, void *h2d_arg,
                               void *dev, size_t dev_bytes, gkcu_amg **out) {
  GKCU__CHECK_ARG(ctx, out && dev && ((uintptr_t)dev & 255) == 0);
  *out = nullptr;
  size_t need = gkcu_amg_device_bytes(d);
  GKCU__CHECK_ARG(ctx, need > 0 && dev_bytes >= need);
  gkcu_amg *h = (gkcu_amg *)malloc(sizeof *h);
  if (!h) return gkcu__fail(ctx, GKC_EOUT_OF_MEMORY, "amg: out of host memory");
  carver c = {(char *)dev, 0, false, ctx->sm_count};
  carve(c, d, h);
  const copier cp = {ctx->stream, h2d, h2d_arg};
  cudaError_t e = cudaSuccess;
  for (int l = 0; l < d->nlev && e == cudaSuccess; l++) {
    const gkcu_amg_level_desc *D = &d->lev[l];
    gkcu_amg_lev *L = &h->lev[l];
    const size_t n = (size_t)L->n * sizeof(float);
    if (l > 0 || D->A.values) e = put_mat(cp, &L->A, &D->A);
    if (e == cudaSuccess && l < d->nlev - 1) e = put_mat(cp, &L->P, &D->P);
    if (e == cudaSuccess && l < d->nlev - 1) e = put_mat(cp, &L->R, &D->R);
    if (e == cudaSuccess) e = cp.put(L->dinv, D->dinv, n);
    if (e == cudaSuccess) e = cp.put(L->dl1inv, D->dl1inv, n);
  }
  if (e == cudaSuccess && d->coarse_inv)
    e = cp.put(h->cinv, d->coarse_inv, (size_t)d->nc * (size_t)d->nc * sizeof(float));
  if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
  if (e != cudaSuccess) {
    free(h);
    return gkcu__cuda_fail(ctx, e, "amg: copying the hierarchy to the device");
  }
  *out = h;
  return 0;
}

namespace {

constexpr int RT = 256;  /* threads per block */
constexpr int RB = 1024; /* blocks at most: the partial sums */

/* Sums v over the block; thread 0 gets the total. */
__device__ double rho_block_sum(double v) {
  __shared__ double sh[RT / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    v = 0;
    for (int i = 0; i < RT / 32; i++) v += sh[i];
  }
  return v;
}

/* |1 / a_ii| (0 where the diagonal is zero or not finite), the start u =
 * S x (S = |D|^-1/2, x cpu_amg.c's fixed pseudo-random vector) and the
 * blocks' parts of x.x. */
__global__ void __launch_bounds__(RT) k_rho_start(int n, const int *__restrict__ rp,
                                                  const int *__restrict__ ci,
                                                  const float *__restrict__ va, double *dabs,
                                                  double *u, double *part) {
  double s = 0;
  for (int i = blockIdx.x * RT + threadIdx.x; i < n; i += gridDim.x * RT) {
    double d = 0;
    for (int j = rp[i]; j < rp[i + 1]; j++)
      if (ci[j] == i) d += (double)va[j];
    const double da = d == 0 || !isfinite(d) ? 0.0 : fabs(1.0 / d);
    /* cpu_amg.c's start, bit for bit: values in [0.5, 1.5), the signs
     * mixed (a one-signed start is nearly orthogonal to the oscillating
     * top eigenvector of an M-matrix and approaches rho slowly) */
    const unsigned hsh = (unsigned)i * 2654435761u;
    const double x = ((double)(hsh >> 8) / 16777216.0 + 0.5) * (hsh & 0x80u ? -1.0 : 1.0);
    dabs[i] = da;
    u[i] = x * sqrt(da);
    s += x * x;
  }
  s = rho_block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* y = A u; the blocks' parts of sum |dinv| y^2 (= ||S A S x||^2). */
__global__ void __launch_bounds__(RT) k_rho_apply(int n, const int *__restrict__ rp,
                                                  const int *__restrict__ ci,
                                                  const float *__restrict__ va,
                                                  const double *__restrict__ dabs,
                                                  const double *__restrict__ u, double *y,
                                                  double *part) {
  double s = 0;
  for (int i = blockIdx.x * RT + threadIdx.x; i < n; i += gridDim.x * RT) {
    double yi = 0;
    for (int j = rp[i]; j < rp[i + 1]; j++) yi = fma((double)va[j], u[ci[j]], yi);
    y[i] = yi;
    s += dabs[i] * yi * yi;
  }
  s = rho_block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* The next u = |dinv| y / ||S y||. */
__global__ void k_rho_scale(int n, const double *__restrict__ dabs, const double *__restrict__ y,
                            double *u, double sc) {
  for (int i = blockIdx.x * RT + threadIdx.x; i < n; i += gridDim.x * RT) u[i] = dabs[i] * y[i] * sc;
}

/* The blocks' parts, summed in block order on the host. */
int sum_parts(gkcu_ctx *ctx, const double *part, int g, double *host, double *out) {
  GKCU__TRY_CUDA(ctx, cudaMemcpyAsync(host, part, (size_t)g * sizeof(double),
                                      cudaMemcpyDeviceToHost, ctx->stream));
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  double s = 0;
  for (int i = 0; i < g; i++) s += host[i];
  *out = s;
  return 0;
}

}  // namespace

extern "C" size_t gkcu_amg_rho_work_bytes(int32_t n) {
  if (n < 1) return 0;
  return 3 * up256((size_t)n * sizeof(double)) + up256(RB * sizeof(double));
}

extern "C" int gkcu_amg_rho(gkcu_ctx *ctx, int32_t n, const int32_t *rp, const int32_t *ci,
                            const float *va, int iters, void *work, size_t work_bytes,
                            double *rho) {
  GKCU__CHECK_ARG(ctx, n >= 1 && rp && ci && va && rho && iters >= 0 && work &&
                           ((uintptr_t)work & 255) == 0 &&
                           work_bytes >= gkcu_amg_rho_work_bytes(n));
  const size_t vb = up256((size_t)n * sizeof(double));
  double *dabs = (double *)work, *u = (double *)((char *)work + vb),
         *y = (double *)((char *)work + 2 * vb), *part = (double *)((char *)work + 3 * vb);
  const int sms = ctx->sm_count > 0 ? ctx->sm_count : 1;
  long long g = ((long long)n + RT - 1) / RT;
  if (g > (long long)sms * 8) g = (long long)sms * 8;
  if (g > RB) g = RB;
  double host[RB], xx = 0, yy = 0, ratio = 0;
  cudaStream_t s = ctx->stream;
  k_rho_start<<<(int)g, RT, 0, s>>>(n, rp, ci, va, dabs, u, part);
  GKCU__LAUNCHED(ctx, "k_rho_start");
  int rc = sum_parts(ctx, part, (int)g, host, &xx);
  if (rc) return rc;
  for (int it = 0; it < iters; it++) {
    k_rho_apply<<<(int)g, RT, 0, s>>>(n, rp, ci, va, dabs, u, y, part);
    GKCU__LAUNCHED(ctx, "k_rho_apply");
    if ((rc = sum_parts(ctx, part, (int)g, host, &yy))) return rc;
    if (xx == 0 || yy == 0 || !isfinite(yy)) break;
    ratio = sqrt(yy / xx);
    k_rho_scale<<<(int)g, RT, 0, s>>>(n, dabs, y, u, 1 / sqrt(yy));
    GKCU__LAUNCHED(ctx, "k_rho_scale");
    xx = 1;
  }
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(s)); /* the work is the caller's again */
  *rho = ratio;
  return 0;
}

extern "C" int gkcu_amg_levels(const gkcu_amg *h) { return h->nlev; }
extern "C" int32_t gkcu_amg_rows(const gkcu_amg *h) { return h->lev[0].n; }

extern "C" const float *gkcu_amg_level0_values(const gkcu_amg *h) { return h->lev[0].A.va; }
extern "C" void gkcu_amg_free(gkcu_amg *h) { free(h); }
