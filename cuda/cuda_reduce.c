/* cuda_reduce.c: see cuda_reduce.h. */
#include "cuda_reduce.h"

#include "backend.h"
#include "gkcu_reduce.h"

int cuda_launch_reduce(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l) {
  gkcu_ctx *ctx = s->ctx;
  int algo = job->algo == GKCD_ALGO_AUTO ? gkcu_reduce_pick(ctx, job->in.reduce.n) : job->algo + 1;
  job->algo_name = gkcu_reduce_algo_name(algo);
  return gkcu_reduce_async(ctx, algo, job->in.reduce.op, cuda_layout_f32(l, 0), job->in.reduce.n,
                           (double *)l->out_dev);
}
