/* gkcu_solve_kern.cuh: the kernels of gkcu_solve.cu (included there once;
 * C++ only, never installed).  The recurrences are cpu_solve.c's, step for
 * step, so that both backends stop for the same reasons at the same
 * iterations.
 *
 * Every kernel but the last of an iteration ends in a reduction: each block
 * sums its share in double, writes it to a partial, draws a ticket, and the
 * block that draws the last one adds the partials in a fixed order and runs
 * that step's scalar logic (finish()), one thread, on the state block.  The
 * next kernel reads the state; nothing goes to the host.  A kernel that
 * finds the solve stopped (state.reason >= 0) returns at once, all its
 * blocks alike (they read reason before any of them can be the last).
 */
#ifndef GKCU_SOLVE_KERN_CUH
#define GKCU_SOLVE_KERN_CUH

#include "gkcu_internal.h"
#include "gkcu_solve.h"

namespace gks {

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

/* The "while" loop's condition handle, passed to the iteration's last
 * kernel, which sets it once the iteration's state is final (no kernel of
 * its own per iteration).  on = 0 in the other loop kinds. */
struct loop_cond {
  cudaGraphConditionalHandle h;
  int on;
};

/* What the last block does with the reduced values. */
enum stage {
  S_BNORM,    /* d0 = b.b */
  S_RES,      /* d0 = ||b - A x||^2 (the start) */
  S_FINAL,    /* d0 = ||b - A x||^2 (the end) */
  S_PCG_INIT, /* d1 = r.z */
  S_CG_PQ,    /* d0 = p.Ap */
  S_CG_UPD,   /* d0 = r.r, d1 = r.z (PCG) */
  S_CG_R,     /* d0 = r.r (CG preconditioned by AMG: z comes later) */
  S_CG_RZ,    /* d1 = r.z, z = M^-1 r from the AMG cycle */
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
    case S_CG_R:
      st->rr = d0;
      record(st, sqrt(d0));
      break;
    case S_CG_UPD:
    case S_CG_RZ: {
      if (stage == S_CG_UPD) {
        st->rr = d0;
        if (record(st, sqrt(d0))) break;
      }
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

/* Go on while the solve runs and this launch's chunk is not done. */
__device__ void set_loop(const loop_cond &c, const state *st) {
  if (c.on) cudaGraphSetConditional(c.h, st->reason < 0 && st->it < st->stop_at ? 1u : 0u);
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
 * one thread of the last block (and, when lc, the loop's condition from the
 * finished state). */
__device__ void reduce_finish(state *st, double *part, int stage, int pcg, double d0,
                              double d1, const loop_cond *lc = nullptr) {
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
    if (lc) set_loop(*lc, st);
  }
}

/* y = A in (or b - A in when b or b64: the request's float32 or float64 b),
 * row sums in double, W threads per row
 * (W = 1: a thread per row); out[i] = y rounded to V unless out is NULL;
 * d0 += u0*y, d1 += u1*y where u0, u1 are a0[i], a1[i], or y itself when
 * NULL (nd = 1: d1 not wanted), y as stored (the dots describe the vectors
 * the next kernels read).  Iteration stages return at once once the solve
 * has stopped. */
/* At most 32 registers (2048 / NT blocks an SM): at 40 the product ran at
 * 75% occupancy, and CG on the 27-point stencil 156^3 (H200) did 2,535
 * iterations/s; at full occupancy 3,380 (bench/gpu/module_ab.sh, no spill;
 * unrolling the row loop by 4 as well gained nothing). */
template <int W, typename TI, typename V, typename VA>
__global__ void __launch_bounds__(NT, 2048 / NT)
    k_spmv(int n, const int *__restrict__ rp, const int *__restrict__ ci,
           const VA *__restrict__ va, const TI *__restrict__ in, V *out,
           const float *__restrict__ b, const double *__restrict__ b64, const V *a0, const V *a1,
           int nd, state *st, double *part, int stage) {
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
      double y = b64 ? b64[row] - s : b ? (double)b[row] - s : s;
      if (out) {
        const V yv = (V)y;
        out[row] = yv;
        y = (double)yv;
      }
      d0 = fma(a0 ? (double)a0[row] : y, y, d0);
      if (nd > 1) d1 = fma(a1 ? (double)a1[row] : y, y, d1);
    }
  }
  reduce_finish(st, part, stage, 0, d0, d1);
}

/* d0 = b.b of b (float32 or float64). */
template <typename TB>
__global__ void __launch_bounds__(NT) k_norm2f(int n, const TB *__restrict__ b, state *st,
                                               double *part) {
  double d0 = 0;
  for (long long i = (long long)blockIdx.x * NT + threadIdx.x; i < n; i += (long long)gridDim.x * NT)
    d0 = fma((double)b[i], (double)b[i], d0);
  reduce_finish(st, part, S_BNORM, 0, d0, 0);
}

#define GRID_LOOP(i, n) \
  for (long long i = (long long)blockIdx.x * NT + threadIdx.x; i < (n); i += (long long)gridDim.x * NT)

/* x = x0 (0 when x0 is NULL), x0 of the request's type TX */
template <typename TX, typename V>
__global__ void k_init_x(int n, const TX *x0, V *x) {
  GRID_LOOP(i, n) x[i] = x0 ? (V)x0[i] : (V)0;
}

/* The x returned, in the request's type TO (float32 or float64). */
template <typename V, typename TO>
__global__ void k_store_x(int n, const V *__restrict__ x, TO *y) {
  GRID_LOOP(i, n) y[i] = (TO)x[i];
}

/* PCG: dinv = 1 / diag(A) (repeated entries add up); the first row whose
 * diagonal is zero or not finite into st->bad_row. */
template <typename V, typename VA>
__global__ void k_dinv(int n, const int *__restrict__ rp, const int *__restrict__ ci,
                       const VA *__restrict__ va, V *dinv, state *st) {
  GRID_LOOP(i, n) {
    double d = 0;
    for (int j = rp[i]; j < rp[i + 1]; j++)
      if (ci[j] == i) d += (double)va[j];
    if (d == 0 || !isfinite(d)) atomicMin(&st->bad_row, (int)i);
    else dinv[i] = (V)(1.0 / d);
  }
}

/* PCG's start: z = dinv r, p = z, rz = r.z */
template <typename V>
__global__ void __launch_bounds__(NT) k_pcg_init(int n, const V *__restrict__ r,
                                                 const V *__restrict__ dinv, V *z, V *p,
                                                 state *st, double *part) {
  double d1 = 0;
  GRID_LOOP(i, n) {
    const V zi = (V)((double)dinv[i] * (double)r[i]);
    z[i] = zi, p[i] = zi;
    d1 = fma((double)r[i], (double)zi, d1);
  }
  reduce_finish(st, part, S_PCG_INIT, 1, 0, d1);
}

/* CG: r -= alpha q; rr = r.r; PCG also z = dinv r, rz = r.z; with amg, r.z
 * comes from the AMG cycle after it (stage S_CG_R here).  (x += alpha p
 * waits for k_cg_p, which reads p anyway.) */
template <typename V>
__global__ void __launch_bounds__(NT)
    k_cg_update(int n, V *r, const V *__restrict__ q, V *z, const V *__restrict__ dinv,
                state *st, double *part, int amg) {
  if (st->reason >= 0) return;
  const double a = st->alpha;
  double d0 = 0, d1 = 0;
  GRID_LOOP(i, n) {
    const V rv = (V)fma(-a, (double)q[i], (double)r[i]);
    const double ri = (double)rv;
    r[i] = rv;
    d0 = fma(ri, ri, d0);
    if (dinv) {
      const V zi = (V)((double)dinv[i] * ri);
      z[i] = zi;
      d1 = fma(ri, (double)zi, d1);
    }
  }
  reduce_finish(st, part, amg ? S_CG_R : S_CG_UPD, dinv != nullptr, d0, d1);
}

/* CG: x += alpha p (when this iteration got as far as alpha, even if it
 * then stopped: cpu_solve.c updates x before its stopping test), then
 * p = z + beta p (z = r for plain CG) unless the solve has stopped. */
template <typename V>
__global__ void k_cg_p(int n, V *x, V *p, const V *__restrict__ z, const state *st,
                       loop_cond lc) {
  /* the iteration's state is final here (k_cg_update's last block) */
  if (blockIdx.x == 0 && threadIdx.x == 0) set_loop(lc, st);
  const bool upd_x = st->x_pending, upd_p = st->reason < 0;
  if (!upd_x && !upd_p) return;
  const double a = st->alpha, beta = st->beta;
  GRID_LOOP(i, n) {
    const double pi = (double)p[i];
    if (upd_x) x[i] = (V)fma(a, pi, (double)x[i]);
    if (upd_p) p[i] = (V)fma(beta, pi, (double)z[i]);
  }
}

/* BiCGSTAB: p = r (first iteration) or r + beta (p - omega v); with
 * Jacobi (dinv) also ph = dinv p, the right preconditioner's M^-1 p; also
 * clears the half-way flag the previous iteration's last kernel has
 * consumed. */
template <typename V>
__global__ void k_bi_p(int n, V *p, const V *__restrict__ r, const V *__restrict__ v,
                       const V *__restrict__ dinv, V *ph, state *st) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && st->half) st->half = 0;
  if (st->reason >= 0) return;
  const double beta = st->beta, omega = st->omega;
  const bool first = st->it == 0;
  GRID_LOOP(i, n) {
    const V pv = first ? r[i] : (V)fma(beta, fma(-omega, (double)v[i], (double)p[i]), (double)r[i]);
    p[i] = pv;
    if (dinv) ph[i] = (V)((double)dinv[i] * (double)pv);
  }
}

/* BiCGSTAB: s = r - alpha v, ss = s.s; with Jacobi (dinv) also sh = dinv s */
template <typename V>
__global__ void __launch_bounds__(NT) k_bi_s(int n, V *s, const V *__restrict__ r,
                                             const V *__restrict__ v, const V *__restrict__ dinv,
                                             V *sh, state *st, double *part) {
  if (st->reason >= 0) return;
  const double a = st->alpha;
  double d0 = 0;
  GRID_LOOP(i, n) {
    const V sv = (V)fma(-a, (double)v[i], (double)r[i]);
    const double si = (double)sv;
    s[i] = sv;
    if (dinv) sh[i] = (V)((double)dinv[i] * si);
    d0 = fma(si, si, d0);
  }
  reduce_finish(st, part, S_BI_S, 0, d0, 0);
}

/* BiCGSTAB: x += alpha p + omega s; r = s - omega t; rr = r.r, rho = rhat.r.
 * When the solve converged half way (after s): x += alpha p, r = s.  Right
 * preconditioned, p and sh are M^-1 p and M^-1 s (x moves along them),
 * else p itself and s. */
template <typename V>
__global__ void __launch_bounds__(NT)
    k_bi_update(int n, V *x, V *r, const V *__restrict__ p, const V *__restrict__ s,
                const V *__restrict__ sh, const V *__restrict__ t, const V *__restrict__ rhat,
                state *st, double *part, loop_cond lc) {
  if (st->reason >= 0) {
    if (blockIdx.x == 0 && threadIdx.x == 0) set_loop(lc, st);
    if (st->half) {
      const double a = st->alpha;
      GRID_LOOP(i, n) x[i] = (V)fma(a, (double)p[i], (double)x[i]), r[i] = s[i];
    }
    return;
  }
  const double a = st->alpha, w = st->omega;
  double d0 = 0, d1 = 0;
  GRID_LOOP(i, n) {
    x[i] = (V)((double)x[i] + (a * (double)p[i] + w * (double)sh[i]));
    const V rv = (V)fma(-w, (double)t[i], (double)s[i]);
    const double ri = (double)rv;
    r[i] = rv;
    d0 = fma(ri, ri, d0);
    d1 = fma((double)rhat[i], ri, d1);
  }
  reduce_finish(st, part, S_BI_UPD, 0, d0, d1, &lc);
}

/* "while": sets the stop for this launch, chunk iterations on. */
__global__ void k_set_stop(state *st, long long chunk) { st->stop_at = st->it + chunk; }

}  // namespace gks

#endif /* GKCU_SOLVE_KERN_CUH */
