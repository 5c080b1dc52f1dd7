/* cuda_spmv.c: see cuda_spmv.h. */
#include "cuda_spmv.h"

#include "backend.h"
#include "cuda_slot.h"
#include "gkcu_spmv.h"
#include "log.h"
#include "res_object.h"

int cuda_launch_spmv(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  gkcu_ctx *ctx = s->ctx;
  const slice_budget *sb = cuda_slot_slices(impl, s);
  int nslices = 1, rc;
  void *out = l->out_dev;
  __typeof__(job->in.spmv) *p = &job->in.spmv;
  /* The longest row, known from validation, tells a regular matrix
   * (thread- or warp-per-row kernels win) from a skewed one (merge path). */
  int algo = job->algo == GKCD_ALGO_AUTO
                 ? gkcu_spmv_pick_hint(ctx, p->rows, p->cols, p->nnz, p->max_row)
                 : job->algo + 1;
  if (p->values.dtype == DT_F64 || p->x.dtype == DT_F64) algo = gkcu_spmv_typed_algo(algo);
  job->algo_name = gkcu_spmv_algo_name(algo);
  /* beta is never 0 in float32 when beta64 is not (methods_scalar) */
  if (p->beta != 0.0f && l->dev[4] != out) /* inputs: row_ptr, col_idx, values, x, y */
    cudaMemcpyAsync(out, l->dev[4], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
  if (p->values.dtype == DT_F64 || p->x.dtype == DT_F64) {
    /* float64 operands: the typed kernel, with the scalars as sent */
    const int32_t *rp = (const int32_t *)l->dev[0], *ci = (const int32_t *)l->dev[1];
    int vf = p->values.dtype == DT_F64, xf = p->x.dtype == DT_F64;
    if (sb)
      rc = slice_spmv_typed(ctx, sb, algo, p->rows, p->cols, p->nnz, rp, ci, l->dev[2], vf,
                            p->alpha64, l->dev[3], xf, p->beta64, out, p->max_row, &nslices);
    else
      rc = gkcu_spmv_typed(ctx, algo, p->rows, p->cols, p->nnz, rp, ci, l->dev[2], vf, p->alpha64,
                           l->dev[3], xf, p->beta64, out, p->max_row);
    goto done;
  }
  /* A resident matrix brings its plan (csr_upload made it); by value: none. */
  if (sb)
    rc = slice_spmv(ctx, sb, algo, p->rows, p->cols, p->nnz, (const int32_t *)l->dev[0],
                    (const int32_t *)l->dev[1], cuda_layout_f32(l, 2), p->alpha,
                    cuda_layout_f32(l, 3), p->beta, out, p->plan, &nslices);
  else
    rc = gkcu_spmv_planned(ctx, algo, p->rows, p->cols, p->nnz, (const int32_t *)l->dev[0],
                           (const int32_t *)l->dev[1], cuda_layout_f32(l, 2), p->alpha,
                           cuda_layout_f32(l, 3), p->beta, out, p->plan);
done:
  if (nslices > 1)
    log_debug("spmv %dx%d (%lld nonzeros): %d slices (%s)", p->rows, p->cols, (long long)p->nnz,
              nslices, job->algo_name);
  return rc;
}
