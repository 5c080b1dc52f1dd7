/* cuda_run.h: the CUDA backend's run entries (backend.h run[]), one per
 * kind of method; cuda_backend.c puts each method's in be->run.
 *
 * Each takes a free slot of the job's lane (waiting for one: cuda_slot.h)
 * on the backend's GPU, runs the job on it, gives it back and finishes the
 * job; a job of a device already lost fails at once as device_lost.
 */
#ifndef CUDA_RUN_H
#define CUDA_RUN_H

#include "job.h"

typedef struct gkcd_backend gkcd_backend;

/* The array path (cuda_array.h), or the tiny one (cuda_tiny.h): sgemm,
 * reduce, spmv, dot, nrm2, axpby, download. */
void cuda_run_array(gkcd_backend *be, gkcd_job *job);
/* upload, csr_upload (cuda_upload.h). */
void cuda_run_upload(gkcd_backend *be, gkcd_job *job);
void cuda_run_csr_upload(gkcd_backend *be, gkcd_job *job);
/* solve and batch (cuda_solve.h, cuda_batch.h): a job that ran to the end
 * on a GPU lost meanwhile fails as device_lost. */
void cuda_run_solve(gkcd_backend *be, gkcd_job *job);
void cuda_run_batch(gkcd_backend *be, gkcd_job *job);

#endif
