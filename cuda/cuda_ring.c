/* cuda_ring.c: see cuda_ring.h. */
#include "cuda_ring.h"

#include <string.h>

void cuda_copy_pieces(void *dst, const void *src, size_t n, size_t piece) {
  if (n < 2 * piece) {
    memcpy(dst, src, n);
    return;
  }
  long pieces = (long)((n + piece - 1) / piece);
#pragma omp parallel for num_threads(8) schedule(static)
  for (long i = 0; i < pieces; i++) {
    size_t off = (size_t)i * piece, len = n - off < piece ? n - off : piece;
    memcpy((char *)dst + off, (const char *)src + off, len);
  }
}

/* One core copies ~10 GB/s and the bus takes ~50: a chunk is copied on a
 * few threads, in pieces big enough that starting them costs little. */
static void copy_chunk(void *dst, const void *src, size_t n) { cuda_copy_pieces(dst, src, n, (size_t)1 << 20); }

cudaError_t cuda_ring_init(cuda_ring *r) {
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < CUDA_RING_CHUNKS && e == cudaSuccess; i++) {
    if (!r->chunk[i] && (e = cudaMallocHost(&r->chunk[i], CUDA_RING_CHUNK)) != cudaSuccess)
      r->chunk[i] = NULL;
    if (e == cudaSuccess && !r->done[i])
      e = cudaEventCreateWithFlags(&r->done[i], cudaEventDisableTiming);
  }
  return e;
}

void cuda_ring_destroy(cuda_ring *r) {
  for (int i = 0; i < CUDA_RING_CHUNKS; i++) {
    if (r->done[i]) cudaEventDestroy(r->done[i]);
    if (r->chunk[i]) cudaFreeHost(r->chunk[i]);
    r->done[i] = NULL;
    r->chunk[i] = NULL;
    r->used[i] = 0;
  }
}

/* Waits until chunk k's last DMA is over, so the host may touch it. */
static cudaError_t take(cuda_ring *r, unsigned k) {
  if (!r->used[k]) return cudaSuccess;
  cudaError_t e = cudaEventSynchronize(r->done[k]);
  if (e == cudaSuccess) r->used[k] = 0;
  return e;
}

static cudaError_t mark(cuda_ring *r, unsigned k, cudaStream_t stream) {
  cudaError_t e = cudaEventRecord(r->done[k], stream);
  if (e == cudaSuccess) r->used[k] = 1;
  return e;
}

cudaError_t cuda_ring_h2d(cuda_ring *r, cudaStream_t stream, void *dst, const void *src, size_t n) {
  cudaError_t e = r->chunk[CUDA_RING_CHUNKS - 1] ? cudaSuccess : cuda_ring_init(r);
  for (size_t off = 0; e == cudaSuccess && off < n; off += CUDA_RING_CHUNK) {
    size_t len = n - off < CUDA_RING_CHUNK ? n - off : CUDA_RING_CHUNK;
    unsigned k = r->next++ % CUDA_RING_CHUNKS;
    if ((e = take(r, k)) != cudaSuccess) break;
    copy_chunk(r->chunk[k], (const char *)src + off, len);
    if ((e = cudaMemcpyAsync((char *)dst + off, r->chunk[k], len, cudaMemcpyHostToDevice, stream)) ==
        cudaSuccess)
      e = mark(r, k, stream);
  }
  return e;
}

cudaError_t cuda_ring_d2h(cuda_ring *r, cudaStream_t stream, void *dst, const void *src, size_t n,
                          cudaEvent_t after) {
  cudaError_t e = r->chunk[CUDA_RING_CHUNKS - 1] ? cudaSuccess : cuda_ring_init(r);
  size_t nchunks = (n + CUDA_RING_CHUNK - 1) / CUDA_RING_CHUNK;
  unsigned first = r->next;
  r->next += (unsigned)nchunks;
  /* Chunk c's DMA is enqueued at step c; its bytes are copied out at step
   * c + CHUNKS - 1, just before chunk c + CHUNKS reuses its place. */
  for (size_t c = 0; e == cudaSuccess && c < nchunks + CUDA_RING_CHUNKS - 1; c++) {
    if (c < nchunks) {
      unsigned k = (first + (unsigned)c) % CUDA_RING_CHUNKS;
      size_t off = c * CUDA_RING_CHUNK, len = n - off < CUDA_RING_CHUNK ? n - off : CUDA_RING_CHUNK;
      if ((e = take(r, k)) != cudaSuccess) break;
      if ((e = cudaMemcpyAsync(r->chunk[k], (const char *)src + off, len, cudaMemcpyDeviceToHost,
                               stream)) != cudaSuccess ||
          (e = mark(r, k, stream)) != cudaSuccess)
        break;
      if (c + 1 == nchunks && after && (e = cudaEventRecord(after, stream)) != cudaSuccess) break;
    }
    if (c + 1 >= CUDA_RING_CHUNKS && c + 1 - CUDA_RING_CHUNKS < nchunks) {
      size_t j = c + 1 - CUDA_RING_CHUNKS;
      unsigned k = (first + (unsigned)j) % CUDA_RING_CHUNKS;
      size_t off = j * CUDA_RING_CHUNK, len = n - off < CUDA_RING_CHUNK ? n - off : CUDA_RING_CHUNK;
      if ((e = take(r, k)) != cudaSuccess) break;
      copy_chunk((char *)dst + off, r->chunk[k], len);
    }
  }
  return e;
}
