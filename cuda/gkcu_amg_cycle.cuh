/* gkcu_amg_cycle.cuh: one V(1,1) cycle of a gkcu_amg hierarchy, z = M^-1 r,
 * as kernels enqueued on a stream (captured into gkcu_solve's graphs or
 * not); included once, by gkcu_solve.cu, after gkcu_solve_kern.cuh.
 *
 * The schedule is cpu_amg.c's vcycle() step for step: on each level one
 * smoothing step from zero, the residual, restriction, the coarser level,
 * prolongation, one smoothing step; the coarsest level solved by its dense
 * inverse (or smoothed four times when it has none).  The Chebyshev step
 * of degree k (Saad, algorithm 12.1) is k - 1 fused kernels plus its start:
 * each multiplies A by the current direction d and, in the same pass, adds
 * d to x, updates the residual r -= D^-1 A d and forms the next direction
 * into a second buffer (d is the product's input, so it cannot be written
 * in place); the last one adds both directions to x and writes nothing
 * else.  So a degree-2 step costs one product with A from zero and two
 * otherwise, as on the CPU.
 *
 * Three kernels do everything: k_amg_row (a product with A_l, P_l or R_l,
 * W threads per row, row sums in double, then a per-row operation),
 * k_amg_vec (elementwise operations) and k_amg_dense (the coarsest level).
 * The operation is a run-time argument (uniform across the grid), so the
 * kernels are instantiated per vector type only: TB, TX the level's
 * right-hand side and solution (the solve's V on level 0, float32 below),
 * TI the product's input (TX, or a float32 scratch vector).
 *
 * Every kernel returns at once when the solve has stopped (state.reason
 * >= 0), like the iteration's own: a graph of 8 iterations enqueued past
 * convergence costs launches, not cycles.  The last kernel of a cycle on
 * level 0 may also reduce b.z (the Krylov method's r.z) into the state,
 * through reduce_finish, with a stage given by the caller: CG's r.z costs
 * no pass of its own.
 */
#ifndef GKCU_AMG_CYCLE_CUH
#define GKCU_AMG_CYCLE_CUH

/* gkcu_solve.cu includes gkcu_solve_kern.cuh (state, reduce_finish, NT,
 * MAX_BLOCKS, GRID_LOOP) before this file, which is part of its module. */
#include "gkcu_amg.cuh"

namespace gks {

enum amg_row_op {
  OP_RESID,      /* r = b - A x                          (in = x) */
  OP_CHEB_START, /* r = dinv (b - A x); d = r / theta     (in = x) */
  OP_CHEB_STEP,  /* x += d; r -= dinv A d; dn = c1 d + c2 r; last: x += dn, nothing else written (in = d) */
  OP_L1,         /* q = dl1inv (b - A x)                  (in = x) */
  OP_PROLONG,    /* x += P xc                             (in = the coarser level's x) */
  OP_RESTRICT,   /* bc = R r                              (in = r; out = the coarser level's b) */
};

enum amg_vec_op {
  EV_CHEB_START0, /* r = dinv b; d = r / theta (x = 0) */
  EV_CHEB_END,    /* x += d (degree 1) */
  EV_L1_ZERO,     /* x = dl1inv b */
  EV_ADD_Q,       /* x += q */
};

/* What a cycle kernel reads and writes; unused members NULL. */
template <typename TI, typename TB, typename TX>
struct amg_args {
  int op, n;
  const int *rp, *ci;
  const float *va;
  const TI *in;
  const TB *b;
  TX *x;
  float *r, *d, *dn, *out;
  const float *dinv; /* dinv (Chebyshev) or dl1inv (l1-Jacobi) */
  double theta, c1, c2;
  int x_zero;        /* x is 0: not read */
  int last;
  state *st;
  double *part;
  int stage;         /* >= 0: reduce b.x (as stored) into the state with this stage */
};

/* The per-row part of k_amg_row: s = the row's product; returns b_i x_i
 * where x_i was written last (the dot's term), else 0. */
template <typename TI, typename TB, typename TX>
__device__ __forceinline__ double amg_row_op_at(const amg_args<TI, TB, TX> &a, long long i, double s) {
  switch (a.op) {
    case OP_RESID: a.r[i] = (float)((double)a.b[i] - s); return 0;
    case OP_CHEB_START: {
      const double rr = (double)a.dinv[i] * ((double)a.b[i] - s);
      a.r[i] = (float)rr;
      a.d[i] = (float)(rr / a.theta);
      return 0;
    }
    case OP_CHEB_STEP: {
      const double di = (double)a.d[i];
      const double xn = (a.x_zero ? 0.0 : (double)a.x[i]) + di;
      const double rr = (double)a.r[i] - (double)a.dinv[i] * s;
      const double dn = a.c1 * di + a.c2 * rr;
      if (a.last) {
        const TX xv = (TX)(xn + dn);
        a.x[i] = xv;
        return (double)a.b[i] * (double)xv;
      }
      a.x[i] = (TX)xn;
      a.r[i] = (float)rr;
      a.dn[i] = (float)dn;
      return 0;
    }
    case OP_L1: a.out[i] = (float)((double)a.dinv[i] * ((double)a.b[i] - s)); return 0;
    case OP_PROLONG: a.x[i] = (TX)((double)a.x[i] + s); return 0;
    case OP_RESTRICT: a.out[i] = (float)s; return 0;
  }
  return 0;
}

template <int W, typename TI, typename TB, typename TX>
__global__ void __launch_bounds__(NT) k_amg_row(amg_args<TI, TB, TX> a) {
  if (a.st->reason >= 0) return;
  constexpr int RPW = 32 / W; /* rows per warp */
  const int lane = threadIdx.x & 31, sub = lane % W;
  const long long warp = ((long long)blockIdx.x * NT + threadIdx.x) >> 5;
  const long long stride = (long long)gridDim.x * (NT / 32) * RPW;
  double dot = 0;
  for (long long r0 = warp * RPW; r0 < a.n; r0 += stride) {
    const long long row = r0 + lane / W;
    double s = 0;
    if (row < a.n) {
      const int end = a.rp[row + 1];
      for (int j = a.rp[row] + sub; j < end; j += W) s = fma((double)a.va[j], (double)a.in[a.ci[j]], s);
    }
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (row < a.n && sub == 0) dot += amg_row_op_at(a, row, s);
  }
  if (a.stage >= 0) reduce_finish(a.st, a.part, a.stage, 1, 0, dot);
}

template <typename TB, typename TX>
__global__ void __launch_bounds__(NT) k_amg_vec(amg_args<float, TB, TX> a) {
  if (a.st->reason >= 0) return;
  double dot = 0;
  GRID_LOOP(i, a.n) {
    switch (a.op) {
      case EV_CHEB_START0: {
        const double rr = (double)a.dinv[i] * (double)a.b[i];
        a.r[i] = (float)rr;
        a.d[i] = (float)(rr / a.theta);
        break;
      }
      case EV_CHEB_END: {
        const TX xv = (TX)((a.x_zero ? 0.0 : (double)a.x[i]) + (double)a.d[i]);
        a.x[i] = xv;
        dot = fma((double)a.b[i], (double)xv, dot);
        break;
      }
      case EV_L1_ZERO: {
        const TX xv = (TX)((double)a.dinv[i] * (double)a.b[i]);
        a.x[i] = xv;
        dot = fma((double)a.b[i], (double)xv, dot);
        break;
      }
      case EV_ADD_Q: {
        const TX xv = (TX)((double)a.x[i] + (double)a.in[i]);
        a.x[i] = xv;
        dot = fma((double)a.b[i], (double)xv, dot);
        break;
      }
    }
  }
  if (a.stage >= 0) reduce_finish(a.st, a.part, a.stage, 1, 0, dot);
}

/* x = inv b, inv n x n row-major: a warp per row. */
template <typename TB, typename TX>
__global__ void __launch_bounds__(NT) k_amg_dense(int n, const float *__restrict__ inv,
                                                  const TB *__restrict__ b, TX *x, state *st,
                                                  double *part, int stage) {
  if (st->reason >= 0) return;
  const int lane = threadIdx.x & 31;
  const long long warp = ((long long)blockIdx.x * NT + threadIdx.x) >> 5;
  const long long nw = (long long)gridDim.x * (NT / 32);
  double dot = 0;
  for (long long i = warp; i < n; i += nw) {
    double s = 0;
    for (int j = lane; j < n; j += 32) s = fma((double)inv[i * n + j], (double)b[j], s);
    s = warp_sum(s);
    if (lane == 0) {
      const TX xv = (TX)s;
      x[i] = xv;
      dot = fma((double)b[i], (double)xv, dot);
    }
  }
  if (stage >= 0) reduce_finish(st, part, stage, 1, 0, dot);
}

/* The host side: enqueues one cycle. */
struct amg_cycle {
  gkcu_ctx *ctx;
  const gkcu_amg *h;
  /* level 0's matrix (the solve's) and its threads per row */
  const int *rp0, *ci0;
  const float *va0;
  int w0;
  state *st;
  double *part;
  int sms;
};

inline int amg_grid(const amg_cycle &c, long long threads) {
  long long g = (threads + NT - 1) / NT, cap = (long long)c.sms * 8;
  if (g > cap) g = cap;
  if (g > MAX_BLOCKS) g = MAX_BLOCKS;
  return g < 1 ? 1 : (int)g;
}

template <typename TI, typename TB, typename TX>
int amg_row(const amg_cycle &c, int w, const amg_args<TI, TB, TX> &a) {
  const int g = amg_grid(c, (long long)a.n * w);
  cudaStream_t s = c.ctx->stream;
  switch (w) {
    case 1: k_amg_row<1, TI, TB, TX><<<g, NT, 0, s>>>(a); break;
    case 2: k_amg_row<2, TI, TB, TX><<<g, NT, 0, s>>>(a); break;
    case 4: k_amg_row<4, TI, TB, TX><<<g, NT, 0, s>>>(a); break;
    case 8: k_amg_row<8, TI, TB, TX><<<g, NT, 0, s>>>(a); break;
    case 16: k_amg_row<16, TI, TB, TX><<<g, NT, 0, s>>>(a); break;
    case 32: k_amg_row<32, TI, TB, TX><<<g, NT, 0, s>>>(a); break;
    default: return gkcu__fail(c.ctx, GKC_EINTERNAL, "amg: no product for %d threads per row", w);
  }
  GKCU__LAUNCHED(c.ctx, "k_amg_row");
  return 0;
}

template <typename TB, typename TX>
int amg_vec(const amg_cycle &c, const amg_args<float, TB, TX> &a) {
  k_amg_vec<TB, TX><<<amg_grid(c, a.n), NT, 0, c.ctx->stream>>>(a);
  GKCU__LAUNCHED(c.ctx, "k_amg_vec");
  return 0;
}

/* The arguments every kernel of level l shares, A_l as the matrix. */
template <typename TI, typename TB, typename TX>
amg_args<TI, TB, TX> amg_base(const amg_cycle &c, int l, const TB *b, TX *x) {
  const gkcu_amg_lev *L = &c.h->lev[l];
  amg_args<TI, TB, TX> a;
  memset(&a, 0, sizeof a);
  a.n = L->n;
  a.rp = l ? L->A.rp : c.rp0, a.ci = l ? L->A.ci : c.ci0, a.va = l ? L->A.va : c.va0;
  a.b = b, a.x = x, a.r = L->r, a.d = L->d, a.dn = L->dn;
  a.st = c.st, a.part = c.part, a.stage = -1;
  return a;
}

inline int amg_w(const amg_cycle &c, int l) { return l ? c.h->lev[l].A.w : c.w0; }

/* One smoothing step on level l (cpu_amg.c's smooth()); zero: x starts at
 * 0 and is only written.  stage >= 0: its last kernel reduces b.x. */
template <typename TB, typename TX>
int amg_smooth(const amg_cycle &c, int l, const TB *b, TX *x, int zero, int stage) {
  const gkcu_amg *h = c.h;
  const gkcu_amg_lev *L = &h->lev[l];
  int rc;
  if (h->smoother == GKCU_AMG_L1_JACOBI || !(L->rho > 0)) {
    amg_args<float, TB, TX> v = amg_base<float, TB, TX>(c, l, b, x);
    v.dinv = L->dl1inv, v.stage = stage;
    if (zero) {
      v.op = EV_L1_ZERO;
      return amg_vec(c, v);
    }
    amg_args<TX, TB, TX> a = amg_base<TX, TB, TX>(c, l, b, x);
    a.op = OP_L1, a.in = x, a.out = L->q, a.dinv = L->dl1inv;
    if ((rc = amg_row(c, amg_w(c, l), a))) return rc;
    v.op = EV_ADD_Q, v.in = L->q;
    return amg_vec(c, v);
  }
  const double up = 1.1 * L->rho, lo = up / h->cheb_ratio;
  const double theta = (up + lo) / 2, delta = (up - lo) / 2, sigma = theta / delta;
  double rk = 1 / sigma;
  if (zero) {
    amg_args<float, TB, TX> v = amg_base<float, TB, TX>(c, l, b, x);
    v.op = EV_CHEB_START0, v.dinv = L->dinv, v.theta = theta;
    if ((rc = amg_vec(c, v))) return rc;
  } else {
    amg_args<TX, TB, TX> a = amg_base<TX, TB, TX>(c, l, b, x);
    a.op = OP_CHEB_START, a.in = x, a.dinv = L->dinv, a.theta = theta;
    if ((rc = amg_row(c, amg_w(c, l), a))) return rc;
  }
  float *d = L->d, *dn = L->dn;
  if (h->cheb_degree == 1) {
    amg_args<float, TB, TX> v = amg_base<float, TB, TX>(c, l, b, x);
    v.op = EV_CHEB_END, v.x_zero = zero, v.stage = stage;
    return amg_vec(c, v);
  }
  for (int k = 1; k < h->cheb_degree; k++) {
    const double rn = 1 / (2 * sigma - rk);
    amg_args<float, TB, TX> a = amg_base<float, TB, TX>(c, l, b, x);
    a.op = OP_CHEB_STEP, a.in = d, a.d = d, a.dn = dn, a.dinv = L->dinv;
    a.c1 = rn * rk, a.c2 = 2 * rn / delta;
    a.x_zero = zero && k == 1;
    a.last = k == h->cheb_degree - 1;
    if (a.last) a.stage = stage;
    if ((rc = amg_row(c, amg_w(c, l), a))) return rc;
    rk = rn;
    float *t = d;
    d = dn, dn = t;
  }
  return 0;
}

/* The cycle from level l down (cpu_amg.c's vcycle()). */
template <typename TB, typename TX>
int amg_vcycle(const amg_cycle &c, int l, const TB *b, TX *x, int stage) {
  const gkcu_amg *h = c.h;
  const gkcu_amg_lev *L = &h->lev[l];
  int rc;
  if (l == h->nlev - 1) {
    if (h->cinv) {
      int g = amg_grid(c, (long long)h->nc * 32);
      k_amg_dense<TB, TX><<<g, NT, 0, c.ctx->stream>>>(h->nc, h->cinv, b, x, c.st, c.part, stage);
      GKCU__LAUNCHED(c.ctx, "k_amg_dense");
      return 0;
    }
    if ((rc = amg_smooth(c, l, b, x, 1, -1))) return rc;
    for (int k = 0; k < 3; k++)
      if ((rc = amg_smooth(c, l, b, x, 0, k == 2 ? stage : -1))) return rc;
    return 0;
  }
  const gkcu_amg_lev *C = &h->lev[l + 1];
  if ((rc = amg_smooth(c, l, b, x, 1, -1))) return rc;
  {
    amg_args<TX, TB, TX> a = amg_base<TX, TB, TX>(c, l, b, x);
    a.op = OP_RESID, a.in = x;
    if ((rc = amg_row(c, amg_w(c, l), a))) return rc;
  }
  {
    amg_args<float, TB, TX> a = amg_base<float, TB, TX>(c, l, b, x);
    a.op = OP_RESTRICT, a.n = L->R.rows, a.rp = L->R.rp, a.ci = L->R.ci, a.va = L->R.va;
    a.in = L->r, a.out = C->b;
    if ((rc = amg_row(c, L->R.w, a))) return rc;
  }
  if ((rc = amg_vcycle<float, float>(c, l + 1, C->b, C->x, -1))) return rc;
  {
    amg_args<float, TB, TX> a = amg_base<float, TB, TX>(c, l, b, x);
    a.op = OP_PROLONG, a.rp = L->P.rp, a.ci = L->P.ci, a.va = L->P.va, a.in = C->x;
    if ((rc = amg_row(c, L->P.w, a))) return rc;
  }
  return amg_smooth(c, l, b, x, 0, stage);
}

/* z = M^-1 r on the solve's vectors (type V); stage >= 0: r.z reduced into
 * the state with that stage by the cycle's last kernel. */
template <typename V>
int amg_apply(const amg_cycle &c, const V *r, V *z, int stage) {
  return amg_vcycle<V, V>(c, 0, r, z, stage);
}

}  // namespace gks

#endif /* GKCU_AMG_CYCLE_CUH */
