/* devcache.h: a caching allocator for device memory.
 *
 * cudaMalloc and cudaFree are slow and cudaFree synchronizes the whole
 * device, so buffers freed by one request are kept for the next in size
 * classes (quarter powers of two: at most 25% waste).  The bytes kept idle
 * are bounded by max_cached; when cudaMalloc fails, everything idle is
 * released and the allocation is tried once more before reporting
 * GKC_EOUT_OF_MEMORY.  Thread-safe.  Callers free a buffer only once no
 * stream uses it any more.
 */
#ifndef GKC_DEVCACHE_H
#define GKC_DEVCACHE_H

#include <stddef.h>

typedef struct devcache devcache;

int devcache_create(devcache **out, size_t max_cached);
/* Frees every idle buffer; buffers still handed out are the caller's bug. */
void devcache_destroy(devcache *dc);

/* A device buffer of at least bytes; *cap is its true size, to hand back
 * to devcache_free.  0 or GKC_EOUT_OF_MEMORY / GKC_EDEVICE_ERROR, with a
 * message in msg. */
int devcache_alloc(devcache *dc, size_t bytes, void **ptr, size_t *cap, char *msg, size_t msglen);
void devcache_free(devcache *dc, void *ptr, size_t cap);
/* Releases every idle buffer to the driver. */
void devcache_trim(devcache *dc);

/* Bytes idle in the cache, and bytes handed out. */
void devcache_stats(devcache *dc, size_t *cached, size_t *in_use);

/* The size class of bytes (exposed for tests). */
size_t devcache_class(size_t bytes);

#endif
