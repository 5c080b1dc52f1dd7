/* cuda_backend.c: the backend that serves requests from one CUDA GPU, or
 * from one part of one (--split-device; cuda_multi.c opens them all).
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
#include <time.h>

#include "backend.h"
#include "resident.h"
#include "devcache.h"
#include "gkc_errors.h"
#include "gkcu.h"
#include "gkcu_blas1.h"
#include "gkcu_reduce.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"
#include "log.h"
#include "scheduler.h"

#define ALIGN 256
#define LATENCY_SLOTS 2 /* latency-lane streams, and its workers */


#include "cuda_backend_int.h"

extern const gkcd_part_ops cuda_part_ops; /* cuda_part.c */

/* job->lane (scheduler.h) indexes the lanes made here. */
_Static_assert((int)LANE_BULK == (int)LANES_BULK && (int)LANE_LATENCY == (int)LANES_LATENCY,
               "lane numbers");

static const char *sgemm_algos[GKCU_SGEMM_NALGO];
static const char *reduce_algos[GKCU_REDUCE_NALGO];
static const char *spmv_algos[GKCU_SPMV_NALGO];
static const char *const blas1_algos[] = {"gkcu", NULL};

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

slot *take_slot(cuda_impl *impl, int lane) {
  pthread_mutex_lock(&impl->mu);
  for (;;) {
    for (int i = impl->lane_lo[lane]; i < impl->lane_hi[lane]; i++)
      if (!impl->slots[i].busy) {
        impl->slots[i].busy = 1;
        impl->busy++;
        pthread_mutex_unlock(&impl->mu);
        return &impl->slots[i];
      }
    pthread_cond_wait(&impl->cv[lane], &impl->mu);
  }
}

void give_slot(cuda_impl *impl, slot *s) {
  pthread_mutex_lock(&impl->mu);
  s->busy = 0;
  impl->busy--;
  pthread_cond_signal(&impl->cv[s->lane]);
  pthread_mutex_unlock(&impl->mu);
}

/* Where a slot's temporaries come from. */
static devcache *tmp_cache(cuda_impl *impl, const slot *s) {
  return s->lane == LANES_LATENCY ? impl->lane_cache : impl->cache;
}

/* The bulk lane slices its long kernels only where the lanes share SMs. */
static const slice_budget *slicing(const cuda_impl *impl, const slot *s) {
  return s->lane == LANES_BULK && impl->slice.flops > 0 ? &impl->slice : NULL;
}

/* Errors that leave the context unusable for everyone. */
int cuda_is_sticky(cudaError_t e) {
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

void fail_cuda(cuda_impl *impl, gkcd_job *job, cudaError_t e, const char *what) {
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    job_fail(job, GKC_EOUT_OF_MEMORY, "%s: %s", what, cudaGetErrorString(e));
    return;
  }
  if (!cuda_is_sticky(e)) {
    job_fail(job, GKC_EDEVICE_ERROR, "%s: %s", what, cudaGetErrorString(e));
    return;
  }
  cuda_gpu_lost(impl, "%s: %s", what, cudaGetErrorString(e));
  fail_lost(impl, job);
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

/* Where one job's data lives on the device.  Inputs already resident are
 * used where they are; the others get a place in one temporary allocation,
 * as does the result unless it is to stay resident. */
typedef struct {
  const gkcd_span *in[6];
  const void *dev[6];   /* device address of each input */
  size_t off[6];        /* its offset in tmp (when copied) or in the output (uploads) */
  int nin;
  size_t tmp_bytes;     /* inputs to copy, then the result */
  size_t res_off;       /* offset of the result in tmp, when it goes there */
  size_t res_bytes;     /* the result (8 for a reduce or dot) */
  size_t stage_bytes;   /* unpinned host inputs, packed */
  char *tmp, *out_dev;
  size_t tmp_cap;
} layout;

static void add(layout *l, const gkcd_span *s) {
  l->in[l->nin] = s; /* absent optional inputs keep their place, with no bytes */
  if (s->ptr && s->where != SPAN_RES) {
    l->off[l->nin] = l->tmp_bytes;
    l->tmp_bytes += up(s->bytes ? s->bytes : 1);
    if (!s->pinned) l->stage_bytes += up(s->bytes);
  }
  l->nin++;
}

static void plan(gkcd_job *job, layout *l) {
  memset(l, 0, sizeof *l);
  switch (job->method) {
    case PROTO_M_SGEMM:
      add(l, &job->in.sgemm.a);
      add(l, &job->in.sgemm.b);
      add(l, &job->in.sgemm.c);
      break;
    case PROTO_M_REDUCE: add(l, &job->in.reduce.x); break;
    case PROTO_M_SPMV:
      add(l, &job->in.spmv.row_ptr);
      add(l, &job->in.spmv.col_idx);
      add(l, &job->in.spmv.values);
      add(l, &job->in.spmv.x);
      add(l, &job->in.spmv.y);
      break;
    case PROTO_M_DOT:
    case PROTO_M_AXPBY:
      add(l, &job->in.vec.x);
      add(l, &job->in.vec.y);
      break;
    case PROTO_M_DOWNLOAD: add(l, &job->in.upload.data); break;
  }
  int scalar = job->method == PROTO_M_REDUCE || job->method == PROTO_M_DOT;
  l->res_bytes = scalar ? sizeof(double) : job->out_bytes;
  if (scalar || job->out_kind == OUT_BIN || job->out_kind == OUT_HOST) {
    l->res_off = l->tmp_bytes;
    l->tmp_bytes += up(l->res_bytes);
  }
  if (job->method == PROTO_M_DOWNLOAD) l->tmp_bytes = 0; /* straight from resident memory */
}

/* Uploads: the inputs are copied straight into the new resident array. */
static void plan_upload(gkcd_job *job, layout *l) {
  memset(l, 0, sizeof *l);
  const gkcd_span *parts[3];
  int n = 0;
  if (job->method == PROTO_M_UPLOAD) {
    parts[n++] = &job->in.upload.data;
  } else {
    parts[n++] = &job->in.csr.row_ptr;
    parts[n++] = &job->in.csr.col_idx;
    parts[n++] = &job->in.csr.values;
  }
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    l->in[i] = parts[i];
    l->off[i] = at;
    at += parts[i]->bytes;
    if (!parts[i]->pinned) l->stage_bytes += up(parts[i]->bytes);
  }
  l->nin = n;
}

/* Enqueues the host-to-device copies; inputs outside regions go through
 * the slot's pinned stage, region inputs are copied from the client's
 * registered pages directly. */
static cudaError_t copy_in(slot *s, layout *l, char *base, int upload) {
  size_t st = 0;
  for (int i = 0; i < l->nin; i++) {
    const gkcd_span *sp = l->in[i];
    if (upload && sp->where == SPAN_RES) { /* a new array made from a resident one */
      l->dev[i] = base + l->off[i];
      cudaError_t e = cudaMemcpyAsync(base + l->off[i], sp->ptr, sp->bytes,
                                      cudaMemcpyDeviceToDevice, s->stream);
      if (e != cudaSuccess) return e;
      continue;
    }
    if (sp->where == SPAN_RES || !sp->ptr) {
      l->dev[i] = sp->ptr;
      continue;
    }
    char *dst = base + l->off[i];
    l->dev[i] = dst;
    if (sp->bytes == 0) continue;
    const void *src = sp->ptr;
    if (!sp->pinned) {
      copy((char *)s->stage + st, sp->ptr, sp->bytes);
      src = (char *)s->stage + st;
      st += up(sp->bytes);
    }
    cudaError_t e = cudaMemcpyAsync(dst, src, sp->bytes, cudaMemcpyHostToDevice, s->stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

static const float *fdev(const layout *l, int i) { return (const float *)l->dev[i]; }

/* Launches the kernel; a launcher error leaves a message in the context. */
static int run_kernel(cuda_impl *impl, slot *s, gkcd_job *job, layout *l) {
  gkcu_ctx *ctx = s->ctx;
  const slice_budget *sb = slicing(impl, s);
  int nslices = 1, rc;
  float *out = (float *)l->out_dev;
  switch (job->method) {
    case PROTO_M_SGEMM: {
      __typeof__(job->in.sgemm) *g = &job->in.sgemm;
      int algo = job->algo == GKCD_ALGO_AUTO
                     ? (g->tf32 ? GKCU_SGEMM_CUBLAS_TF32 : gkcu_sgemm_pick(ctx, g->m, g->n, g->k))
                     : job->algo + 1;
      if (g->beta != 0.0f && l->dev[2] != out) /* C starts as the input c */
        cudaMemcpyAsync(out, l->dev[2], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
      if (sb)
        rc = slice_sgemm(ctx, sb, &algo, job->algo == GKCD_ALGO_AUTO, g->m, g->n, g->k, g->alpha,
                         fdev(l, 0), g->trans_a, fdev(l, 1), g->trans_b, g->beta, out, &nslices);
      else
        rc = gkcu_sgemm(ctx, algo, g->m, g->n, g->k, g->alpha, fdev(l, 0), g->trans_a, fdev(l, 1),
                        g->trans_b, g->beta, out);
      job->algo_name = gkcu_sgemm_algo_name(algo);
      if (nslices > 1)
        log_debug("sgemm %dx%dx%d: %d slices (%s)", g->m, g->n, g->k, nslices, job->algo_name);
      return rc;
    }
    case PROTO_M_REDUCE: {
      int algo = job->algo == GKCD_ALGO_AUTO ? gkcu_reduce_pick(ctx, job->in.reduce.n)
                                             : job->algo + 1;
      job->algo_name = gkcu_reduce_algo_name(algo);
      return gkcu_reduce_async(ctx, algo, job->in.reduce.op, fdev(l, 0), job->in.reduce.n,
                               (double *)out);
    }
    case PROTO_M_SPMV: {
      __typeof__(job->in.spmv) *p = &job->in.spmv;
      /* The longest row, known from validation, tells a regular matrix
       * (thread- or warp-per-row kernels win) from a skewed one (merge path). */
      int algo = job->algo == GKCD_ALGO_AUTO
                     ? gkcu_spmv_pick_hint(ctx, p->rows, p->cols, p->nnz, p->max_row)
                     : job->algo + 1;
      job->algo_name = gkcu_spmv_algo_name(algo);
      if (p->beta != 0.0f && l->dev[4] != out) /* inputs: row_ptr, col_idx, values, x, y */
        cudaMemcpyAsync(out, l->dev[4], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
      /* A resident matrix brings its plan (csr_upload made it); by value: none. */
      if (sb)
        rc = slice_spmv(ctx, sb, algo, p->rows, p->cols, p->nnz, (const int32_t *)l->dev[0],
                        (const int32_t *)l->dev[1], fdev(l, 2), p->alpha, fdev(l, 3), p->beta, out,
                        p->plan, &nslices);
      else
        rc = gkcu_spmv_planned(ctx, algo, p->rows, p->cols, p->nnz, (const int32_t *)l->dev[0],
                               (const int32_t *)l->dev[1], fdev(l, 2), p->alpha, fdev(l, 3), p->beta,
                               out, p->plan);
      if (nslices > 1)
        log_debug("spmv %dx%d (%lld nonzeros): %d slices (%s)", p->rows, p->cols,
                  (long long)p->nnz, nslices, job->algo_name);
      return rc;
    }
    case PROTO_M_DOT:
      job->algo_name = "gkcu";
      return gkcu_dot_async(ctx, job->in.vec.n, fdev(l, 0), fdev(l, 1), (double *)out);
    case PROTO_M_AXPBY:
      job->algo_name = "gkcu";
      /* In place on the output: it starts as y (unless it is y). */
      if (l->dev[1] != out)
        cudaMemcpyAsync(out, l->dev[1], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
      return gkcu_axpby(ctx, job->in.vec.n, job->in.vec.alpha, fdev(l, 0), job->in.vec.beta, out);
    case PROTO_M_DOWNLOAD:
      return 0;
  }
  return GKC_EINTERNAL;
}

/* Runs job on slot s; leaves results or an error in job. */
static void run_on(cuda_impl *impl, slot *s, gkcd_job *job) {
  layout l;
  int upload = job->method == PROTO_M_UPLOAD || job->method == PROTO_M_CSR_UPLOAD;
  upload ? plan_upload(job, &l) : plan(job, &l);
  int rc;
  devcache *tc = tmp_cache(impl, s);
  if (l.tmp_bytes &&
      (rc = devcache_alloc(tc, l.tmp_bytes, (void **)&l.tmp, &l.tmp_cap, job->errmsg,
                           sizeof job->errmsg))) {
    job->err = rc;
    return;
  }
  /* csr_upload: the balanced spmv plan goes after the three arrays, in the
   * same allocation.  Its few KB ((rows + nnz) / 1024 * 16 bytes or less)
   * are not counted in the memory budget, which uses out_bytes. */
  size_t alloc_bytes = job->out_bytes, plan_bytes = 0;
  job->plan_off = 0;
  if (job->method == PROTO_M_CSR_UPLOAD &&
      (plan_bytes = gkcu_spmv_plan_bytes(s->ctx, job->in.csr.rows, job->in.csr.nnz)) > 0) {
    job->plan_off = up(job->out_bytes);
    alloc_bytes = job->plan_off + plan_bytes;
  }
  if (job->out_kind == OUT_RES_NEW) {
    if ((rc = devcache_alloc(impl->cache, alloc_bytes, &job->out_ptr, &job->out_cap,
                             job->errmsg, sizeof job->errmsg))) {
      job->err = rc;
      job->out_ptr = NULL;
      goto out;
    }
  }
  l.out_dev = job->out_kind == OUT_RES || job->out_kind == OUT_RES_NEW ? job->out_ptr
                                                                       : l.tmp + l.res_off;
  size_t stage_need = l.stage_bytes > l.res_bytes ? l.stage_bytes : l.res_bytes;
  if (stage_need && grow_stage(s, stage_need, job) != 0) goto out;
  if (job->out_kind == OUT_BIN && !(job->out = malloc(job->out_bytes ? job->out_bytes : 1))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for the result", job->out_bytes);
    goto out;
  }

  cudaError_t e = cudaEventRecord(s->ev_in, s->stream);
  if (e == cudaSuccess) e = copy_in(s, &l, upload ? l.out_dev : l.tmp, upload);
  if (e == cudaSuccess) e = cudaEventRecord(s->ev0, s->stream);
  if (e != cudaSuccess) {
    fail_cuda(impl, job, e, "copying the request to the device");
    goto out;
  }
  if (upload) {
    if (job->method == PROTO_M_CSR_UPLOAD) {
      __typeof__(job->in.csr) *c = &job->in.csr;
      job->algo_used = gkcu_spmv_pick_hint(s->ctx, c->rows, c->cols, c->nnz, c->max_row) - 1;
      job->algo_name = gkcu_spmv_algo_name(job->algo_used + 1);
      /* row_ptr is at the start of out_dev, its copy enqueued on this stream */
      if (job->plan_off &&
          (rc = gkcu_spmv_plan(s->ctx, c->rows, c->nnz, (const int32_t *)l.out_dev,
                               (char *)l.out_dev + job->plan_off)) != 0) {
        snprintf(job->errmsg, sizeof job->errmsg, "%s", gkcu_ctx_errmsg(s->ctx));
        job->err = rc;
        e = cudaStreamSynchronize(s->stream);
        if (rc == GKC_EDEVICE_ERROR && cuda_is_sticky(e)) {
          cuda_gpu_lost(impl, "%s", job->errmsg);
          fail_lost(impl, job);
        }
        goto out;
      }
    }
  } else if ((rc = run_kernel(impl, s, job, &l)) != 0) {
    snprintf(job->errmsg, sizeof job->errmsg, "%s", gkcu_ctx_errmsg(s->ctx));
    job->err = rc;
    e = cudaStreamSynchronize(s->stream);
    if (rc == GKC_EDEVICE_ERROR && cuda_is_sticky(e)) {
      cuda_gpu_lost(impl, "%s", job->errmsg);
      fail_lost(impl, job);
    }
    goto out;
  }
  /* The result back to the host: into the stage (then the reply), or
   * straight into a registered region. */
  int to_host = !upload && (job->out_kind == OUT_BIN || job->out_kind == OUT_HOST ||
                            job->method == PROTO_M_REDUCE || job->method == PROTO_M_DOT);
  const void *res_src = job->method == PROTO_M_DOWNLOAD ? l.dev[0] : l.out_dev;
  int direct = job->out_kind == OUT_HOST && job->out_res && job->out_res->pinned &&
               job->method != PROTO_M_REDUCE && job->method != PROTO_M_DOT;
  if ((e = cudaEventRecord(s->ev1, s->stream)) != cudaSuccess ||
      (to_host && (e = cudaMemcpyAsync(direct ? job->out_ptr : s->stage, res_src, l.res_bytes,
                                       cudaMemcpyDeviceToHost, s->stream)) != cudaSuccess) ||
      (e = cudaEventRecord(s->ev_out, s->stream)) != cudaSuccess ||
      (e = cudaStreamSynchronize(s->stream)) != cudaSuccess) {
    fail_cuda(impl, job, e, "running the kernel");
    goto out;
  }
  float ms = 0;
  if (cudaEventElapsedTime(&ms, s->ev0, s->ev1) == cudaSuccess) job->kernel_us = ms * 1e3;
  if (cudaEventElapsedTime(&ms, s->ev_in, s->ev0) == cudaSuccess) job->h2d_us = ms * 1e3;
  if (cudaEventElapsedTime(&ms, s->ev1, s->ev_out) == cudaSuccess) job->d2h_us = ms * 1e3;
  if (job->method == PROTO_M_REDUCE || job->method == PROTO_M_DOT)
    memcpy(&job->value, s->stage, sizeof(double));
  else if (to_host && !direct)
    copy(job->out_kind == OUT_BIN ? job->out : job->out_ptr, s->stage, job->out_bytes);
  /* Lost while it ran (another part's error, or the daemon took the device
   * out): what it made there is not to be used. */
  if (cuda_lost(impl)) fail_lost(impl, job);
out:
  if (job->err) {
    free(job->out);
    job->out = NULL;
    if (job->out_kind == OUT_RES_NEW && job->out_ptr) {
      devcache_free(impl->cache, job->out_ptr, job->out_cap);
      job->out_ptr = NULL;
    }
  }
  devcache_free(tc, l.tmp, l.tmp_cap);
}

/* A reduce or dot whose inputs came with the request and fit in TINY_BYTES
 * runs without copies: the inputs go into the slot's pinned stage, which
 * the kernel reads over the bus (cudaMallocHost memory is mapped into the
 * device's address space under unified addressing), and the kernel writes
 * its double straight back into the stage.  No H2D or D2H operation, no
 * device temporaries, no events: on a 16-float reduce that is two copy
 * operations and four event records less on the GPU's timeline and the
 * host's (bench/RESULTS.md, the small-request figures).  kernel_us is then
 * the host's time from the launch to the end of the stream sync; h2d_us
 * and d2h_us are absent (there were no copies).  1 when it ran job (or
 * failed it), 0 when job is not tiny. */
enum { TINY_BYTES = 16 << 10 };
static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static int run_tiny(cuda_impl *impl, slot *s, gkcd_job *job) {
  const gkcd_span *in[2];
  int nin;
  if (job->method == PROTO_M_REDUCE) in[0] = &job->in.reduce.x, nin = 1;
  else if (job->method == PROTO_M_DOT) in[0] = &job->in.vec.x, in[1] = &job->in.vec.y, nin = 2;
  else return 0;
  size_t at = 0;
  for (int i = 0; i < nin; i++) {
    if (!in[i]->ptr || in[i]->where == SPAN_RES || in[i]->bytes == 0) return 0;
    at += up(in[i]->bytes);
  }
  if (at + ALIGN > TINY_BYTES) return 0;
  if (grow_stage(s, at + ALIGN, job) != 0) return 1;
  char *st = s->stage;
  const float *x[2] = {NULL, NULL};
  for (int i = 0, o = 0; i < nin; o += (int)up(in[i]->bytes), i++) {
    memcpy(st + o, in[i]->ptr, in[i]->bytes);
    x[i] = (const float *)(st + o);
  }
  double *res = (double *)(st + at);
  gkcu_ctx *ctx = s->ctx;
  double t0 = now_us();
  int rc;
  if (job->method == PROTO_M_REDUCE) {
    int algo = job->algo == GKCD_ALGO_AUTO ? gkcu_reduce_pick(ctx, job->in.reduce.n)
                                           : job->algo + 1;
    job->algo_name = gkcu_reduce_algo_name(algo);
    rc = gkcu_reduce_async(ctx, algo, job->in.reduce.op, x[0], job->in.reduce.n, res);
  } else {
    job->algo_name = "gkcu";
    rc = gkcu_dot_async(ctx, job->in.vec.n, x[0], x[1], res);
  }
  cudaError_t e = cudaStreamSynchronize(s->stream);
  if (rc) {
    job_fail(job, rc, "%s", gkcu_ctx_errmsg(ctx));
    if (rc == GKC_EDEVICE_ERROR && cuda_is_sticky(e)) {
      cuda_gpu_lost(impl, "%s", job->errmsg);
      fail_lost(impl, job);
    }
  } else if (e != cudaSuccess) {
    fail_cuda(impl, job, e, "running the kernel");
  } else {
    job->kernel_us = now_us() - t0;
    memcpy(&job->value, (const void *)res, sizeof(double));
  }
  return 1;
}

/* The lane whose slots run job: the scheduler's choice, when there are two. */
static int job_lane(const cuda_impl *impl, const gkcd_job *job) {
  return lanes_count(impl->lanes) > 1 && job->lane == LANE_LATENCY ? LANES_LATENCY : LANES_BULK;
}

static void cuda_run(gkcd_backend *be, gkcd_job *job) {
  cuda_impl *impl = be->impl;
  if (cuda_lost(impl)) {
    fail_lost(impl, job);
  } else if (job->method == PROTO_M_SGEMM && job->algo + 1 == GKCU_SGEMM_CUBLAS_TF32 &&
             !job->in.sgemm.tf32) {
    job_fail(job, GKC_EINVALID_ARGUMENT,
             "argument 'algo': cublas_tf32 rounds inputs to TF32; ask for it with"
             " precision: \"tf32\"");
  } else if (job->method == PROTO_M_SOLVE || job->method == PROTO_M_BATCH) {
    cudaSetDevice(impl->device);
    slot *s = take_slot(impl, job_lane(impl, job));
    job->method == PROTO_M_SOLVE ? cuda_run_solve(impl, s, job) : cuda_run_batch(impl, s, job);
    give_slot(impl, s);
    if (!job->err && cuda_lost(impl)) fail_lost(impl, job);
  } else {
    cudaSetDevice(impl->device);
    slot *s = take_slot(impl, job_lane(impl, job));
    if (!run_tiny(impl, s, job)) run_on(impl, s, job);
    give_slot(impl, s);
  }
  job_finish(job);
}

/* Resident arrays live in device memory, from the same caching allocator. */
static int cuda_res_alloc(gkcd_backend *be, size_t bytes, void **ptr, size_t *cap, char *msg,
                          size_t msglen) {
  cuda_impl *impl = be->impl;
  cudaSetDevice(impl->device);
  return devcache_alloc(impl->cache, bytes, ptr, cap, msg, msglen);
}

static void cuda_res_free(gkcd_backend *be, void *ptr, size_t cap) {
  cuda_impl *impl = be->impl;
  cudaSetDevice(impl->device);
  devcache_free(impl->cache, ptr, cap);
}

/* Client regions are page-locked for DMA, so copies to and from them need
 * no staging.  Failure just means the slower staged path.  Portable: every
 * GPU's copies use them, whichever device registered them. */
static int cuda_region_pin(gkcd_backend *be, void *ptr, size_t bytes) {
  cuda_impl *impl = be->impl;
  cudaSetDevice(impl->device);
  cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return 0;
}

static void cuda_region_unpin(gkcd_backend *be, void *ptr) {
  cuda_impl *impl = be->impl;
  cudaSetDevice(impl->device);
  if (cudaHostUnregister(ptr) != cudaSuccess) cudaGetLastError();
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
  cudaSetDevice(impl->device);
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
  cudaSetDevice(impl->device);
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

/* GKCD_CUDA_LANES=streams: no green contexts even where the driver has
 * them (to test and measure the fallback); unset or "green": use them. */
int cuda_force_streams(void) {
  const char *v = getenv("GKCD_CUDA_LANES");
  if (!v || !*v || strcmp(v, "green") == 0) return 0;
  if (strcmp(v, "streams") == 0) return 1;
  log_warn("GKCD_CUDA_LANES=%s ignored: it takes 'green' or 'streams'", v);
  return 0;
}

/* One slot on lane: its stream (in the lane's green context, or at the
 * lane's priority), events, and a gkcu context told its lane's SM count. */
static int slot_init(cuda_impl *impl, slot *s, int lane, int i, char *msg, size_t msglen) {
  cudaError_t e;
  s->lane = lane;
  if ((e = lanes_stream_create(impl->lanes, lane, &s->stream, msg, msglen)) != cudaSuccess) {
    s->stream = NULL;
    return GKC_EDEVICE_ERROR;
  }
  if ((e = cudaEventCreate(&s->ev_in)) != cudaSuccess ||
      (e = cudaEventCreate(&s->ev0)) != cudaSuccess ||
      (e = cudaEventCreate(&s->ev1)) != cudaSuccess ||
      (e = cudaEventCreate(&s->ev_out)) != cudaSuccess) {
    snprintf(msg, msglen, "CUDA: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return GKC_EDEVICE_ERROR;
  }
  int rc = gkcu_ctx_create(&s->ctx, s->stream);
  if (rc == 0 && lanes_green(impl->lanes)) rc = gkcu_ctx_set_sms(s->ctx, lanes_sms(impl->lanes, lane));
  if (rc) {
    snprintf(msg, msglen, "creating the CUDA context for stream %d failed: %s", i,
             s->ctx ? gkcu_ctx_errmsg(s->ctx) : "(no context)");
    return rc;
  }
  return 0;
}

int cuda_part_open(gkcd_backend **out, const gkcd_config *cfg, cuda_gpu *gpu, int part,
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
    rc = slot_init(impl, &impl->slots[i], lane, i, msg, msglen);
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
  be->algos[PROTO_M_SGEMM] = sgemm_algos;
  be->algos[PROTO_M_REDUCE] = reduce_algos;
  be->algos[PROTO_M_SPMV] = spmv_algos;
  be->algos[PROTO_M_DOT] = blas1_algos;
  be->algos[PROTO_M_AXPBY] = blas1_algos;
  be->algos[PROTO_M_SOLVE] = cuda_solve_algos;
  be->algos[PROTO_M_BATCH] = cuda_batch_algos;
  be->run = cuda_run;
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

int cuda_is_backend(const gkcd_backend *be) { return be && be->destroy == cuda_destroy; }

