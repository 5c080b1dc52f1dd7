/* devcache.c: see devcache.h. */
#include "devcache.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "gkc_errors.h"

typedef struct {
  void *ptr;
  size_t cap;
} block;

struct devcache {
  pthread_mutex_t mu;
  size_t max_cached, cached, in_use;
  block *idle;
  size_t nidle, idle_cap;
};

size_t devcache_class(size_t bytes) {
  if (bytes <= 4096) return 4096;
  /* The next size of the form 2^e * {4, 5, 6, 7} / 4 at or above bytes. */
  int e = 63 - __builtin_clzll((unsigned long long)bytes); /* 2^e <= bytes */
  size_t base = (size_t)1 << e, step = base / 4;
  size_t c = base;
  while (c < bytes) c += step;
  return c;
}

int devcache_create(devcache **out, size_t max_cached) {
  devcache *dc = calloc(1, sizeof *dc);
  if (!dc) return GKC_EOUT_OF_MEMORY;
  pthread_mutex_init(&dc->mu, NULL);
  dc->max_cached = max_cached;
  *out = dc;
  return 0;
}

static void release_idle_locked(devcache *dc) {
  for (size_t i = 0; i < dc->nidle; i++) cudaFree(dc->idle[i].ptr);
  dc->nidle = 0;
  dc->cached = 0;
}

void devcache_destroy(devcache *dc) {
  if (!dc) return;
  release_idle_locked(dc);
  free(dc->idle);
  pthread_mutex_destroy(&dc->mu);
  free(dc);
}

int devcache_alloc(devcache *dc, size_t bytes, void **ptr, size_t *cap, char *msg, size_t msglen) {
  size_t want = devcache_class(bytes);
  pthread_mutex_lock(&dc->mu);
  for (size_t i = 0; i < dc->nidle; i++) {
    if (dc->idle[i].cap != want) continue;
    *ptr = dc->idle[i].ptr;
    *cap = want;
    dc->idle[i] = dc->idle[--dc->nidle];
    dc->cached -= want;
    dc->in_use += want;
    pthread_mutex_unlock(&dc->mu);
    return 0;
  }
  pthread_mutex_unlock(&dc->mu);

  cudaError_t e = cudaMalloc(ptr, want);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError(); /* an allocation failure is not sticky: clear it */
    pthread_mutex_lock(&dc->mu);
    release_idle_locked(dc);
    pthread_mutex_unlock(&dc->mu);
    e = cudaMalloc(ptr, want);
  }
  if (e != cudaSuccess) {
    int oom = e == cudaErrorMemoryAllocation;
    if (oom) cudaGetLastError();
    snprintf(msg, msglen, "cannot allocate %zu bytes of device memory: %s", want,
             cudaGetErrorString(e));
    return oom ? GKC_EOUT_OF_MEMORY : GKC_EDEVICE_ERROR;
  }
  pthread_mutex_lock(&dc->mu);
  dc->in_use += want;
  pthread_mutex_unlock(&dc->mu);
  *cap = want;
  return 0;
}

void devcache_free(devcache *dc, void *ptr, size_t cap) {
  if (!ptr) return;
  pthread_mutex_lock(&dc->mu);
  dc->in_use -= cap;
  if (dc->cached + cap <= dc->max_cached) {
    if (dc->nidle == dc->idle_cap) {
      size_t ncap = dc->idle_cap ? dc->idle_cap * 2 : 16;
      block *nb = realloc(dc->idle, ncap * sizeof *nb);
      if (nb) {
        dc->idle = nb;
        dc->idle_cap = ncap;
      }
    }
    if (dc->nidle < dc->idle_cap) {
      dc->idle[dc->nidle++] = (block){ptr, cap};
      dc->cached += cap;
      pthread_mutex_unlock(&dc->mu);
      return;
    }
  }
  pthread_mutex_unlock(&dc->mu);
  cudaFree(ptr);
}

void devcache_trim(devcache *dc) {
  pthread_mutex_lock(&dc->mu);
  release_idle_locked(dc);
  pthread_mutex_unlock(&dc->mu);
}

void devcache_stats(devcache *dc, size_t *cached, size_t *in_use) {
  pthread_mutex_lock(&dc->mu);
  *cached = dc->cached;
  *in_use = dc->in_use;
  pthread_mutex_unlock(&dc->mu);
}
