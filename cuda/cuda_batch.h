/* cuda_batch.h: the CUDA backend's `batch` on a slot: its steps on the
 * slot's stream, the scalars they pass each other kept on the device, the
 * job's cancel flag and deadline polled between steps. */
#ifndef CUDA_BATCH_H
#define CUDA_BATCH_H

#include "cuda_impl.h"
#include "job.h"

/* Its algo names (backend.h algos[]). */
extern const char *const cuda_batch_algos[];
/* Runs job on s; results or an error in job (the caller finishes it). */
void cuda_batch_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job);

#endif
