/* cuda_part.c: a partitioned matrix's primitives (backend.h,
 * gkcd_part_ops) on one CUDA device: each call takes one of the device's
 * bulk-lane streams (so a part of a split GPU stays on its own SMs), runs
 * its copy or kernel there (gkcu_part.h), waits for it and gives the stream
 * back.  A partitioned solve calls them from its fan (daemon/fan.h): each
 * device's from its own thread, all at once.
 *
 * A sticky error loses the GPU like any other request of this backend
 * (cuda_gpu_lost); a device already lost refuses with GKC_EDEVICE_LOST. */
#include "cuda_part.h"

#include <stdio.h>

#include "backend.h"
#include "cuda_fail.h"
#include "cuda_gpu.h"
#include "cuda_layout.h"
#include "cuda_slot.h"
#include "gkc_errors.h"
#include "gkcu_part.h"

static int gone(cuda_impl *impl, char *msg, size_t msglen) {
  if (!cuda_lost(impl)) return 0;
  char why[256];
  cuda_gpu_why(impl, why, sizeof why);
  snprintf(msg, msglen, "device %d was lost: %s", impl->be->device, why);
  return GKC_EDEVICE_LOST;
}

/* After the work on s: waits for it and turns a failure into a message
 * (and a lost GPU when the error is sticky). */
static int finish(cuda_impl *impl, cuda_slot *s, int rc, const char *what, char *msg, size_t msglen) {
  cudaError_t e = cudaStreamSynchronize(s->stream);
  if (rc == 0 && e == cudaSuccess) return 0;
  if (rc) snprintf(msg, msglen, "%s on device %d: %s", what, impl->be->device, gkcu_ctx_errmsg(s->ctx));
  else snprintf(msg, msglen, "%s on device %d: %s", what, impl->be->device, cudaGetErrorString(e));
  if (e != cudaSuccess && cuda_is_sticky(e)) {
    cuda_gpu_lost(impl, "%s", msg);
    return GKC_EDEVICE_LOST;
  }
  if (e != cudaSuccess) cudaGetLastError();
  return rc ? rc : GKC_EDEVICE_ERROR;
}

static cuda_slot *begin(gkcd_backend *be, cuda_impl **impl_out) {
  cuda_impl *impl = be->impl;
  *impl_out = impl;
  (void)cuda_gpu_use(impl, "a partition's work"); /* logged; the work's own calls fail and say so */
  return cuda_slot_take(impl, LANES_BULK);
}

static int copy(gkcd_backend *be, void *dst, const void *src, size_t bytes, int to_dev, char *msg,
                size_t msglen) {
  cuda_impl *impl = be->impl;
  int rc = gone(impl, msg, msglen);
  if (rc || bytes == 0) return rc;
  cuda_slot *s = begin(be, &impl);
  /* Big copies (a partition's block, an object saved to or restored from
   * the fd store: gigabytes of pageable, often freshly mapped memory) go
   * through the slot's pinned ring, whose CPU copies run on threads and
   * overlap the DMA; the driver's own pageable path copies on one thread
   * (8 GiB saved took 9 s on an H200 host that way). */
  cudaError_t e;
  if (bytes > CUDA_STAGE_SMALL)
    e = to_dev ? cuda_ring_h2d(&s->ring, s->stream, dst, src, bytes)
               : cuda_ring_d2h(&s->ring, s->stream, dst, src, bytes, NULL);
  else
    e = cudaMemcpyAsync(dst, src, bytes, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                        s->stream);
  if (e != cudaSuccess) {
    snprintf(msg, msglen, "copying %zu bytes %s device %d: %s", bytes, to_dev ? "to" : "from",
             impl->be->device, cudaGetErrorString(e));
    cudaGetLastError();
    rc = cuda_is_sticky(e) ? (cuda_gpu_lost(impl, "%s", msg), GKC_EDEVICE_LOST) : GKC_EDEVICE_ERROR;
    cudaStreamSynchronize(s->stream);
  } else {
    rc = finish(impl, s, 0, to_dev ? "copying to the device" : "copying from the device", msg, msglen);
  }
  cuda_slot_give(impl, s);
  return rc;
}

static int to_dev(gkcd_backend *be, void *dst, const void *src, size_t bytes, char *msg, size_t msglen) {
  return copy(be, dst, src, bytes, 1, msg, msglen);
}

static int to_host(gkcd_backend *be, void *dst, const void *src, size_t bytes, char *msg, size_t msglen) {
  return copy(be, dst, src, bytes, 0, msg, msglen);
}

static int spmv(gkcd_backend *be, int32_t rows, int64_t nnz, const int32_t *rp, const int32_t *ci,
                const float *v, const double *x, double *y, double *xy, char *msg, size_t msglen) {
  cuda_impl *impl = be->impl;
  int rc = gone(impl, msg, msglen);
  if (rc) return rc;
  if (rows == 0) {
    if (xy) *xy = 0;
    return 0;
  }
  cuda_slot *s = begin(be, &impl);
  rc = finish(impl, s, gkcu_part_spmv(s->ctx, rows, nnz, rp, ci, v, x, y, xy),
              xy ? "spmv and p . A p of a partition's block" : "spmv of a partition's block", msg, msglen);
  cuda_slot_give(impl, s);
  return rc;
}

static int gather(gkcd_backend *be, double *dst, const double *src, const int32_t *idx, int64_t n,
                  char *msg, size_t msglen) {
  cuda_impl *impl = be->impl;
  int rc = gone(impl, msg, msglen);
  if (rc || n == 0) return rc;
  cuda_slot *s = begin(be, &impl);
  rc = finish(impl, s, gkcu_part_gather(s->ctx, dst, src, idx, n), "gathering a halo", msg, msglen);
  cuda_slot_give(impl, s);
  return rc;
}

static int dot(gkcd_backend *be, const double *x, const double *y, int64_t n, double *out, char *msg,
               size_t msglen) {
  cuda_impl *impl = be->impl;
  int rc = gone(impl, msg, msglen);
  if (rc) return rc;
  cuda_slot *s = begin(be, &impl);
  rc = finish(impl, s, gkcu_part_dot(s->ctx, x, y, n, out), "a partial dot product", msg, msglen);
  cuda_slot_give(impl, s);
  return rc;
}

static int axpby(gkcd_backend *be, double a, const double *x, double b, double *y, int64_t n, char *msg,
                 size_t msglen) {
  cuda_impl *impl = be->impl;
  int rc = gone(impl, msg, msglen);
  if (rc || n == 0) return rc;
  cuda_slot *s = begin(be, &impl);
  rc = finish(impl, s, gkcu_part_axpby(s->ctx, a, x, b, y, n), "axpby on a partition", msg, msglen);
  cuda_slot_give(impl, s);
  return rc;
}

static int cg_update(gkcd_backend *be, double a, const double *p, const double *q, double *x,
                     double *r, const double *dinv, double *z, int64_t n, double out[2], char *msg,
                     size_t msglen) {
  cuda_impl *impl = be->impl;
  int rc = gone(impl, msg, msglen);
  if (rc) return rc;
  cuda_slot *s = begin(be, &impl);
  rc = finish(impl, s, gkcu_part_cg_update(s->ctx, a, p, q, x, r, dinv, z, n, out),
              "the CG update on a partition", msg, msglen);
  cuda_slot_give(impl, s);
  return rc;
}

const gkcd_part_ops cuda_part_ops = {
    .to_dev = to_dev, .to_host = to_host, .spmv = spmv, .gather = gather, .dot = dot,
    .axpby = axpby, .cg_update = cg_update};
