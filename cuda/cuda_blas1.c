/* cuda_blas1.c: see cuda_blas1.h. */
#include "cuda_blas1.h"

#include "gkcu_blas1.h"
#include "res_object.h"

/* x's dtype is y's and the output's (the rows check it). */
static int f64(const gkcd_job *job) { return job->in.vec.x.dtype == DT_F64; }

int cuda_launch_dot(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  job->algo_name = "gkcu";
  if (f64(job))
    return gkcu_dot_f64_async(s->ctx, job->in.vec.n, (const double *)l->dev[0],
                              (const double *)l->dev[1], (double *)l->out_dev);
  return gkcu_dot_async(s->ctx, job->in.vec.n, cuda_layout_f32(l, 0), cuda_layout_f32(l, 1),
                        (double *)l->out_dev);
}

int cuda_launch_nrm2(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  job->algo_name = "gkcu";
  if (f64(job))
    return gkcu_nrm2_f64_async(s->ctx, job->in.vec.n, (const double *)l->dev[0], (double *)l->out_dev);
  return gkcu_nrm2_async(s->ctx, job->in.vec.n, cuda_layout_f32(l, 0), (double *)l->out_dev);
}

int cuda_launch_axpby(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  __typeof__(job->in.vec) *v = &job->in.vec;
  job->algo_name = "gkcu";
  /* In place on the output: it starts as y (unless it is y). */
  if (l->dev[1] != l->out_dev)
    cudaMemcpyAsync(l->out_dev, l->dev[1], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
  if (f64(job)) /* the scalars as sent, in double */
    return gkcu_axpby_f64(s->ctx, v->n, v->alpha64, (const double *)l->dev[0], v->beta64,
                          (double *)l->out_dev);
  return gkcu_axpby(s->ctx, v->n, v->alpha, cuda_layout_f32(l, 0), v->beta, (float *)l->out_dev);
}
