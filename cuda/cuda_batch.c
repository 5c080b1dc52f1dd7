/* cuda_batch.c: the CUDA backend's batch.
 *
 * It runs natively: each step is one of the gkcu launchers on the
 * resident arrays (dot, axpby and spmv on float32 or float64 ones, as the
 * step's dtype says), on the slot's stream; the dots' and reduces' values and
 * the axpbys' scalars stay on the device (gkcu_batch.h), so the host waits
 * once per batch unless an spmv or sgemm needs a value for its scalars.
 *
 * An spmv step's x or out may be a slice of a client's region (host
 * memory, job.h x_host / out_host): the slice gets a place in one device
 * scratch allocation for the batch, x is copied there on the stream just
 * before its step (so it reads what an earlier step wrote into the region)
 * and out copied back just after it, as cudaMemcpyAsync from the mapping:
 * straight from the pages once the pinner registered them, else through
 * the driver's own staging (a copy to pageable memory returns when done,
 * so a later step's copy from the same slice sees it).  The slot's stage
 * is not used: it holds the batch's state record.
 */
#include "cuda_batch.h"

#include "backend.h"
#include "cuda_fail.h"
#include "cuda_layout.h"
#include "gkc_errors.h"
#include "gkcu_batch.h"
#include "gkcu_blas1.h"
#include "gkcu_reduce.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"
#include "res_object.h"

const char *const cuda_batch_algos[] = {"gkcu", NULL};

/* Places in dscratch for the steps' region slices: points st->x / st->out
 * of those steps there, their host addresses kept in hx[] / ho[]; returns
 * the bytes needed (0: none), or with dscratch NULL only counts them. */
static size_t place_slices(gkcd_step *steps, int n, char *dscratch, const void **hx, void **ho) {
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    gkcd_step *st = &steps[i];
    if (st->x_host) {
      if (dscratch) hx[i] = st->x, st->x = dscratch + at;
      at += cuda_up(st->x_bytes);
    }
    if (st->out_host) {
      if (dscratch) ho[i] = st->out, st->out = dscratch + at;
      at += cuda_up(st->out_bytes);
    }
  }
  return at;
}

/* Puts back the host addresses place_slices swapped out. */
static void unplace_slices(gkcd_step *steps, int n, const void **hx, void **ho) {
  for (int i = 0; i < n; i++) {
    if (steps[i].x_host) steps[i].x = hx[i];
    if (steps[i].out_host) steps[i].out = ho[i];
  }
}

/* An spmv or sgemm step on the slot's stream, its scalars resolved on the
 * host (a64, b64: in double; a float32 step takes them rounded, as
 * batch_step_begin does); 0 or a gkc error (message in the ctx).  The
 * other ops run from the loop below, their scalars on the device. */
static int run_step(cuda_slot *s, gkcd_step *st, double a64, double b64) {
  gkcu_ctx *ctx = s->ctx;
  cudaStream_t str = s->stream;
  float alpha = (float)a64, beta = (float)b64;
  switch (st->op) {
    case BATCH_SPMV: {
      if (b64 != 0 && st->out != st->y &&
          cudaMemcpyAsync(st->out, st->y, st->out_bytes, cudaMemcpyDeviceToDevice, str) != cudaSuccess)
        return GKC_EDEVICE_ERROR;
      int algo = gkcu_spmv_pick_hint(ctx, st->m, st->k, st->nnz, st->max_row);
      if (st->dtype == DT_F64 || st->values_dtype == DT_F64) /* as cuda_spmv.c */
        return gkcu_spmv_typed(ctx, gkcu_spmv_typed_algo(algo), st->m, st->k, st->nnz, st->row_ptr,
                               st->col_idx, st->values, st->values_dtype == DT_F64,
                               st->dtype == DT_F64 ? a64 : alpha, st->x, st->dtype == DT_F64,
                               st->dtype == DT_F64 ? b64 : beta, st->out, st->max_row);
      return gkcu_spmv_planned(ctx, algo, st->m, st->k, st->nnz, st->row_ptr, st->col_idx,
                               st->values, alpha, st->x, beta, st->out, st->plan);
    }
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

/* A scalar that names earlier steps' values (it needs them resolved). */
static int refers(const gkcd_scalar *c) { return c->num >= 0 || c->den >= 0; }

static gkcu_bscalar dev_scalar(const gkcd_scalar *c) {
  gkcu_bscalar b = {c->scale, c->num, c->den};
  return b;
}

/* The device values so far to the host (steps[j].value) and the failure
 * record into *hs: waits for the stream. */
static cudaError_t catch_up(cuda_slot *s, gkcd_job *job, int upto, const gkcu_batch_state *ds,
                            gkcu_batch_state *hs) {
  cudaError_t e = cudaMemcpyAsync(hs, ds, sizeof *hs, cudaMemcpyDeviceToHost, s->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
  if (e != cudaSuccess) return e;
  gkcd_step *steps = job->in.batch.steps;
  for (int j = 0; j < upto; j++)
    if (steps[j].op == BATCH_DOT || steps[j].op == BATCH_REDUCE) steps[j].value = hs->vals[j];
  return cudaSuccess;
}

/* The batch on the slot's stream.  dot and reduce leave their values in
 * device memory and axpby reads its alpha and beta from there
 * (gkcu_batch.h), so a batch of those and of spmv/sgemm with literal
 * scalars (a CG iteration) waits for the GPU once, at the end.  An spmv or
 * sgemm whose scalar names an earlier value, or any step after an axpby
 * whose scalar might have failed on the device, first catches up: waits,
 * takes the values, and stops if a scalar failed. */
void cuda_batch_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  gkcd_step *steps = job->in.batch.steps;
  const int nsteps = job->in.batch.nsteps;
  job->algo_name = cuda_batch_algos[0];
  void *dmem = NULL;
  size_t dcap = 0;
  int rc = devcache_alloc(impl->cache, sizeof(gkcu_batch_state), &dmem, &dcap, job->errmsg,
                          sizeof job->errmsg);
  if (rc) {
    job->err = rc;
    return;
  }
  /* the region slices' places on the device (none: nothing allocated) */
  const void *hx[BATCH_MAX_STEPS] = {0};
  void *ho[BATCH_MAX_STEPS] = {0}, *smem = NULL;
  size_t scap = 0, sbytes = place_slices(steps, nsteps, NULL, hx, ho);
  if (sbytes && (rc = devcache_alloc(impl->cache, sbytes, &smem, &scap, job->errmsg,
                                     sizeof job->errmsg))) {
    job->err = rc;
    devcache_free(impl->cache, dmem, dcap);
    return;
  }
  if (sbytes) place_slices(steps, nsteps, smem, hx, ho);
  gkcu_batch_state *ds = dmem, local;
  gkcu_batch_state *hs = s->stage && s->stage_cap >= sizeof local ? s->stage : &local;
  int pending = 0;  /* device values the host has not taken */
  int may_fail = 0; /* an axpby whose scalar may have failed, not looked at yet */
  int failed = 0;   /* a device scalar failed (hs holds which) */
  cudaError_t e = cudaEventRecord(s->ev0, s->stream);
  int inited = 0;   /* the device state was reset: its record can be read */
  if (e == cudaSuccess) {
    if ((rc = gkcu_batch_state_init(s->ctx, ds))) {
      job_fail(job, rc, "batch: %s", gkcu_ctx_errmsg(s->ctx));
      goto done;
    }
    inited = 1;
  }
  for (int i = 0; i < nsteps && e == cudaSuccess; i++) {
    gkcd_step *st = &steps[i];
    int why = i > 0 ? job_poll(job) : 0;
    if (why) {
      float a, b;
      (void)batch_step_begin(job, i, why == SOLVE_R_CANCELLED ? BATCH_STOP_CANCELLED
                                                              : BATCH_STOP_DEADLINE, &a, &b);
      break;
    }
    gkcu_ctx *ctx = s->ctx;
    switch (st->op) {
      case BATCH_DOT:
        rc = st->dtype == DT_F64 ? gkcu_dot_f64_async(ctx, st->n, st->x, st->y, &ds->vals[i])
                                 : gkcu_dot_async(ctx, st->n, st->x, st->y, &ds->vals[i]);
        pending = 1;
        break;
      case BATCH_REDUCE:
        rc = gkcu_reduce_async(ctx, gkcu_reduce_pick(ctx, st->n), st->sub, st->x, st->n,
                               &ds->vals[i]);
        pending = 1;
        break;
      case BATCH_AXPBY:
        if (st->dtype == DT_F64)
          rc = gkcu_axpby_ref_f64(ctx, i, st->n, dev_scalar(&st->alpha), st->x,
                                  dev_scalar(&st->beta), st->y, st->out, ds);
        else
          rc = gkcu_axpby_ref(ctx, i, st->n, dev_scalar(&st->alpha), st->x, dev_scalar(&st->beta),
                              st->y, st->out, ds);
        may_fail |= refers(&st->alpha) || refers(&st->beta);
        break;
      default: {
        if (may_fail || (pending && (refers(&st->alpha) || refers(&st->beta)))) {
          if ((e = catch_up(s, job, i, ds, hs)) != cudaSuccess) break;
          pending = may_fail = 0;
          if ((failed = hs->fail_step >= 0)) break;
        }
        double alpha, beta;
        if (batch_step_begin64(job, i, 0, &alpha, &beta)) goto done;
        if (st->x_host && (e = cudaMemcpyAsync((void *)st->x, hx[i], st->x_bytes,
                                               cudaMemcpyHostToDevice, s->stream)) != cudaSuccess)
          break;
        rc = run_step(s, st, alpha, beta);
        if (!rc && st->out_host &&
            (e = cudaMemcpyAsync(ho[i], st->out, st->out_bytes, cudaMemcpyDeviceToHost,
                                 s->stream)) != cudaSuccess)
          break;
      }
    }
    if (e != cudaSuccess || failed) break;
    if (rc) {
      job_fail(job, rc, "step %d (%s): %s; steps 0 to %d ran", i, batch_op_name(st->op),
               gkcu_ctx_errmsg(s->ctx), i - 1);
      break;
    }
    job->in.batch.done = i + 1;
  }
done:
  /* Earlier steps' work must be done (and any asynchronous fault seen)
   * before the reply says so. */
  if (e == cudaSuccess) e = cudaEventRecord(s->ev1, s->stream);
  if (e == cudaSuccess && inited) e = catch_up(s, job, job->in.batch.done, ds, hs);
  if (e != cudaSuccess) {
    if (!job->err) cuda_fail(impl, job, e, "running the batch");
  } else if (inited && hs->fail_step >= 0 && hs->fail_step < nsteps) {
    /* the first step that failed, whatever stopped the loop later */
    job->in.batch.done = hs->fail_step;
    batch_fail_scalar(job, hs->fail_step, hs->fail_which, hs->fail_value);
  } else {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, s->ev0, s->ev1) == cudaSuccess) job->kernel_us = ms * 1e3;
  }
  if (cudaStreamSynchronize(s->stream) != cudaSuccess) (void)cudaGetLastError();
  if (sbytes) {
    unplace_slices(steps, nsteps, hx, ho);
    devcache_free(impl->cache, smem, scap);
  }
  devcache_free(impl->cache, dmem, dcap);
}
