/* cuda_sgemm.c: see cuda_sgemm.h. */
#include "cuda_sgemm.h"

#include "backend.h"
#include "cuda_slot.h"
#include "gkcu_sgemm.h"
#include "log.h"

int cuda_launch_sgemm(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  gkcu_ctx *ctx = s->ctx;
  const slice_budget *sb = cuda_slot_slices(impl, s);
  int nslices = 1, rc;
  float *out = (float *)l->out_dev;
  __typeof__(job->in.sgemm) *g = &job->in.sgemm;
  int algo = job->algo == GKCD_ALGO_AUTO
                 ? (g->tf32 ? GKCU_SGEMM_CUBLAS_TF32 : gkcu_sgemm_pick(ctx, g->m, g->n, g->k))
                 : job->algo + 1;
  if (g->beta != 0.0f && l->dev[2] != out) /* C starts as the input c */
    cudaMemcpyAsync(out, l->dev[2], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
  if (sb)
    rc = slice_sgemm(ctx, sb, &algo, job->algo == GKCD_ALGO_AUTO, g->m, g->n, g->k, g->alpha,
                     cuda_layout_f32(l, 0), g->trans_a, cuda_layout_f32(l, 1), g->trans_b, g->beta,
                     out, &nslices);
  else
    rc = gkcu_sgemm(ctx, algo, g->m, g->n, g->k, g->alpha, cuda_layout_f32(l, 0), g->trans_a,
                    cuda_layout_f32(l, 1), g->trans_b, g->beta, out);
  job->algo_name = gkcu_sgemm_algo_name(algo);
  if (nslices > 1)
    log_debug("sgemm %dx%dx%d: %d slices (%s)", g->m, g->n, g->k, nslices, job->algo_name);
  return rc;
}
