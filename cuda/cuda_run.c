/* cuda_run.c: see cuda_run.h. */
#include "cuda_run.h"

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_array.h"
#include "cuda_batch.h"
#include "cuda_fail.h"
#include "cuda_gpu.h"
#include "cuda_slot.h"
#include "cuda_solve.h"
#include "cuda_tiny.h"
#include "cuda_upload.h"

typedef void (*body_fn)(cuda_impl *impl, cuda_slot *s, gkcd_job *job);

/* body on a slot of the job's lane, then job_finish.  recheck: a job that
 * succeeded on a device lost meanwhile fails (the array path looks for
 * itself, before it frees what the job made). */
static void on_slot(gkcd_backend *be, gkcd_job *job, body_fn body, int recheck) {
  cuda_impl *impl = be->impl;
  cudaError_t e;
  if (cuda_lost(impl)) {
    cuda_fail_lost(impl, job);
  } else if ((e = cuda_gpu_use(impl, "a job")) != cudaSuccess) {
    cuda_fail(impl, job, e, "selecting the device");
  } else {
    cuda_slot *s = cuda_slot_take(impl, cuda_slot_lane(impl, job));
    body(impl, s, job);
    cuda_slot_give(impl, s);
    if (recheck && !job->err && cuda_lost(impl)) cuda_fail_lost(impl, job);
  }
  job_finish(job);
}

static void arrays(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  if (!cuda_tiny_run(impl, s, job)) cuda_array_run(impl, s, job);
}

void cuda_run_array(gkcd_backend *be, gkcd_job *job) { on_slot(be, job, arrays, 0); }
void cuda_run_upload(gkcd_backend *be, gkcd_job *job) { on_slot(be, job, cuda_upload_run, 0); }
void cuda_run_csr_upload(gkcd_backend *be, gkcd_job *job) { on_slot(be, job, cuda_upload_csr_run, 0); }
void cuda_run_solve(gkcd_backend *be, gkcd_job *job) { on_slot(be, job, cuda_solve_run, 1); }
void cuda_run_batch(gkcd_backend *be, gkcd_job *job) { on_slot(be, job, cuda_batch_run, 1); }
