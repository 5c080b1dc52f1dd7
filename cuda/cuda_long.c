/* cuda_long.c: the CUDA backend's batch (solve is in cuda_solve.c).
 *
 * batch runs natively: each step is one of the gkcu launchers on the
 * resident arrays, on the slot's stream; a dot or reduce waits for its
 * value (later steps may need it on the host to form alpha or beta).
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

const char *const cuda_batch_algos[] = {"gkcu", NULL};

int cuda_poll_job(void *arg) {
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
    int why = i > 0 ? cuda_poll_job(job) : 0;
    float alpha, beta;
    if (batch_step_begin(job, i, !why ? 0 : why == CPU_SOLVE_CANCELLED ? BATCH_STOP_CANCELLED : BATCH_STOP_DEADLINE,
                         &alpha, &beta))
      break;
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
