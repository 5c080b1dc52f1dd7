/* cuda_blas1.c: see cuda_blas1.h. */
#include "cuda_blas1.h"

#include "gkcu_blas1.h"

int cuda_launch_dot(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  job->algo_name = "gkcu";
  return gkcu_dot_async(s->ctx, job->in.vec.n, cuda_layout_f32(l, 0), cuda_layout_f32(l, 1),
                        (double *)l->out_dev);
}

int cuda_launch_nrm2(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  job->algo_name = "gkcu";
  return gkcu_nrm2_async(s->ctx, job->in.vec.n, cuda_layout_f32(l, 0), (double *)l->out_dev);
}

int cuda_launch_axpby(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  float *out = (float *)l->out_dev;
  job->algo_name = "gkcu";
  /* In place on the output: it starts as y (unless it is y). */
  if (l->dev[1] != out)
    cudaMemcpyAsync(out, l->dev[1], job->out_bytes, cudaMemcpyDeviceToDevice, s->stream);
  return gkcu_axpby(s->ctx, job->in.vec.n, job->in.vec.alpha, cuda_layout_f32(l, 0),
                    job->in.vec.beta, out);
}
