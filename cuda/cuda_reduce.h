/* cuda_reduce.h: reduce's launcher on the array path (cuda_layout.h):
 * input x; the sum, min or max into a double, by the request's algorithm
 * or gkcu_reduce_pick's. */
#ifndef CUDA_REDUCE_H
#define CUDA_REDUCE_H

#include "cuda_layout.h"

int cuda_launch_reduce(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l);

#endif
