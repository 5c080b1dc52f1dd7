/* cuda_rates.h: what the cost model starts from on a GPU (cost.h),
 * measured on the device itself at start-up. */
#ifndef CUDA_RATES_H
#define CUDA_RATES_H

#include "cost.h"
#include "cuda_impl.h"

/* The cost model's starting rates, measured on slot s in a few
 * milliseconds; any failure keeps the figures already in *r. */
void cuda_measure_rates(cuda_slot *s, cost_rates *r);

#endif
