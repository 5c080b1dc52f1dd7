/* gkcu_solve.cu: CG, Jacobi-PCG and BiCGSTAB iterating on the GPU (see
 * gkcu_solve.h).  The kernels are here; the recurrences are cpu_solve.c's,
 * step for step, so that both backends stop for the same reasons at the
 * same iterations.
 *
 * Every kernel but the last of an iteration ends in a reduction: each block
 * sums its share in double, writes it to a partial, draws a ticket, and the
 * block that draws the last one adds the partials in a fixed order and runs
 * that step's scalar logic (finish()), one thread, on the state block.  The
 * next kernel reads the state; nothing goes to the host.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gkcu_internal.h"
#include "gkcu_solve.h"

namespace {

constexpr int NT = 256;          /* threads per block, every kernel */
constexpr int MAX_BLOCKS = 2048; /* partials: 2 per block */
constexpr int UNROLL_ITERS = 8;  /* iterations per graph in "unrolled" */
constexpr double TINY = 1e-30;   /* BiCGSTAB's breakdown threshold (cpu_solve.c) */

/* The scalars of a solve, in device memory. */
struct state {
  double rtol, atol, bn, tol;
  double rr;              /* r.r of the last residual computed */
  double rz, alpha, beta; /* CG */
  double rho, rho_prev, omega, rhat_n; /* BiCGSTAB (alpha shared) */
  double final_rr;        /* ||b - A x||^2 of the float32 x */
  double *hist;           /* device history, or NULL */
  long long it, max_iter, stop_at;
  int reason;             /* -1 while running */
  int half;               /* BiCGSTAB converged half way: x += alpha p, r = s pending */
  int x_pending;          /* CG: alpha is this iteration's, x += alpha p still to do */
  int bad_row;            /* PCG: first zero diagonal (INT_MAX: none) */
  unsigned int ticket;
};

/* What the last block does with the reduced values. */
enum stage {
  S_BNORM,    /* d0 = b.b */
  S_RES,      /* d0 = ||b - A x||^2 (the start) */
  S_FINAL,    /* d0 = ||b - A x||^2 (the end) */
  S_PCG_INIT, /* d1 = r.z */
  S_CG_PQ,    /* d0 = p.Ap */
  S_CG_UPD,   /* d0 = r.r, d1 = r.z (PCG) */
  S_BI_V,     /* d0 = rhat.v, d1 = v.v */
  S_BI_S,     /* d0 = s.s */
  S_BI_T,     /* d0 = t.t, d1 = t.s */
  S_BI_UPD,   /* d0 = r.r, d1 = rhat.r */
};

/* cpu_solve.c's record(): iteration it's residual norm; 1 if it stopped. */
__device__ int record(state *st, double rn) {
  st->it++;
  if (st->hist) st->hist[st->it - 1] = rn / st->bn;
  if (!isfinite(rn)) {
    st->reason = GKCU_SOLVE_NON_FINITE;
    return 1;
  }
  if (rn <= st->tol) {
    st->reason = GKCU_SOLVE_CONVERGED;
    return 1;
  }
  return 0;
}

__device__ void finish(state *st, int stage, int pcg, double d0, double d1) {
  switch (stage) {
    case S_BNORM:
      st->bn = sqrt(d0);
      st->tol = fmax(st->rtol * st->bn, st->atol);
      break;
    case S_RES: st->rr = d0; break;
    case S_FINAL: st->final_rr = d0; break;
    case S_PCG_INIT: st->rz = d1; break;
    case S_CG_PQ:
      if (!isfinite(d0)) st->reason = GKCU_SOLVE_NON_FINITE;
      else if (d0 <= 0) st->reason = GKCU_SOLVE_BREAKDOWN;
      else st->alpha = st->rz / d0, st->x_pending = 1;
      break;
    case S_CG_UPD: {
      st->rr = d0;
      if (record(st, sqrt(d0))) break;
      double rz_new = pcg ? d1 : d0;
      if (!isfinite(rz_new)) st->reason = GKCU_SOLVE_NON_FINITE;
      else if (rz_new <= 0) st->reason = GKCU_SOLVE_BREAKDOWN;
      else if (st->it >= st->max_iter) st->reason = GKCU_SOLVE_MAX_ITER;
      else st->beta = rz_new / st->rz, st->rz = rz_new;
      break;
    }
    case S_BI_V:
      if (!isfinite(d0)) st->reason = GKCU_SOLVE_NON_FINITE;
      else if (fabs(d0) <= TINY * st->rhat_n * sqrt(d1)) st->reason = GKCU_SOLVE_BREAKDOWN;
      else st->alpha = st->rho / d0;
      break;
    case S_BI_S:
      if (sqrt(d0) <= st->tol) { /* converged half way */
        st->half = 1;
        st->rr = d0;
        record(st, sqrt(d0));
      }
      break;
    case S_BI_T:
      if (!isfinite(d0) || !isfinite(d1)) st->reason = GKCU_SOLVE_NON_FINITE;
      else if (d0 == 0) st->reason = GKCU_SOLVE_BREAKDOWN;
      else st->omega = d1 / d0;
      break;
    case S_BI_UPD:
      st->rr = d0;
      if (record(st, sqrt(d0))) break;
      if (st->omega == 0) {
        st->reason = GKCU_SOLVE_BREAKDOWN;
      } else if (st->it >= st->max_iter) {
        st->reason = GKCU_SOLVE_MAX_ITER;
      } else {
        /* the next iteration's start (cpu_solve.c: after the poll) */
        st->rho_prev = st->rho;
        st->rho = d1;
        if (!isfinite(d1)) st->reason = GKCU_SOLVE_NON_FINITE;
        else if (fabs(d1) <= TINY * st->rhat_n * sqrt(d0)) st->reason = GKCU_SOLVE_BREAKDOWN;
        else st->beta = st->rho / st->rho_prev * (st->alpha / st->omega);
      }
      break;
  }
}

__device__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* Sums a and b over the block; thread 0 gets the totals. */
__device__ void block_sum2(double &a, double &b) {
  __shared__ double sh[2][NT / 32];
  a = warp_sum(a);
  b = warp_sum(b);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads(); /* sh may still be read from an earlier call */
  if (lane == 0) sh[0][w] = a, sh[1][w] = b;
  __syncthreads();
  if (threadIdx.x == 0) {
    a = 0, b = 0;
    for (int i = 0; i < NT / 32; i++) a += sh[0][i], b += sh[1][i];
  }
}

/* The grid-wide sum of (d0, d1) in a fixed order, then finish() on it by
 * one thread of the last block. */
__device__ void reduce_finish(state *st, double *part, int stage, int pcg, double d0,
                              double d1) {
  __shared__ bool last;
  block_sum2(d0, d1);
  if (threadIdx.x == 0) {
    part[blockIdx.x] = d0;
    part[MAX_BLOCKS + blockIdx.x] = d1;
    __threadfence(); /* the partials visible before the ticket is drawn */
    last = atomicAdd(&st->ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  d0 = 0, d1 = 0;
  for (int i = threadIdx.x; i < (int)gridDim.x; i += NT)
    d0 += __ldcg(&part[i]), d1 += __ldcg(&part[MAX_BLOCKS + i]);
  block_sum2(d0, d1);
  if (threadIdx.x == 0) {
    st->ticket = 0u;
    finish(st, stage, pcg, d0, d1);
  }
}

/* y = A in (or b - A in when b), row sums in double, W threads per row;
 * out[i] = y unless out is NULL; d0 += u0*y, d1 += u1*y where u0, u1 are
 * a0[i], a1[i], or y itself when NULL (nd = 1: d1 not wanted).  Iteration
 * stages return at once once the solve has stopped. */
template <int W, typename TI>
__global__ void __launch_bounds__(NT)
    k_spmv(int n, const int *__restrict__ rp, const int *__restrict__ ci,
           const float *__restrict__ va, const TI *__restrict__ in, double *out,
           const float *__restrict__ b, const double *a0, const double *a1, int nd, state *st,
           double *part, int stage) {
  /* CG: the previous iteration's k_cg_p, which used x_pending, is done */
  if (stage == S_CG_PQ && blockIdx.x == 0 && threadIdx.x == 0) st->x_pending = 0;
  if (stage != S_RES && stage != S_FINAL && st->reason >= 0) return;
  constexpr int RPW = 32 / W; /* rows per warp */
  const int lane = threadIdx.x & 31, sub = lane % W;
  const long long warp = ((long long)blockIdx.x * NT + threadIdx.x) >> 5;
  const long long stride = (long long)gridDim.x * (NT / 32) * RPW;
  double d0 = 0, d1 = 0;
  for (long long r0 = warp * RPW; r0 < n; r0 += stride) {
    const long long row = r0 + lane / W;
    double s = 0;
    if (row < n) {
      const int end = rp[row + 1];
      for (int j = rp[row] + sub; j < end; j += W) s = fma((double)va[j], (double)in[ci[j]], s);
    }
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (row < n && sub == 0) {
      double y = b ? (double)b[row] - s : s;
      if (out) out[row] = y;
      d0 = fma(a0 ? a0[row] : y, y, d0);
      if (nd > 1) d1 = fma(a1 ? a1[row] : y, y, d1);
    }
  }
  reduce_finish(st, part, stage, 0, d0, d1);
}

/* d0 = b.b of a float vector. */
__global__ void __launch_bounds__(NT) k_norm2f(int n, const float *__restrict__ b, state *st,
                                               double *part) {
  double d0 = 0;
  for (long long i = (long long)blockIdx.x * NT + threadIdx.x; i < n; i += (long long)gridDim.x * NT)
    d0 = fma((double)b[i], (double)b[i], d0);
  reduce_finish(st, part, S_BNORM, 0, d0, 0);
}

#define GRID_LOOP(i, n) \
  for (long long i = (long long)blockIdx.x * NT + threadIdx.x; i < (n); i += (long long)gridDim.x * NT)

/* x = x0 in double (0 when x0 is NULL) */
__global__ void k_init_x(int n, const float *x0, double *x) {
  GRID_LOOP(i, n) x[i] = x0 ? (double)x0[i] : 0.0;
}

__global__ void k_to_float(int n, const double *__restrict__ x, float *y) {
  GRID_LOOP(i, n) y[i] = (float)x[i];
}

/* PCG: dinv = 1 / diag(A) (repeated entries add up); the first row whose
 * diagonal is zero or not finite into st->bad_row. */
__global__ void k_dinv(int n, const int *__restrict__ rp, const int *__restrict__ ci,
                       const float *__restrict__ va, double *dinv, state *st) {
  GRID_LOOP(i, n) {
    double d = 0;
    for (int j = rp[i]; j < rp[i + 1]; j++)
      if (ci[j] == i) d += va[j];
    if (d == 0 || !isfinite(d)) atomicMin(&st->bad_row, (int)i);
    else dinv[i] = 1.0 / d;
  }
}

/* PCG's start: z = dinv r, p = z, rz = r.z */
__global__ void __launch_bounds__(NT) k_pcg_init(int n, const double *__restrict__ r,
                                                 const double *__restrict__ dinv, double *z,
                                                 double *p, state *st, double *part) {
  double d1 = 0;
  GRID_LOOP(i, n) {
    double zi = dinv[i] * r[i];
    z[i] = zi, p[i] = zi;
    d1 = fma(r[i], zi, d1);
  }
  reduce_finish(st, part, S_PCG_INIT, 1, 0, d1);
}

/* CG: r -= alpha q; rr = r.r; PCG also z = dinv r, rz = r.z.  (x += alpha p
 * waits for k_cg_p, which reads p anyway.) */
__global__ void __launch_bounds__(NT)
    k_cg_update(int n, double *r, const double *__restrict__ q, double *z,
                const double *__restrict__ dinv, state *st, double *part) {
  if (st->reason >= 0) return;
  const double a = st->alpha;
  double d0 = 0, d1 = 0;
  GRID_LOOP(i, n) {
    double ri = fma(-a, q[i], r[i]);
    r[i] = ri;
    d0 = fma(ri, ri, d0);
    if (dinv) {
      double zi = dinv[i] * ri;
      z[i] = zi;
      d1 = fma(ri, zi, d1);
    }
  }
  reduce_finish(st, part, S_CG_UPD, dinv != nullptr, d0, d1);
}

/* CG: x += alpha p (when this iteration got as far as alpha, even if it
 * then stopped: cpu_solve.c updates x before its stopping test), then
 * p = z + beta p (z = r for plain CG) unless the solve has stopped. */
__global__ void k_cg_p(int n, double *x, double *p, const double *__restrict__ z,
                       const state *st) {
  const bool upd_x = st->x_pending, upd_p = st->reason < 0;
  if (!upd_x && !upd_p) return;
  const double a = st->alpha, beta = st->beta;
  GRID_LOOP(i, n) {
    double pi = p[i];
    if (upd_x) x[i] = fma(a, pi, x[i]);
    if (upd_p) p[i] = fma(beta, pi, z[i]);
  }
}

/* BiCGSTAB: p = r (first iteration) or r + beta (p - omega v); also clears
 * the half-way flag the previous iteration's last kernel has consumed. */
__global__ void k_bi_p(int n, double *p, const double *__restrict__ r,
                       const double *__restrict__ v, state *st) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && st->half) st->half = 0;
  if (st->reason >= 0) return;
  const double beta = st->beta, omega = st->omega;
  const bool first = st->it == 0;
  GRID_LOOP(i, n) p[i] = first ? r[i] : fma(beta, fma(-omega, v[i], p[i]), r[i]);
}

/* BiCGSTAB: s = r - alpha v, ss = s.s */
__global__ void __launch_bounds__(NT) k_bi_s(int n, double *s, const double *__restrict__ r,
                                             const double *__restrict__ v, state *st,
                                             double *part) {
  if (st->reason >= 0) return;
  const double a = st->alpha;
  double d0 = 0;
  GRID_LOOP(i, n) {
    double si = fma(-a, v[i], r[i]);
    s[i] = si;
    d0 = fma(si, si, d0);
  }
  reduce_finish(st, part, S_BI_S, 0, d0, 0);
}

/* BiCGSTAB: x += alpha p + omega s; r = s - omega t; rr = r.r, rho = rhat.r.
 * When the solve converged half way (after s): x += alpha p, r = s. */
__global__ void __launch_bounds__(NT)
    k_bi_update(int n, double *x, double *r, const double *__restrict__ p,
                const double *__restrict__ s, const double *__restrict__ t,
                const double *__restrict__ rhat, state *st, double *part) {
  if (st->reason >= 0) {
    if (st->half) {
      const double a = st->alpha;
      GRID_LOOP(i, n) x[i] = fma(a, p[i], x[i]), r[i] = s[i];
    }
    return;
  }
  const double a = st->alpha, w = st->omega;
  double d0 = 0, d1 = 0;
  GRID_LOOP(i, n) {
    x[i] = x[i] + (a * p[i] + w * s[i]);
    double ri = fma(-w, t[i], s[i]);
    r[i] = ri;
    d0 = fma(ri, ri, d0);
    d1 = fma(rhat[i], ri, d1);
  }
  reduce_finish(st, part, S_BI_UPD, 0, d0, d1);
}

/* "while": sets the stop for this launch, chunk iterations on. */
__global__ void k_set_stop(state *st, long long chunk) { st->stop_at = st->it + chunk; }

/* "while": the loop goes on while the solve runs and the chunk is not done. */
__global__ void k_cond(const state *st, cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, st->reason < 0 && st->it < st->stop_at ? 1u : 0u);
}

/* --- host side --------------------------------------------------------------------- */

enum { HOW_WHILE = 0, HOW_UNROLLED, HOW_STREAM };
const char *const how_names[] = {"while", "unrolled", "stream"};

/* The device vectors of a solve, carved from the workspace in this order. */
struct vecs {
  double *x, *r, *p, *q, *z, *dinv; /* CG/PCG: q = Ap; BiCGSTAB: q = v, z = s */
  double *rhat, *t;
  double *hist;
  state *st;
  double *part;
};

/* CG: x r p q; PCG: x r p q z dinv; BiCGSTAB: x r p v s rhat t (v in q, s in z) */
size_t nvec(int method) { return method == GKCU_SOLVE_BICGSTAB ? 7 : method == GKCU_SOLVE_PCG ? 6 : 4; }

inline size_t up256(size_t b) { return (b + 255) & ~(size_t)255; }

struct solver {
  gkcu_ctx *ctx;
  const gkcu_solve_args *a;
  vecs v;
  int w;              /* threads per row */
  int g_spmv, g_vec;  /* grid sizes */
};

/* The W for a mean row length: the smallest power of two >= it, 2..32. */
int pick_w(int32_t n, int64_t nnz) {
  double mean = (double)nnz / n;
  int w = 2;
  while (w < 32 && w < mean) w *= 2;
  return w;
}

template <typename TI>
int launch_spmv_t(solver *S, const TI *in, double *out, const float *b, const double *a0,
                  const double *a1, int nd, int stage) {
  const gkcu_solve_args *a = S->a;
  cudaStream_t str = S->ctx->stream;
#define GKCU__SPMV_W(W)                                                                           \
  case W:                                                                                         \
    k_spmv<W, TI><<<S->g_spmv, NT, 0, str>>>(a->n, a->row_ptr, a->col_idx, a->values, in, out, b, \
                                             a0, a1, nd, S->v.st, S->v.part, stage);              \
    break;
  switch (S->w) {
    GKCU__SPMV_W(2)
    GKCU__SPMV_W(4)
    GKCU__SPMV_W(8)
    GKCU__SPMV_W(16)
    GKCU__SPMV_W(32)
    default: return gkcu__fail(S->ctx, GKC_EINTERNAL, "solve: no spmv for %d threads per row", S->w);
  }
#undef GKCU__SPMV_W
  GKCU__LAUNCHED(S->ctx, "k_spmv");
  return 0;
}

/* One iteration's kernels, on the context's stream (captured or not). */
int enqueue_iteration(solver *S) {
  const gkcu_solve_args *a = S->a;
  vecs *v = &S->v;
  cudaStream_t str = S->ctx->stream;
  int n = a->n, g = S->g_vec, rc;
  if (a->method != GKCU_SOLVE_BICGSTAB) {
    const int pcg = a->method == GKCU_SOLVE_PCG;
    if ((rc = launch_spmv_t<double>(S, v->p, v->q, nullptr, v->p, nullptr, 1, S_CG_PQ))) return rc;
    k_cg_update<<<g, NT, 0, str>>>(n, v->r, v->q, pcg ? v->z : nullptr, pcg ? v->dinv : nullptr,
                                   v->st, v->part);
    GKCU__LAUNCHED(S->ctx, "k_cg_update");
    k_cg_p<<<g, NT, 0, str>>>(n, v->x, v->p, pcg ? v->z : v->r, v->st);
    GKCU__LAUNCHED(S->ctx, "k_cg_p");
    return 0;
  }
  double *vv = v->q, *s = v->z;
  k_bi_p<<<g, NT, 0, str>>>(n, v->p, v->r, vv, v->st);
  GKCU__LAUNCHED(S->ctx, "k_bi_p");
  if ((rc = launch_spmv_t<double>(S, v->p, vv, nullptr, v->rhat, nullptr, 2, S_BI_V))) return rc;
  k_bi_s<<<g, NT, 0, str>>>(n, s, v->r, vv, v->st, v->part);
  GKCU__LAUNCHED(S->ctx, "k_bi_s");
  if ((rc = launch_spmv_t<double>(S, s, v->t, nullptr, nullptr, s, 2, S_BI_T))) return rc;
  k_bi_update<<<g, NT, 0, str>>>(n, v->x, v->r, v->p, s, v->t, v->rhat, v->st, v->part);
  GKCU__LAUNCHED(S->ctx, "k_bi_update");
  return 0;
}

/* Ends a capture that failed part way, dropping the graph when it is ours
 * (a while-node's body belongs to the node). */
void abandon_capture(cudaStream_t str, bool ours) {
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(str, &g) == cudaSuccess && g && ours) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();
}

/* The "while" graph: one conditional while-node whose body is an iteration
 * and k_cond.  0, or nonzero when this runtime or driver cannot (the error
 * is cleared: the caller falls back). */
int build_while(solver *S, cudaGraphExec_t *exec) {
#if CUDART_VERSION >= 12040
  int drv = 0;
  if (cudaDriverGetVersion(&drv) != cudaSuccess || drv < 12040) return 1;
  cudaStream_t str = S->ctx->stream;
  cudaGraph_t g = nullptr;
  cudaGraphConditionalHandle h;
  cudaGraphNodeParams cp = {};
  cudaGraphNode_t node;
  int ok = 0;
  if (cudaGraphCreate(&g, 0) != cudaSuccess) goto out;
  if (cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault) != cudaSuccess) goto out;
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  if (cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &cp) != cudaSuccess) goto out;
  if (cudaStreamBeginCaptureToGraph(str, cp.conditional.phGraph_out[0], nullptr, nullptr, 0,
                                    cudaStreamCaptureModeThreadLocal) != cudaSuccess)
    goto out;
  if (enqueue_iteration(S)) {
    abandon_capture(str, false);
    goto out;
  }
  k_cond<<<1, 1, 0, str>>>(S->v.st, h);
  if (cudaGetLastError() != cudaSuccess) {
    abandon_capture(str, false);
    goto out;
  }
  {
    cudaGraph_t body = nullptr;
    if (cudaStreamEndCapture(str, &body) != cudaSuccess) goto out;
  }
  ok = cudaGraphInstantiate(exec, g, 0) == cudaSuccess;
out:
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  return ok ? 0 : 1;
#else
  (void)S, (void)exec;
  return 1;
#endif
}

/* The "unrolled" graph: UNROLL_ITERS iterations captured from the stream. */
int build_unrolled(solver *S, cudaGraphExec_t *exec) {
  cudaStream_t str = S->ctx->stream;
  cudaGraph_t g = nullptr;
  if (cudaStreamBeginCapture(str, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  for (int i = 0; i < UNROLL_ITERS; i++)
    if (enqueue_iteration(S)) {
      abandon_capture(str, true);
      return 1;
    }
  int ok = cudaStreamEndCapture(str, &g) == cudaSuccess &&
           cudaGraphInstantiate(exec, g, 0) == cudaSuccess;
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  return ok ? 0 : 1;
}

/* Enqueues about chunk iterations. */
int enqueue_chunk(solver *S, int how, cudaGraphExec_t exec, long long chunk) {
  cudaStream_t str = S->ctx->stream;
  if (how == HOW_WHILE) {
    k_set_stop<<<1, 1, 0, str>>>(S->v.st, chunk);
    GKCU__LAUNCHED(S->ctx, "k_set_stop");
    GKCU__TRY_CUDA(S->ctx, cudaGraphLaunch(exec, str));
  } else if (how == HOW_UNROLLED) {
    for (long long i = 0; i < chunk; i += UNROLL_ITERS) GKCU__TRY_CUDA(S->ctx, cudaGraphLaunch(exec, str));
  } else {
    for (long long i = 0; i < chunk; i++) {
      int rc = enqueue_iteration(S);
      if (rc) return rc;
    }
  }
  return 0;
}

double now_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int forced_how() {
  const char *e = getenv("GKCU_SOLVE_GRAPH");
  if (!e) e = getenv("GKC_SOLVE_GRAPH");
  if (!e) return -1;
  for (int i = 0; i < 3; i++)
    if (!strcmp(e, how_names[i])) return i;
  return -1;
}

/* The loop: chunks of iterations, two in flight, the state looked at after
 * each.  hs: two pinned copies of the state. */
int run_loop(solver *S, state *hs, cudaEvent_t ev[2], gkcu_solve_result *res, int *stopped) {
  gkcu_ctx *ctx = S->ctx;
  cudaStream_t str = ctx->stream;
  cudaGraphExec_t exec = nullptr;
  int how = forced_how(), rc = 0;
  if (how == HOW_WHILE || how < 0) {
    if (build_while(S, &exec)) {
      if (how == HOW_WHILE)
        return gkcu__fail(ctx, GKC_EDEVICE_ERROR, "solve: GKCU_SOLVE_GRAPH=while, but this driver"
                          " or runtime cannot build a conditional graph");
      how = -1;
    } else {
      how = HOW_WHILE;
    }
  }
  if (how == HOW_UNROLLED || how < 0) {
    if (build_unrolled(S, &exec)) {
      if (how == HOW_UNROLLED)
        return gkcu__fail(ctx, GKC_EDEVICE_ERROR, "solve: cannot capture the iteration as a graph");
      how = HOW_STREAM;
    } else {
      how = HOW_UNROLLED;
    }
  }
  res->how = how_names[how];
  const double poll_ms = S->a->poll_ms > 0 ? S->a->poll_ms : 2.0;
  long long chunk = how == HOW_UNROLLED ? UNROLL_ITERS : 4;
  long long queued = 0; /* iterations enqueued (upper bound on those run) */
  int stop = 0;
  double t0 = now_ms();
  /* group g's state goes to hs[g & 1], then ev[g & 1] */
  long long g = 0;
  for (;; g++) {
    if (queued < S->a->max_iter) {
      if ((rc = enqueue_chunk(S, how, exec, chunk))) goto out;
      queued += chunk;
      cudaError_t e = cudaMemcpyAsync(&hs[g & 1], S->v.st, sizeof(state),
                                      cudaMemcpyDeviceToHost, str);
      if (e == cudaSuccess) e = cudaEventRecord(ev[g & 1], str);
      if (e != cudaSuccess) {
        rc = gkcu__cuda_fail(ctx, e, "solve: copying the state back");
        goto out;
      }
    } else if (g == 0) {
      break;
    }
    if (g == 0) continue; /* two in flight before the first wait */
    {
      cudaError_t e = cudaEventSynchronize(ev[(g - 1) & 1]);
      if (e != cudaSuccess) {
        rc = gkcu__cuda_fail(ctx, e, "solve: waiting for the iteration");
        goto out;
      }
    }
    const state *seen = &hs[(g - 1) & 1];
    if (seen->reason >= 0 || queued >= S->a->max_iter) break;
    if (S->a->poll && (stop = S->a->poll(S->a->poll_arg))) break; /* the group in flight drains */
    /* aim at poll_ms / 2 per chunk from the rate so far */
    double el = now_ms() - t0;
    if (seen->it > 0 && el > 0) {
      double per_ms = seen->it / el;
      long long c = (long long)(per_ms * poll_ms / 2);
      if (how == HOW_UNROLLED) c = (c + UNROLL_ITERS - 1) / UNROLL_ITERS * UNROLL_ITERS;
      chunk = c < 1 ? 1 : c > (1 << 20) ? (1 << 20) : c;
      if (how == HOW_UNROLLED && chunk < UNROLL_ITERS) chunk = UNROLL_ITERS;
    }
  }
  {
    cudaError_t e = cudaStreamSynchronize(str);
    if (e != cudaSuccess) {
      rc = gkcu__cuda_fail(ctx, e, "solve: the iteration");
      goto out;
    }
  }
  res->loop_us = (now_ms() - t0) * 1e3;
  *stopped = stop; /* unless the device had stopped first: see gkcu_solve */
out:
  if (rc) (void)cudaStreamSynchronize(str); /* nothing of exec still running */
  if (exec) (void)cudaGraphExecDestroy(exec);
  return rc;
}

}  // namespace

extern "C" size_t gkcu_solve_work_bytes(int method, int32_t n, int64_t max_iter, int with_history) {
  if (n < 1 || method < 0 || method > GKCU_SOLVE_BICGSTAB || max_iter < 1) return 0;
  size_t vb = up256((size_t)n * sizeof(double));
  size_t total = nvec(method) * vb + up256(sizeof(state)) + up256(2 * MAX_BLOCKS * sizeof(double));
  if (with_history) {
    if ((uint64_t)max_iter > (SIZE_MAX - total - 256) / sizeof(double)) return 0;
    total += up256((size_t)max_iter * sizeof(double));
  }
  return total;
}

extern "C" int gkcu_solve(gkcu_ctx *ctx, const gkcu_solve_args *a, gkcu_solve_result *res) {
  GKCU__CHECK_ARG(ctx, a && res && a->n >= 1 && a->nnz >= 0 && a->row_ptr && a->b && a->x);
  GKCU__CHECK_ARG(ctx, a->method >= 0 && a->method <= GKCU_SOLVE_BICGSTAB && a->max_iter >= 1);
  GKCU__CHECK_ARG(ctx, a->nnz == 0 || (a->col_idx && a->values));
  size_t need = gkcu_solve_work_bytes(a->method, a->n, a->max_iter, a->history != nullptr);
  GKCU__CHECK_ARG(ctx, need > 0 && a->work && a->work_bytes >= need &&
                           ((uintptr_t)a->work & 255) == 0);
  memset(res, 0, sizeof *res);
  res->bad_row = -1;
  res->how = "none";

  solver S = {};
  S.ctx = ctx;
  S.a = a;
  const int n = a->n;
  const size_t vb = up256((size_t)n * sizeof(double));
  char *w = (char *)a->work;
  double **slots[7] = {&S.v.x, &S.v.r, &S.v.p, &S.v.q, &S.v.z, &S.v.dinv, &S.v.t};
  if (a->method == GKCU_SOLVE_BICGSTAB) slots[5] = &S.v.rhat;
  for (size_t i = 0; i < nvec(a->method); i++) *slots[i] = (double *)(w + i * vb);
  w += nvec(a->method) * vb;
  S.v.st = (state *)w;
  w += up256(sizeof(state));
  S.v.part = (double *)w;
  w += up256(2 * MAX_BLOCKS * sizeof(double));
  S.v.hist = a->history ? (double *)w : nullptr;

  S.w = pick_w(n, a->nnz);
  int sms = ctx->sm_count > 0 ? ctx->sm_count : 1;
  int occ_v = 0, occ_s = 0;
  GKCU__TRY_CUDA(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_v, k_cg_update, NT, 0));
  GKCU__TRY_CUDA(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_s, k_spmv<8, double>, NT, 0));
  long long gv = (long long)sms * (occ_v > 0 ? occ_v : 1);
  long long gs = (long long)sms * (occ_s > 0 ? occ_s : 1);
  long long need_v = ((long long)n + NT - 1) / NT, need_s = ((long long)n * S.w + NT - 1) / NT;
  S.g_vec = (int)(gv < need_v ? gv : need_v);
  S.g_spmv = (int)(gs < need_s ? gs : need_s);
  if (S.g_vec > MAX_BLOCKS) S.g_vec = MAX_BLOCKS;
  if (S.g_spmv > MAX_BLOCKS) S.g_spmv = MAX_BLOCKS;

  cudaStream_t str = ctx->stream;
  state *hs = nullptr;
  cudaEvent_t ev[2] = {nullptr, nullptr};
  int rc = 0, stopped = 0;
  vecs *v = &S.v;
  const int g = S.g_vec;
#define TRY(call)                                     \
  do {                                                \
    cudaError_t e__ = (call);                         \
    if (e__ != cudaSuccess) {                         \
      rc = gkcu__cuda_fail(ctx, e__, #call);          \
      goto out;                                       \
    }                                                 \
  } while (0)
#define LAUNCHED(name) TRY(cudaGetLastError())
  TRY(cudaHostAlloc((void **)&hs, 2 * sizeof(state), cudaHostAllocDefault));
  TRY(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
  TRY(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));

  /* The start: the state, x, (PCG) 1/diag, ||b||, r = b - A x, ||r||. */
  memset(&hs[0], 0, sizeof(state));
  hs[0].rtol = a->rtol, hs[0].atol = a->atol, hs[0].max_iter = a->max_iter;
  hs[0].hist = v->hist, hs[0].reason = -1, hs[0].bad_row = 0x7fffffff;
  TRY(cudaMemcpyAsync(v->st, &hs[0], sizeof(state), cudaMemcpyHostToDevice, str));
  k_init_x<<<g, NT, 0, str>>>(n, a->x0, v->x);
  LAUNCHED("k_init_x");
  if (a->method == GKCU_SOLVE_PCG) {
    k_dinv<<<g, NT, 0, str>>>(n, a->row_ptr, a->col_idx, a->values, v->dinv, v->st);
    LAUNCHED("k_dinv");
  }
  k_norm2f<<<g, NT, 0, str>>>(n, a->b, v->st, v->part);
  LAUNCHED("k_norm2f");
  if ((rc = launch_spmv_t<double>(&S, v->x, v->r, a->b, nullptr, nullptr, 1, S_RES))) goto out;
  TRY(cudaMemcpyAsync(&hs[1], v->st, sizeof(state), cudaMemcpyDeviceToHost, str));
  TRY(cudaStreamSynchronize(str));
  {
    state s0 = hs[1];
    if (s0.bad_row != 0x7fffffff) {
      res->bad_row = s0.bad_row;
      rc = GKCU_SOLVE_EZERO_DIAG;
      goto out;
    }
    double rn = sqrt(s0.rr);
    int why = -1;
    if (!isfinite(s0.bn)) {
      why = GKCU_SOLVE_NON_FINITE;
    } else if (s0.bn == 0) { /* x = 0 solves it exactly */
      TRY(cudaMemsetAsync(v->x, 0, (size_t)n * sizeof(double), str));
      why = GKCU_SOLVE_CONVERGED;
    } else if (!isfinite(rn)) {
      why = GKCU_SOLVE_NON_FINITE;
    } else if (rn <= s0.tol) {
      why = GKCU_SOLVE_CONVERGED;
    }
    if (why < 0) {
      /* the method's start, then the loop */
      if (a->method == GKCU_SOLVE_CG) {
        TRY(cudaMemcpyAsync(v->p, v->r, (size_t)n * sizeof(double), cudaMemcpyDeviceToDevice, str));
        s0.rz = s0.rr;
      } else if (a->method == GKCU_SOLVE_BICGSTAB) {
        TRY(cudaMemcpyAsync(v->rhat, v->r, (size_t)n * sizeof(double), cudaMemcpyDeviceToDevice,
                            str));
        s0.rhat_n = rn, s0.rho = s0.rr, s0.rho_prev = 1, s0.alpha = 1, s0.omega = 1;
      }
      hs[0] = s0;
      TRY(cudaMemcpyAsync(v->st, &hs[0], sizeof(state), cudaMemcpyHostToDevice, str));
      if (a->method == GKCU_SOLVE_PCG) {
        k_pcg_init<<<g, NT, 0, str>>>(n, v->r, v->dinv, v->z, v->p, v->st, v->part);
        LAUNCHED("k_pcg_init");
      }
      /* hs[0] is read by the copy above: wait before the loop reuses it */
      TRY(cudaStreamSynchronize(str));
      if ((rc = run_loop(&S, hs, ev, res, &stopped))) goto out;
    } else {
      res->reason = why;
    }
    /* x to float32, and the residual of exactly that x */
    k_to_float<<<g, NT, 0, str>>>(n, v->x, a->x);
    LAUNCHED("k_to_float");
    if ((rc = launch_spmv_t<float>(&S, a->x, nullptr, a->b, nullptr, nullptr, 1, S_FINAL))) goto out;
    TRY(cudaMemcpyAsync(&hs[0], v->st, sizeof(state), cudaMemcpyDeviceToHost, str));
    TRY(cudaStreamSynchronize(str));
    const state *sf = &hs[0];
    if (why < 0) {
      res->iterations = sf->it;
      /* the device's own reason when it stopped, else the poll's */
      if (sf->reason >= 0) res->reason = sf->reason;
      else if (stopped) res->reason = stopped;
      else rc = gkcu__fail(ctx, GKC_EINTERNAL, "solve: the loop ended with the solve running");
    }
    res->residual = s0.bn == 0 ? 0 : sqrt(sf->final_rr) / s0.bn;
    if (a->history && res->iterations > 0)
      TRY(cudaMemcpy(a->history, v->hist, (size_t)res->iterations * sizeof(double),
                     cudaMemcpyDeviceToHost));
  }
out:
  if (rc) (void)cudaStreamSynchronize(str); /* nothing may still use the workspace */
  if (ev[0]) cudaEventDestroy(ev[0]);
  if (ev[1]) cudaEventDestroy(ev[1]);
  if (hs) cudaFreeHost(hs);
#undef LAUNCHED
#undef TRY
  return rc;
}
