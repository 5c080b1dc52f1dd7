/* cuda_blas1.h: the vector methods' launchers on the array path
 * (cuda_layout.h), gkcu_blas1.h's kernels (algo "gkcu"), on float32 or
 * float64 vectors (x's dtype, which is y's and the output's):
 *
 *   dot    inputs x, y; x . y into a double
 *   nrm2   input x; ||x||_2 into a double (squares summed in float64)
 *   axpby  inputs x, y; alpha x + beta y in place on the output, which
 *          starts as y (unless it is y); float64 takes the scalars as
 *          sent (alpha64, beta64)
 */
#ifndef CUDA_BLAS1_H
#define CUDA_BLAS1_H

#include "cuda_layout.h"

int cuda_launch_dot(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l);
int cuda_launch_nrm2(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l);
int cuda_launch_axpby(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l);

#endif
