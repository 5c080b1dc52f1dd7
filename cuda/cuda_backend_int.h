/* cuda_backend_int.h: what the CUDA backend's files share: the stream
 * slots and the backend's state (cuda_backend.c makes them), the request
 * path's entry points (cuda_run.c, cuda_tiny.c; cuda_layout.h has the
 * rest), the GPU's loss, and the long methods (cuda_solve.c, cuda_long.c). */
#ifndef CUDA_BACKEND_INT_H
#define CUDA_BACKEND_INT_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cuda_slice.h"
#include "devcache.h"
#include "gkcu.h"
#include "config.h"
#include "cost.h"
#include "job.h"
#include "lanes.h"

#define CUDA_MAX_PARTS 16 /* --split-device's upper bound */

typedef struct gkcd_backend gkcd_backend;

typedef struct {
  gkcu_ctx *ctx;
  cudaStream_t stream;
  cudaEvent_t ev_in, ev0, ev1, ev_out; /* before H2D, kernel start/end, after D2H */
  void *stage; /* pinned */
  size_t stage_cap;
  int busy;
  int lane;    /* LANES_BULK or LANES_LATENCY: whose SMs its stream runs on */
} slot;

/* One GPU, shared by the backends it was cut into (--split-device; one
 * when it is not cut).  A sticky error on any of them poisons the GPU's
 * context, so losing the GPU loses every part. */
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

typedef struct {
  int device;             /* the GPU's ordinal (cudaSetDevice) */
  cuda_gpu *gpu;
  int part;               /* 0 .. gpu->nparts-1 */
  gkcd_backend *be;
  char name[128];         /* "NVIDIA H100 80GB HBM3 (GPU 0, part 1/2)" */
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
} cuda_impl;

/* cuda_run.c: backend->run (backend.h): runs job on a slot of its lane,
 * then job_finish. */
void cuda_run(gkcd_backend *be, gkcd_job *job);
/* A free slot of lane (waits for one), and giving it back. */
slot *take_slot(cuda_impl *impl, int lane);
void give_slot(cuda_impl *impl, slot *s);
/* Grows s's pinned stage to at least bytes; -1 with job failed
 * (out_of_memory) when it cannot. */
int cuda_grow_stage(slot *s, size_t bytes, gkcd_job *job);
/* cuda_tiny.c: a reduce or dot on a few KB of the request's own bytes,
 * run with no copy: 1 when it ran job (or failed it), 0 when job is not
 * tiny. */
int cuda_run_tiny(cuda_impl *impl, slot *s, gkcd_job *job);
/* Fails job for a CUDA error; a sticky one loses the GPU (every part of
 * it: cuda_gpu_lost) and fails the job with GKC_EDEVICE_LOST. */
void fail_cuda(cuda_impl *impl, gkcd_job *job, cudaError_t e, const char *what);
/* Takes impl's whole GPU out of service (each part through
 * backend_device_lost), once; why says what failed.  Any thread. */
void cuda_gpu_lost(cuda_impl *impl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Nonzero once impl's device is lost (its GPU, or the daemon took it out). */
int cuda_lost(const cuda_impl *impl);
/* Fails job with GKC_EDEVICE_LOST: "device N (GPU g) was lost: why". */
void fail_lost(cuda_impl *impl, gkcd_job *job);

/* cuda_backend.c: one backend on part `part` of gpu (0 of 1 when it is not
 * cut), its streams made in lanes (which it takes over, and closes on
 * failure); it holds a reference to gpu.  0, or a negative gkc_error with
 * msg (nothing left open). */
int cuda_part_open(gkcd_backend **out, const gkcd_config *cfg, cuda_gpu *gpu, int part,
                   cuda_lanes *lanes, const char *gpu_name, char *msg, size_t msglen);
/* Whether e leaves the GPU's context unusable for everyone. */
int cuda_is_sticky(cudaError_t e);
/* GKCD_CUDA_LANES=streams: no green contexts (the fallback, to test and
 * measure it). */
int cuda_force_streams(void);
/* Whether be is one of these backends (peer_copy's other side). */
int cuda_is_backend(const gkcd_backend *be);

/* cuda_rates.c: the cost model's starting rates, measured on slot s in a
 * few milliseconds; any failure keeps the figures already in *r. */
void cuda_measure_rates(slot *s, cost_rates *r);

/* cuda_multi.c: a part's reference to its GPU given back; the last frees it. */
void cuda_gpu_release(cuda_gpu *gpu);
/* backend->peer_copy (backend.h). */
int cuda_peer_copy(gkcd_backend *be, void *dst, gkcd_backend *from, const void *src, size_t bytes,
                   int *peer, char *msg, size_t msglen);

/* cuda_solve.c, cuda_long.c: solve and batch, on slot s. */
extern const char *const cuda_solve_algos[], *const cuda_batch_algos[];
void cuda_run_solve(cuda_impl *impl, slot *s, gkcd_job *job);
void cuda_run_batch(cuda_impl *impl, slot *s, gkcd_job *job);
/* A running job's cancel flag and deadline: 0 goes on, else CPU_SOLVE_CANCELLED
 * or CPU_SOLVE_DEADLINE (the same numbers as GKCU_SOLVE_*). */
int cuda_poll_job(void *arg);

#endif
