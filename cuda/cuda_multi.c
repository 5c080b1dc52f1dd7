/* cuda_multi.c: every GPU of the host as devices of the daemon.
 *
 * cuda_multi_open (cuda_backends_create's body) opens one backend per
 * selected GPU (--devices; all visible ones by default,
 * CUDA_VISIBLE_DEVICES applying as usual), each with its own streams,
 * library handles, device cache, lanes and measured cost rates; the
 * backend above (cuda_backend.c) hands down the function that opens one.
 * --split-device N cuts each GPU into N backends over disjoint SM
 * partitions: one split of the GPU's SMs into N equal green contexts, each
 * of which is split again between that part's latency and bulk lanes
 * (lanes_open_parts).  Without green contexts the N backends share the
 * whole GPU through streams, and the log says so.
 *
 * Peer access is enabled once, at start-up, between every pair of GPUs the
 * driver allows (logged), so that peer_copy goes GPU to GPU directly.  The
 * parts of one GPU share its memory and its context: a copy between them is
 * a device-to-device copy, and a sticky error on one loses them all.
 */
#include "cuda_multi.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_fail.h"
#include "cuda_gpu.h"
#include "cuda_slot.h"
#include "gkc_errors.h"
#include "log.h"

/* GKCD_CUDA_LANES=streams: no green contexts even where the driver has
 * them (to test and measure the fallback); unset or "green": use them. */
static int force_streams(void) {
  const char *v = getenv("GKCD_CUDA_LANES");
  if (!v || !*v || strcmp(v, "green") == 0) return 0;
  if (strcmp(v, "streams") == 0) return 1;
  log_warn("GKCD_CUDA_LANES=%s ignored: it takes 'green' or 'streams'", v);
  return 0;
}

/* Opens GPU ordinal as nparts backends, appended at out[*n]. */
static int gpu_open(gkcd_backend **out, int *n, cuda_gpu **gpu_out, int ordinal, int nparts,
                    const gkcd_config *cfg, cuda_part_open_fn open_part, char *msg, size_t msglen) {
  struct cudaDeviceProp prop;
  cudaError_t e;
  /* cudaFree(0) makes the primary context now: the green contexts retain
   * it, and creating it under them would cost a second initialisation. */
  if ((e = cudaSetDevice(ordinal)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess ||
      (e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) {
    snprintf(msg, msglen, "GPU %d: CUDA: %s", ordinal, cudaGetErrorString(e));
    cudaGetLastError();
    return GKC_EDEVICE_ERROR;
  }
  /* its reference is ours, until every part holds its own */
  cuda_gpu *gpu = cuda_gpu_new(ordinal, nparts, prop.multiProcessorCount);
  cuda_lanes *lanes[CUDA_MAX_PARTS] = {0};
  if (!gpu) goto oom;
  int rc = nparts == 1
               ? lanes_open(&lanes[0], ordinal, cfg->latency_sms, force_streams())
               : lanes_open_parts(lanes, nparts, ordinal, cfg->latency_sms, force_streams(),
                                  &gpu->spare_sms);
  if (rc) goto oom;
  for (int p = 0; p < nparts; p++) {
    char pmsg[256];
    cuda_lanes *L = lanes[p];
    lanes[p] = NULL; /* open_part owns it now, even when it fails */
    if ((rc = open_part(&out[*n], cfg, gpu, p, L, prop.name, pmsg, sizeof pmsg)) != 0) {
      snprintf(msg, msglen, "GPU %d%s: %s", ordinal, nparts > 1 ? " (a part)" : "", pmsg);
      for (int q = p + 1; q < nparts; q++) lanes_close(lanes[q]);
      cuda_gpu_release(gpu);
      return rc;
    }
    (*n)++;
  }
  *gpu_out = gpu;
  cuda_gpu_release(gpu);
  return 0;
oom:
  snprintf(msg, msglen, "GPU %d: out of memory", ordinal);
  if (gpu) cuda_gpu_release(gpu);
  return GKC_EOUT_OF_MEMORY;
}

/* Peer access between every pair of GPUs that allows it, once, logged. */
static void enable_peers(cuda_gpu **gpus, int ngpus) {
  for (int i = 0; i < ngpus; i++)
    for (int j = 0; j < ngpus; j++) {
      int a = gpus[i]->ordinal, b = gpus[j]->ordinal, can = 0;
      if (i == j) continue;
      cudaError_t e = cudaDeviceCanAccessPeer(&can, a, b);
      if (e != cudaSuccess || !can) {
        cudaGetLastError();
        log_info("peer access: GPU %d -> GPU %d: not available%s%s; copies are staged by the driver",
                 a, b, e != cudaSuccess ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "");
        continue;
      }
      if ((e = cudaSetDevice(a)) == cudaSuccess) e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) e = cudaSuccess;
      cudaGetLastError();
      if (e != cudaSuccess) {
        log_warn("peer access: GPU %d -> GPU %d: cudaDeviceEnablePeerAccess: %s", a, b,
                 cudaGetErrorString(e));
        continue;
      }
      if (b < 64) gpus[i]->peers |= (uint64_t)1 << b;
      log_info("peer access: GPU %d -> GPU %d: enabled (direct copies)", a, b);
    }
}

int cuda_multi_open(gkcd_backend **out, int max, int *count, const gkcd_config *cfg,
                    cuda_part_open_fn open_part, char *msg, size_t msglen) {
  int ndev = 0, n = 0, rc = 0, nparts = cfg->split_device > 1 ? cfg->split_device : 1;
  *count = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    cudaGetLastError();
    snprintf(msg, msglen, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return GKC_EDEVICE_ERROR;
  }
  if (nparts > CUDA_MAX_PARTS) {
    snprintf(msg, msglen, "--split-device %d: at most %d parts per GPU", nparts, CUDA_MAX_PARTS);
    return GKC_EINVALID_ARGUMENT;
  }
  int nsel = cfg->ndevices > 0 ? cfg->ndevices : ndev;
  for (int i = 0; i < cfg->ndevices; i++)
    if (cfg->devices[i] < 0 || cfg->devices[i] >= ndev) {
      snprintf(msg, msglen, "--devices: there is no GPU %d (%d visible: 0..%d)", cfg->devices[i],
               ndev, ndev - 1);
      return GKC_EINVALID_ARGUMENT;
    }
  if ((long)nsel * nparts > max) {
    snprintf(msg, msglen, "%d GPUs x --split-device %d makes %ld devices; at most %d", nsel, nparts,
             (long)nsel * nparts, max);
    return GKC_EINVALID_ARGUMENT;
  }
  cuda_gpu **gpus = calloc((size_t)nsel, sizeof *gpus);
  if (!gpus) {
    snprintf(msg, msglen, "out of memory");
    return GKC_EOUT_OF_MEMORY;
  }
  for (int i = 0; i < nsel; i++) {
    int ordinal = cfg->ndevices > 0 ? cfg->devices[i] : i;
    if ((rc = gpu_open(out, &n, &gpus[i], ordinal, nparts, cfg, open_part, msg, msglen)) != 0) {
      while (n > 0) {
        n--;
        out[n]->destroy(out[n]);
      }
      free(gpus);
      return rc;
    }
  }
  if (nsel > 1) enable_peers(gpus, nsel);
  for (int i = 0; i < n; i++) {
    cuda_impl *impl = out[i]->impl;
    log_info("device: %s: %d streams%s", impl->name, impl->nslots,
             lanes_green(impl->lanes) ? ", its own SMs" : "");
  }
  free(gpus);
  *count = n;
  return 0;
}

int cuda_peer_copy(gkcd_backend *be, void *dst, gkcd_backend *from, const void *src, size_t bytes,
                   int *peer, char *msg, size_t msglen) {
  *peer = 0;
  if (!cuda_is_backend(from)) {
    snprintf(msg, msglen, "peer_copy from device %d to device %d: the source is not a GPU",
             from ? from->device : -1, be->device);
    return GKC_EINVALID_ARGUMENT;
  }
  cuda_impl *di = be->impl, *si = from->impl;
  char dn[64], sn[64];
  cuda_gpu_where(di, dn, sizeof dn);
  cuda_gpu_where(si, sn, sizeof sn);
  if (cuda_lost(di) || cuda_lost(si)) {
    snprintf(msg, msglen, "copying %zu bytes from device %d (%s) to device %d (%s): device %d was lost",
             bytes, from->device, sn, be->device, dn, cuda_lost(si) ? from->device : be->device);
    return GKC_EDEVICE_LOST;
  }
  if (bytes == 0) return 0;
  cudaError_t e = cudaSetDevice(di->device);
  if (e != cudaSuccess) goto fail;
  int same = di->gpu == si->gpu;
  cuda_slot *s = cuda_slot_take(di, LANES_BULK);
  if (same)
    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream);
  else
    e = cudaMemcpyPeerAsync(dst, di->device, src, si->device, bytes, s->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
  cuda_slot_give(di, s);
  if (e != cudaSuccess) goto fail;
  *peer = same || (si->device < 64 && (di->gpu->peers >> si->device & 1)) ||
          (di->device < 64 && (si->gpu->peers >> di->device & 1));
  return 0;
fail:
  snprintf(msg, msglen, "copying %zu bytes from device %d (%s) to device %d (%s): %s", bytes,
           from->device, sn, be->device, dn, cudaGetErrorString(e));
  cudaGetLastError();
  if (cuda_is_sticky(e)) {
    /* Sticky: the context that ran the copy (the destination's) is gone. */
    cuda_gpu_lost(di, "%s", msg);
    return GKC_EDEVICE_LOST;
  }
  return GKC_EDEVICE_ERROR;
}

/* Every CUDA backend has this peer_copy, and no other backend does. */
int cuda_is_backend(const gkcd_backend *be) { return be && be->peer_copy == cuda_peer_copy; }

int cuda_backend_where(const gkcd_backend *be, cuda_where *out) {
  if (!cuda_is_backend(be)) return -1;
  const cuda_impl *impl = be->impl;
  memset(out, 0, sizeof *out);
  out->gpu = impl->device;
  out->part = impl->part;
  out->nparts = impl->gpu->nparts;
  out->green = lanes_green(impl->lanes);
  out->sms = lanes_part_sms(impl->lanes);
  out->gpu_sms = impl->gpu->total_sms;
  out->spare_sms = impl->gpu->spare_sms;
  return 0;
}

void cuda_backend_inject_error(gkcd_backend *be, const char *why) {
  if (cuda_is_backend(be)) cuda_gpu_lost(be->impl, "%s", why);
}
