/* cuda_multi.h: every GPU of the host as devices, and what the CUDA
 * backends tell about the GPU each serves from.
 *
 * cuda_backends_create (backend.h) opens one backend per selected GPU, or
 * --split-device N per GPU over disjoint SM partitions (green contexts).
 * cuda_backend_where and cuda_backend_inject_error let tests, the daemon's
 * status and benchmarks see how a GPU was cut, and let a test lose one GPU
 * the way a sticky CUDA error would.  The rest is for the backend's own
 * files.
 */
#ifndef GKC_CUDA_MULTI_H
#define GKC_CUDA_MULTI_H

#include <stddef.h>

#include "config.h"

typedef struct gkcd_backend gkcd_backend;
typedef struct cuda_gpu cuda_gpu;
typedef struct cuda_lanes cuda_lanes;

typedef struct {
  int gpu;        /* the CUDA runtime's device number */
  int part;       /* 0 .. nparts-1 */
  int nparts;     /* --split-device, 1 when not cut */
  int green;      /* the part's SMs are its own (green contexts) */
  int sms;        /* SMs this backend may use: its part (all lanes), or the GPU's */
  int gpu_sms;    /* the GPU's SMs */
  int spare_sms;  /* SMs of the GPU no part got (the driver's granularity) */
} cuda_where;

/* 0 with *out filled, or -1 when be is not a CUDA backend. */
int cuda_backend_where(const gkcd_backend *be, cuda_where *out);

/* Loses be's GPU as a sticky CUDA error on it would: every part of that
 * GPU is taken out through backend_device_lost, and each of their jobs
 * still running or run later fails with device_lost, "device N (GPU g)
 * was lost: why".  For tests. */
void cuda_backend_inject_error(gkcd_backend *be, const char *why);

/* --- for the backend's files -------------------------------------------- */

/* Opens part `part` of gpu as a backend at *out, its streams made in lanes
 * (which it takes over, and closes on failure), holding a reference to
 * gpu; 0, or a negative gkc_error with msg (nothing left open).  The
 * backend above (cuda_backend.c) passes its own. */
typedef int (*cuda_part_open_fn)(gkcd_backend **out, const gkcd_config *cfg, cuda_gpu *gpu, int part,
                                 cuda_lanes *lanes, const char *gpu_name, char *msg, size_t msglen);
/* cuda_backends_create (backend.h), each part opened by open_part. */
int cuda_multi_open(gkcd_backend **out, int max, int *count, const gkcd_config *cfg,
                    cuda_part_open_fn open_part, char *msg, size_t msglen);
/* backend->peer_copy (backend.h). */
int cuda_peer_copy(gkcd_backend *be, void *dst, gkcd_backend *from, const void *src, size_t bytes,
                   int *peer, char *msg, size_t msglen);
/* Whether be is one of these backends (peer_copy's other side). */
int cuda_is_backend(const gkcd_backend *be);

#endif
