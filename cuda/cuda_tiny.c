/* cuda_tiny.c: see cuda_tiny.h. */
#include "cuda_tiny.h"

#include <string.h>
#include <time.h>

#include "cuda_fail.h"
#include "cuda_launch.h"
#include "cuda_slot.h"
#include "method.h"

enum { TINY_BYTES = 16 << 10 };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int cuda_tiny_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  cuda_launch_fn launch = cuda_launchers[job->method];
  const gkcd_method *row = job->row;
  if (!launch || !row || !row->scalar || !row->inputs) return 0;
  gkcd_span *in[CUDA_MAX_INPUTS];
  int nin = row->inputs(job, in, CUDA_MAX_INPUTS);
  if (nin < 1 || nin > CUDA_MAX_INPUTS) return 0;
  size_t at = 0;
  for (int i = 0; i < nin; i++) {
    if (!in[i]->ptr || in[i]->where == SPAN_RES || in[i]->bytes == 0) return 0;
    at += cuda_up(in[i]->bytes);
  }
  if (at + CUDA_ALIGN > TINY_BYTES) return 0;
  if (cuda_slot_grow_stage(s, at + CUDA_ALIGN, job) != 0) return 1;
  char *st = s->stage;
  cuda_layout l;
  memset(&l, 0, sizeof l);
  for (int i = 0, o = 0; i < nin; o += (int)cuda_up(in[i]->bytes), i++) {
    memcpy(st + o, in[i]->ptr, in[i]->bytes);
    l.in[i] = in[i];
    l.dev[i] = st + o;
  }
  l.nin = nin;
  l.out_dev = st + at;
  l.res_bytes = sizeof(double);
  double t0 = now_us();
  int rc = launch(impl, s, job, &l);
  if (rc) {
    cuda_fail_launch(impl, s, job, rc);
    return 1;
  }
  cudaError_t e = cudaStreamSynchronize(s->stream);
  if (e != cudaSuccess) {
    cuda_fail(impl, job, e, "running the kernel");
  } else {
    job->kernel_us = now_us() - t0;
    memcpy(&job->value, l.out_dev, sizeof(double));
  }
  return 1;
}
