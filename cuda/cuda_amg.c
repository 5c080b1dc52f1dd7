/* cuda_amg.c: cuda_amg_build (see cuda_amg.h): the finest level's rho on
 * the GPU (gkcu_amg_rho), the matrix to the host, cpu_amg_setup, the
 * hierarchy described through cpu_amg's accessors (never its structs), the
 * coarsest inverse, gkcu_amg_upload. */
#include "cuda_amg.h"

#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cpu_amg.h"
#include "cpu_hugemem.h"
#include "gkc_errors.h"
#include "log.h"

struct cuda_amg {
  gkcu_amg *dev;
  cuda_amg_mem mem;
  void *ptr;
  size_t cap;
  int levels;
};

/* The process's minor page faults so far (the log's "faults"). */
static long minflt(void) {
  struct rusage u;
  return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : 0;
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* src rounded to float32 into dst, on the OpenMP threads. */
static void round_f32(float *dst, const double *src, size_t n) {
#pragma omp parallel for schedule(static) if (n > ((size_t)1 << 16))
  for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* One float32 array of the description: taken from f (advancing it) and
 * filled from src when f is set; only counted (*need) when it is not. */
static const float *take_f32(float **f, size_t *need, const double *src, size_t n) {
  *need += n;
  if (!*f) return NULL;
  float *p = *f;
  round_f32(p, src, n);
  *f += n;
  return p;
}

/* cpu_amg's hierarchy as gkcu_amg's description: index arrays point into
 * h, values are rounded into f32 (the device stores float32).  With f32
 * NULL, only *need (floats) is counted; the pointers are not to be used. */
static void describe(const cpu_amg *h, gkcu_amg_desc *d, const double *cinv, int lev0, float *f32,
                     size_t *need) {
  memset(d, 0, sizeof *d);
  *need = 0;
  d->nlev = cpu_amg_levels(h);
  for (int l = 0; l < d->nlev; l++) {
    gkcu_amg_level_desc *L = &d->lev[l];
    cpu_amg_csr m;
    cpu_amg_matrix(h, l, CPU_AMG_A, &m);
    /* level 0's values are the resident matrix's own, not uploaded, unless
     * they are float64 (lev0): the cycle reads float32 */
    L->A = (gkcu_amg_csr){m.rows, m.cols, m.nnz, m.row_ptr, m.col_idx,
                          l || lev0 ? take_f32(&f32, need, m.values, (size_t)m.nnz) : NULL};
    if (cpu_amg_matrix(h, l, CPU_AMG_P, &m) == 0)
      L->P = (gkcu_amg_csr){m.rows, m.cols, m.nnz, m.row_ptr, m.col_idx,
                            take_f32(&f32, need, m.values, (size_t)m.nnz)};
    if (cpu_amg_matrix(h, l, CPU_AMG_R, &m) == 0)
      L->R = (gkcu_amg_csr){m.rows, m.cols, m.nnz, m.row_ptr, m.col_idx,
                            take_f32(&f32, need, m.values, (size_t)m.nnz)};
    size_t rows = (size_t)L->A.rows;
    L->dinv = take_f32(&f32, need, cpu_amg_dinv(h, l), rows);
    L->dl1inv = take_f32(&f32, need, cpu_amg_dl1inv(h, l), rows);
    cpu_amg_level_info li;
    cpu_amg_level(h, l, &li);
    L->rho = li.rho;
  }
  cpu_amg_cycle_info ci;
  cpu_amg_cycle(h, &ci);
  d->smoother = ci.smoother == CPU_AMG_SMOOTHER_L1_JACOBI ? GKCU_AMG_L1_JACOBI : GKCU_AMG_CHEBYSHEV;
  d->cheb_degree = ci.cheb_degree;
  d->cheb_ratio = ci.cheb_ratio;
  d->nc = cpu_amg_coarse_rows(h);
  d->coarse_inv = d->nc ? take_f32(&f32, need, cinv, (size_t)d->nc * (size_t)d->nc) : NULL;
}

/* gkcu_amg_upload's copies through a slot's pinned ring (cuda_ring.h). */
typedef struct {
  cuda_ring *ring;
  cudaStream_t stream;
} ring_copy;

static int ring_h2d(void *arg, void *dst, const void *src, size_t n) {
  ring_copy *rc = arg;
  return (int)cuda_ring_h2d(rc->ring, rc->stream, dst, src, n);
}

/* n bytes from the device to the host: through the ring when there is one
 * (chunks copied out on several threads, overlapped with the next chunk's
 * DMA: 141 ms for a 4M-row matrix's 185 MB through the driver's pageable
 * path on an H200 host), else cudaMemcpyAsync (the caller synchronises). */
static cudaError_t get(cuda_ring *ring, cudaStream_t str, void *dst, const void *src, size_t n) {
  if (!n) return cudaSuccess;
  if (ring) return cuda_ring_d2h(ring, str, dst, src, n, NULL);
  return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, str);
}

_Static_assert(GKCU_AMG_MAX_LEVELS == CPU_AMG_MAX_LEVELS, "one level limit");

int cuda_amg_build(gkcu_ctx *ctx, const cuda_amg_mem *mem, int32_t n, int64_t nnz,
                   const int32_t *rp, const int32_t *ci, const void *va, int va_f64, int nthreads,
                   cuda_ring *ring, cuda_amg **out, int32_t *bad_row, char *msg, size_t msglen) {
  *out = NULL;
  *bad_row = -1;
  int rc = 0;
  cudaStream_t str = gkcu_ctx_stream(ctx);
  /* each step's end, for the log line that says where a setup went */
  double t[7] = {mono_ms()}, t_ring = 0;
  long f[7] = {minflt()};
  /* the host copies in huge pages (cpu_hugemem.h): ~1,100 page faults for
   * a 4M-row matrix's 185 MB on the H200 host (the log's second count),
   * where 4 KiB pages would take some 47,000 */
  int32_t *hrp = cpu_hugemem_alloc(((size_t)n + 1) * sizeof *hrp);
  int32_t *hci = cpu_hugemem_alloc((size_t)nnz * sizeof *hci);
  const size_t vsize = va_f64 ? sizeof(double) : sizeof(float);
  void *hva = cpu_hugemem_alloc((size_t)nnz * vsize);
  cpu_amg *h = NULL;
  double *cinv = NULL;
  float *f32 = NULL;
  gkcu_amg *dev = NULL;
  void *ptr = NULL;
  size_t cap = 0;
  cuda_amg *o = NULL;
  if (!hrp || !hci || !hva) {
    snprintf(msg, msglen, "argument 'precond': cannot allocate host memory to set up the AMG"
             " hierarchy of matrix (%" PRId32 " rows, %" PRId64 " entries)", n, nnz);
    rc = GKC_EOUT_OF_MEMORY;
    goto out;
  }
  /* The finest level's rho on the GPU, where the matrix is (15 passes over
   * it: a third of the host setup's time otherwise); without room for its
   * three vectors the host estimates it, as it would anyway. */
  cpu_amg_opts ao = CPU_AMG_OPTS_INIT;
  ao.nthreads = nthreads;
  ao.borrow = 1; /* hrp, hci and hva are kept until h is freed */
  {
    size_t rb = gkcu_amg_rho_work_bytes(n);
    void *rw = NULL;
    size_t rcap = 0;
    char rmsg[128];
    /* (its kernels read float32: a float64 matrix's rho is the host's) */
    if (!va_f64 && rb && mem->alloc(mem->arg, rb, &rw, &rcap, rmsg, sizeof rmsg) == 0) {
      int r = gkcu_amg_rho(ctx, n, rp, ci, va, CPU_AMG_POWER_ITERS, rw, rcap, &ao.rho0);
      mem->release(mem->arg, rw, rcap);
      if (r) {
        snprintf(msg, msglen, "amg: %s", gkcu_ctx_errmsg(ctx));
        rc = r == GKC_EINVALID_ARGUMENT ? GKC_EINTERNAL : GKC_EDEVICE_ERROR;
        goto out;
      }
    }
  }
  t[1] = mono_ms();
  f[1] = minflt();
  /* a slot's ring is made on its first use: timed apart */
  cudaError_t e = ring ? cuda_ring_init(ring) : cudaSuccess;
  t_ring = mono_ms() - t[1];
  /* sub-steps' ends, for the debug line below */
  double u[7] = {mono_ms()};
  if (e == cudaSuccess) e = get(ring, str, hrp, rp, ((size_t)n + 1) * sizeof *hrp);
  u[1] = mono_ms();
  if (e == cudaSuccess) e = get(ring, str, hci, ci, (size_t)nnz * sizeof *hci);
  u[2] = mono_ms();
  if (e == cudaSuccess) e = get(ring, str, hva, va, (size_t)nnz * vsize);
  u[3] = mono_ms();
  if (e == cudaSuccess) e = cudaStreamSynchronize(str);
  if (e != cudaSuccess) {
    snprintf(msg, msglen, "amg: copying the matrix to the host: %s", cudaGetErrorString(e));
    rc = GKC_EDEVICE_ERROR;
    goto out;
  }
  t[2] = mono_ms();
  f[2] = minflt();
  int arc = cpu_amg_setup(n, hrp, hci, hva, va_f64, &ao, &h, bad_row);
  t[3] = mono_ms();
  f[3] = minflt();
  if (arc == CPU_AMG_EEMPTY_ROW) {
    snprintf(msg, msglen, "argument 'precond': amg needs an entry in every row, and row %" PRId32
             " of the matrix is empty", *bad_row);
    rc = GKC_EINVALID_ARGUMENT;
  } else if (arc == CPU_AMG_EZERO_DIAG) {
    snprintf(msg, msglen, "argument 'precond': amg divides by the diagonal, and row %" PRId32
             " of the matrix has a zero (or non-finite) diagonal entry", *bad_row);
    rc = GKC_EINVALID_ARGUMENT;
  } else if (arc == CPU_AMG_ETOO_LARGE) {
    snprintf(msg, msglen, "argument 'precond': a coarse level of the AMG hierarchy would hold over"
             " 2^31 - 1 entries");
    rc = GKC_EOUT_OF_MEMORY;
  } else if (arc) {
    snprintf(msg, msglen, "argument 'precond': cannot allocate the AMG hierarchy of matrix"
             " (%" PRId32 " rows, %" PRId64 " entries) on the host", n, nnz);
    rc = GKC_EOUT_OF_MEMORY;
  }
  if (rc) goto out;
  int32_t nc = cpu_amg_coarse_rows(h);
  if (nc && !(cinv = malloc((size_t)nc * (size_t)nc * sizeof *cinv))) {
    snprintf(msg, msglen, "argument 'precond': cannot allocate the AMG coarsest inverse (%" PRId32
             " rows)", nc);
    rc = GKC_EOUT_OF_MEMORY;
    goto out;
  }
  if (nc) cpu_amg_coarse_inverse(h, cinv);
  t[4] = mono_ms();
  f[4] = minflt();
  gkcu_amg_desc d;
  size_t nf = 0;
  describe(h, &d, cinv, va_f64, NULL, &nf);
  u[4] = mono_ms();
  if (nf > SIZE_MAX / sizeof *f32 || !(f32 = cpu_hugemem_alloc(nf * sizeof *f32))) {
    snprintf(msg, msglen, "argument 'precond': cannot allocate %zu bytes of host memory to upload"
             " the AMG hierarchy", nf * sizeof *f32);
    rc = GKC_EOUT_OF_MEMORY;
    goto out;
  }
  u[5] = mono_ms();
  describe(h, &d, cinv, va_f64, f32, &nf);
  t[5] = mono_ms();
  f[5] = minflt();
  size_t bytes = gkcu_amg_device_bytes(&d);
  if (!bytes) {
    snprintf(msg, msglen, "amg: the hierarchy's device layout overflows");
    rc = GKC_EOUT_OF_MEMORY;
    goto out;
  }
  if ((rc = mem->alloc(mem->arg, bytes, &ptr, &cap, msg, msglen))) {
    size_t at = strlen(msg);
    if (at < msglen)
      snprintf(msg + at, msglen - at, " (argument 'precond': the AMG hierarchy, %zu bytes)", bytes);
    ptr = NULL;
    goto out;
  }
  u[6] = mono_ms();
  ring_copy rcp = {ring, str};
  if ((rc = gkcu_amg_upload(ctx, &d, ring ? ring_h2d : NULL, &rcp, ptr, cap, &dev))) {
    snprintf(msg, msglen, "%s", gkcu_ctx_errmsg(ctx));
    goto out;
  }
  if (!(o = calloc(1, sizeof *o))) {
    snprintf(msg, msglen, "argument 'precond': out of host memory");
    rc = GKC_EOUT_OF_MEMORY;
    goto out;
  }
  o->dev = dev, o->mem = *mem, o->ptr = ptr, o->cap = cap, o->levels = d.nlev;
  *out = o;
  t[6] = mono_ms();
  f[6] = minflt();
  log_info("amg: %d levels for %" PRId32 " rows (%" PRId64 " entries) in %.0f ms: rho on the GPU %.0f,"
           " matrix to the host %.0f (the slot's ring made %.0f), host hierarchy %.0f (level 0 %.0f,"
           " diagonals %.0f, aggregation %.0f, rho %.0f, prolongators %.0f, transposes %.0f, A P"
           " %.0f, R A P %.0f), coarsest inverse %.0f, float32 copies %.0f, upload %.0f; page faults"
           " %ld, %ld, %ld, %ld, %ld, %ld",
           d.nlev, n, nnz, t[6] - t[0], t[1] - t[0], t[2] - t[1], t_ring, t[3] - t[2],
           cpu_amg_step_ms(h, CPU_AMG_T_FINEST), cpu_amg_step_ms(h, CPU_AMG_T_DIAG),
           cpu_amg_step_ms(h, CPU_AMG_T_AGGREGATE), cpu_amg_step_ms(h, CPU_AMG_T_RHO),
           cpu_amg_step_ms(h, CPU_AMG_T_PROLONG), cpu_amg_step_ms(h, CPU_AMG_T_TRANSPOSE),
           cpu_amg_step_ms(h, CPU_AMG_T_AP), cpu_amg_step_ms(h, CPU_AMG_T_RAP),
           t[4] - t[3], t[5] - t[4], t[6] - t[5], f[1] - f[0], f[2] - f[1], f[3] - f[2],
           f[4] - f[3], f[5] - f[4], f[6] - f[5]);
  log_debug("amg: download row pointers %.1f, columns %.1f, values %.1f, wait %.1f ms; float32"
            " count %.1f, allocation %.1f, rounding %.1f; device allocation %.1f, upload %.1f",
            u[1] - u[0], u[2] - u[1], u[3] - u[2], t[2] - u[3], u[4] - t[4], u[5] - u[4],
            t[5] - u[5], u[6] - t[5], t[6] - u[6]);
  dev = NULL, ptr = NULL;
out:
  free(hrp), free(hci), free(hva);
  free(cinv), free(f32);
  cpu_amg_free(h);
  gkcu_amg_free(dev);
  if (ptr) mem->release(mem->arg, ptr, cap);
  return rc;
}

const gkcu_amg *cuda_amg_dev(const cuda_amg *h) { return h->dev; }
int cuda_amg_levels(const cuda_amg *h) { return h->levels; }
int cuda_amg_device(const cuda_amg *h) { return h->mem.device; }
size_t cuda_amg_bytes(const cuda_amg *h) { return h->cap + sizeof *h + sizeof(gkcu_amg_desc); }

void cuda_amg_free(cuda_amg *h) {
  if (!h) return;
  if (cudaSetDevice(h->mem.device) != cudaSuccess) (void)cudaGetLastError();
  gkcu_amg_free(h->dev);
  h->mem.release(h->mem.arg, h->ptr, h->cap);
  free(h);
}
