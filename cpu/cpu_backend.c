/* cpu_backend.c: the backend that serves every request from the CPU.
 *
 * Runs each job synchronously on the scheduler's worker thread: OpenBLAS for
 * sgemm, our own OpenMP kernels for reduce and spmv (cpu_kernels.h).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <math.h>
#include <stdatomic.h>

#include "backend.h"
#include "cpu_impl.h"
#include "cpu_kernels.h"
#include "cpu_solve.h"
#include "gkc_errors.h"
#include "res_object.h"


static const char *const sgemm_algos[] = {"openblas", NULL};
static const char *const reduce_algos[] = {"cpu_omp", NULL};
static const char *const spmv_algos[] = {"cpu_merge", NULL};
static const char *const blas1_algos[] = {"openblas", NULL};
static const char *const solve_algos[] = {"cpu_omp", NULL};
static const char *const batch_algos[] = {"cpu", NULL};

_Static_assert((int)CPU_CG == SOLVE_CG && (int)CPU_PCG == SOLVE_PCG &&
               (int)CPU_BICGSTAB == SOLVE_BICGSTAB, "cpu_solve.h and job.h number the methods alike");
_Static_assert((int)CPU_SOLVE_CONVERGED == SOLVE_R_CONVERGED &&
               (int)CPU_SOLVE_MAX_ITER == SOLVE_R_MAX_ITER &&
               (int)CPU_SOLVE_BREAKDOWN == SOLVE_R_BREAKDOWN &&
               (int)CPU_SOLVE_NON_FINITE == SOLVE_R_NON_FINITE &&
               (int)CPU_SOLVE_DEADLINE == SOLVE_R_DEADLINE &&
               (int)CPU_SOLVE_CANCELLED == SOLVE_R_CANCELLED,
               "cpu_solve.h and job.h number the reasons alike");

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The request's arrays sit at arbitrary byte offsets in its msgpack frame;
 * kernels want naturally aligned arrays.  Returns s->ptr when it already is,
 * else an aligned copy stored in *tmp (NULL when out of memory), from the
 * daemon's pool of big buffers (job_out_alloc: memory already in place, not
 * fresh pages to fault in), given back with scratch_free.  On this backend
 * resident arrays and regions are host memory too. */
static const void *aligned(const gkcd_span *s, void **tmp) {
  *tmp = NULL;
  uintptr_t mask = s->dtype == DT_F64 ? 7 : 3; /* the element's own alignment */
  if (((uintptr_t)s->ptr & mask) == 0 || s->bytes == 0) return s->ptr;
  *tmp = job_out_alloc(s->bytes);
  if (*tmp) memcpy(*tmp, s->ptr, s->bytes);
  return *tmp;
}

static void scratch_free(void *p) {
  if (p) job_out_free(p);
}

/* Each virtual device has its own pool: what one allocates counts against
 * it alone, so one device can run out while the others go on. */
static int cpu_res_alloc(gkcd_backend *be, size_t bytes, void **ptr, size_t *cap, char *msg,
                         size_t msglen) {
  cpu_impl *impl = be->impl;
  *ptr = NULL;
  *cap = bytes;
  if (impl->mem_limit) {
    size_t used = atomic_fetch_add(&impl->mem_used, bytes);
    if (used + bytes < used || used + bytes > impl->mem_limit) {
      atomic_fetch_sub(&impl->mem_used, bytes);
      snprintf(msg, msglen, "device %d: cannot allocate %zu bytes: its memory of %zu bytes holds"
               " %zu already", be->device, bytes, impl->mem_limit, used);
      return GKC_EOUT_OF_MEMORY;
    }
  }
  *ptr = malloc(bytes ? bytes : 1);
  if (*ptr) return 0;
  if (impl->mem_limit) atomic_fetch_sub(&impl->mem_used, bytes);
  snprintf(msg, msglen, "cannot allocate %zu bytes", bytes);
  return GKC_EOUT_OF_MEMORY;
}

static void cpu_res_free(gkcd_backend *be, void *ptr, size_t cap) {
  cpu_impl *impl = be->impl;
  if (ptr && impl->mem_limit) atomic_fetch_sub(&impl->mem_used, cap);
  free(ptr);
}

/* Virtual devices share the host's memory: a copy between them is memcpy. */
static int cpu_peer_copy(gkcd_backend *be, void *dst, gkcd_backend *from, const void *src,
                         size_t bytes, int *peer, char *msg, size_t msglen) {
  (void)be, (void)from, (void)msg, (void)msglen;
  memcpy(dst, src, bytes);
  *peer = 1;
  return 0;
}

/* Where the array result goes: a new buffer for the reply, a new resident
 * array, or straight into the region or resident array the client named.
 * NULL (with the job failed) when out of memory. */
static void *out_buffer(gkcd_backend *be, gkcd_job *job) {
  switch (job->out_kind) {
    case OUT_BIN:
      if (!(job->out = job_out_alloc(job->out_bytes)))
        job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for the result",
                 job->out_bytes);
      return job->out;
    case OUT_RES_NEW:
      if (cpu_res_alloc(be, job->out_bytes, &job->out_ptr, &job->out_cap, job->errmsg,
                        sizeof job->errmsg)) {
        job->err = GKC_EOUT_OF_MEMORY;
        job->out_ptr = NULL;
      }
      return job->out_ptr;
    default:
      return job->out_ptr; /* aligned: offsets are multiples of the element size (refs.c) */
  }
}

/* Undoes out_buffer after a failure. */
static void drop_out(gkcd_backend *be, gkcd_job *job) {
  if (job->out_kind == OUT_RES_NEW && job->out_ptr) cpu_res_free(be, job->out_ptr, job->out_cap);
  job->out_ptr = NULL;
}

static void run_sgemm(gkcd_backend *be, gkcd_job *job) {
  __typeof__(job->in.sgemm) *s = &job->in.sgemm;
  void *ta = NULL, *tb = NULL;
  const float *a = aligned(&s->a, &ta), *b = aligned(&s->b, &tb);
  if (!a || !b) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate memory for sgemm");
    goto out;
  }
  float *c = out_buffer(be, job);
  if (!c) goto out;
  /* memmove: the client may name the same region bytes for c and out. */
  if (s->beta != 0.0f) memmove(c, s->c.ptr, job->out_bytes);
  double t0 = now_us();
  cpu_sgemm(s->m, s->n, s->k, s->alpha, a, s->trans_a, b, s->trans_b, s->beta, c);
  job->kernel_us = now_us() - t0;
  job->algo_name = sgemm_algos[0];
out:
  scratch_free(ta);
  scratch_free(tb);
}

static void run_reduce(gkcd_backend *be, gkcd_job *job) {
  cpu_impl *impl = be->impl;
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
  scratch_free(tx);
}

static void run_spmv(gkcd_backend *be, gkcd_job *job) {
  cpu_impl *impl = be->impl;
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  void *t[4] = {0};
  const int32_t *rp = aligned(&s->row_ptr, &t[0]), *ci = aligned(&s->col_idx, &t[1]);
  const void *v = aligned(&s->values, &t[2]), *x = aligned(&s->x, &t[3]);
  if (!rp || (!ci && s->nnz) || (!v && s->nnz) || !x) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate memory for spmv");
    goto out;
  }
  void *y = out_buffer(be, job);
  if (!y) goto out;
  if (s->beta != 0.0f) memmove(y, s->y.ptr, job->out_bytes);
  double t0 = now_us();
  if (s->values.dtype == DT_F32 && s->x.dtype == DT_F32)
    cpu_spmv(s->rows, s->cols, rp, ci, v, x, s->alpha, s->beta, y, impl->nthreads);
  else
    cpu_spmv_typed(s->rows, s->cols, rp, ci, v, s->values.dtype == DT_F64, x, s->x.dtype == DT_F64,
                   s->alpha64, s->beta64, y, impl->nthreads);
  job->kernel_us = now_us() - t0;
  job->algo_name = spmv_algos[0];
out:
  for (int i = 0; i < 4; i++) scratch_free(t[i]);
}

static void run_vec(gkcd_backend *be, gkcd_job *job) {
  __typeof__(job->in.vec) *s = &job->in.vec;
  void *tx, *ty = NULL;
  const void *x = aligned(&s->x, &tx);
  /* nrm2 has x alone: its sum of squares is x . x */
  const void *y = !x || job->method == PROTO_M_NRM2 ? x : aligned(&s->y, &ty);
  int f64 = s->x.dtype == DT_F64;
  if (!x || !y) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate memory for %s",
             proto_method_name(job->method));
    goto out;
  }
  double t0 = now_us();
  if (job->method == PROTO_M_NRM2) {
    job->value = f64 ? cpu_nrm2_f64(x, s->n) : sqrt(cpu_dot(x, x, s->n));
  } else if (job->method == PROTO_M_DOT) {
    job->value = f64 ? cpu_dot_f64(x, y, s->n) : cpu_dot(x, y, s->n);
  } else {
    void *o = out_buffer(be, job);
    if (!o) goto out;
    t0 = now_us();
    if (f64) cpu_axpby_f64(s->n, s->alpha64, x, s->beta64, y, o);
    else cpu_axpby(s->n, s->alpha, x, s->beta, y, o);
  }
  job->kernel_us = now_us() - t0;
  job->algo_name = blas1_algos[0];
out:
  scratch_free(tx);
  scratch_free(ty);
}

/* upload, csr_upload: into resident memory; download: out of it. */
static void run_copy(gkcd_backend *be, gkcd_job *job) {
  double t0 = now_us();
  char *o = (char *)out_buffer(be, job);
  if (!o) return;
  if (job->method == PROTO_M_CSR_UPLOAD) {
    __typeof__(job->in.csr) *s = &job->in.csr;
    memcpy(o, s->row_ptr.ptr, s->row_ptr.bytes);
    memcpy(o + s->row_ptr.bytes, s->col_idx.ptr, s->col_idx.bytes);
    size_t voff = res_values_offset(s->rows, s->nnz, s->values.dtype);
    memset(o + s->row_ptr.bytes + s->col_idx.bytes, 0, voff - s->row_ptr.bytes - s->col_idx.bytes);
    memcpy(o + voff, s->values.ptr, s->values.bytes);
    job->algo_used = 0;
    job->algo_name = spmv_algos[0];
  } else {
    memcpy(o, job->in.upload.data.ptr, job->in.upload.data.bytes);
  }
  job->kernel_us = now_us() - t0;
}

/* cpu_solve's poll: the job's cancel flag and deadline (job.h). */
static int poll_job(void *job) { return job_poll(job); }

/* be->precond_free: a hierarchy cpu_solve built (cpu_amg.h). */
static void free_amg(gkcd_backend *be, void *h) {
  (void)be;
  cpu_amg_free(h);
}

static void run_solve(gkcd_backend *be, gkcd_job *job) {
  cpu_impl *impl = be->impl;
  __typeof__(job->in.solve) *s = &job->in.solve;
  void *tb = NULL, *tx = NULL;
  const void *b = aligned(&s->b, &tb), *x0 = s->x0.ptr ? aligned(&s->x0, &tx) : NULL;
  if (!b || (s->x0.ptr && !x0)) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate memory for solve");
    goto out;
  }
  if (s->history && !(job->history = job->priv[1] = malloc((size_t)s->max_iter * sizeof(double)))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %" PRId64 " residuals for the history",
             s->max_iter);
    goto out;
  }
  void *x = out_buffer(be, job);
  if (!x) goto out;
  /* precond amg: the matrix's hierarchy when the daemon lent it
   * (s->amg), else cpu_solve builds one and hands it back for the matrix to
   * keep (job->amg_built: rpc.c decides, on the loop).  A virtual device's
   * pool (--cpu-device-memory) bounds a new one: it may take what the pool
   * has left when the solve starts. */
  size_t left = 0;
  if (impl->mem_limit) {
    size_t used = atomic_load(&impl->mem_used);
    left = used < impl->mem_limit ? impl->mem_limit - used : 1;
  }
  cpu_solve_opts o = {s->method, s->rtol, s->atol, s->max_iter, job->history, poll_job, job,
                      impl->nthreads, s->fp32, s->values_dtype == DT_F64, s->b.dtype == DT_F64,
                      s->precond, left, s->amg, job->amg_matrix != NULL};
  cpu_solve_result res;
  double t0 = now_us();
  int rc = cpu_solve(s->n, s->row_ptr, s->col_idx, s->values, b, x0, x, &o, &res);
  job->kernel_us = now_us() - t0;
  /* whatever the outcome: the loop keeps it with the matrix or frees it */
  job->amg_built = res.amg_built;
  job->amg_built_bytes = res.amg_bytes;
  /* what divides by the diagonal, as the request named it */
  const char *who = s->method_asked == SOLVE_PCG ? "argument 'method': pcg"
                    : s->precond == SOLVE_PRECOND_AMG ? "argument 'precond': amg"
                                                      : "argument 'precond': jacobi";
  if (rc == CPU_SOLVE_ENOMEM) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate the solver's vectors (%" PRId32 " rows)",
             s->n);
  } else if (rc == CPU_SOLVE_EAMG_NOMEM) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "argument 'precond': cannot allocate the AMG hierarchy of"
             " matrix (%" PRId32 " rows, %" PRId64 " entries)%s", s->n, s->nnz,
             impl->mem_limit ? ": over what the device's memory has left" : "");
  } else if (rc == CPU_SOLVE_EAMG_TOO_LARGE) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "argument 'precond': a coarse level of the AMG hierarchy"
             " would hold over 2^31 - 1 entries");
  } else if (rc == CPU_SOLVE_EZERO_DIAG) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "%s divides by the diagonal, and row %" PRId32
             " of the matrix has a zero (or non-finite) diagonal entry", who, res.bad_row);
  } else if (rc == CPU_SOLVE_EEMPTY_ROW) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "%s needs an entry in every row, and row %" PRId32
             " of the matrix is empty", who, res.bad_row);
  } else if (res.reason == CPU_SOLVE_CANCELLED) {
    job_fail(job, GKC_ECANCELLED, "cancelled after %" PRId64 " iterations", res.iterations);
  } else {
    job->iterations = res.iterations;
    job->reason = res.reason;
    job->value = res.residual;
    job->amg_levels = res.levels;
    job->amg_setup_us = res.amg_setup_us;
    job->algo_name = solve_algos[0];
  }
out:
  scratch_free(tb);
  scratch_free(tx);
}

/* The steps in order; a failing step stops the batch, the earlier ones'
 * outputs stay written. */
static void run_batch(gkcd_backend *be, gkcd_job *job) {
  cpu_impl *impl = be->impl;
  gkcd_step *steps = job->in.batch.steps;
  double t0 = now_us();
  job->algo_name = batch_algos[0];
  for (int i = 0; i < job->in.batch.nsteps; i++) {
    gkcd_step *st = &steps[i];
    int why = i > 0 ? job_poll(job) : 0;
    double a64, b64; /* float32 steps: float32 values, rounded below */
    if (batch_step_begin64(job, i, !why ? 0 : why == SOLVE_R_CANCELLED ? BATCH_STOP_CANCELLED : BATCH_STOP_DEADLINE,
                           &a64, &b64))
      break;
    float alpha = (float)a64, beta = (float)b64;
    int f64 = st->dtype == DT_F64;
    switch (st->op) {
      case BATCH_DOT:
        st->value = f64 ? cpu_dot_f64(st->x, st->y, st->n) : cpu_dot(st->x, st->y, st->n);
        break;
      case BATCH_REDUCE: st->value = cpu_reduce(st->x, st->n, st->sub, impl->nthreads); break;
      case BATCH_AXPBY:
        if (f64) cpu_axpby_f64(st->n, a64, st->x, b64, st->y, st->out);
        else cpu_axpby(st->n, alpha, st->x, beta, st->y, st->out);
        break;
      case BATCH_SPMV:
        if (b64 != 0 && st->out != st->y) memmove(st->out, st->y, st->out_bytes);
        if (!f64 && st->values_dtype == DT_F32)
          cpu_spmv(st->m, st->k, st->row_ptr, st->col_idx, st->values, st->x, alpha, beta, st->out,
                   impl->nthreads);
        else
          cpu_spmv_typed(st->m, st->k, st->row_ptr, st->col_idx, st->values,
                         st->values_dtype == DT_F64, st->x, f64, f64 ? a64 : alpha,
                         f64 ? b64 : beta, st->out, impl->nthreads);
        break;
      case BATCH_SGEMM:
        if (beta != 0.0f && st->out != st->c) memmove(st->out, st->c, st->out_bytes);
        cpu_sgemm(st->m, (int32_t)st->n, st->k, alpha, st->a, st->trans_a, st->b, st->trans_b,
                  beta, st->out);
        break;
    }
    job->in.batch.done = i + 1;
  }
  job->kernel_us = now_us() - t0;
}

/* The CPU backend's half of the method table (backend.h run[]): what
 * computes each method's job.  cpu_run wraps every one alike. */
typedef void (*cpu_method_fn)(gkcd_backend *be, gkcd_job *job);
static const cpu_method_fn cpu_methods[PROTO_M_COUNT] = {
    [PROTO_M_SGEMM] = run_sgemm, [PROTO_M_REDUCE] = run_reduce, [PROTO_M_SPMV] = run_spmv,
    [PROTO_M_DOT] = run_vec,     [PROTO_M_AXPBY] = run_vec,     [PROTO_M_NRM2] = run_vec,     [PROTO_M_UPLOAD] = run_copy,
    [PROTO_M_DOWNLOAD] = run_copy, [PROTO_M_CSR_UPLOAD] = run_copy, [PROTO_M_SOLVE] = run_solve,
    [PROTO_M_BATCH] = run_batch,
};

static void cpu_run(gkcd_backend *be, gkcd_job *job) {
  cpu_impl *impl = be->impl;
  cpu_methods[job->method](be, job);
  /* A device lost while the job ran (fault injection, in tests) takes the
   * job with it, as a GPU's sticky error would. */
  if (!job->err && atomic_load(&be->lost)) {
    job_fail(job, GKC_EDEVICE_LOST, "device %d (%s) was lost: %s", be->device, impl->name,
             backend_lost_reason(be));
  }
  if (job->err) drop_out(be, job);
  job_finish(job);
}

static int cpu_spmv_pick(gkcd_backend *be, int32_t rows, int32_t cols, int64_t nnz, int32_t max_row) {
  (void)be, (void)rows, (void)cols, (void)nnz, (void)max_row;
  return 0;
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
  snprintf(out->name, sizeof out->name, "%s", impl->name);
  out->kind = "cpu";
  out->gpu = -1;
  if (impl->mem_limit) {
    out->memory_total = impl->mem_limit;
    out->memory_free = impl->mem_limit - atomic_load(&impl->mem_used);
  } else {
    out->memory_total = meminfo("MemTotal");
    out->memory_free = meminfo("MemAvailable");
  }
  out->threads = impl->nthreads > 0 ? impl->nthreads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  return 1;
}

static void cpu_destroy(gkcd_backend *be) {
  free(be->impl);
  free(be);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The cost model's starting rates, measured here in a few milliseconds: a
 * 256^3 sgemm and a 16 MiB sum, each the best of three. */
static cost_rates measure_rates(int nthreads) {
  cost_rates r = {.flops_per_us = 5e4, .bytes_per_us = 1e4, .fixed_us = 5};
  enum { N = 256, V = 4 << 20 };
  float *a = calloc((size_t)N * N * 3, sizeof *a), *x = malloc((size_t)V * sizeof *x);
  if (!a || !x) goto done;
  for (size_t i = 0; i < (size_t)N * N * 2; i++) a[i] = (float)(i % 7) * 0.25f;
  for (size_t i = 0; i < V; i++) x[i] = (float)(i % 5);
  double best_mm = 1e9, best_sum = 1e9;
  for (int t = 0; t < 3; t++) {
    double t0 = now_s();
    cpu_sgemm(N, N, N, 1.0f, a, 0, a + N * N, 0, 0.0f, a + 2 * N * N);
    double t1 = now_s();
    volatile double sink = cpu_reduce(x, V, 0, nthreads);
    (void)sink;
    double t2 = now_s();
    if (t1 - t0 < best_mm) best_mm = t1 - t0;
    if (t2 - t1 < best_sum) best_sum = t2 - t1;
  }
  if (best_mm > 0) r.flops_per_us = 2.0 * N * N * N / (best_mm * 1e6);
  if (best_sum > 0) r.bytes_per_us = 4.0 * V / (best_sum * 1e6);
done:
  free(a);
  free(x);
  return r;
}

extern const gkcd_part_ops cpu_part_ops; /* cpu_part.c */

/* One backend over impl, with the cost model's starting rates. */
static gkcd_backend *make_backend(cpu_impl *impl, const cost_rates *rates) {
  gkcd_backend *be = calloc(1, sizeof *be);
  if (!be) return NULL;
  be->name = "cpu";
  be->f64 = 1; /* every method on float64 but sgemm and reduce, which the rows refuse */
  be->f64_solve_matrix = 1;
  be->amg = 1; /* cpu_solve's preconditioners: none, jacobi, amg with cg and bicgstab */
  be->precond_free = free_amg;
  be->rates = *rates;
  be->latency_workers = 1;
  be->algos[PROTO_M_SGEMM] = sgemm_algos;
  be->algos[PROTO_M_REDUCE] = reduce_algos;
  be->algos[PROTO_M_SPMV] = spmv_algos;
  be->algos[PROTO_M_DOT] = blas1_algos;
  be->algos[PROTO_M_AXPBY] = blas1_algos;
  be->algos[PROTO_M_NRM2] = blas1_algos;
  be->algos[PROTO_M_SOLVE] = solve_algos;
  be->algos[PROTO_M_BATCH] = batch_algos;
  for (int m = 0; m < PROTO_M_COUNT; m++)
    if (cpu_methods[m]) be->run[m] = cpu_run;
  be->res_alloc = cpu_res_alloc;
  be->res_free = cpu_res_free;
  be->peer_copy = cpu_peer_copy;
  be->part = &cpu_part_ops;
  be->spmv_pick = cpu_spmv_pick;
  be->devices = cpu_devices;
  be->destroy = cpu_destroy;
  be->impl = impl;
  return be;
}

int cpu_backends_create(gkcd_backend **out, int count, int nthreads, size_t memory_each, char *msg,
                        size_t msglen) {
  if (count < 1 || count > GKCD_MAX_DEVICES) {
    snprintf(msg, msglen, "--cpu-devices %d is outside 1..%d", count, GKCD_MAX_DEVICES);
    return GKC_EINVALID_ARGUMENT;
  }
  char model[128];
  cpu_model(model, sizeof model);
  if (count > 1 && memory_each == 0) memory_each = meminfo("MemTotal") / (uint64_t)count;
  /* A start for the cost model, measured once with one device's threads:
   * the virtual devices are alike.  It corrects itself from the times
   * requests take. */
  cost_rates rates = measure_rates(nthreads);
  for (int i = 0; i < count; i++) {
    cpu_impl *impl = calloc(1, sizeof *impl);
    gkcd_backend *be = impl ? make_backend(impl, &rates) : NULL;
    if (!be) {
      free(impl);
      for (int j = 0; j < i; j++) out[j]->destroy(out[j]);
      snprintf(msg, msglen, "out of memory");
      return GKC_EOUT_OF_MEMORY;
    }
    impl->nthreads = nthreads;
    impl->index = i, impl->count = count;
    impl->mem_limit = count > 1 ? memory_each : 0; /* one device: the host's memory, as ever */
    atomic_init(&impl->mem_used, 0);
    if (count > 1)
      snprintf(impl->name, sizeof impl->name, "%.100s (virtual %d/%d)", model, i, count);
    else
      snprintf(impl->name, sizeof impl->name, "%s", model);
    be->device = i;
    out[i] = be;
  }
  return 0;
}

int cpu_backend_create(gkcd_backend **out, int nthreads, char *msg, size_t msglen) {
  return cpu_backends_create(out, 1, nthreads, 0, msg, msglen);
}
