/* cuda_backend_int.h: what the CUDA backend's files share (cuda_backend.c,
 * cuda_long.c): the stream slots and the backend's state. */
#ifndef CUDA_BACKEND_INT_H
#define CUDA_BACKEND_INT_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cuda_slice.h"
#include "devcache.h"
#include "gkcu.h"
#include "job.h"
#include "lanes.h"

typedef struct {
  gkcu_ctx *ctx;
  cudaStream_t stream;
  cudaEvent_t ev_in, ev0, ev1, ev_out; /* before H2D, kernel start/end, after D2H */
  void *stage; /* pinned */
  size_t stage_cap;
  int busy;
  int lane;    /* LANES_BULK or LANES_LATENCY: whose SMs its stream runs on */
} slot;

typedef struct {
  int device;
  char name[128];
  int nslots;
  slot *slots;      /* every lane's: lane l has slots[lane_lo[l] .. lane_hi[l]) */
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
  atomic_int poisoned;
} cuda_impl;

/* A free slot of lane (waits for one), and giving it back. */
slot *take_slot(cuda_impl *impl, int lane);
void give_slot(cuda_impl *impl, slot *s);
/* Fails job for a CUDA error; a sticky one takes the backend down. */
void fail_cuda(cuda_impl *impl, gkcd_job *job, cudaError_t e, const char *what);

/* cuda_solve.c, cuda_long.c: solve and batch, on slot s. */
extern const char *const cuda_solve_algos[], *const cuda_batch_algos[];
void cuda_run_solve(cuda_impl *impl, slot *s, gkcd_job *job);
void cuda_run_batch(cuda_impl *impl, slot *s, gkcd_job *job);
/* A running job's cancel flag and deadline: 0 goes on, else CPU_SOLVE_CANCELLED
 * or CPU_SOLVE_DEADLINE (the same numbers as GKCU_SOLVE_*). */
int cuda_poll_job(void *arg);

#endif
