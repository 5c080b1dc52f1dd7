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
  CUgreenCtx part;  /* --split-device: the part's own green context, which
                     * the lanes' were split from (NULL otherwise) */
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

/* Destroys every green context L holds (its lanes', then its part's). */
static void green_drop(cuda_lanes *L) {
  for (int l = 0; l < LANES_MAX; l++)
    if (L->g[l] && L->green_destroy) {
      CUresult r = L->green_destroy(L->g[l]);
      if (r != CUDA_SUCCESS) log_warn("lanes: cuGreenCtxDestroy: %s", cu_name(r));
      L->g[l] = NULL;
    }
  if (L->part && L->green_destroy) {
    CUresult r = L->green_destroy(L->part);
    if (r != CUDA_SUCCESS) log_warn("lanes: cuGreenCtxDestroy (part): %s", cu_name(r));
    L->part = NULL;
  }
}

/* The driver functions green contexts need, and a driver new enough. */
static int green_lookup(cuda_lanes *L) {
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
  return 0;
}

/* The lanes over base (the device's SMs, or a part's): want > 0: the
 * latency lane is one group of want SMs split from base, the bulk lane its
 * remainder (separate splits could hand out overlapping SM sets:
 * shared/SCHEDULING.md); want <= 0: one lane, a green context over all of
 * base. */
static int green_lanes(cuda_lanes *L, CUdevice dev, CUdevResource *base, int want) {
  unsigned total = base->sm.smCount;
  if (want <= 0) return green_make(L, dev, base, LANES_BULK);
  if ((unsigned)want >= total)
    return why(L, "--latency-sms %d leaves no SM for the bulk lane (%u SMs to split)", want, total);
  CUdevResource part, rest;
  memset(&part, 0, sizeof part);
  memset(&rest, 0, sizeof rest);
  unsigned groups = 1;
  TRY_CU(L, L->split_by_count(&part, &groups, base, &rest, 0, (unsigned)want));
  if (groups < 1) return why(L, "the driver could not make a partition of %d SMs", want);
  if (rest.sm.smCount == 0)
    return why(L, "a latency partition of %u SMs (asked %d) leaves none for the bulk lane",
               part.sm.smCount, want);
  if (green_make(L, dev, &part, LANES_LATENCY) || green_make(L, dev, &rest, LANES_BULK)) return -1;
  return 0;
}

static int green_open(cuda_lanes *L, int device, int want) {
  if (green_lookup(L)) return -1;
  CUdevice dev;
  TRY_CU(L, L->device_get(&dev, device));
  CUdevResource all;
  memset(&all, 0, sizeof all);
  TRY_CU(L, L->get_dev_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  /* minSmPartitionSize and smCoscheduledAlignment are CUDA 13 fields: an
   * older driver leaves them 0, and then the split alone says what it
   * rounds to. */
  log_info("lanes: the GPU has %u SMs; a partition is at least %u SMs, in multiples of %u%s",
           all.sm.smCount, all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment,
           all.sm.minSmPartitionSize ? "" : " (0: not reported by this driver)");
  return green_lanes(L, dev, &all, want);
}

/* A lanes object for device with no green context yet: its SM count and
 * stream priorities.  NULL when memory runs out. */
static cuda_lanes *lanes_new(int device, int *total) {
  cuda_lanes *L = calloc(1, sizeof *L);
  if (!L) return NULL;
  if (!g_error_name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &fn, 6000, cudaEnableDefault, &q) ==
            cudaSuccess && q == cudaDriverEntryPointSuccess)
      g_error_name = (PFN_cuGetErrorName_v6000)fn;
    else
      cudaGetLastError();
  }
  *total = 0;
  if (cudaDeviceGetAttribute(total, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    *total = 0;
  }
  if (cudaDeviceGetStreamPriorityRange(&L->prio_least, &L->prio_greatest) != cudaSuccess) {
    cudaGetLastError(); /* no priorities: both lanes at the default */
    L->prio_least = L->prio_greatest = 0;
  }
  return L;
}

int lanes_open(cuda_lanes **out, int device, int latency_sms, int force_streams) {
  int total;
  cuda_lanes *L = lanes_new(device, &total);
  if (!L) return GKC_EOUT_OF_MEMORY;
  *out = L;
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
  green_drop(L);
  L->sms[LANES_BULK] = L->sms[LANES_LATENCY] = total;
  log_warn("lanes: no green contexts (%s); both lanes share all %d SMs, the latency lane's streams"
           " at the highest priority (%d, bulk %d), bulk kernels cut into slices",
           L->why, total, L->prio_greatest, L->prio_least);
  return 0;
}

void lanes_close(cuda_lanes *L) {
  if (!L) return;
  green_drop(L);
  free(L);
}

/* --split-device: nparts equal parts of the device's SMs from one split
 * (the largest size the driver can make nparts groups of: it rounds a
 * group to its granularity, 8 SMs on sm_90, so the size is found by asking
 * it, not assumed), each made a green context; a split's results cannot be
 * split again, so each part's lanes are split from its green context's own
 * resource.  0, or -1 with why(P[0]) set (nothing left open). */
static int green_parts(cuda_lanes **P, int nparts, int device, int want, int *spare) {
  cuda_lanes *L0 = P[0];
  if (green_lookup(L0)) return -1;
  for (int i = 1; i < nparts; i++) {
    cuda_lanes *Li = P[i];
    int pl = Li->prio_least, pg = Li->prio_greatest;
    *Li = *L0; /* the driver functions */
    Li->prio_least = pl;
    Li->prio_greatest = pg;
  }
  CUdevice dev;
  TRY_CU(L0, L0->device_get(&dev, device));
  CUdevResource all, rest;
  memset(&all, 0, sizeof all);
  memset(&rest, 0, sizeof rest);
  TRY_CU(L0, L0->get_dev_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  unsigned total = all.sm.smCount, size = total / (unsigned)nparts, groups = 0;
  log_info("lanes: GPU %d has %u SMs; a partition is at least %u SMs, in multiples of %u%s", device,
           total, all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment,
           all.sm.minSmPartitionSize ? "" : " (0: not reported by this driver)");
  for (; size > 0; size--) { /* a dry run (no result array) counts the groups */
    groups = 0;
    TRY_CU(L0, L0->split_by_count(NULL, &groups, &all, NULL, 0, size));
    if (groups >= (unsigned)nparts) break;
  }
  if (size == 0) return why(L0, "the driver cannot cut %u SMs into %d parts", total, nparts);
  CUdevResource *res = calloc((size_t)nparts, sizeof *res);
  if (!res) return why(L0, "out of memory");
  groups = (unsigned)nparts;
  CUresult r = L0->split_by_count(res, &groups, &all, &rest, 0, size);
  if (r != CUDA_SUCCESS || groups != (unsigned)nparts) {
    free(res);
    return why(L0, "cuDevSmResourceSplitByCount(%d x %u SMs): %s", nparts, size,
               r != CUDA_SUCCESS ? cu_name(r) : "too few groups");
  }
  *spare = (int)rest.sm.smCount;
  int rc = 0;
  for (int i = 0; i < nparts && rc == 0; i++) {
    cuda_lanes *L = P[i];
    CUdevResourceDesc desc;
    CUdevResource mine;
    memset(&mine, 0, sizeof mine);
    if ((r = L->generate_desc(&desc, &res[i], 1)) != CUDA_SUCCESS ||
        (r = L->green_create(&L->part, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM)) != CUDA_SUCCESS ||
        (r = L->green_get_resource(L->part, &mine, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS) {
      rc = why(L0, "part %d's green context (%u SMs): %s", i, res[i].sm.smCount, cu_name(r));
      break;
    }
    if (green_lanes(L, dev, &mine, want) != 0) {
      if (L != L0) snprintf(L0->why, sizeof L0->why, "part %d: %.150s", i, L->why);
      rc = -1;
    }
  }
  free(res);
  if (rc)
    for (int i = 0; i < nparts; i++) green_drop(P[i]);
  return rc;
}

int lanes_open_parts(cuda_lanes **out, int nparts, int device, int latency_sms, int force_streams,
                     int *spare_sms) {
  int total = 0;
  *spare_sms = 0;
  for (int i = 0; i < nparts; i++) {
    out[i] = lanes_new(device, &total);
    if (!out[i]) {
      for (int j = 0; j < i; j++) lanes_close(out[j]);
      return GKC_EOUT_OF_MEMORY;
    }
    out[i]->n = latency_sms > 0 ? 2 : 1;
  }
  int green = 0;
  if (force_streams)
    why(out[0], "GKCD_CUDA_LANES=streams");
  else if (green_parts(out, nparts, device, latency_sms, spare_sms) == 0)
    green = 1;
  for (int i = 0; i < nparts; i++) {
    cuda_lanes *L = out[i];
    L->green = green;
    if (!green) {
      snprintf(L->why, sizeof L->why, "%s", out[0]->why);
      L->sms[LANES_BULK] = L->sms[LANES_LATENCY] = total;
    } else if (L->n == 1) {
      L->sms[LANES_LATENCY] = L->sms[LANES_BULK];
    }
  }
  if (green) {
    for (int i = 0; i < nparts; i++)
      log_info("lanes: GPU %d part %d/%d: green contexts: %s%d SMs%s", device, i + 1, nparts,
               out[i]->n > 1 ? "latency " : "", out[i]->sms[out[i]->n > 1 ? LANES_LATENCY : LANES_BULK],
               out[i]->n > 1 ? "" : " (lanes off)");
    for (int i = 0; i < nparts && out[i]->n > 1; i++)
      log_info("lanes: GPU %d part %d/%d: bulk %d SMs", device, i + 1, nparts, out[i]->sms[LANES_BULK]);
    log_info("lanes: GPU %d: %d SMs left over by the split into %d parts", device, *spare_sms, nparts);
    return 0;
  }
  *spare_sms = 0;
  log_warn("--split-device %d: no green contexts on GPU %d (%s); the %d devices share all %d SMs"
           " through streams%s", nparts, device, out[0]->why, nparts, total,
           out[0]->n > 1 ? ", each device's latency lane at the highest priority, bulk kernels sliced" : "");
  return 0;
}

int lanes_part_sms(const cuda_lanes *L) {
  if (!L->green) return L->sms[LANES_BULK];
  return L->n > 1 ? L->sms[LANES_BULK] + L->sms[LANES_LATENCY] : L->sms[LANES_BULK];
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
