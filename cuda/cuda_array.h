/* cuda_array.h: the array path, one request's arrays through the device
 * on a slot: sgemm, reduce, spmv, dot, nrm2, axpby, download, and the
 * uploads.
 *
 * The worker packs the request's arrays into the slot's pinned stage, and
 * on the slot's stream copies them to one device allocation from the
 * caching allocator (cuda_layout.h), runs the method's launcher between two
 * events (cuda_launch.h) and copies the result back; then it waits for
 * that stream alone.  With more workers than slots, requests on different
 * streams overlap their copies and kernels.  Inputs were validated on the
 * host before they get here (daemon/validate.c), so no kernel is ever
 * launched on indices it could run off with.  Results or an error are left
 * in the job; the caller finishes it.
 */
#ifndef CUDA_ARRAY_H
#define CUDA_ARRAY_H

#include <stddef.h>

#include "cuda_layout.h"

/* Runs job, a method of the array path (its row's inputs, its launcher in
 * cuda_launchers; none: its input is its result), on s. */
void cuda_array_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job);
/* An upload on s: the nin inputs are copied into the new resident array
 * (job->out_kind OUT_RES_NEW, alloc_bytes >= out_bytes of it allocated
 * here), then `after`, when not NULL, runs on it (l->out_dev) as a
 * launcher would.  Nothing comes back to the host. */
void cuda_array_upload(cuda_impl *impl, cuda_slot *s, gkcd_job *job, const gkcd_span *const in[],
                       int nin, size_t alloc_bytes, cuda_launch_fn after);

#endif
