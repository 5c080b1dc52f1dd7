/* test_gpu_multidev: every GPU of the host as devices (cuda/cuda_multi.c),
 * below the daemon: the backends cuda_backends_create makes run jobs the
 * way gkcd's workers do (be->run on this thread, job_finish counted here).
 *
 * Twice: each visible GPU cut in two (--split-device 2), then every visible
 * GPU whole.  On each device: sgemm, reduce, nrm2 and spmv on fresh random
 * inputs against a float64 reference (the reduce and nrm2 also tiny: from
 * the pinned stage); peer_copy between every pair of devices
 * (the bytes read back; *peer set where the copy was direct); the parts'
 * SM partitions (green contexts) equal, disjoint by construction, and
 * adding up with the split's leftover to the GPU's SMs; memory per part (the
 * GPU's total, used = the part's own allocations).  Then the losses: a
 * device taken out by the daemon (as GKCD_FAULT=device_lost does, through
 * backend_device_lost) fails its jobs device_lost naming it while the other
 * part of the same GPU goes on computing right; a sticky error injected on
 * one part loses every part of that GPU, and a second GPU, when there is
 * one, still computes right.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "backend_host.h"
#include "cuda_multi.h"
#include "devcache.h"
#include "gkc_errors.h"
#include "gpu_util.h"
#include "gpu_test.h"
#include "test.h"

/* --- jobs ------------------------------------------------------------------------ */

static gpu_rng rng;
static int checks;

static float *host_random(size_t n) {
  float *p = malloc(n * sizeof *p + 4);
  ASSERT(p);
  for (size_t i = 0; i < n; i++) p[i] = gpu_rng_float(&rng, -1.0f, 1.0f);
  return p;
}

static gkcd_span host_span(const void *p, size_t bytes) {
  return (gkcd_span){.ptr = p, .bytes = bytes, .where = SPAN_HOST};
}

/* Runs job on be as a worker would; it must finish exactly once. */
static void run(gkcd_backend *be, gkcd_job *job) {
  int before = atomic_load(&host_finished);
  job->algo = GKCD_ALGO_AUTO;
  job->out_kind = OUT_BIN;
  job->row = host_row(job->method);
  be->run[job->method](be, job);
  ASSERT_EQ(atomic_load(&host_finished), before + 1);
}

/* sgemm m x n x k; 0 when right, else the job's error. */
static int check_sgemm(gkcd_backend *be, int m, int n, int k, gkcd_job *job) {
  float *a = host_random((size_t)m * k), *b = host_random((size_t)k * n);
  memset(job, 0, sizeof *job);
  job->method = PROTO_M_SGEMM;
  job->in.sgemm.m = m;
  job->in.sgemm.n = n;
  job->in.sgemm.k = k;
  job->in.sgemm.alpha = 1.0f;
  job->in.sgemm.a = host_span(a, (size_t)m * k * 4);
  job->in.sgemm.b = host_span(b, (size_t)k * n * 4);
  job->out_bytes = (size_t)m * n * 4;
  run(be, job);
  if (job->err) {
    free(a);
    free(b);
    return job->err;
  }
  const float *c = job->out;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double want = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        want += (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
        mag += fabs((double)a[(size_t)i * k + p] * b[(size_t)p * n + j]);
      }
      double got = c[(size_t)i * n + j];
      if (!(fabs(got - want) <= 2.0 * k * FLT_EPSILON * mag + 1e-30))
        TEST_FAIL("device %d: sgemm %dx%dx%d: C[%d,%d] = %.9g, want %.9g (algo %s)", be->device, m, n,
                  k, i, j, got, want, job->algo_name);
    }
  free(job->out);
  free(a);
  free(b);
  checks++;
  return 0;
}

static void check_reduce(gkcd_backend *be, int64_t n) {
  float *x = host_random((size_t)n);
  gkcd_job job;
  memset(&job, 0, sizeof job);
  job.method = PROTO_M_REDUCE;
  job.in.reduce.x = host_span(x, (size_t)n * 4);
  job.in.reduce.n = n;
  job.in.reduce.op = 0; /* sum */
  run(be, &job);
  if (job.err) TEST_FAIL("device %d: reduce: %s", be->device, job.errmsg);
  double want = 0, abs_sum = 0;
  for (int64_t i = 0; i < n; i++) {
    want += x[i];
    abs_sum += fabs(x[i]);
  }
  /* test_gpu_reduce's bound for the CUB algo (the loosest of them). */
  if (!(fabs(job.value - want) <= 2e-5 * abs_sum + 1e-30))
    TEST_FAIL("device %d: reduce sum of %lld: %.12g, want %.12g (algo %s)", be->device, (long long)n,
              job.value, want, job.algo_name);
  free(x);
  checks++;
}

/* ||x||_2 of n floats: a few KB run from the pinned stage (cuda_tiny.h),
 * more through the device (cuda_array.h). */
static void check_nrm2(gkcd_backend *be, int64_t n) {
  float *x = host_random((size_t)n);
  gkcd_job job;
  memset(&job, 0, sizeof job);
  job.method = PROTO_M_NRM2;
  job.in.vec.x = host_span(x, (size_t)n * 4);
  job.in.vec.n = n;
  run(be, &job);
  if (job.err) TEST_FAIL("device %d: nrm2: %s", be->device, job.errmsg);
  long double ss = 0; /* the exact squares summed with 11 more bits than the GPU's */
  for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  double want = sqrt((double)ss);
  /* test_gpu_blas1's bound */
  if (!(fabs(job.value - want) <= 1e-12 * want))
    TEST_FAIL("device %d: nrm2 of %lld: %.17g, want %.17g (algo %s)", be->device, (long long)n,
              job.value, want, job.algo_name);
  free(x);
  checks++;
}

static void check_spmv(gkcd_backend *be, int32_t grid) {
  gpu_csr m;
  ASSERT(gpu_csr_stencil3d(&m, grid, gpu_rng_next(&rng)) == 0);
  float *x = host_random((size_t)m.cols);
  gkcd_job job;
  memset(&job, 0, sizeof job);
  job.method = PROTO_M_SPMV;
  job.in.spmv.rows = m.rows;
  job.in.spmv.cols = m.cols;
  job.in.spmv.nnz = m.nnz;
  job.in.spmv.alpha = 1.0f;
  job.in.spmv.row_ptr = host_span(m.row_ptr, (size_t)(m.rows + 1) * 4);
  job.in.spmv.col_idx = host_span(m.col_idx, (size_t)m.nnz * 4);
  job.in.spmv.values = host_span(m.values, (size_t)m.nnz * 4);
  job.in.spmv.x = host_span(x, (size_t)m.cols * 4);
  job.in.spmv.max_row = 27;
  job.out_bytes = (size_t)m.rows * 4;
  run(be, &job);
  if (job.err) TEST_FAIL("device %d: spmv: %s", be->device, job.errmsg);
  double *want = malloc((size_t)m.rows * sizeof *want), *mag = malloc((size_t)m.rows * sizeof *mag);
  ASSERT(want && mag);
  gpu_spmv_ref(&m, 1.0, x, 0.0, NULL, want, mag);
  const float *y = job.out;
  for (int32_t r = 0; r < m.rows; r++)
    if (!(fabs(y[r] - want[r]) <= 1e-5 * mag[r] + 1e-30))
      TEST_FAIL("device %d: spmv row %d: %.9g, want %.9g (algo %s)", be->device, r, y[r], want[r],
                job.algo_name);
  free(job.out);
  free(want);
  free(mag);
  free(x);
  gpu_csr_free(&m);
  checks++;
}

static void check_compute(gkcd_backend *be) {
  gkcd_job job;
  int rc = check_sgemm(be, 300, 257, 190, &job);
  if (rc) TEST_FAIL("device %d: sgemm: %s", be->device, job.errmsg);
  check_reduce(be, 1000003);
  check_reduce(be, 100); /* tiny: from the pinned stage */
  check_nrm2(be, 1000003);
  check_nrm2(be, 1001);
  check_spmv(be, 24);
}

/* --- peer copies ------------------------------------------------------------------- */

static void *res_fill(gkcd_backend *be, const void *h, size_t bytes, size_t *cap) {
  void *p = NULL;
  char msg[256];
  cuda_where w;
  ASSERT(cuda_backend_where(be, &w) == 0);
  if (be->res_alloc(be, bytes, &p, cap, msg, sizeof msg) != 0)
    TEST_FAIL("device %d: res_alloc %zu: %s", be->device, bytes, msg);
  CUDA_OK(cudaSetDevice(w.gpu));
  if (h) {
    CUDA_OK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    /* From pageable memory cudaMemcpy may return once the bytes are staged,
     * before the DMA has written them; the peer copy then runs on a stream
     * of gkcd's, which does not wait for the legacy stream, and could read
     * the old bytes (the "bytes differ" seen on two and four H200s).  gkcd
     * itself writes resident memory only on its own streams, synchronised
     * before the job that wrote it finishes. */
    CUDA_OK(cudaDeviceSynchronize());
  }
  return p;
}

/* bytes from src_be's memory at offset soff to dst_be's at offset doff (the
 * allocations are bytes + 64 long: offsets below 64, unaligned ones too);
 * the bytes around the copy in dst must stay as they were. */
static void check_peer(gkcd_backend *dst_be, gkcd_backend *src_be, size_t bytes, size_t soff,
                       size_t doff) {
  size_t total = bytes + 64;
  unsigned char *h = malloc(total), *g = malloc(total), *back = malloc(total);
  ASSERT(h && g && back);
  for (size_t i = 0; i < total; i++) h[i] = (unsigned char)gpu_rng_next(&rng);
  for (size_t i = 0; i < total; i++) g[i] = (unsigned char)gpu_rng_next(&rng);
  size_t scap, dcap;
  char *src = res_fill(src_be, h, total, &scap), *dst = res_fill(dst_be, g, total, &dcap);
  char msg[256] = "";
  int peer = -1;
  int rc = dst_be->peer_copy(dst_be, dst + doff, src_be, src + soff, bytes, &peer, msg, sizeof msg);
  if (rc) TEST_FAIL("peer_copy %d -> %d: %s", src_be->device, dst_be->device, msg);
  cuda_where ws, wd;
  cuda_backend_where(src_be, &ws);
  cuda_backend_where(dst_be, &wd);
  int can = 0;
  if (ws.gpu != wd.gpu) CUDA_OK(cudaDeviceCanAccessPeer(&can, wd.gpu, ws.gpu));
  /* Parts of one GPU copy within it; GPUs the driver links, directly. */
  if (ws.gpu == wd.gpu || can) ASSERT_EQ(peer, 1);
  else ASSERT_EQ(peer, 0);
  CUDA_OK(cudaSetDevice(wd.gpu));
  CUDA_OK(cudaMemcpy(back, dst, total, cudaMemcpyDeviceToHost));
  memcpy(g + doff, h + soff, bytes); /* what dst must hold now */
  if (memcmp(back, g, total) != 0) {
    size_t i = 0;
    while (back[i] == g[i]) i++;
    TEST_FAIL("peer_copy %d (GPU %d) -> %d (GPU %d), %zu bytes at offsets %zu -> %zu: byte %zu of"
              " the destination differs (%s the copy)", src_be->device, ws.gpu, dst_be->device,
              wd.gpu, bytes, soff, doff, i, i < doff || i >= doff + bytes ? "outside" : "inside");
  }
  src_be->res_free(src_be, src, scap);
  dst_be->res_free(dst_be, dst, dcap);
  free(h);
  free(g);
  free(back);
  checks++;
}

/* Every ordered pair of devices, at sizes around powers of two and the
 * copy engines' 2 MiB pages, aligned and not. */
static void check_peers(gkcd_backend **be, int n) {
  static const size_t sizes[] = {1, 4095, 4096, 4097, ((size_t)2 << 20) - 1, ((size_t)2 << 20) + 1,
                                 ((size_t)3 << 20) + 17};
  static const size_t offs[][2] = {{0, 0}, {1, 0}, {0, 3}, {5, 7}};
  int pairs = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
          check_peer(be[j], be[i], sizes[s], offs[o][0], offs[o][1]);
      pairs++;
    }
  printf("  peer_copy: %d ordered pairs of %d devices, %zu sizes x %zu offsets each, bytes checked\n",
         pairs, n, sizeof sizes / sizeof sizes[0], sizeof offs / sizeof offs[0]);
}

/* --- one configuration ---------------------------------------------------------- */

static gkcd_config config(int split) {
  gkcd_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.streams = 2;
  cfg.device_cache_bytes = (size_t)1 << 30;
  cfg.latency_sms = 8;
  cfg.slice_us = 100;
  cfg.split_device = split;
  cfg.cpu_devices = 1;
  return cfg;
}

static int open_all(gkcd_backend **be, int split) {
  gkcd_config cfg = config(split);
  char msg[256] = "";
  int n = 0;
  if (cuda_backends_create(be, 64, &n, &cfg, msg, sizeof msg) != 0)
    TEST_FAIL("cuda_backends_create (split %d): %s", split, msg);
  for (int i = 0; i < n; i++) {
    be[i]->device = i; /* as the daemon numbers them */
    gkcd_device_info info;
    ASSERT_EQ(be[i]->devices(be[i], &info, 1), 1);
    cuda_where w;
    ASSERT(cuda_backend_where(be[i], &w) == 0);
    char want[64];
    if (split > 1) snprintf(want, sizeof want, "(GPU %d, part %d/%d)", w.gpu, w.part + 1, split);
    else snprintf(want, sizeof want, "(GPU %d)", w.gpu);
    ASSERT_CONTAINS(info.name, want);
    printf("  device %d: %s: %d SMs%s\n", i, info.name, w.sms, w.green ? " (its own)" : "");
  }
  return n;
}

static void close_all(gkcd_backend **be, int n) {
  for (int i = 0; i < n; i++) be[i]->destroy(be[i]);
}

static uint64_t used(gkcd_backend *be) {
  gkcd_device_info info;
  ASSERT_EQ(be->devices(be, &info, 1), 1);
  return info.memory_total - info.memory_free;
}

/* The parts of each GPU: equal SM shares adding up, memory per part. */
static void check_parts(gkcd_backend **be, int n, int split) {
  for (int i = 0; i < n; i += split) {
    cuda_where w0;
    cuda_backend_where(be[i], &w0);
    if (!w0.green) {
      printf("  GPU %d: no green contexts: the parts share all SMs (SM checks not made)\n", w0.gpu);
      for (int p = 0; p < split; p++) {
        cuda_where w;
        cuda_backend_where(be[i + p], &w);
        ASSERT_EQ(w.sms, w.gpu_sms);
      }
    } else {
      int sum = 0;
      for (int p = 0; p < split; p++) {
        cuda_where w;
        cuda_backend_where(be[i + p], &w);
        ASSERT_EQ(w.gpu, w0.gpu);
        ASSERT_EQ(w.part, p);
        ASSERT_EQ(w.sms, w0.sms); /* equal shares */
        ASSERT(w.sms >= 8);
        /* its lanes split its share: latency + bulk = the part */
        gkcd_lane_info bulk, lat;
        be[i + p]->lane_info(be[i + p], 0, &bulk);
        be[i + p]->lane_info(be[i + p], 1, &lat);
        ASSERT(bulk.sms > 0 && lat.sms >= 8);
        ASSERT_EQ(bulk.sms + lat.sms, w.sms);
        sum += w.sms;
      }
      printf("  GPU %d: %d parts x %d SMs + %d left over = %d\n", w0.gpu, split, w0.sms, w0.spare_sms,
             w0.gpu_sms);
      ASSERT_EQ(sum + w0.spare_sms, w0.gpu_sms);
      ASSERT(w0.spare_sms < w0.sms);
      checks++;
    }
    /* Memory: each part reports the GPU's total and its own use. */
    gkcd_device_info i0, i1;
    be[i]->devices(be[i], &i0, 1);
    be[i + 1]->devices(be[i + 1], &i1, 1);
    ASSERT_EQ(i0.memory_total, i1.memory_total);
    uint64_t u0 = used(be[i]), u1 = used(be[i + 1]);
    size_t bytes = (size_t)96 << 20, cap;
    void *p = res_fill(be[i], NULL, bytes, &cap);
    ASSERT_EQ(used(be[i]), u0 + cap);
    ASSERT_EQ(used(be[i + 1]), u1);
    be[i]->res_free(be[i], p, cap);
    checks++;
  }
}

static void run_config(int split) {
  gkcd_backend *be[64];
  printf("--split-device %d\n", split);
  for (int i = 0; i < 64; i++) atomic_store(&host_lost_calls[i], 0);
  int n = open_all(be, split);
  ASSERT(n >= split);
  for (int i = 0; i < n; i++) check_compute(be[i]);
  check_peers(be, n);
  if (split > 1) check_parts(be, n, split);

  gkcd_job job;
  if (split > 1) {
    /* The daemon takes part 2 of GPU 0 out (fault injection does this). */
    backend_device_lost(be[1], "fault injection");
    ASSERT_EQ(check_sgemm(be[1], 64, 64, 64, &job), GKC_EDEVICE_LOST);
    ASSERT_CONTAINS(job.errmsg, "device 1 (GPU 0, part 2/");
    ASSERT_CONTAINS(job.errmsg, "was lost");
    ASSERT(job.out == NULL);
    check_compute(be[0]); /* its sibling goes on */
    ASSERT_EQ(host_lost_calls[0], 0);
    checks++;
  }
  /* A sticky error on device 0 loses its GPU: every part. */
  cuda_backend_inject_error(be[0], "an illegal memory access was encountered (injected)");
  for (int i = 0; i < split; i++) {
    ASSERT_EQ(host_lost_calls[i], 1);
    ASSERT_EQ(check_sgemm(be[i], 64, 64, 64, &job), GKC_EDEVICE_LOST);
    char want[64];
    snprintf(want, sizeof want, "device %d (GPU 0", i);
    ASSERT_CONTAINS(job.errmsg, want);
    if (i == 0) ASSERT_CONTAINS(job.errmsg, "illegal memory access");
  }
  char msg[256];
  int peer;
  if (n > split) {
    /* The next GPU is untouched, and copies to the lost one are refused. */
    for (int i = split; i < n; i++) {
      ASSERT_EQ(host_lost_calls[i], 0);
      check_compute(be[i]);
    }
    size_t cap;
    void *p = res_fill(be[split], NULL, 4096, &cap);
    ASSERT_EQ(be[split]->peer_copy(be[split], p, be[0], p, 4096, &peer, msg, sizeof msg),
              GKC_EDEVICE_LOST);
    ASSERT_CONTAINS(msg, "device 0 was lost");
    be[split]->res_free(be[split], p, cap);
  } else {
    printf("  one GPU: the other-GPU-unaffected check needs two (not made)\n");
  }
  checks++;
  close_all(be, n);
}

int main(void) {
  gpu_require_device();
  rng.s = gpu_seed("test_gpu_multidev");
  int ndev = 0;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  printf("%d visible GPU%s\n", ndev, ndev > 1 ? "s" : "");
  run_config(2);
  run_config(1);
  printf("test_gpu_multidev: %d checks passed\n", checks);
  return 0;
}
