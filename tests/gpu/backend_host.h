/* backend_host.h: what gkcd gives a backend, for programs that drive the
 * CUDA backends in-process (test_gpu_multidev, bench_split): job_finish
 * counts finished jobs, backend_device_lost marks a device lost once and
 * counts it, backend_fatal fails the program (no loss here may be fatal),
 * and the batch helpers fail it too (these programs run no batch).
 */
#ifndef GKC_BACKEND_HOST_H
#define GKC_BACKEND_HOST_H

#include <stdatomic.h>

/* job_finish calls so far (any thread). */
extern atomic_int host_finished;
/* backend_device_lost calls that took a device out, per device number. */
extern atomic_int host_lost_calls[64];

#endif
