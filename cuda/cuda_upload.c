/* cuda_upload.c: see cuda_upload.h. */
#include "cuda_upload.h"

#include "cuda_array.h"
#include "gkcu_spmv.h"
#include "res_object.h"

void cuda_upload_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  const gkcd_span *in[] = {&job->in.upload.data};
  cuda_array_upload(impl, s, job, in, 1, job->out_bytes, NULL);
}

/* After the arrays' copies: the algo auto will use for the matrix, and
 * the plan at job->plan_off (row_ptr is at the start of l->out_dev, its
 * copy enqueued on this stream). */
static int plan(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  __typeof__(job->in.csr) *c = &job->in.csr;
  int algo = gkcu_spmv_pick_hint(s->ctx, c->rows, c->cols, c->nnz, c->max_row);
  /* float64 values: what cuda_spmv.c will run on them */
  if (c->values.dtype == DT_F64) algo = gkcu_spmv_typed_algo(algo);
  job->algo_used = algo - 1;
  job->algo_name = gkcu_spmv_algo_name(algo);
  if (!job->plan_off) return 0;
  return gkcu_spmv_plan(s->ctx, c->rows, c->nnz, (const int32_t *)l->out_dev,
                        l->out_dev + job->plan_off);
}

void cuda_upload_csr_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  __typeof__(job->in.csr) *c = &job->in.csr;
  const gkcd_span *in[] = {&c->row_ptr, &c->col_idx, &c->values};
  /* The balanced spmv plan goes after the three arrays, in the same
   * allocation.  Its few KB ((rows + nnz) / 1024 * 16 bytes or less) are
   * not counted in the memory budget, which uses out_bytes.  Float64
   * values get none: the balanced kernels are float32 only, and the
   * values go at res_values_offset (cuda_layout_plan_into pads them). */
  size_t plan_bytes = c->values.dtype == DT_F64 ? 0 : gkcu_spmv_plan_bytes(s->ctx, c->rows, c->nnz);
  job->plan_off = plan_bytes > 0 ? cuda_up(job->out_bytes) : 0;
  cuda_array_upload(impl, s, job, in, 3, plan_bytes > 0 ? job->plan_off + plan_bytes : job->out_bytes,
                    plan);
}
