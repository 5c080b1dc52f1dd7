/* cuda_upload.h: `upload` and `csr_upload` on a slot: the request's
 * arrays copied into a new resident array (cuda_array.h), from the host or
 * from a resident one.  csr_upload's new matrix also holds, past its three
 * arrays, the balanced spmv plan its later spmv calls use (float32 values;
 * float64 values sit at res_values_offset and need none), and the job
 * says which spmv algo auto will pick for it. */
#ifndef CUDA_UPLOAD_H
#define CUDA_UPLOAD_H

#include "cuda_impl.h"
#include "job.h"

void cuda_upload_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job);
void cuda_upload_csr_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job);

#endif
