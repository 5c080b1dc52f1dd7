/* cuda_slot.c: see cuda_slot.h. */
#include "cuda_slot.h"

#include <stdio.h>

#include "gkc_errors.h"
#include "scheduler.h"

/* job->lane (scheduler.h) indexes the lanes made here. */
_Static_assert((int)LANE_BULK == (int)LANES_BULK && (int)LANE_LATENCY == (int)LANES_LATENCY,
               "lane numbers");

int cuda_slot_init(cuda_impl *impl, cuda_slot *s, int lane, int i, char *msg, size_t msglen) {
  cudaError_t e;
  s->lane = lane;
  if (lanes_stream_create(impl->lanes, lane, &s->stream, msg, msglen) != cudaSuccess) { /* msg set */
    s->stream = NULL;
    return GKC_EDEVICE_ERROR;
  }
  if ((e = cudaEventCreate(&s->ev_in)) != cudaSuccess ||
      (e = cudaEventCreate(&s->ev0)) != cudaSuccess ||
      (e = cudaEventCreate(&s->ev1)) != cudaSuccess ||
      (e = cudaEventCreate(&s->ev_out)) != cudaSuccess) {
    snprintf(msg, msglen, "CUDA: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return GKC_EDEVICE_ERROR;
  }
  /* The bulk lane's big copies go through the ring: made now, so that no
   * request waits for pinned memory (the latency lane's small ones use
   * the stage, and make a ring only if one ever needs it). */
  if (lane == LANES_BULK && (e = cuda_ring_init(&s->ring)) != cudaSuccess) {
    snprintf(msg, msglen, "allocating %d x %zu MiB of pinned memory for stream %d: %s",
             CUDA_RING_CHUNKS, CUDA_RING_CHUNK >> 20, i, cudaGetErrorString(e));
    cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? GKC_EOUT_OF_MEMORY : GKC_EDEVICE_ERROR;
  }
  int rc = gkcu_ctx_create(&s->ctx, s->stream);
  if (rc == 0 && lanes_green(impl->lanes)) rc = gkcu_ctx_set_sms(s->ctx, lanes_sms(impl->lanes, lane));
  if (rc) {
    snprintf(msg, msglen, "creating the CUDA context for stream %d failed: %s", i,
             s->ctx ? gkcu_ctx_errmsg(s->ctx) : "(no context)");
    return rc;
  }
  return 0;
}

void cuda_slot_destroy(cuda_slot *s) {
  gkcu_ctx_destroy(s->ctx);
  if (s->stream) cudaStreamDestroy(s->stream);
  if (s->ev_in) cudaEventDestroy(s->ev_in);
  if (s->ev0) cudaEventDestroy(s->ev0);
  if (s->ev1) cudaEventDestroy(s->ev1);
  if (s->ev_out) cudaEventDestroy(s->ev_out);
  if (s->stage) cudaFreeHost(s->stage);
  cuda_ring_destroy(&s->ring);
}

cuda_slot *cuda_slot_take(cuda_impl *impl, int lane) {
  pthread_mutex_lock(&impl->mu);
  for (;;) {
    for (int i = impl->lane_lo[lane]; i < impl->lane_hi[lane]; i++)
      if (!impl->slots[i].busy) {
        impl->slots[i].busy = 1;
        impl->busy++;
        pthread_mutex_unlock(&impl->mu);
        return &impl->slots[i];
      }
    pthread_cond_wait(&impl->cv[lane], &impl->mu);
  }
}

void cuda_slot_give(cuda_impl *impl, cuda_slot *s) {
  pthread_mutex_lock(&impl->mu);
  s->busy = 0;
  impl->busy--;
  pthread_cond_signal(&impl->cv[s->lane]);
  pthread_mutex_unlock(&impl->mu);
}

int cuda_slot_lane(const cuda_impl *impl, const gkcd_job *job) {
  return lanes_count(impl->lanes) > 1 && job->lane == LANE_LATENCY ? LANES_LATENCY : LANES_BULK;
}

int cuda_slot_grow_stage(cuda_slot *s, size_t bytes, gkcd_job *job) {
  if (s->stage_cap >= bytes) return 0;
  if (s->stage) cudaFreeHost(s->stage);
  s->stage = NULL;
  s->stage_cap = 0;
  size_t cap = bytes < ((size_t)4 << 20) ? ((size_t)4 << 20) : bytes;
  cudaError_t e = cudaMallocHost(&s->stage, cap);
  if (e != cudaSuccess) {
    cudaGetLastError();
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory: %s",
             cap, cudaGetErrorString(e));
    return -1;
  }
  s->stage_cap = cap;
  return 0;
}

devcache *cuda_slot_cache(cuda_impl *impl, const cuda_slot *s) {
  return s->lane == LANES_LATENCY ? impl->lane_cache : impl->cache;
}

const slice_budget *cuda_slot_slices(const cuda_impl *impl, const cuda_slot *s) {
  return s->lane == LANES_BULK && impl->slice.flops > 0 ? &impl->slice : NULL;
}
