/* cuda_launch.c: the per-method launchers of the request path: which
 * algorithm runs (the request's, or the auto rule's), the in-place starts
 * (sgemm's C, spmv's y and axpby's y copied to the output first when beta
 * needs them), and the bulk lane's slicing where the lanes share SMs
 * (cuda_slice.h).  See cuda_layout.h. */
#include "cuda_layout.h"

#include "backend.h"
#include "gkc_errors.h"
#include "gkcu.h"
#include "gkcu_blas1.h"
#include "gkcu_reduce.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"
#include "log.h"
#include "proto_methods.h"

/* The bulk lane slices its long kernels only where the lanes share SMs. */
static const slice_budget *slicing(const cuda_impl *impl, const slot *s) {
  return s->lane == LANES_BULK && impl->slice.flops > 0 ? &impl->slice : NULL;
}

static const float *fdev(const layout *l, int i) { return (const float *)l->dev[i]; }

int cuda_launch(cuda_impl *impl, slot *s, gkcd_job *job, layout *l) {
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

