/* cuda_ring.h: a stream slot's pinned ring, through which host memory the
 * driver cannot DMA (inline request bytes, fresh result buffers, regions
 * not yet pinned) moves to and from the device.
 *
 * The ring is a fixed number of fixed-size pinned chunks, made once when
 * the slot is, so that no request size ever waits for cudaMallocHost (a
 * stage grown to the request's size cost 312 ms on the first sgemm 8192^3;
 * bench/RESULTS.md).  A big copy is cut into chunks: the CPU copy of chunk
 * k+1 into the ring overlaps the DMA of chunk k out of it (to the device),
 * or the DMA of chunk k+1 overlaps the CPU copy of chunk k out (to the
 * host), so a transfer runs at the slower of the two rather than their sum.
 *
 * Each chunk has an event recorded after the DMA that last used it; the
 * host waits on it before writing or reading the chunk again.  The slot's
 * stream is in order, so a host-to-device DMA out of a chunk always runs
 * before a later device-to-host DMA into it.
 */
#ifndef CUDA_RING_H
#define CUDA_RING_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#define CUDA_RING_CHUNKS 4
#define CUDA_RING_CHUNK ((size_t)8 << 20)

typedef struct {
  void *chunk[CUDA_RING_CHUNKS]; /* pinned; NULL until cuda_ring_init */
  cudaEvent_t done[CUDA_RING_CHUNKS]; /* after the last DMA that used the chunk */
  int used[CUDA_RING_CHUNKS];         /* done has been recorded */
  unsigned next;                      /* the chunk the next copy starts with */
} cuda_ring;

/* memcpy of n bytes on up to 8 threads in pieces of `piece` bytes (a
 * plain memcpy below two pieces); cuda_layout.c's cuda_copy_host uses it
 * too. */
void cuda_copy_pieces(void *dst, const void *src, size_t n, size_t piece);

/* Allocates r's chunks and events (on the current device); cudaSuccess, or
 * the error, with what was made left for cuda_ring_destroy.  Idempotent. */
cudaError_t cuda_ring_init(cuda_ring *r);
/* Frees what cuda_ring_init made (any part of it). */
void cuda_ring_destroy(cuda_ring *r);

/* Enqueues the copy of n bytes from host src (any memory) to device dst on
 * stream, through the ring; returns when the last chunk's DMA is enqueued
 * (src may be reused then; the device has the data once the stream gets
 * there).  Makes the ring first if needed. */
cudaError_t cuda_ring_h2d(cuda_ring *r, cudaStream_t stream, void *dst, const void *src, size_t n);
/* Copies n bytes from device src to host dst (any memory), after what is
 * already enqueued on stream; records `after` (if not NULL) on stream once
 * the last chunk's DMA is enqueued, and returns when dst holds the bytes. */
cudaError_t cuda_ring_d2h(cuda_ring *r, cudaStream_t stream, void *dst, const void *src, size_t n,
                          cudaEvent_t after);

#endif
