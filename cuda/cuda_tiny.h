/* cuda_tiny.h: a scalar method (reduce, dot, nrm2) on a few KB of the
 * request's own bytes, run with no copy.
 *
 * Such a job's inputs go into the slot's pinned stage, which the kernel
 * reads over the bus (cudaMallocHost memory is mapped into the device's
 * address space under unified addressing), and the kernel writes its
 * double straight back into the stage: its launcher (cuda_launch.h) runs on
 * a layout whose addresses are in the stage.  No H2D or D2H operation, no
 * device temporaries, no events: on a 16-float reduce that is two copy
 * operations and four event records less on the GPU's timeline and the
 * host's (bench/RESULTS.md, the small-request figures).  kernel_us is then
 * the host's time from the launch to the end of the stream sync; h2d_us
 * and d2h_us are absent (there were no copies).
 */
#ifndef CUDA_TINY_H
#define CUDA_TINY_H

#include "cuda_impl.h"
#include "job.h"

/* 1 when it ran job on s (or failed it), 0 when job is not tiny: not a
 * scalar method with a launcher, or an input resident, empty or too big. */
int cuda_tiny_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job);

#endif
