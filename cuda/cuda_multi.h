/* cuda_multi.h: what the CUDA backends tell about the GPU each serves from.
 *
 * cuda_backends_create (backend.h) opens one backend per selected GPU, or
 * --split-device N per GPU over disjoint SM partitions (green contexts).
 * These calls let tests, the daemon's status and benchmarks see how a GPU
 * was cut, and let a test lose one GPU the way a sticky CUDA error would.
 */
#ifndef GKC_CUDA_MULTI_H
#define GKC_CUDA_MULTI_H

typedef struct gkcd_backend gkcd_backend;

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

#endif
