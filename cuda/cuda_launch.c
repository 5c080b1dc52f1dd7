/* cuda_launch.c: see cuda_launch.h. */
#include "cuda_launch.h"

#include "cuda_blas1.h"
#include "cuda_reduce.h"
#include "cuda_sgemm.h"
#include "cuda_spmv.h"

const cuda_launch_fn cuda_launchers[PROTO_M_COUNT] = {
    [PROTO_M_SGEMM] = cuda_launch_sgemm, [PROTO_M_REDUCE] = cuda_launch_reduce,
    [PROTO_M_SPMV] = cuda_launch_spmv,   [PROTO_M_DOT] = cuda_launch_dot,
    [PROTO_M_NRM2] = cuda_launch_nrm2,   [PROTO_M_AXPBY] = cuda_launch_axpby,
};
