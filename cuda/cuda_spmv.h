/* cuda_spmv.h: spmv's launcher on the array path (cuda_layout.h): inputs
 * row_ptr, col_idx, values, x, y.  The algorithm is the request's, or
 * the auto rule's from the matrix's longest row; y starts as the input y
 * when beta needs it; a resident matrix brings the plan csr_upload made;
 * the bulk lane cuts long ones into slices where the lanes share the SMs
 * (cuda_slice.h). */
#ifndef CUDA_SPMV_H
#define CUDA_SPMV_H

#include "cuda_layout.h"

int cuda_launch_spmv(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l);

#endif
