/* cuda_solve.h: the CUDA backend's `solve` on a slot: the whole Krylov
 * iteration on the GPU (gkcu_solve.h), cancel and deadline polled about
 * every SOLVE_POLL_MS. */
#ifndef CUDA_SOLVE_H
#define CUDA_SOLVE_H

#include "cuda_impl.h"
#include "job.h"

/* Its algo names (backend.h algos[]): how the loop ran. */
extern const char *const cuda_solve_algos[];
/* Runs job on s; results or an error in job (the caller finishes it). */
void cuda_solve_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job);

#endif
