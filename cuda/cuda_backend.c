/* cuda_backend.c: the backend that serves requests from one CUDA GPU.
 *
 * A fixed set of stream slots (--streams), each with its gkcu context
 * (cuBLAS/cuSPARSE handles bound to the stream), a pinned staging buffer
 * and two timing events.  A worker thread takes a free slot, packs the
 * request's arrays into the slot's pinned buffer, and on the slot's stream
 * copies them to one device allocation from the caching allocator, runs the
 * kernel between two events, and copies the result back; then it waits for
 * that stream alone.  With more workers than slots, requests on different
 * streams overlap their copies and kernels.  Inputs were validated on the
 * host before they get here (daemon/validate.c), so no kernel is ever
 * launched on indices it could run off with.
 *
 * An error that poisons the CUDA context (an illegal address, say) cannot be
 * recovered in-process: the job gets device_error, every later job too, and
 * backend_fatal() makes the daemon finish what it can and exit non-zero so
 * the service manager restarts it.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "devcache.h"
#include "gkc_errors.h"
#include "gkcu.h"
#include "gkcu_reduce.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"

#define ALIGN 256

typedef struct {
  gkcu_ctx *ctx;
  cudaStream_t stream;
  cudaEvent_t ev_in, ev0, ev1, ev_out; /* before H2D, kernel start/end, after D2H */
  void *stage; /* pinned */
  size_t stage_cap;
  int busy;
} slot;

typedef struct {
  int device;
  char name[128];
  int nslots;
  slot *slots;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int busy;
  devcache *cache;
  atomic_int poisoned;
} cuda_impl;

static const char *sgemm_algos[GKCU_SGEMM_NALGO];
static const char *reduce_algos[GKCU_REDUCE_NALGO];
static const char *spmv_algos[GKCU_SPMV_NALGO];

static size_t up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* Copies between the request, the pinned stage and the result are most of
 * the daemon's own time on big requests (one core moves ~10 GB/s, and a
 * fresh result buffer also takes its page faults there): split big ones
 * over a few threads. */
static void copy(void *dst, const void *src, size_t n) {
  enum { PIECE = 8 << 20 };
  if (n < 2 * (size_t)PIECE) {
    memcpy(dst, src, n);
    return;
  }
  long pieces = (long)((n + PIECE - 1) / PIECE);
#pragma omp parallel for num_threads(8) schedule(static)
  for (long i = 0; i < pieces; i++) {
    size_t off = (size_t)i * PIECE, len = n - off < PIECE ? n - off : PIECE;
    memcpy((char *)dst + off, (const char *)src + off, len);
  }
}

static slot *take_slot(cuda_impl *impl) {
  pthread_mutex_lock(&impl->mu);
  for (;;) {
    for (int i = 0; i < impl->nslots; i++)
      if (!impl->slots[i].busy) {
        impl->slots[i].busy = 1;
        impl->busy++;
        pthread_mutex_unlock(&impl->mu);
        return &impl->slots[i];
      }
    pthread_cond_wait(&impl->cv, &impl->mu);
  }
}

static void give_slot(cuda_impl *impl, slot *s) {
  pthread_mutex_lock(&impl->mu);
  s->busy = 0;
  impl->busy--;
  pthread_cond_signal(&impl->cv);
  pthread_mutex_unlock(&impl->mu);
}

/* Errors that leave the context unusable for everyone. */
static int is_sticky(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
    case cudaErrorMemoryAllocation:
    case cudaErrorInvalidValue:
    case cudaErrorNotReady:
      return 0;
    default:
      return 1;
  }
}

static void fail_cuda(cuda_impl *impl, gkcd_job *job, cudaError_t e, const char *what) {
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    job_fail(job, GKC_EOUT_OF_MEMORY, "%s: %s", what, cudaGetErrorString(e));
    return;
  }
  job_fail(job, GKC_EDEVICE_ERROR, "%s: %s", what, cudaGetErrorString(e));
  if (is_sticky(e) && !atomic_exchange(&impl->poisoned, 1))
    backend_fatal("the CUDA context is unusable after: %s: %s", what, cudaGetErrorString(e));
}

static int grow_stage(slot *s, size_t bytes, gkcd_job *job) {
  if (s->stage_cap >= bytes) return 0;
  if (s->stage) cudaFreeHost(s->stage);
  s->stage = NULL;
  s->stage_cap = 0;
  size_t cap = bytes < ((size_t)4 << 20) ? ((size_t)4 << 20) : bytes;
  cudaError_t e = cudaMallocHost(&s->stage, cap);
  if (e != cudaSuccess) {
    cudaGetLastError();
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory: %s",
             cap, cudaGetErrorString(e));
    return -1;
  }
  s->stage_cap = cap;
  return 0;
}

/* The arrays one job sends to the device, and what it gets back. */
typedef struct {
  const gkcd_span *in[6];
  size_t off[6];
  int nin;
  size_t in_bytes;  /* packed, aligned */
  size_t out_bytes; /* result array, or 8 for a reduce's double */
} layout;

static void add(layout *l, const gkcd_span *s) {
  l->in[l->nin] = s;
  l->off[l->nin] = l->in_bytes;
  l->in_bytes += up(s->bytes ? s->bytes : 1);
  l->nin++;
}

static int run_kernel(slot *s, gkcd_job *job, char *dev, const layout *l, int *err) {
  gkcu_ctx *ctx = s->ctx;
  char *out = dev + l->in_bytes;
  switch (job->method) {
    case PROTO_M_SGEMM: {
      __typeof__(job->in.sgemm) *g = &job->in.sgemm;
      int algo = job->algo == GKCD_ALGO_AUTO
                     ? (g->tf32 ? GKCU_SGEMM_CUBLAS_TF32 : gkcu_sgemm_pick(ctx, g->m, g->n, g->k))
                     : job->algo + 1;
      job->algo_name = gkcu_sgemm_algo_name(algo);
      if (g->beta != 0.0f) /* C starts as the input c, which was packed third */
        cudaMemcpyAsync(out, dev + l->off[2], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
      *err = gkcu_sgemm(ctx, algo, g->m, g->n, g->k, g->alpha, (const float *)(dev + l->off[0]),
                        g->trans_a, (const float *)(dev + l->off[1]), g->trans_b, g->beta,
                        (float *)out);
      return 0;
    }
    case PROTO_M_REDUCE: {
      int algo = job->algo == GKCD_ALGO_AUTO ? gkcu_reduce_pick(ctx, job->in.reduce.n)
                                             : job->algo + 1;
      job->algo_name = gkcu_reduce_algo_name(algo);
      *err = gkcu_reduce_async(ctx, algo, job->in.reduce.op, (const float *)(dev + l->off[0]),
                               job->in.reduce.n, (double *)out);
      return 0;
    }
    case PROTO_M_SPMV: {
      __typeof__(job->in.spmv) *p = &job->in.spmv;
      /* The longest row, known from validation, tells a regular matrix
       * (thread- or warp-per-row kernels win) from a skewed one (merge path). */
      int algo = job->algo == GKCD_ALGO_AUTO
                     ? gkcu_spmv_pick_hint(ctx, p->rows, p->cols, p->nnz, p->max_row)
                     : job->algo + 1;
      job->algo_name = gkcu_spmv_algo_name(algo);
      if (p->beta != 0.0f)
        cudaMemcpyAsync(out, dev + l->off[4], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
      *err = gkcu_spmv(ctx, algo, p->rows, p->cols, p->nnz, (const int32_t *)(dev + l->off[0]),
                       (const int32_t *)(dev + l->off[1]), (const float *)(dev + l->off[2]),
                       p->alpha, (const float *)(dev + l->off[3]), p->beta, (float *)out);
      return 0;
    }
  }
  return -1;
}

static void plan(gkcd_job *job, layout *l) {
  memset(l, 0, sizeof *l);
  switch (job->method) {
    case PROTO_M_SGEMM:
      add(l, &job->in.sgemm.a);
      add(l, &job->in.sgemm.b);
      if (job->in.sgemm.c.ptr) add(l, &job->in.sgemm.c);
      l->out_bytes = job->out_bytes;
      break;
    case PROTO_M_REDUCE:
      add(l, &job->in.reduce.x);
      l->out_bytes = sizeof(double);
      break;
    case PROTO_M_SPMV:
      add(l, &job->in.spmv.row_ptr);
      add(l, &job->in.spmv.col_idx);
      add(l, &job->in.spmv.values);
      add(l, &job->in.spmv.x);
      if (job->in.spmv.y.ptr) add(l, &job->in.spmv.y);
      l->out_bytes = job->out_bytes;
      break;
  }
}

static void run_on(cuda_impl *impl, slot *s, gkcd_job *job) {
  layout l;
  plan(job, &l);
  size_t dev_bytes = l.in_bytes + up(l.out_bytes), dev_cap = 0;
  char *dev = NULL;
  int rc = devcache_alloc(impl->cache, dev_bytes, (void **)&dev, &dev_cap, job->errmsg,
                          sizeof job->errmsg);
  if (rc) {
    job->err = rc;
    return;
  }
  size_t stage_bytes = l.in_bytes > l.out_bytes ? l.in_bytes : l.out_bytes;
  if (grow_stage(s, stage_bytes, job) != 0) goto out;
  if (job->out_bytes && !(job->out = malloc(job->out_bytes))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for the result", job->out_bytes);
    goto out;
  }
  for (int i = 0; i < l.nin; i++) copy((char *)s->stage + l.off[i], l.in[i]->ptr, l.in[i]->bytes);

  cudaError_t e = cudaEventRecord(s->ev_in, s->stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(dev, s->stage, l.in_bytes, cudaMemcpyHostToDevice, s->stream);
  if (e == cudaSuccess) e = cudaEventRecord(s->ev0, s->stream);
  if (e != cudaSuccess) {
    fail_cuda(impl, job, e, "copying the request to the device");
    goto out;
  }
  int kerr = 0;
  run_kernel(s, job, dev, &l, &kerr);
  if (kerr) {
    snprintf(job->errmsg, sizeof job->errmsg, "%s", gkcu_ctx_errmsg(s->ctx));
    job->err = kerr;
    e = cudaStreamSynchronize(s->stream);
    if (kerr == GKC_EDEVICE_ERROR && is_sticky(e) && !atomic_exchange(&impl->poisoned, 1))
      backend_fatal("the CUDA context is unusable after: %s", job->errmsg);
    goto out;
  }
  if ((e = cudaEventRecord(s->ev1, s->stream)) != cudaSuccess ||
      (e = cudaMemcpyAsync(s->stage, dev + l.in_bytes, l.out_bytes, cudaMemcpyDeviceToHost,
                           s->stream)) != cudaSuccess ||
      (e = cudaEventRecord(s->ev_out, s->stream)) != cudaSuccess ||
      (e = cudaStreamSynchronize(s->stream)) != cudaSuccess) {
    fail_cuda(impl, job, e, "running the kernel");
    free(job->out);
    job->out = NULL;
    goto out;
  }
  float ms = 0;
  if (cudaEventElapsedTime(&ms, s->ev0, s->ev1) == cudaSuccess) job->kernel_us = ms * 1e3;
  if (cudaEventElapsedTime(&ms, s->ev_in, s->ev0) == cudaSuccess) job->h2d_us = ms * 1e3;
  if (cudaEventElapsedTime(&ms, s->ev1, s->ev_out) == cudaSuccess) job->d2h_us = ms * 1e3;
  if (job->method == PROTO_M_REDUCE)
    memcpy(&job->value, s->stage, sizeof(double));
  else
    copy(job->out, s->stage, job->out_bytes);
out:
  devcache_free(impl->cache, dev, dev_cap);
}

static void cuda_run(gkcd_backend *be, gkcd_job *job) {
  cuda_impl *impl = be->impl;
  if (atomic_load(&impl->poisoned)) {
    job_fail(job, GKC_EDEVICE_ERROR, "the GPU failed earlier; gkcd is restarting");
  } else if (job->method == PROTO_M_SGEMM && job->algo + 1 == GKCU_SGEMM_CUBLAS_TF32 &&
             !job->in.sgemm.tf32) {
    job_fail(job, GKC_EINVALID_ARGUMENT,
             "argument 'algo': cublas_tf32 rounds inputs to TF32; ask for it with"
             " precision: \"tf32\"");
  } else {
    cudaSetDevice(impl->device);
    slot *s = take_slot(impl);
    run_on(impl, s, job);
    give_slot(impl, s);
  }
  job_finish(job);
}

static int cuda_devices(gkcd_backend *be, gkcd_device_info *out, int max) {
  cuda_impl *impl = be->impl;
  if (max < 1) return 0;
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", impl->name);
  size_t free_b = 0, total_b = 0;
  cudaSetDevice(impl->device);
  if (!atomic_load(&impl->poisoned) && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    out->memory_total = total_b;
    out->memory_free = free_b;
  }
  size_t cached, in_use;
  devcache_stats(impl->cache, &cached, &in_use);
  out->cached_bytes = cached;
  out->streams = impl->nslots;
  pthread_mutex_lock(&impl->mu);
  out->streams_busy = impl->busy;
  pthread_mutex_unlock(&impl->mu);
  return 1;
}

static void cuda_destroy(gkcd_backend *be) {
  cuda_impl *impl = be->impl;
  for (int i = 0; i < impl->nslots; i++) {
    slot *s = &impl->slots[i];
    gkcu_ctx_destroy(s->ctx);
    if (s->stream) cudaStreamDestroy(s->stream);
    if (s->ev_in) cudaEventDestroy(s->ev_in);
    if (s->ev0) cudaEventDestroy(s->ev0);
    if (s->ev1) cudaEventDestroy(s->ev1);
    if (s->ev_out) cudaEventDestroy(s->ev_out);
    if (s->stage) cudaFreeHost(s->stage);
  }
  devcache_destroy(impl->cache);
  pthread_mutex_destroy(&impl->mu);
  pthread_cond_destroy(&impl->cv);
  free(impl->slots);
  free(impl);
  free(be);
}

int cuda_backend_create(gkcd_backend **out, const gkcd_config *cfg, char *msg, size_t msglen) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    cudaGetLastError();
    snprintf(msg, msglen, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return GKC_EDEVICE_ERROR;
  }
  gkcd_backend *be = calloc(1, sizeof *be);
  cuda_impl *impl = calloc(1, sizeof *impl);
  if (!be || !impl) goto oom;
  be->impl = impl;
  pthread_mutex_init(&impl->mu, NULL);
  pthread_cond_init(&impl->cv, NULL);
  impl->device = 0;
  struct cudaDeviceProp prop;
  if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess)
    goto cuda_fail;
  snprintf(impl->name, sizeof impl->name, "%.127s", prop.name);
  if (devcache_create(&impl->cache, cfg->device_cache_bytes) != 0) goto oom;
  if (!(impl->slots = calloc((size_t)cfg->streams, sizeof *impl->slots))) goto oom;
  impl->nslots = cfg->streams;
  for (int i = 0; i < impl->nslots; i++) {
    slot *s = &impl->slots[i];
    if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&s->ev_in)) != cudaSuccess ||
        (e = cudaEventCreate(&s->ev0)) != cudaSuccess ||
        (e = cudaEventCreate(&s->ev1)) != cudaSuccess ||
        (e = cudaEventCreate(&s->ev_out)) != cudaSuccess)
      goto cuda_fail;
    int rc = gkcu_ctx_create(&s->ctx, s->stream);
    if (rc) {
      snprintf(msg, msglen, "creating the CUDA context for stream %d failed (%d)", i, rc);
      cuda_destroy(be);
      return rc;
    }
  }
  for (int a = 1; a < GKCU_SGEMM_NALGO; a++) sgemm_algos[a - 1] = gkcu_sgemm_algo_name(a);
  for (int a = 1; a < GKCU_REDUCE_NALGO; a++) reduce_algos[a - 1] = gkcu_reduce_algo_name(a);
  for (int a = 1; a < GKCU_SPMV_NALGO; a++) spmv_algos[a - 1] = gkcu_spmv_algo_name(a);
  be->name = "cuda";
  be->algos[PROTO_M_SGEMM] = sgemm_algos;
  be->algos[PROTO_M_REDUCE] = reduce_algos;
  be->algos[PROTO_M_SPMV] = spmv_algos;
  be->run = cuda_run;
  be->devices = cuda_devices;
  be->destroy = cuda_destroy;
  *out = be;
  return 0;

cuda_fail:
  snprintf(msg, msglen, "CUDA: %s", cudaGetErrorString(e));
  cudaGetLastError();
  cuda_destroy(be);
  return GKC_EDEVICE_ERROR;
oom:
  snprintf(msg, msglen, "out of memory");
  if (be && impl) cuda_destroy(be); else { free(be); free(impl); }
  return GKC_EOUT_OF_MEMORY;
}
