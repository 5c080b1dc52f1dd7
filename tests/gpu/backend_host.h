/* backend_host.h: what gkcd gives a backend, for programs that drive the
 * CUDA backends in-process (test_gpu_multidev, bench_split): job_finish
 * counts finished jobs, backend_device_lost marks a device lost once and
 * counts it, backend_fatal fails the program (no loss here may be fatal),
 * and the batch helpers fail it too (these programs run no batch).  A job
 * also needs its method's row (daemon/method.h), for the two things a
 * backend reads from it: its array inputs in order and whether its result
 * is a scalar; host_row has those of the array methods (sgemm, reduce,
 * spmv, dot, axpby, nrm2, download), as the daemon's rows give them.
 */
#ifndef GKC_BACKEND_HOST_H
#define GKC_BACKEND_HOST_H

#include <stdatomic.h>

#include "method.h"

/* job_finish calls so far (any thread). */
extern atomic_int host_finished;
/* backend_device_lost calls that took a device out, per device number. */
extern atomic_int host_lost_calls[64];

/* The row of array method m (a proto_method), or NULL for another. */
const gkcd_method *host_row(int m);

#endif
