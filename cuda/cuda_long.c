/* cuda_long.c: the CUDA backend's solve and batch.
 *
 * batch runs natively: each step is one of the gkcu launchers on the
 * resident arrays, on the slot's stream; a dot or reduce waits for its
 * value (later steps may need it on the host to form alpha or beta).
 *
 * solve is, for now, an interim path: the matrix and vectors come to the
 * host, cpu_solve iterates there (float64, OpenMP, the CPU backend's code,
 * so the results match it exactly), and x goes back where `out` says.  It is
 * correct but not fast; the fused-kernel, CUDA-Graph solver the issue asks
 * for is still to be written (algo "cpu_fallback" says which ran).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu_solve.h"
#include "cuda_backend_int.h"
#include "gkc_errors.h"
#include "gkcu_blas1.h"
#include "gkcu_reduce.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"

const char *const cuda_solve_algos[] = {"cpu_fallback", NULL};
const char *const cuda_batch_algos[] = {"gkcu", NULL};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int poll_job(void *arg) {
  gkcd_job *job = arg;
  if (atomic_load_explicit(&job->cancel, memory_order_relaxed)) return CPU_SOLVE_CANCELLED;
  if (job->deadline_ns) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec > job->deadline_ns)
      return CPU_SOLVE_DEADLINE;
  }
  return 0;
}

/* A host copy of bytes at p: device memory when res, else p itself (copied
 * when unaligned).  NULL with the job failed on error. */
static void *host_copy(cuda_impl *impl, gkcd_job *job, const void *p, size_t bytes, int res,
                       void **tmp) {
  *tmp = NULL;
  if (!res && ((uintptr_t)p & 3) == 0) return (void *)p;
  if (!(*tmp = malloc(bytes ? bytes : 1))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes", bytes);
    return NULL;
  }
  if (!res) return memcpy(*tmp, p, bytes);
  cudaError_t e = cudaMemcpy(*tmp, p, bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    fail_cuda(impl, job, e, "copying the matrix to the host");
    return NULL;
  }
  return *tmp;
}

void cuda_run_solve(cuda_impl *impl, slot *s, gkcd_job *job) {
  (void)s;
  __typeof__(job->in.solve) *v = &job->in.solve;
  size_t rp_b = ((size_t)v->n + 1) * 4, nz_b = (size_t)v->nnz * 4;
  void *t[6] = {0};
  float *x = NULL;
  const int32_t *rp = host_copy(impl, job, v->row_ptr, rp_b, 1, &t[0]);
  const int32_t *ci = rp ? host_copy(impl, job, v->col_idx, nz_b, 1, &t[1]) : NULL;
  const float *va = ci ? host_copy(impl, job, v->values, nz_b, 1, &t[2]) : NULL;
  const float *b = va ? host_copy(impl, job, v->b.ptr, v->b.bytes, v->b.where == SPAN_RES, &t[3])
                      : NULL;
  const float *x0 = NULL;
  if (b && v->x0.ptr)
    x0 = host_copy(impl, job, v->x0.ptr, v->x0.bytes, v->x0.where == SPAN_RES, &t[4]);
  if (!b || (v->x0.ptr && !x0)) goto out;
  if (v->history &&
      !(job->history = job->priv[1] = malloc((size_t)v->max_iter * sizeof(double)))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate the history");
    goto out;
  }
  /* x on the host: the reply buffer, the client's region, or a temporary
   * copied to the resident array afterwards. */
  if (job->out_kind == OUT_BIN) {
    x = job->out = malloc(job->out_bytes);
  } else if (job->out_kind == OUT_HOST) {
    x = job->out_ptr;
  } else {
    x = t[5] = malloc(job->out_bytes);
  }
  if (!x) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for x", job->out_bytes);
    goto out;
  }
  cpu_solve_opts o = {v->method, v->rtol, v->atol, v->max_iter, job->history, poll_job, job, 0};
  cpu_solve_result res;
  double t0 = now_us();
  int rc = cpu_solve(v->n, rp, ci, va, b, x0, x, &o, &res);
  job->kernel_us = now_us() - t0;
  if (rc == CPU_SOLVE_ENOMEM) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate the solver's vectors");
    goto out;
  }
  if (rc == CPU_SOLVE_EZERO_DIAG) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "argument 'method': pcg divides by the diagonal, and"
             " row %" PRId32 " of the matrix has a zero (or non-finite) diagonal entry", res.bad_row);
    goto out;
  }
  if (res.reason == CPU_SOLVE_CANCELLED) {
    job_fail(job, GKC_ECANCELLED, "cancelled after %" PRId64 " iterations", res.iterations);
    goto out;
  }
  if (job->out_kind == OUT_RES || job->out_kind == OUT_RES_NEW) {
    int arc = 0;
    if (job->out_kind == OUT_RES_NEW)
      arc = devcache_alloc(impl->cache, job->out_bytes, &job->out_ptr, &job->out_cap, job->errmsg,
                           sizeof job->errmsg);
    if (arc) {
      job->err = arc;
      job->out_ptr = NULL;
      goto out;
    }
    cudaError_t e = cudaMemcpy(job->out_ptr, x, job->out_bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      fail_cuda(impl, job, e, "copying x to the device");
      goto out;
    }
  }
  job->iterations = res.iterations;
  job->reason = res.reason;
  job->value = res.residual;
  job->algo_name = cuda_solve_algos[0];
out:
  if (job->err) {
    free(job->out);
    job->out = NULL;
    if (job->out_kind == OUT_RES_NEW && job->out_ptr) {
      devcache_free(impl->cache, job->out_ptr, job->out_cap);
      job->out_ptr = NULL;
    }
  }
  for (int i = 0; i < 6; i++) free(t[i]);
}

/* One step on the slot's stream; 0 or a gkc error (message in the ctx). */
static int run_step(slot *s, gkcd_step *st, float alpha, float beta) {
  gkcu_ctx *ctx = s->ctx;
  cudaStream_t str = s->stream;
  switch (st->op) {
    case BATCH_DOT: return gkcu_dot(ctx, st->n, st->x, st->y, &st->value);
    case BATCH_REDUCE:
      return gkcu_reduce(ctx, gkcu_reduce_pick(ctx, st->n), st->sub, st->x, st->n, &st->value);
    case BATCH_AXPBY:
      if (st->out == st->x && st->x != st->y) /* out = beta*y + alpha*out */
        return gkcu_axpby(ctx, st->n, beta, st->y, alpha, st->out);
      if (st->out != st->y &&
          cudaMemcpyAsync(st->out, st->y, st->out_bytes, cudaMemcpyDeviceToDevice, str) != cudaSuccess)
        return GKC_EDEVICE_ERROR;
      return gkcu_axpby(ctx, st->n, alpha, st->x, beta, st->out);
    case BATCH_SPMV:
      if (beta != 0.0f && st->out != st->y &&
          cudaMemcpyAsync(st->out, st->y, st->out_bytes, cudaMemcpyDeviceToDevice, str) != cudaSuccess)
        return GKC_EDEVICE_ERROR;
      return gkcu_spmv_planned(ctx, gkcu_spmv_pick_hint(ctx, st->m, st->k, st->nnz, st->max_row),
                               st->m, st->k, st->nnz, st->row_ptr, st->col_idx, st->values, alpha,
                               st->x, beta, st->out, st->plan);
    case BATCH_SGEMM: {
      int32_t n = (int32_t)st->n;
      if (beta != 0.0f && st->out != st->c &&
          cudaMemcpyAsync(st->out, st->c, st->out_bytes, cudaMemcpyDeviceToDevice, str) != cudaSuccess)
        return GKC_EDEVICE_ERROR;
      return gkcu_sgemm(ctx, gkcu_sgemm_pick(ctx, st->m, n, st->k), st->m, n, st->k, alpha, st->a,
                        st->trans_a, st->b, st->trans_b, beta, st->out);
    }
  }
  return GKC_EINTERNAL;
}

void cuda_run_batch(cuda_impl *impl, slot *s, gkcd_job *job) {
  gkcd_step *steps = job->in.batch.steps;
  job->algo_name = cuda_batch_algos[0];
  cudaError_t e = cudaEventRecord(s->ev0, s->stream);
  for (int i = 0; i < job->in.batch.nsteps && e == cudaSuccess; i++) {
    gkcd_step *st = &steps[i];
    int why = i > 0 ? poll_job(job) : 0;
    if (why) {
      job_fail(job, why == CPU_SOLVE_CANCELLED ? GKC_ECANCELLED : GKC_EDEADLINE_EXCEEDED,
               "step %d (%s): %s before it started; steps 0 to %d ran", i, batch_op_name(st->op),
               why == CPU_SOLVE_CANCELLED ? "cancelled" : "the deadline passed", i - 1);
      break;
    }
    float alpha = 0, beta = 0;
    int bad = 0;
    if (st->op == BATCH_AXPBY || st->op == BATCH_SPMV || st->op == BATCH_SGEMM) {
      if (batch_scalar(steps, &st->alpha, &alpha)) bad = 'a';
      else if (batch_scalar(steps, &st->beta, &beta)) bad = 'b';
    }
    if (bad) {
      job_fail(job, GKC_EINVALID_ARGUMENT, "step %d (%s): argument '%s' came out as %g, not a"
               " finite float32 (a division by zero?); steps 0 to %d ran and their outputs are"
               " written", i, batch_op_name(st->op), bad == 'a' ? "alpha" : "beta",
               batch_scalar_value(steps, bad == 'a' ? &st->alpha : &st->beta), i - 1);
      break;
    }
    int rc = run_step(s, st, alpha, beta);
    if (rc) {
      job_fail(job, rc, "step %d (%s): %s; steps 0 to %d ran", i, batch_op_name(st->op),
               gkcu_ctx_errmsg(s->ctx), i - 1);
      break;
    }
    job->in.batch.done = i + 1;
  }
  /* Earlier steps' work must be done (and any asynchronous fault seen)
   * before the reply says so. */
  if (e == cudaSuccess) e = cudaEventRecord(s->ev1, s->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
  if (e != cudaSuccess) {
    if (!job->err) fail_cuda(impl, job, e, "running the batch");
    return;
  }
  float ms = 0;
  if (cudaEventElapsedTime(&ms, s->ev0, s->ev1) == cudaSuccess) job->kernel_us = ms * 1e3;
}
