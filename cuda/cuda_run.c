/* cuda_run.c: one request on the CUDA backend, from the worker that took
 * it to job_finish (backend.h's run).
 *
 * The worker takes a free slot of the job's lane (a stream with its gkcu
 * context, events and pinned stage: cuda_backend_int.h), packs the
 * request's arrays into the stage, and on the slot's stream copies them to
 * one device allocation from the caching allocator (cuda_layout.h), runs
 * the kernel between two events (cuda_launch.c) and copies the result
 * back; then it waits for that stream alone.  With more workers than slots,
 * requests on different streams overlap their copies and kernels.  Inputs
 * were validated on the host before they get here (daemon/validate.c), so
 * no kernel is ever launched on indices it could run off with.  Tiny
 * reduces and dots take a path without copies (cuda_tiny.c); solve and
 * batch their own (cuda_solve.c, cuda_long.c).
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_layout.h"
#include "gkc_errors.h"
#include "gkcu.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"
#include "resident.h"
#include "scheduler.h"

/* job->lane (scheduler.h) indexes the lanes made here. */
_Static_assert((int)LANE_BULK == (int)LANES_BULK && (int)LANE_LATENCY == (int)LANES_LATENCY,
               "lane numbers");

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

int cuda_grow_stage(slot *s, size_t bytes, gkcd_job *job) {
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

/* Runs job on slot s; leaves results or an error in job. */
/* A launcher on s's context refused or failed with rc: the job fails with
 * the context's message; once the stream has drained, a sticky error means
 * the GPU is lost (every later job fails as device_lost). */
static void launch_failed(cuda_impl *impl, slot *s, gkcd_job *job, int rc) {
  snprintf(job->errmsg, sizeof job->errmsg, "%s", gkcu_ctx_errmsg(s->ctx));
  job->err = rc;
  cudaError_t e = cudaStreamSynchronize(s->stream);
  if (rc == GKC_EDEVICE_ERROR && cuda_is_sticky(e)) {
    cuda_gpu_lost(impl, "%s", job->errmsg);
    fail_lost(impl, job);
  }
}

static void run_on(cuda_impl *impl, slot *s, gkcd_job *job) {
  layout l;
  int upload = job->method == PROTO_M_UPLOAD || job->method == PROTO_M_CSR_UPLOAD;
  upload ? layout_plan_upload(job, &l) : layout_plan(job, &l);
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
    job->plan_off = cuda_up(job->out_bytes);
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
  /* The result back to the host: into the stage (then the reply), or
   * straight into a registered region; a resident result stays where it
   * is, and needs no stage (a 256 MiB resident product kept 256 MiB of
   * pinned stage per slot before). */
  int to_host = !upload && (job->out_kind == OUT_BIN || job->out_kind == OUT_HOST ||
                            job->method == PROTO_M_REDUCE || job->method == PROTO_M_DOT);
  int direct = job->out_kind == OUT_HOST && job->out_res && job->out_res->pinned &&
               job->method != PROTO_M_REDUCE && job->method != PROTO_M_DOT;
  size_t res_stage = to_host && !direct ? l.res_bytes : 0;
  size_t stage_need = l.stage_bytes > res_stage ? l.stage_bytes : res_stage;
  if (stage_need && cuda_grow_stage(s, stage_need, job) != 0) goto out;
  if (job->out_kind == OUT_BIN && !(job->out = malloc(job->out_bytes ? job->out_bytes : 1))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for the result", job->out_bytes);
    goto out;
  }

  /* Events only around what there is: a request whose operands are all
   * resident and whose result stays resident (an iterative client's usual
   * step) records the kernel's two and nothing else, two records and two
   * queries fewer on its path (bench/RESULTS.md, resident sgemm). */
  cudaError_t e = l.ncopies ? cudaEventRecord(s->ev_in, s->stream) : cudaSuccess;
  if (e == cudaSuccess) e = layout_copy_in(s, &l, upload ? l.out_dev : l.tmp, upload);
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
        launch_failed(impl, s, job, rc);
        goto out;
      }
    }
  } else if ((rc = cuda_launch(impl, s, job, &l)) != 0) {
    launch_failed(impl, s, job, rc);
    goto out;
  }
  const void *res_src = job->method == PROTO_M_DOWNLOAD ? l.dev[0] : l.out_dev;
  if ((e = cudaEventRecord(s->ev1, s->stream)) != cudaSuccess ||
      (to_host && (e = cudaMemcpyAsync(direct ? job->out_ptr : s->stage, res_src, l.res_bytes,
                                       cudaMemcpyDeviceToHost, s->stream)) != cudaSuccess) ||
      (to_host && (e = cudaEventRecord(s->ev_out, s->stream)) != cudaSuccess) ||
      (e = cudaStreamSynchronize(s->stream)) != cudaSuccess) {
    fail_cuda(impl, job, e, "running the kernel");
    goto out;
  }
  float ms = 0;
  if (cudaEventElapsedTime(&ms, s->ev0, s->ev1) == cudaSuccess) job->kernel_us = ms * 1e3;
  if (l.ncopies && cudaEventElapsedTime(&ms, s->ev_in, s->ev0) == cudaSuccess) job->h2d_us = ms * 1e3;
  if (to_host && cudaEventElapsedTime(&ms, s->ev1, s->ev_out) == cudaSuccess) job->d2h_us = ms * 1e3;
  if (job->method == PROTO_M_REDUCE || job->method == PROTO_M_DOT)
    memcpy(&job->value, s->stage, sizeof(double));
  else if (to_host && !direct)
    cuda_copy_host(job->out_kind == OUT_BIN ? job->out : job->out_ptr, s->stage, job->out_bytes);
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

/* The lane whose slots run job: the scheduler's choice, when there are two. */
static int job_lane(const cuda_impl *impl, const gkcd_job *job) {
  return lanes_count(impl->lanes) > 1 && job->lane == LANE_LATENCY ? LANES_LATENCY : LANES_BULK;
}

void cuda_run(gkcd_backend *be, gkcd_job *job) {
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
    if (!cuda_run_tiny(impl, s, job)) run_on(impl, s, job);
    give_slot(impl, s);
  }
  job_finish(job);
}

/* Resident arrays live in device memory, from the same caching allocator. */
