/* cuda_impl.h: the CUDA backend's state, as types only: a stream slot, a
 * GPU (shared by the backends it is cut into) and one backend's impl.
 *
 * Every file of the backend (cuda_*.c) reads these; none of them is
 * defined by a function here, so the files' calls can form layers, lowest
 * first (cuda/NOTES.md, "The backend's files, in layers"):
 *
 *   devcache.c, lanes.c, cuda_slice.c   allocator, lanes, bulk slices
 *   cuda_ring.c               a slot's pinned ring for big host copies
 *   cuda_gpu.c, cuda_slot.c, cuda_rates.c
 *                             one GPU and its loss; the stream slots; the
 *                             cost model's starting rates
 *   cuda_fail.c               a CUDA or launcher error as the job's failure
 *   cuda_multi.c, cuda_part.c every GPU as devices, peer copies; the
 *                             partitioned-matrix primitives
 *   cuda_layout.c             where one request's arrays live on the device
 *   cuda_sgemm.c, cuda_reduce.c, cuda_spmv.c, cuda_blas1.c
 *                             the per-method launchers, by family
 *   cuda_launch.c             their table, by method
 *   cuda_array.c, cuda_tiny.c, cuda_upload.c, cuda_solve.c, cuda_batch.c
 *                             what runs a job on a slot
 *   cuda_run.c                the run entries (a slot taken and given back)
 *   cuda_backend.c            the backend: its run table, start-up, status
 */
#ifndef CUDA_IMPL_H
#define CUDA_IMPL_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cuda_ring.h"
#include "cuda_slice.h"
#include "devcache.h"
#include "gkcu.h"
#include "lanes.h"

#define CUDA_MAX_PARTS 16 /* --split-device's upper bound */

typedef struct gkcd_backend gkcd_backend;

/* A stream slot: a stream with its gkcu context (cuBLAS/cuSPARSE handles
 * bound to the stream), timing events, a small pinned stage (scalars,
 * tiny requests) and the pinned ring big copies go through (cuda_ring.h).
 * A worker holds one for the whole of a job (cuda_slot.h). */
typedef struct {
  gkcu_ctx *ctx;
  cudaStream_t stream;
  cudaEvent_t ev_in, ev0, ev1, ev_out; /* before H2D, kernel start/end, after D2H */
  void *stage; /* pinned */
  size_t stage_cap;
  cuda_ring ring;
  int busy;
  int lane;    /* LANES_BULK or LANES_LATENCY: whose SMs its stream runs on */
} cuda_slot;

/* One GPU, shared by the backends it was cut into (--split-device; one
 * when it is not cut).  A sticky error on any of them poisons the GPU's
 * context, so losing the GPU loses every part (cuda_gpu.h). */
typedef struct cuda_gpu {
  int ordinal;            /* the CUDA runtime's device number */
  int nparts;
  gkcd_backend *part[CUDA_MAX_PARTS];
  int total_sms, spare_sms; /* the GPU's SMs; those no part got */
  uint64_t peers;         /* bit j: peer access to GPU j enabled (j < 64) */
  atomic_int refs;        /* parts not yet destroyed */
  atomic_int lost;
  pthread_mutex_t mu;     /* guards why */
  char why[256];          /* the error that lost it */
} cuda_gpu;

/* One backend: a GPU, or one part of one. */
typedef struct {
  int device;             /* the GPU's ordinal (cudaSetDevice) */
  cuda_gpu *gpu;
  int part;               /* 0 .. gpu->nparts-1 */
  gkcd_backend *be;
  char name[128];         /* "NVIDIA H100 80GB HBM3 (GPU 0, part 1/2)" */
  int nslots;
  cuda_slot *slots; /* every lane's: lane l has slots[lane_lo[l] .. lane_hi[l]) */
  int lane_lo[LANES_MAX], lane_hi[LANES_MAX];
  pthread_mutex_t mu;
  pthread_cond_t cv[LANES_MAX];
  int busy;
  cuda_lanes *lanes;
  devcache *cache;      /* resident arrays, and the bulk lane's temporaries */
  devcache *lane_cache; /* the latency lane's temporaries (== cache with one lane):
                         * its own budget, so that bulk buffers never crowd
                         * them out into cudaFree, which waits for the device */
  slice_budget slice;   /* nonzero: lanes share the SMs, bulk kernels are sliced */
} cuda_impl;

#endif
