/* lanes.c: see lanes.h. */
#include "lanes.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_errors.h"
#include "log.h"

struct cuda_lanes {
  int n;            /* lanes: 1 or 2 */
  int green;        /* the lanes are green contexts */
  int sms[LANES_MAX];
  char why[200];    /* why not green */
  CUgreenCtx g[LANES_MAX];
  int prio_least, prio_greatest; /* the primary context's stream priorities */
  PFN_cuDeviceGetDevResource_v12040 get_dev_resource;
  PFN_cuDevSmResourceSplitByCount_v12040 split_by_count;
  PFN_cuDevResourceGenerateDesc_v12040 generate_desc;
  PFN_cuGreenCtxCreate_v12040 green_create;
  PFN_cuGreenCtxGetDevResource_v12040 green_get_resource;
  PFN_cuGreenCtxDestroy_v12040 green_destroy;
  PFN_cuGreenCtxStreamCreate_v12050 green_stream_create;
  PFN_cuCtxFromGreenCtx_v12040 ctx_from_green;
  PFN_cuCtxPushCurrent_v4000 ctx_push;
  PFN_cuCtxPopCurrent_v4000 ctx_pop;
  PFN_cuDeviceGet_v2000 device_get;
};

/* The driver's own error names, when the driver is there to ask. */
static PFN_cuGetErrorName_v6000 g_error_name;

static const char *cu_name(CUresult r) {
  static _Thread_local char num[32];
  const char *s = NULL;
  if (g_error_name && g_error_name(r, &s) == CUDA_SUCCESS && s) return s;
  snprintf(num, sizeof num, "CUresult %d", (int)r);
  return num;
}

/* Sets L->why and returns -1, so that failures read `return why(L, ...)`. */
__attribute__((format(printf, 2, 3))) static int why(cuda_lanes *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(L->why, sizeof L->why, fmt, ap);
  va_end(ap);
  return -1;
}

/* Driver functions come through the runtime (cudaGetDriverEntryPointByVersion)
 * rather than from linking libcuda: gkcd must still start, and serve from
 * its CPU backend, on a machine with no NVIDIA driver at all. */
static int lookup(cuda_lanes *L, const char *sym, int version, void **fn) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  *fn = NULL;
  cudaError_t e = cudaGetDriverEntryPointByVersion(sym, fn, (unsigned)version, cudaEnableDefault, &q);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return why(L, "cudaGetDriverEntryPointByVersion(%s): %s", sym, cudaGetErrorString(e));
  }
  if (q != cudaDriverEntryPointSuccess || !*fn)
    return why(L, "the driver has no %s%s", sym,
               q == cudaDriverEntryPointVersionNotSufficent ? " (too old)" : "");
  return 0;
}

#define LOOKUP(L, field, sym, ver) lookup((L), sym, (ver), (void **)&(L)->field)
#define TRY_CU(L, call)                                                 \
  do {                                                                  \
    CUresult r__ = (call);                                              \
    if (r__ != CUDA_SUCCESS) return why((L), "%s: %s", #call, cu_name(r__)); \
  } while (0)

/* One green context over res; its SM count read back from the driver. */
static int green_make(cuda_lanes *L, CUdevice dev, CUdevResource *res, int lane) {
  CUdevResourceDesc desc;
  TRY_CU(L, L->generate_desc(&desc, res, 1));
  TRY_CU(L, L->green_create(&L->g[lane], desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUdevResource got;
  memset(&got, 0, sizeof got);
  TRY_CU(L, L->green_get_resource(L->g[lane], &got, CU_DEV_RESOURCE_TYPE_SM));
  L->sms[lane] = (int)got.sm.smCount;
  return 0;
}

/* Both lanes from one split of the device's SMs: the latency lane is the
 * split's one group, the bulk lane its remainder.  Separate splits could
 * hand out overlapping SM sets (shared/SCHEDULING.md). */
static int green_open(cuda_lanes *L, int device, int want) {
  int ver = 0;
  cudaError_t e = cudaDriverGetVersion(&ver);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return why(L, "cudaDriverGetVersion: %s", cudaGetErrorString(e));
  }
  if (ver < 12050)
    return why(L, "the driver supports CUDA %d.%d; green-context streams need 12.5", ver / 1000,
               ver % 1000 / 10);
  if (LOOKUP(L, device_get, "cuDeviceGet", 2000) || LOOKUP(L, ctx_push, "cuCtxPushCurrent", 4000) ||
      LOOKUP(L, ctx_pop, "cuCtxPopCurrent", 4000) || LOOKUP(L, get_dev_resource, "cuDeviceGetDevResource", 12040) ||
      LOOKUP(L, split_by_count, "cuDevSmResourceSplitByCount", 12040) ||
      LOOKUP(L, generate_desc, "cuDevResourceGenerateDesc", 12040) ||
      LOOKUP(L, green_create, "cuGreenCtxCreate", 12040) ||
      LOOKUP(L, green_get_resource, "cuGreenCtxGetDevResource", 12040) ||
      LOOKUP(L, green_destroy, "cuGreenCtxDestroy", 12040) ||
      LOOKUP(L, green_stream_create, "cuGreenCtxStreamCreate", 12050) ||
      LOOKUP(L, ctx_from_green, "cuCtxFromGreenCtx", 12040))
    return -1;
  CUdevice dev;
  TRY_CU(L, L->device_get(&dev, device));
  CUdevResource all, part, rest;
  memset(&all, 0, sizeof all);
  memset(&part, 0, sizeof part);
  memset(&rest, 0, sizeof rest);
  TRY_CU(L, L->get_dev_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  unsigned total = all.sm.smCount;
  /* minSmPartitionSize and smCoscheduledAlignment are CUDA 13 fields: an
   * older driver leaves them 0, and then the split alone says what it
   * rounds to. */
  log_info("lanes: the GPU has %u SMs; a partition is at least %u SMs, in multiples of %u%s", total,
           all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment,
           all.sm.minSmPartitionSize ? "" : " (0: not reported by this driver)");
  if ((unsigned)want >= total)
    return why(L, "--latency-sms %d leaves no SM for the bulk lane (the GPU has %u)", want, total);
  unsigned groups = 1;
  TRY_CU(L, L->split_by_count(&part, &groups, &all, &rest, 0, (unsigned)want));
  if (groups < 1) return why(L, "the driver could not make a partition of %d SMs", want);
  if (rest.sm.smCount == 0)
    return why(L, "a latency partition of %u SMs (asked %d) leaves none for the bulk lane",
               part.sm.smCount, want);
  if (green_make(L, dev, &part, LANES_LATENCY) || green_make(L, dev, &rest, LANES_BULK)) return -1;
  return 0;
}

int lanes_open(cuda_lanes **out, int device, int latency_sms, int force_streams) {
  cuda_lanes *L = calloc(1, sizeof *L);
  if (!L) return GKC_EOUT_OF_MEMORY;
  *out = L;
  if (!g_error_name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &fn, 6000, cudaEnableDefault, &q) ==
            cudaSuccess && q == cudaDriverEntryPointSuccess)
      g_error_name = (PFN_cuGetErrorName_v6000)fn;
    else
      cudaGetLastError();
  }
  int total = 0;
  if (cudaDeviceGetAttribute(&total, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    total = 0;
  }
  if (cudaDeviceGetStreamPriorityRange(&L->prio_least, &L->prio_greatest) != cudaSuccess) {
    cudaGetLastError(); /* no priorities: both lanes at the default */
    L->prio_least = L->prio_greatest = 0;
  }
  L->n = latency_sms > 0 ? 2 : 1;
  L->sms[LANES_BULK] = L->sms[LANES_LATENCY] = total;
  if (L->n == 1) {
    why(L, "lanes are off (--latency-sms 0)");
    log_info("lanes: off (--latency-sms 0): one lane on all %d SMs", total);
    return 0;
  }
  if (force_streams)
    why(L, "GKCD_CUDA_LANES=streams");
  else if (green_open(L, device, latency_sms) == 0)
    L->green = 1;
  if (L->green) {
    log_info("lanes: green contexts: latency %d SMs (asked %d), bulk %d SMs", L->sms[LANES_LATENCY],
             latency_sms, L->sms[LANES_BULK]);
    return 0;
  }
  for (int l = 0; l < LANES_MAX; l++)
    if (L->g[l] && L->green_destroy) {
      CUresult r = L->green_destroy(L->g[l]);
      if (r != CUDA_SUCCESS) log_warn("lanes: cuGreenCtxDestroy: %s", cu_name(r));
      L->g[l] = NULL;
    }
  L->sms[LANES_BULK] = L->sms[LANES_LATENCY] = total;
  log_warn("lanes: no green contexts (%s); both lanes share all %d SMs, the latency lane's streams"
           " at the highest priority (%d, bulk %d), bulk kernels cut into slices",
           L->why, total, L->prio_greatest, L->prio_least);
  return 0;
}

void lanes_close(cuda_lanes *L) {
  if (!L) return;
  for (int l = 0; l < LANES_MAX; l++)
    if (L->g[l]) {
      CUresult r = L->green_destroy(L->g[l]);
      if (r != CUDA_SUCCESS) log_warn("lanes: cuGreenCtxDestroy: %s", cu_name(r));
    }
  free(L);
}

int lanes_count(const cuda_lanes *L) { return L->n; }
int lanes_green(const cuda_lanes *L) { return L->green; }
int lanes_sms(const cuda_lanes *L, int lane) { return L->sms[lane == LANES_LATENCY ? 1 : 0]; }
const char *lanes_why(const cuda_lanes *L) { return L->green ? "" : L->why; }

cudaError_t lanes_stream_create(cuda_lanes *L, int lane, cudaStream_t *out, char *msg,
                                size_t msglen) {
  /* Latency: the highest priority there is; bulk: the lowest.  Inside a
   * green context this only orders the lane's own streams; on the fallback
   * it is what puts tiny kernels ahead of bulk blocks not yet started. */
  int prio = lane == LANES_LATENCY && L->n > 1 ? L->prio_greatest : L->prio_least;
  if (L->green) {
    CUstream s = NULL;
    CUresult r = L->green_stream_create(&s, L->g[lane], CU_STREAM_NON_BLOCKING, prio);
    if (r != CUDA_SUCCESS) {
      snprintf(msg, msglen, "cuGreenCtxStreamCreate (lane %d): %s", lane, cu_name(r));
      return r == CUDA_ERROR_OUT_OF_MEMORY ? cudaErrorMemoryAllocation : cudaErrorUnknown;
    }
    *out = (cudaStream_t)s;
    return cudaSuccess;
  }
  cudaError_t e = cudaStreamCreateWithPriority(out, cudaStreamNonBlocking, prio);
  if (e != cudaSuccess) snprintf(msg, msglen, "cudaStreamCreateWithPriority: %s", cudaGetErrorString(e));
  return e;
}

int lanes_enter(cuda_lanes *L, int lane, char *msg, size_t msglen) {
  if (!L->green) return 0;
  CUcontext c = NULL;
  CUresult r = L->ctx_from_green(&c, L->g[lane]);
  if (r == CUDA_SUCCESS) r = L->ctx_push(c);
  if (r != CUDA_SUCCESS) {
    snprintf(msg, msglen, "making lane %d's green context current: %s", lane, cu_name(r));
    return -1;
  }
  return 0;
}

int lanes_leave(cuda_lanes *L, char *msg, size_t msglen) {
  if (!L->green) return 0;
  CUcontext c = NULL;
  CUresult r = L->ctx_pop(&c);
  if (r != CUDA_SUCCESS) {
    snprintf(msg, msglen, "cuCtxPopCurrent: %s", cu_name(r));
    return -1;
  }
  return 0;
}
