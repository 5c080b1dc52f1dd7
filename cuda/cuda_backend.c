/* cuda_backend.c: the backend that serves requests from one CUDA GPU, or
 * from one part of one (--split-device; cuda_multi.c opens them all): its
 * stream slots, made at start-up, and the backend's table (backend.h),
 * with the CUDA half of each method's row: what runs it (cuda_run.h) and
 * its algo names.  The top of the backend's layers (cuda_impl.h).
 *
 * A fixed set of stream slots (--streams), each with its gkcu context
 * (cuBLAS/cuSPARSE handles bound to the stream), a pinned staging buffer
 * and its timing events (cuda_slot.h); requests run on them as cuda_run.h
 * says.
 *
 * The slots are split between the scheduler's two lanes (lanes.h): --streams
 * slots for the bulk lane and be->latency_workers for the latency lane,
 * each stream made in its lane's green context (disjoint SMs) or, without
 * them, at its lane's priority with long bulk kernels sliced
 * (cuda_slice.h).  job->lane picks the lane's slots.
 *
 * An error that poisons the CUDA context (an illegal address, say) cannot be
 * recovered in-process: it loses the GPU (every part of it, since they share
 * the context): the job, every job of those backends still running and every
 * later one get device_lost naming the device, and backend_device_lost()
 * has the daemon go on from its other devices (or, with none left, exit
 * non-zero so that the service manager restarts it).  Every call into CUDA
 * from a daemon thread first makes the backend's GPU current.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_amg.h"
#include "cuda_batch.h"
#include "cuda_gpu.h"
#include "cuda_impl.h"
#include "cuda_multi.h"
#include "cuda_part.h"
#include "cuda_rates.h"
#include "cuda_run.h"
#include "cuda_slot.h"
#include "cuda_solve.h"
#include "devcache.h"
#include "gkc_errors.h"
#include "gkcu.h"
#include "gkcu_reduce.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"
#include "log.h"

#define LATENCY_SLOTS 2 /* latency-lane streams, and its workers */

/* The algo names of the gkcu ladders (filled once a backend opens: every
 * backend has the same), and of the methods with one kernel. */
static const char *sgemm_algos[GKCU_SGEMM_NALGO];
static const char *reduce_algos[GKCU_REDUCE_NALGO];
static const char *spmv_algos[GKCU_SPMV_NALGO];
static const char *const blas1_algos[] = {"gkcu", NULL};

/* The CUDA half of each method's row (daemon/method.h): what runs a job
 * of it, and the algo names it takes (NULL: none to choose).  A method
 * with no run here is never handed to this backend. */
static const struct {
  void (*run)(gkcd_backend *be, gkcd_job *job);
  const char *const *algos;
} methods[PROTO_M_COUNT] = {
    [PROTO_M_SGEMM] = {cuda_run_array, sgemm_algos},
    [PROTO_M_REDUCE] = {cuda_run_array, reduce_algos},
    [PROTO_M_SPMV] = {cuda_run_array, spmv_algos},
    [PROTO_M_DOT] = {cuda_run_array, blas1_algos},
    [PROTO_M_AXPBY] = {cuda_run_array, blas1_algos},
    [PROTO_M_NRM2] = {cuda_run_array, blas1_algos},
    [PROTO_M_DOWNLOAD] = {cuda_run_array, NULL},
    [PROTO_M_UPLOAD] = {cuda_run_upload, NULL},
    [PROTO_M_CSR_UPLOAD] = {cuda_run_csr_upload, NULL},
    [PROTO_M_SOLVE] = {cuda_run_solve, cuda_solve_algos},
    [PROTO_M_BATCH] = {cuda_run_batch, cuda_batch_algos},
};

/* Resident arrays live in device memory, from the same caching allocator. */
static int cuda_res_alloc(gkcd_backend *be, size_t bytes, void **ptr, size_t *cap, char *msg,
                          size_t msglen) {
  cuda_impl *impl = be->impl;
  cudaError_t e = cuda_gpu_use(impl, "an allocation");
  if (e != cudaSuccess) {
    snprintf(msg, msglen, "cannot select GPU %d: %s", impl->device, cudaGetErrorString(e));
    return GKC_EDEVICE_ERROR;
  }
  return devcache_alloc(impl->cache, bytes, ptr, cap, msg, msglen);
}

static void cuda_res_free(gkcd_backend *be, void *ptr, size_t cap) {
  cuda_impl *impl = be->impl;
  (void)cuda_gpu_use(impl, "freeing memory"); /* the cache keeps it whatever the device says */
  devcache_free(impl->cache, ptr, cap);
}

/* Client regions are page-locked for DMA, so copies to and from them need
 * no staging.  Failure just means the slower staged path.  Portable: every
 * GPU's copies use them, whichever device registered them. */
static int cuda_region_pin(gkcd_backend *be, void *ptr, size_t bytes) {
  cuda_impl *impl = be->impl;
  if (cuda_gpu_use(impl, "registering a region") != cudaSuccess) return -1;
  cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return 0;
}

static void cuda_region_unpin(gkcd_backend *be, void *ptr) {
  cuda_impl *impl = be->impl;
  (void)cuda_gpu_use(impl, "unregistering a region"); /* a portable registration: any device undoes it */
  if (cudaHostUnregister(ptr) != cudaSuccess) cudaGetLastError();
}

/* be->precond_free: a hierarchy cuda_solve built (cuda_amg.h); it knows
 * its GPU and cache. */
static void free_amg(gkcd_backend *be, void *h) {
  (void)be;
  cuda_amg_free(h);
}

static int cuda_spmv_pick(gkcd_backend *be, int32_t rows, int32_t cols, int64_t nnz,
                          int32_t max_row) {
  cuda_impl *impl = be->impl;
  return gkcu_spmv_pick_hint(impl->slots[0].ctx, rows, cols, nnz, max_row) - 1;
}

static int cuda_devices(gkcd_backend *be, gkcd_device_info *out, int max) {
  cuda_impl *impl = be->impl;
  if (max < 1) return 0;
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", impl->name);
  out->kind = "cuda";
  out->gpu = impl->device;
  out->sms = lanes_part_sms(impl->lanes); /* its part, or the whole GPU */
  size_t free_b = 0, total_b = 0;
  (void)cuda_gpu_use(impl, "its figures"); /* cudaMemGetInfo below says if it failed */
  size_t cached, in_use, own;
  devcache_stats(impl->cache, &cached, &in_use);
  out->cached_bytes = cached;
  own = cached + in_use;
  if (impl->lane_cache != impl->cache) {
    devcache_stats(impl->lane_cache, &cached, &in_use);
    out->cached_bytes += cached;
    own += cached + in_use;
  }
  if (!atomic_load(&impl->gpu->lost) && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    out->memory_total = total_b;
    out->memory_free = free_b;
    /* The parts of a GPU share its memory: each reports the whole, and as
     * used only what it holds itself. */
    if (impl->gpu->nparts > 1) out->memory_free = own < total_b ? total_b - own : 0;
  } else {
    cudaGetLastError(); /* a lost or failing GPU reports no memory */
  }
  out->streams = impl->nslots;
  pthread_mutex_lock(&impl->mu);
  out->streams_busy = impl->busy;
  pthread_mutex_unlock(&impl->mu);
  return 1;
}

/* status: a lane's SMs (its partition; 0 when the lanes share all SMs) and
 * streams. */
static void cuda_lane_info(gkcd_backend *be, int lane, gkcd_lane_info *out) {
  cuda_impl *impl = be->impl;
  memset(out, 0, sizeof *out);
  if (lane < 0 || lane >= lanes_count(impl->lanes)) return;
  out->sms = lanes_green(impl->lanes) ? lanes_sms(impl->lanes, lane) : 0;
  out->streams = impl->lane_hi[lane] - impl->lane_lo[lane];
}

static void cuda_destroy(gkcd_backend *be) {
  cuda_impl *impl = be->impl;
  (void)cuda_gpu_use(impl, "tearing down"); /* what it frees is freed either way */
  for (int i = 0; i < impl->nslots; i++) cuda_slot_destroy(&impl->slots[i]);
  if (impl->lane_cache != impl->cache) devcache_destroy(impl->lane_cache);
  devcache_destroy(impl->cache);
  /* The green contexts go last: the streams made in them are gone. */
  lanes_close(impl->lanes);
  pthread_mutex_destroy(&impl->mu);
  for (int l = 0; l < LANES_MAX; l++) pthread_cond_destroy(&impl->cv[l]);
  free(impl->slots);
  if (impl->gpu) {
    impl->gpu->part[impl->part] = NULL;
    cuda_gpu_release(impl->gpu);
  }
  free(impl);
  free(be);
}

/* cuda_part_open_fn (cuda_multi.h): part `part` of gpu as a backend. */
static int cuda_part_open(gkcd_backend **out, const gkcd_config *cfg, cuda_gpu *gpu, int part,
                          cuda_lanes *lanes, const char *gpu_name, char *msg, size_t msglen) {
  int rc;
  gkcd_backend *be = calloc(1, sizeof *be);
  cuda_impl *impl = calloc(1, sizeof *impl);
  if (!be || !impl) {
    free(be);
    free(impl);
    lanes_close(lanes);
    snprintf(msg, msglen, "out of memory");
    return GKC_EOUT_OF_MEMORY;
  }
  be->impl = impl;
  impl->be = be;
  impl->lanes = lanes;
  pthread_mutex_init(&impl->mu, NULL);
  for (int l = 0; l < LANES_MAX; l++) pthread_cond_init(&impl->cv[l], NULL);
  impl->device = gpu->ordinal;
  impl->gpu = gpu;
  impl->part = part;
  atomic_fetch_add(&gpu->refs, 1);
  gpu->part[part] = be;
  if (gpu->nparts > 1)
    snprintf(impl->name, sizeof impl->name, "%.90s (GPU %d, part %d/%d)", gpu_name, gpu->ordinal,
             part + 1, gpu->nparts);
  else
    snprintf(impl->name, sizeof impl->name, "%.100s (GPU %d)", gpu_name, gpu->ordinal);
  cudaError_t e;
  if ((e = cudaSetDevice(impl->device)) != cudaSuccess) goto cuda_fail;
  int nlanes = lanes_count(impl->lanes);
  if (devcache_create(&impl->cache, cfg->device_cache_bytes) != 0) goto oom;
  impl->lane_cache = impl->cache;
  if (nlanes > 1) {
    /* Small requests' buffers: an eighth of the cache, at least 64 MiB
     * (never more than the whole). */
    size_t lc = cfg->device_cache_bytes / 8;
    if (lc < ((size_t)64 << 20)) lc = (size_t)64 << 20;
    if (lc > cfg->device_cache_bytes) lc = cfg->device_cache_bytes;
    if (devcache_create(&impl->lane_cache, lc) != 0) {
      impl->lane_cache = impl->cache;
      goto oom;
    }
  }
  int nlat = nlanes > 1 ? LATENCY_SLOTS : 0;
  impl->lane_lo[LANES_BULK] = 0;
  impl->lane_hi[LANES_BULK] = impl->lane_lo[LANES_LATENCY] = cfg->streams;
  impl->lane_hi[LANES_LATENCY] = cfg->streams + nlat;
  if (!(impl->slots = calloc((size_t)(cfg->streams + nlat), sizeof *impl->slots))) goto oom;
  impl->nslots = cfg->streams + nlat;
  for (int i = 0; i < impl->nslots; i++) {
    int lane = i < cfg->streams ? LANES_BULK : LANES_LATENCY;
    if (lanes_enter(impl->lanes, lane, msg, msglen) != 0) {
      cuda_destroy(be);
      return GKC_EDEVICE_ERROR;
    }
    rc = cuda_slot_init(impl, &impl->slots[i], lane, i, msg, msglen);
    char lmsg[160];
    if (lanes_leave(impl->lanes, lmsg, sizeof lmsg) != 0 && rc == 0) {
      snprintf(msg, msglen, "%s", lmsg);
      rc = GKC_EDEVICE_ERROR;
    }
    if (rc) {
      cuda_destroy(be);
      return rc;
    }
  }
  for (int a = 1; a < GKCU_SGEMM_NALGO; a++) sgemm_algos[a - 1] = gkcu_sgemm_algo_name(a);
  for (int a = 1; a < GKCU_REDUCE_NALGO; a++) reduce_algos[a - 1] = gkcu_reduce_algo_name(a);
  for (int a = 1; a < GKCU_SPMV_NALGO; a++) spmv_algos[a - 1] = gkcu_spmv_algo_name(a);
  be->name = "cuda";
  /* float64 where the kernels take it: dot, nrm2, axpby (gkcu_blas1.h),
   * spmv with float32 or float64 values and vectors (gkcu_spmv_typed),
   * csr_upload's float64 values, batch's dot, axpby and spmv steps (the
   * rows refuse float64 to sgemm, reduce and their batch steps), solve's
   * b, x0 and x (gkcu_solve.h: its vectors are double on the device
   * anyway), and the resident arrays that hold them (upload and download
   * copy bytes).  Not yet: solve on a float64 matrix (gkcu_solve reads
   * float32 values), which rpc.c refuses before queueing; a partitioned
   * matrix is float32 only on either backend (method_resident.c). */
  be->f64 = 0;
  be->f64_methods = 1ull << PROTO_M_SOLVE | 1ull << PROTO_M_UPLOAD | 1ull << PROTO_M_DOWNLOAD |
                    1ull << PROTO_M_DOT | 1ull << PROTO_M_NRM2 | 1ull << PROTO_M_AXPBY |
                    1ull << PROTO_M_SPMV | 1ull << PROTO_M_CSR_UPLOAD | 1ull << PROTO_M_BATCH;
  be->f64_solve_matrix = 1;
  /* solve precond amg (setup on the host, V-cycle on the GPU: cuda_amg.h)
   * and jacobi with bicgstab; the hierarchy a matrix keeps is freed here */
  be->amg = 1;
  be->precond_free = free_amg;
  /* A start for the cost model: compute and memory rates measured on the
   * bulk lane's first stream (datasheet figures of an H100/H200 if that
   * fails); pinned PCIe ~20 GB/s, launch and hand-off ~15 us.  It corrects
   * itself from the times requests take. */
  be->rates = (cost_rates){.flops_per_us = 5e7, .bytes_per_us = 3e6, .host_bytes_per_us = 2e4,
                           .fixed_us = 15};
  cuda_measure_rates(&impl->slots[0], &be->rates);
  if (nlanes > 1 && !lanes_green(impl->lanes)) {
    impl->slice.flops = cfg->slice_us * be->rates.flops_per_us;
    impl->slice.bytes = cfg->slice_us * be->rates.bytes_per_us;
    log_info("lanes: bulk sgemm and spmv cut into slices of about %g us (%.3g flops, %.3g bytes)",
             cfg->slice_us, impl->slice.flops, impl->slice.bytes);
  }
  be->latency_workers = nlat;
  for (int m = 0; m < PROTO_M_COUNT; m++) {
    be->run[m] = methods[m].run;
    be->algos[m] = methods[m].algos;
  }
  be->res_alloc = cuda_res_alloc;
  be->res_free = cuda_res_free;
  be->region_pin = cuda_region_pin;
  be->region_unpin = cuda_region_unpin;
  be->spmv_pick = cuda_spmv_pick;
  be->devices = cuda_devices;
  be->lane_info = cuda_lane_info;
  be->destroy = cuda_destroy;
  be->peer_copy = cuda_peer_copy;
  be->part = &cuda_part_ops;
  *out = be;
  return 0;

cuda_fail:
  snprintf(msg, msglen, "CUDA: %s", cudaGetErrorString(e));
  cudaGetLastError();
  cuda_destroy(be);
  return GKC_EDEVICE_ERROR;
oom:
  snprintf(msg, msglen, "out of memory");
  cuda_destroy(be);
  return GKC_EOUT_OF_MEMORY;
}

int cuda_backends_create(gkcd_backend **out, int max, int *count, const gkcd_config *cfg, char *msg,
                         size_t msglen) {
  return cuda_multi_open(out, max, count, cfg, cuda_part_open, msg, msglen);
}
