/* cuda_tiny.c: reduce and dot on a few KB of inputs, without copies.
 *
 * A reduce or dot whose inputs came with the request and fit in TINY_BYTES
 * runs without copies: the inputs go into the slot's pinned stage, which
 * the kernel reads over the bus (cudaMallocHost memory is mapped into the
 * device's address space under unified addressing), and the kernel writes
 * its double straight back into the stage.  No H2D or D2H operation, no
 * device temporaries, no events: on a 16-float reduce that is two copy
 * operations and four event records less on the GPU's timeline and the
 * host's (bench/RESULTS.md, the small-request figures).  kernel_us is then
 * the host's time from the launch to the end of the stream sync; h2d_us
 * and d2h_us are absent (there were no copies).  1 when it ran job (or
 * failed it), 0 when job is not tiny (cuda_backend_int.h). */
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cuda_layout.h"
#include "gkc_errors.h"
#include "gkcu.h"
#include "gkcu_blas1.h"
#include "gkcu_reduce.h"
#include "proto_methods.h"
#include "resident.h"

enum { TINY_BYTES = 16 << 10 };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
int cuda_run_tiny(cuda_impl *impl, slot *s, gkcd_job *job) {
  const gkcd_span *in[2];
  int nin;
  if (job->method == PROTO_M_REDUCE) in[0] = &job->in.reduce.x, nin = 1;
  else if (job->method == PROTO_M_DOT) in[0] = &job->in.vec.x, in[1] = &job->in.vec.y, nin = 2;
  else return 0;
  size_t at = 0;
  for (int i = 0; i < nin; i++) {
    if (!in[i]->ptr || in[i]->where == SPAN_RES || in[i]->bytes == 0) return 0;
    at += cuda_up(in[i]->bytes);
  }
  if (at + CUDA_ALIGN > TINY_BYTES) return 0;
  if (cuda_grow_stage(s, at + CUDA_ALIGN, job) != 0) return 1;
  char *st = s->stage;
  const float *x[2] = {NULL, NULL};
  for (int i = 0, o = 0; i < nin; o += (int)cuda_up(in[i]->bytes), i++) {
    memcpy(st + o, in[i]->ptr, in[i]->bytes);
    x[i] = (const float *)(st + o);
  }
  double *res = (double *)(st + at);
  gkcu_ctx *ctx = s->ctx;
  double t0 = now_us();
  int rc;
  if (job->method == PROTO_M_REDUCE) {
    int algo = job->algo == GKCD_ALGO_AUTO ? gkcu_reduce_pick(ctx, job->in.reduce.n)
                                           : job->algo + 1;
    job->algo_name = gkcu_reduce_algo_name(algo);
    rc = gkcu_reduce_async(ctx, algo, job->in.reduce.op, x[0], job->in.reduce.n, res);
  } else {
    job->algo_name = "gkcu";
    rc = gkcu_dot_async(ctx, job->in.vec.n, x[0], x[1], res);
  }
  cudaError_t e = cudaStreamSynchronize(s->stream);
  if (rc) {
    job_fail(job, rc, "%s", gkcu_ctx_errmsg(ctx));
    if (rc == GKC_EDEVICE_ERROR && cuda_is_sticky(e)) {
      cuda_gpu_lost(impl, "%s", job->errmsg);
      fail_lost(impl, job);
    }
  } else if (e != cudaSuccess) {
    fail_cuda(impl, job, e, "running the kernel");
  } else {
    job->kernel_us = now_us() - t0;
    memcpy(&job->value, (const void *)res, sizeof(double));
  }
  return 1;
}

