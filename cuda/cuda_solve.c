/* cuda_solve.c: the CUDA backend's `solve`: the job's arrays to the device
 * where they are not there already, gkcu_solve() (gkcu_solve.h: the whole
 * iteration on the GPU), x to where `out` says.
 *
 * The algo names say how the loop ran: gkcu_while (a CUDA Graph with a
 * conditional while-node), gkcu_unrolled (a graph of 8 iterations launched
 * again and again: the default), gkcu_stream (plain launches, where no
 * graph can be captured); all three run the same kernels and give the same
 * results; gkcu_while only with GKCU_SOLVE_GRAPH=while in gkcd's
 * environment (gkcu_solve.h says why).
 *
 * precond "amg": the matrix's hierarchy when the daemon lent one built on
 * this GPU (in.solve.amg), else one set up here (cuda_amg.h) and handed
 * back in job->amg_built for the matrix to keep (rpc.c decides), whatever
 * becomes of the solve.  Its device memory comes from the device cache, as
 * resident arrays do: out of it, the solve fails with out_of_memory and
 * the matrix is as it was.
 */
#include "cuda_solve.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_amg.h"
#include "cuda_fail.h"
#include "gkc_errors.h"
#include "gkcu_solve.h"
#include "resident.h"

const char *const cuda_solve_algos[] = {"gkcu_while", "gkcu_unrolled", "gkcu_stream", NULL};

_Static_assert((int)GKCU_SOLVE_CONVERGED == (int)SOLVE_R_CONVERGED &&
                   (int)GKCU_SOLVE_MAX_ITER == (int)SOLVE_R_MAX_ITER &&
                   (int)GKCU_SOLVE_BREAKDOWN == (int)SOLVE_R_BREAKDOWN &&
                   (int)GKCU_SOLVE_NON_FINITE == (int)SOLVE_R_NON_FINITE &&
                   (int)GKCU_SOLVE_DEADLINE == (int)SOLVE_R_DEADLINE &&
                   (int)GKCU_SOLVE_CANCELLED == (int)SOLVE_R_CANCELLED,
               "solve reasons: one numbering");
_Static_assert((int)GKCU_PRECOND_NONE == (int)SOLVE_PRECOND_NONE &&
                   (int)GKCU_PRECOND_JACOBI == (int)SOLVE_PRECOND_JACOBI &&
                   (int)GKCU_PRECOND_AMG == (int)SOLVE_PRECOND_AMG,
               "solve preconditioners: one numbering");
_Static_assert((int)GKCU_SOLVE_CG == (int)SOLVE_CG && (int)GKCU_SOLVE_PCG == (int)SOLVE_PCG &&
                   (int)GKCU_SOLVE_BICGSTAB == (int)SOLVE_BICGSTAB,
               "solve methods: one numbering");

/* gkcu_solve's poll: the job's cancel flag and deadline (job.h). */
static int poll_job(void *job) { return job_poll(job); }

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* cuda_amg_mem over the device cache. */
static int amg_alloc(void *cache, size_t bytes, void **ptr, size_t *cap, char *msg, size_t msglen) {
  return devcache_alloc(cache, bytes, ptr, cap, msg, msglen);
}
static void amg_release(void *cache, void *ptr, size_t cap) { devcache_free(cache, ptr, cap); }

/* The AMG hierarchy for the solve: the lent one, or one set up now (kept
 * by the matrix or freed after the job: job->amg_built).  NULL with the
 * job failed. */
static const gkcu_amg *amg_for(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  __typeof__(job->in.solve) *v = &job->in.solve;
  cuda_amg *lent = v->amg;
  /* one built on another GPU (a replicated matrix) does not run here */
  if (lent && cuda_amg_device(lent) == impl->device) {
    job->amg_levels = cuda_amg_levels(lent);
    return cuda_amg_dev(lent);
  }
  double t0 = now_us();
  cuda_amg_mem mem = {amg_alloc, amg_release, impl->cache, impl->device};
  cuda_amg *h = NULL;
  int32_t bad = -1;
  char msg[sizeof job->errmsg];
  /* The ring for a big matrix only: a slot's first use of it allocates its
   * pinned chunks (8 ms), most of a small matrix's setup (1138_bus: 17 ms). */
  cuda_ring *ring = (size_t)v->nnz * 8 >= CUDA_RING_CHUNK ? &s->ring : NULL;
  int rc = cuda_amg_build(s->ctx, &mem, v->n, v->nnz, v->row_ptr, v->col_idx, v->values,
                          v->values_dtype == DT_F64, 0, ring, &h, &bad, msg, sizeof msg);
  if (rc == GKC_EDEVICE_ERROR) {
    cudaError_t e = cudaStreamSynchronize(s->stream);
    if (e != cudaSuccess) cuda_fail(impl, job, e, msg);
    else job_fail(job, rc, "%s", msg);
    return NULL;
  }
  if (rc) {
    job_fail(job, rc, "%s", msg);
    return NULL;
  }
  job->amg_setup_us = now_us() - t0;
  job->amg_levels = cuda_amg_levels(h);
  /* the loop keeps it with the matrix or frees it (rpc.c, amg_settle) */
  job->amg_built = h;
  job->amg_built_bytes = cuda_amg_bytes(h);
  return cuda_amg_dev(h);
}

/* Device buffers this solve took from the cache. */
typedef struct {
  void *p[4];
  size_t cap[4];
  int n;
} temps;

static void *take(cuda_impl *impl, gkcd_job *job, temps *t, size_t bytes) {
  void *p = NULL;
  size_t cap = 0;
  int rc = devcache_alloc(impl->cache, bytes ? bytes : 1, &p, &cap, job->errmsg, sizeof job->errmsg);
  if (rc) {
    job->err = rc;
    return NULL;
  }
  t->p[t->n] = p, t->cap[t->n] = cap, t->n++;
  return p;
}

/* A span on the device: itself when resident, else a copy. */
static const void *on_device(cuda_impl *impl, cuda_slot *s, gkcd_job *job, temps *t,
                             const gkcd_span *sp, const char *what) {
  if (sp->where == SPAN_RES) return sp->ptr;
  void *d = take(impl, job, t, sp->bytes);
  if (!d) return NULL;
  /* Pinned region pages go straight; other host memory through the ring
   * (the driver's own staging of pageable memory runs at a third of it). */
  cudaError_t e = sp->pinned ? cudaMemcpyAsync(d, sp->ptr, sp->bytes, cudaMemcpyHostToDevice, s->stream)
                             : cuda_ring_h2d(&s->ring, s->stream, d, sp->ptr, sp->bytes);
  if (e != cudaSuccess) {
    cuda_fail(impl, job, e, what);
    return NULL;
  }
  return d;
}

void cuda_solve_run(cuda_impl *impl, cuda_slot *s, gkcd_job *job) {
  __typeof__(job->in.solve) *v = &job->in.solve;
  temps t = {{0}, {0}, 0};
  void *x = NULL;
  int x_new = 0; /* OUT_RES_NEW allocated here */
  double t0 = now_us();
  /* float64 b, x0 and x (b.dtype says for all three); the matrix's values
   * float32 or float64 (the product reads either, summing in double) */
  const gkcu_amg *amg = NULL;
  if (v->precond == SOLVE_PRECOND_AMG && !(amg = amg_for(impl, s, job))) goto out;
  size_t wb = gkcu_solve_work_bytes(v->method, v->precond, v->n, v->max_iter, v->history, v->fp32);
  if (!wb) {
    job_fail(job, GKC_ETOO_LARGE, "solve: the workspace for n = %" PRId32 " overflows", v->n);
    goto out;
  }
  void *work = take(impl, job, &t, wb);
  if (!work) goto out;
  const void *b = on_device(impl, s, job, &t, &v->b, "copying b to the device");
  if (!b) goto out;
  const void *x0 = NULL;
  if (v->x0.ptr && !(x0 = on_device(impl, s, job, &t, &v->x0, "copying x0 to the device")))
    goto out;
  if (job->out_kind == OUT_RES) {
    x = job->out_ptr;
  } else if (job->out_kind == OUT_RES_NEW) {
    int rc = devcache_alloc(impl->cache, job->out_bytes, &job->out_ptr, &job->out_cap,
                            job->errmsg, sizeof job->errmsg);
    if (rc) {
      job->err = rc;
      job->out_ptr = NULL;
      goto out;
    }
    x = job->out_ptr, x_new = 1;
  } else if (!(x = take(impl, job, &t, job->out_bytes))) {
    goto out;
  }
  if (v->history &&
      !(job->history = job->priv[1] = malloc((size_t)v->max_iter * sizeof(double)))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate the history");
    goto out;
  }
  gkcu_solve_args a = {
      .method = v->method, .n = v->n, .nnz = v->nnz, .row_ptr = v->row_ptr,
      .col_idx = v->col_idx, .values = v->values, .values_f64 = v->values_dtype == DT_F64,
      .b = b, .x0 = x0, .x = x,
      .rtol = v->rtol, .atol = v->atol, .max_iter = v->max_iter, .history = job->history,
      .poll = poll_job, .poll_arg = job, .poll_ms = SOLVE_POLL_MS,
      .work = work, .work_bytes = wb, .fp32 = v->fp32, .max_row = v->max_row,
      .io_f64 = v->b.dtype == DT_F64, .precond = v->precond, .amg = amg};
  gkcu_solve_result res;
  int rc = gkcu_solve(s->ctx, &a, &res);
  if (rc == GKCU_SOLVE_EZERO_DIAG) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "%s divides by the diagonal, and row %" PRId32
             " of the matrix has a zero (or non-finite) diagonal entry",
             v->method_asked == SOLVE_PCG ? "argument 'method': pcg" : "argument 'precond': jacobi",
             res.bad_row);
    goto out;
  }
  if (rc) {
    cudaError_t e = cudaStreamSynchronize(s->stream);
    if (e != cudaSuccess) cuda_fail(impl, job, e, gkcu_ctx_errmsg(s->ctx));
    else job_fail(job, rc, "solve: %s", gkcu_ctx_errmsg(s->ctx));
    goto out;
  }
  if (res.reason == GKCU_SOLVE_CANCELLED) {
    job_fail(job, GKC_ECANCELLED, "cancelled after %" PRId64 " iterations", res.iterations);
    goto out;
  }
  if (job->out_kind == OUT_BIN || job->out_kind == OUT_HOST) {
    void *dst = job->out_kind == OUT_BIN ? (job->out = job_out_alloc(job->out_bytes)) : job->out_ptr;
    if (!dst) {
      job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for x", job->out_bytes);
      goto out;
    }
    double t1 = now_us();
    int pinned = job->out_kind == OUT_HOST && job->out_res && res_region_pinned(job->out_res);
    cudaError_t e = pinned ? cudaMemcpy(dst, x, job->out_bytes, cudaMemcpyDeviceToHost)
                           : cuda_ring_d2h(&s->ring, s->stream, dst, x, job->out_bytes, NULL);
    if (e != cudaSuccess) {
      cuda_fail(impl, job, e, "copying x to the host");
      goto out;
    }
    job->d2h_us = now_us() - t1;
  }
  job->iterations = res.iterations;
  job->reason = res.reason;
  job->value = res.residual;
  job->kernel_us = res.loop_us > 0 ? res.loop_us : now_us() - t0;
  job->algo_name = !strcmp(res.how, "while")      ? cuda_solve_algos[0]
                   : !strcmp(res.how, "unrolled") ? cuda_solve_algos[1]
                                                  : cuda_solve_algos[2];
out:
  if (job->err) {
    free(job->out);
    job->out = NULL;
    if (x_new && job->out_ptr) {
      devcache_free(impl->cache, job->out_ptr, job->out_cap);
      job->out_ptr = NULL;
    }
  }
  /* Nothing on the stream may still use what goes back to the cache. */
  if (t.n && cudaStreamSynchronize(s->stream) != cudaSuccess) (void)cudaGetLastError();
  for (int i = 0; i < t.n; i++) devcache_free(impl->cache, t.p[i], t.cap[i]);
}
