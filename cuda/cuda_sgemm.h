/* cuda_sgemm.h: sgemm's launcher on the array path (cuda_layout.h):
 * inputs a, b, c.  The algorithm is the request's, or gkcu_sgemm_pick's
 * (cublas_tf32 when the request accepts TF32 rounding); C starts as c
 * when beta needs it; the bulk lane cuts long ones into slices where the
 * lanes share the SMs (cuda_slice.h). */
#ifndef CUDA_SGEMM_H
#define CUDA_SGEMM_H

#include "cuda_layout.h"

int cuda_launch_sgemm(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l);

#endif
