/* cuda_array.c: see cuda_array.h. */
#include "cuda_array.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_fail.h"
#include "cuda_gpu.h"
#include "cuda_launch.h"
#include "cuda_slot.h"
#include "gkc_errors.h"
#include "method.h"
#include "resident.h"

/* Runs job on s with its layout l; leaves results or an error in job.
 * upload: l packs the inputs into the new resident result (alloc_bytes of
 * it), and nothing comes back.  launch: the kernel, run after the copies
 * in (NULL: none; then, unless it is an upload, the one input is the
 * result, copied back from where it lives). */
static void run(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l, int upload,
                size_t alloc_bytes, cuda_launch_fn launch) {
  int rc;
  int scalar = !upload && job->row->scalar; /* the result is a double, into job->value */
  devcache *tc = cuda_slot_cache(impl, s);
  if (l->tmp_bytes &&
      (rc = devcache_alloc(tc, l->tmp_bytes, (void **)&l->tmp, &l->tmp_cap, job->errmsg,
                           sizeof job->errmsg))) {
    job->err = rc;
    return;
  }
  if (job->out_kind == OUT_RES_NEW) {
    if ((rc = devcache_alloc(impl->cache, alloc_bytes, &job->out_ptr, &job->out_cap, job->errmsg,
                             sizeof job->errmsg))) {
      job->err = rc;
      job->out_ptr = NULL;
      goto out;
    }
  }
  l->out_dev = job->out_kind == OUT_RES || job->out_kind == OUT_RES_NEW ? job->out_ptr
                                                                        : l->tmp + l->res_off;
  /* The result back to the host: straight into a registered region, or
   * through the stage (scalars, small results) or the ring (big ones,
   * chunked: cuda_ring.h); a resident result stays where it is.  The stage
   * never grows past CUDA_STAGE_SMALL: a size never seen before must not
   * wait for cudaMallocHost (312 ms for sgemm 8192^3's inputs). */
  int to_host = !upload && (job->out_kind == OUT_BIN || job->out_kind == OUT_HOST || scalar);
  int direct = job->out_kind == OUT_HOST && job->out_res && res_region_pinned(job->out_res) && !scalar;
  int ring_out = to_host && !direct && !scalar && l->res_bytes > CUDA_STAGE_SMALL;
  size_t res_stage = to_host && !direct && !ring_out ? l->res_bytes : 0;
  size_t in_stage = l->stage_bytes <= CUDA_STAGE_SMALL ? l->stage_bytes : 0;
  size_t stage_need = in_stage > res_stage ? in_stage : res_stage;
  if (stage_need && cuda_slot_grow_stage(s, stage_need, job) != 0) goto out;
  if (job->out_kind == OUT_BIN && !(job->out = job_out_alloc(job->out_bytes ? job->out_bytes : 1))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for the result", job->out_bytes);
    goto out;
  }

  /* Events only around what there is: a request whose operands are all
   * resident and whose result stays resident (an iterative client's usual
   * step) records the kernel's two and nothing else, two records and two
   * queries fewer on its path (bench/RESULTS.md, resident sgemm). */
  cudaError_t e = l->ncopies ? cudaEventRecord(s->ev_in, s->stream) : cudaSuccess;
  if (e == cudaSuccess) e = cuda_layout_copy_in(s, l, upload ? l->out_dev : l->tmp, upload);
  if (e == cudaSuccess) e = cudaEventRecord(s->ev0, s->stream);
  if (e != cudaSuccess) {
    cuda_fail(impl, job, e, "copying the request to the device");
    goto out;
  }
  if (launch && (rc = launch(impl, s, job, l)) != 0) {
    cuda_fail_launch(impl, s, job, rc);
    goto out;
  }
  const void *res_src = launch ? l->out_dev : l->dev[0]; /* no kernel: the input is the result */
  void *res_host = job->out_kind == OUT_BIN ? job->out : job->out_ptr;
  if ((e = cudaEventRecord(s->ev1, s->stream)) != cudaSuccess ||
      (to_host && !ring_out &&
       (e = cudaMemcpyAsync(direct ? job->out_ptr : s->stage, res_src, l->res_bytes,
                            cudaMemcpyDeviceToHost, s->stream)) != cudaSuccess) ||
      (to_host && !ring_out && (e = cudaEventRecord(s->ev_out, s->stream)) != cudaSuccess) ||
      (ring_out && (e = cuda_ring_d2h(&s->ring, s->stream, res_host, res_src, l->res_bytes,
                                      s->ev_out)) != cudaSuccess) ||
      (e = cudaStreamSynchronize(s->stream)) != cudaSuccess) {
    cuda_fail(impl, job, e, "running the kernel");
    goto out;
  }
  float ms = 0;
  if (cudaEventElapsedTime(&ms, s->ev0, s->ev1) == cudaSuccess) job->kernel_us = ms * 1e3;
  if (l->ncopies && cudaEventElapsedTime(&ms, s->ev_in, s->ev0) == cudaSuccess) job->h2d_us = ms * 1e3;
  if (to_host && cudaEventElapsedTime(&ms, s->ev1, s->ev_out) == cudaSuccess) job->d2h_us = ms * 1e3;
  if (scalar)
    memcpy(&job->value, s->stage, sizeof(double));
  else if (to_host && !direct && !ring_out)
    cuda_copy_host(res_host, s->stage, job->out_bytes);
  /* Lost while it ran (another part's error, or the daemon took the device
   * out): what it made there is not to be used. */
  if (cuda_lost(impl)) cuda_fail_lost(impl, job);
out:
  if (job->err) {
    free(job->out);
    job->out = NULL;
    if (job->out_kind == OUT_RES_NEW && job->out_ptr) {
      devcache_free(impl->cache, job->out_ptr, job->out_cap);
      job->out_ptr = NULL;
    }
  }
  devcache_free(tc, l->tmp, l->tmp_cap);
}

void cuda_array_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  cuda_launch_fn launch = cuda_launchers[job->method];
  cuda_layout l;
  if (cuda_layout_plan(job, !launch, &l) != 0) {
    job_fail(job, GKC_EINTERNAL, "%s: no method row, or more array inputs than the CUDA backend's %d",
             proto_method_name(job->method), CUDA_MAX_INPUTS);
    return;
  }
  run(impl, s, job, &l, 0, job->out_bytes, launch);
}

void cuda_array_upload(cuda_impl *impl, cuda_slot *s, gkcd_job *job, const gkcd_span *const in[],
                       int nin, size_t alloc_bytes, cuda_launch_fn after) {
  cuda_layout l;
  cuda_layout_plan_into(&l, in, nin);
  run(impl, s, job, &l, 1, alloc_bytes, after);
}
