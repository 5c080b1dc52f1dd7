/* cpu_backend.c: the backend that serves every request from the CPU.
 *
 * Runs each job synchronously on the scheduler's worker thread: OpenBLAS for
 * sgemm, our own OpenMP kernels for reduce and spmv (cpu_kernels.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cpu_kernels.h"
#include "gkc_errors.h"

typedef struct {
  int nthreads;
} cpu_impl;

static const char *const sgemm_algos[] = {"openblas", NULL};
static const char *const reduce_algos[] = {"cpu_omp", NULL};
static const char *const spmv_algos[] = {"cpu_merge", NULL};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The request's arrays sit at arbitrary byte offsets in its msgpack frame;
 * kernels want naturally aligned arrays.  Returns s->ptr when it already is,
 * else a malloc'd aligned copy stored in *tmp (NULL when out of memory). */
static const void *aligned(const gkcd_span *s, void **tmp) {
  *tmp = NULL;
  if (((uintptr_t)s->ptr & 3) == 0 || s->bytes == 0) return s->ptr;
  *tmp = malloc(s->bytes);
  if (*tmp) memcpy(*tmp, s->ptr, s->bytes);
  return *tmp;
}

static void run_sgemm(cpu_impl *impl, gkcd_job *job) {
  __typeof__(job->in.sgemm) *s = &job->in.sgemm;
  void *ta = NULL, *tb = NULL;
  const float *a = aligned(&s->a, &ta), *b = aligned(&s->b, &tb);
  float *c = malloc(job->out_bytes);
  if (!a || !b || !c) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for sgemm", job->out_bytes);
    free(c);
    goto out;
  }
  if (s->beta != 0.0f) memcpy(c, s->c.ptr, job->out_bytes);
  double t0 = now_us();
  cpu_sgemm(s->m, s->n, s->k, s->alpha, a, s->trans_a, b, s->trans_b, s->beta, c);
  job->kernel_us = now_us() - t0;
  job->out = c;
  job->algo_name = sgemm_algos[0];
out:
  free(ta);
  free(tb);
  (void)impl;
}

static void run_reduce(cpu_impl *impl, gkcd_job *job) {
  void *tx;
  const float *x = aligned(&job->in.reduce.x, &tx);
  if (!x) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for reduce",
             job->in.reduce.x.bytes);
    return;
  }
  double t0 = now_us();
  job->value = cpu_reduce(x, job->in.reduce.n, job->in.reduce.op, impl->nthreads);
  job->kernel_us = now_us() - t0;
  job->algo_name = reduce_algos[0];
  free(tx);
}

static void run_spmv(cpu_impl *impl, gkcd_job *job) {
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  void *t[4] = {0};
  const int32_t *rp = aligned(&s->row_ptr, &t[0]), *ci = aligned(&s->col_idx, &t[1]);
  const float *v = aligned(&s->values, &t[2]), *x = aligned(&s->x, &t[3]);
  float *y = malloc(job->out_bytes);
  if (!rp || (!ci && s->nnz) || (!v && s->nnz) || !x || !y) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate memory for spmv");
    free(y);
    goto out;
  }
  if (s->beta != 0.0f) memcpy(y, s->y.ptr, job->out_bytes);
  double t0 = now_us();
  cpu_spmv(s->rows, s->cols, rp, ci, v, x, s->alpha, s->beta, y, impl->nthreads);
  job->kernel_us = now_us() - t0;
  job->out = y;
  job->algo_name = spmv_algos[0];
out:
  for (int i = 0; i < 4; i++) free(t[i]);
}

static void cpu_run(gkcd_backend *be, gkcd_job *job) {
  cpu_impl *impl = be->impl;
  switch (job->method) {
    case PROTO_M_SGEMM: run_sgemm(impl, job); break;
    case PROTO_M_REDUCE: run_reduce(impl, job); break;
    case PROTO_M_SPMV: run_spmv(impl, job); break;
    default: job_fail(job, GKC_EINTERNAL, "the cpu backend has no method %d", job->method);
  }
  job_finish(job);
}

/* "model name" from /proc/cpuinfo; "CPU" when it cannot be read. */
static void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) == 0 && colon) {
      colon += 1 + (colon[1] == ' ');
      colon[strcspn(colon, "\n")] = 0;
      snprintf(buf, len, "%s", colon);
      break;
    }
  }
  fclose(f);
}

static uint64_t meminfo(const char *key) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      kb = strtoull(line + klen + 1, NULL, 10);
      break;
    }
  fclose(f);
  return kb * 1024;
}

static int cpu_devices(gkcd_backend *be, gkcd_device_info *out, int max) {
  cpu_impl *impl = be->impl;
  if (max < 1) return 0;
  memset(out, 0, sizeof *out);
  cpu_model(out->name, sizeof out->name);
  out->memory_total = meminfo("MemTotal");
  out->memory_free = meminfo("MemAvailable");
  out->threads = impl->nthreads > 0 ? impl->nthreads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  return 1;
}

static void cpu_destroy(gkcd_backend *be) {
  free(be->impl);
  free(be);
}

int cpu_backend_create(gkcd_backend **out, int nthreads, char *msg, size_t msglen) {
  gkcd_backend *be = calloc(1, sizeof *be);
  cpu_impl *impl = calloc(1, sizeof *impl);
  if (!be || !impl) {
    free(be);
    free(impl);
    snprintf(msg, msglen, "out of memory");
    return GKC_EOUT_OF_MEMORY;
  }
  impl->nthreads = nthreads;
  be->name = "cpu";
  be->algos[PROTO_M_SGEMM] = sgemm_algos;
  be->algos[PROTO_M_REDUCE] = reduce_algos;
  be->algos[PROTO_M_SPMV] = spmv_algos;
  be->run = cpu_run;
  be->devices = cpu_devices;
  be->destroy = cpu_destroy;
  be->impl = impl;
  *out = be;
  return 0;
}
