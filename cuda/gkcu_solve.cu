/* gkcu_solve.cu: the host side of gkcu_solve (see gkcu_solve.h): the
 * workspace, the start (x0, 1/diag, ||b||, r = b - A x0), the loop as a CUDA
 * Graph (a conditional while-node, else an unrolled graph, else plain
 * launches) with the state looked at between launches, and the end (x to
 * float32 and its residual).  The kernels are in gkcu_solve_kern.cuh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "gkcu_internal.h"
#include "gkcu_solve.h"
#include "gkcu_solve_kern.cuh"
#include "gkcu_width.h"
#include "gkcu_amg_cycle.cuh"

using namespace gks;

namespace {
/* --- host side --------------------------------------------------------------------- */

enum { HOW_WHILE = 0, HOW_UNROLLED, HOW_STREAM };
/* A float64 solve whose x misses the tolerance by its true residual starts
 * again from that x at most this often (each restart costs a residual). */
constexpr int MAX_RESTARTS = 4;
const char *const how_names[] = {"while", "unrolled", "stream"};

/* The device vectors of a solve (V: double, or float with precision fp32),
 * carved from the workspace in this order. */
template <typename V>
struct vecs {
  V *x, *r, *p, *q, *z, *dinv; /* CG/PCG: q = Ap; BiCGSTAB: q = v, z = s */
  V *rhat, *t;
  V *ph, *sh; /* BiCGSTAB preconditioned: M^-1 p, M^-1 s */
  double *hist;
  state *st;
  double *part;
};

/* The vectors of a method (PCG: CG with Jacobi) and preconditioner, in
 * their order: CG: x r p q, z with one, dinv with Jacobi; BiCGSTAB: x r p
 * v s rhat t (v in q, s in z), ph sh with one, dinv with Jacobi; each vb
 * bytes from base.  Returns how many; base NULL: only that. */
template <typename V>
size_t layout(int method, int pc, vecs<V> *v, char *base, size_t vb) {
  V **o[10];
  size_t k = 0;
  o[k++] = &v->x, o[k++] = &v->r, o[k++] = &v->p, o[k++] = &v->q;
  if (method == GKCU_SOLVE_BICGSTAB) {
    o[k++] = &v->z, o[k++] = &v->rhat, o[k++] = &v->t;
    if (pc != GKCU_PRECOND_NONE) o[k++] = &v->ph, o[k++] = &v->sh;
  } else if (pc != GKCU_PRECOND_NONE) {
    o[k++] = &v->z;
  }
  if (pc == GKCU_PRECOND_JACOBI) o[k++] = &v->dinv;
  if (base)
    for (size_t i = 0; i < k; i++) *o[i] = (V *)(base + i * vb);
  return k;
}

size_t nvec(int method, int pc) {
  vecs<double> v;
  return layout<double>(method, pc, &v, nullptr, 0);
}

inline size_t up256(size_t b) { return (b + 255) & ~(size_t)255; }

template <typename V>
struct solver {
  gkcu_ctx *ctx;
  const gkcu_solve_args *a;
  vecs<V> v;
  int w;              /* threads per row */
  int g_spmv, g_vec;  /* grid sizes */
  loop_cond cond;     /* set while the "while" body is captured */
  amg_cycle amg;      /* precond amg: the cycle's context */
};

template <typename TI, typename V>
int launch_spmv_t(solver<V> *S, const TI *in, V *out, const void *b, const V *a0, const V *a1,
                  int nd, int stage) {
  /* b, when given, is the request's: float64 with io_f64, else float32 */
  const float *b32 = b && !S->a->io_f64 ? (const float *)b : nullptr;
  const double *b64 = b && S->a->io_f64 ? (const double *)b : nullptr;
  const gkcu_solve_args *a = S->a;
  cudaStream_t str = S->ctx->stream;
  /* A's values: float32, or float64 (csr_upload dtype f64), each summed in double */
#define GKCU__SPMV_W(W)                                                                           \
  case W:                                                                                         \
    if (a->values_f64)                                                                            \
      k_spmv<W, TI, V, double><<<S->g_spmv, NT, 0, str>>>(a->n, a->row_ptr, a->col_idx,             \
          (const double *)a->values, in, out, b32, b64, a0, a1, nd, S->v.st, S->v.part, stage);     \
    else                                                                                          \
      k_spmv<W, TI, V, float><<<S->g_spmv, NT, 0, str>>>(a->n, a->row_ptr, a->col_idx,              \
          (const float *)a->values, in, out, b32, b64, a0, a1, nd, S->v.st, S->v.part, stage);      \
    break;
  switch (S->w) {
    GKCU__SPMV_W(1)
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
template <typename V>
int enqueue_iteration(solver<V> *S) {
  const gkcu_solve_args *a = S->a;
  vecs<V> *v = &S->v;
  cudaStream_t str = S->ctx->stream;
  int n = a->n, g = S->g_vec, rc;
  const int amg = a->precond == GKCU_PRECOND_AMG;
  if (a->method != GKCU_SOLVE_BICGSTAB) {
    const int pcg = a->method == GKCU_SOLVE_PCG;
    if ((rc = launch_spmv_t<V, V>(S, v->p, v->q, nullptr, v->p, nullptr, 1, S_CG_PQ))) return rc;
    k_cg_update<V><<<g, NT, 0, str>>>(n, v->r, v->q, pcg ? v->z : nullptr, pcg ? v->dinv : nullptr,
                                   v->st, v->part, amg);
    GKCU__LAUNCHED(S->ctx, "k_cg_update");
    /* z = M^-1 r, its last kernel reducing r.z into beta (S_CG_RZ) */
    if (amg && (rc = amg_apply<V>(S->amg, v->r, v->z, S_CG_RZ))) return rc;
    k_cg_p<V><<<g, NT, 0, str>>>(n, v->x, v->p, pcg || amg ? v->z : v->r, v->st, S->cond);
    GKCU__LAUNCHED(S->ctx, "k_cg_p");
    return 0;
  }
  /* right preconditioned: ph = M^-1 p and sh = M^-1 s (Jacobi's in the
   * kernels that write p and s, AMG's a cycle after each) */
  const int pre = a->precond != GKCU_PRECOND_NONE;
  const V *jd = a->precond == GKCU_PRECOND_JACOBI ? v->dinv : nullptr;
  V *vv = v->q, *s = v->z, *ph = pre ? v->ph : v->p, *sh = pre ? v->sh : s;
  k_bi_p<V><<<g, NT, 0, str>>>(n, v->p, v->r, vv, jd, v->ph, v->st);
  GKCU__LAUNCHED(S->ctx, "k_bi_p");
  if (amg && (rc = amg_apply<V>(S->amg, v->p, v->ph, -1))) return rc;
  if ((rc = launch_spmv_t<V, V>(S, ph, vv, nullptr, v->rhat, nullptr, 2, S_BI_V))) return rc;
  k_bi_s<V><<<g, NT, 0, str>>>(n, s, v->r, vv, jd, v->sh, v->st, v->part);
  GKCU__LAUNCHED(S->ctx, "k_bi_s");
  if (amg && (rc = amg_apply<V>(S->amg, s, v->sh, -1))) return rc;
  if ((rc = launch_spmv_t<V, V>(S, sh, v->t, nullptr, nullptr, s, 2, S_BI_T))) return rc;
  k_bi_update<V><<<g, NT, 0, str>>>(n, v->x, v->r, ph, s, sh, v->t, v->rhat, v->st, v->part,
                                    S->cond);
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

/* The driver calls a conditional node needs.  The runtime's
 * cudaGraphConditionalHandleCreate and cudaGraphAddNode take the calling
 * thread's current context (the primary one), while gkcd's lanes launch on
 * green contexts' streams: such a graph does not instantiate ("all kernels
 * must belong to the same context").  The driver's calls take the context,
 * so the node is made in the stream's own.  Looked up once, through the
 * runtime (no link to libcuda). */
struct cond_driver {
  PFN_cuStreamGetCtx_v9020 stream_ctx;
  PFN_cuGraphConditionalHandleCreate_v12030 handle_create;
  PFN_cuGraphAddNode_v12030 add_node;
  bool ok;
};

template <typename F>
bool driver_fn(const char *sym, int version, F *fn) {
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  void *p = nullptr;
  if (cudaGetDriverEntryPointByVersion(sym, &p, (unsigned)version, cudaEnableDefault, &q) !=
          cudaSuccess ||
      q != cudaDriverEntryPointSuccess || !p) {
    (void)cudaGetLastError();
    return false;
  }
  *fn = (F)p;
  return true;
}

const cond_driver &the_cond_driver() {
  static const cond_driver d = [] {
    cond_driver x = {};
    int drv = 0;
    x.ok = cudaDriverGetVersion(&drv) == cudaSuccess && drv >= 12040 &&
           driver_fn("cuStreamGetCtx", 9020, &x.stream_ctx) &&
           driver_fn("cuGraphConditionalHandleCreate", 12030, &x.handle_create) &&
           driver_fn("cuGraphAddNode", 12030, &x.add_node);
    return x;
  }();
  return d;
}

/* The "while" graph: one conditional while-node whose body is an iteration;
 * the iteration's last kernel sets the condition (S->cond).  0 with *graph
 * kept for the caller to destroy after *exec (the executable graph's
 * conditional handle belongs to it), or nonzero when this driver cannot
 * (the error is cleared: the caller falls back or reports). */
template <typename V>
int build_while(solver<V> *S, cudaGraphExec_t *exec, cudaGraph_t *graph) {
  const cond_driver &d = the_cond_driver();
  if (!d.ok) return 1;
  cudaStream_t str = S->ctx->stream;
  cudaGraph_t g = nullptr;
  CUcontext cx = nullptr;
  CUgraphConditionalHandle h = 0;
  CUgraphNodeParams np;
  CUgraphNode node;
  int ok = 0;
  memset(&np, 0, sizeof np);
  if (d.stream_ctx((CUstream)str, &cx) != CUDA_SUCCESS) goto out;
  if (cudaGraphCreate(&g, 0) != cudaSuccess) goto out;
  if (d.handle_create(&h, (CUgraph)g, cx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT) != CUDA_SUCCESS) goto out;
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = h;
  np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  np.conditional.size = 1;
  np.conditional.ctx = cx;
  if (d.add_node(&node, (CUgraph)g, nullptr, nullptr, 0, &np) != CUDA_SUCCESS) goto out;
  if (cudaStreamBeginCaptureToGraph(str, (cudaGraph_t)np.conditional.phGraph_out[0], nullptr,
                                    nullptr, 0, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
    goto out;
  S->cond.h = h, S->cond.on = 1;
  {
    int bad = enqueue_iteration(S);
    S->cond.on = 0;
    if (bad) {
      abandon_capture(str, false);
      goto out;
    }
  }
  {
    cudaGraph_t body = nullptr;
    if (cudaStreamEndCapture(str, &body) != cudaSuccess) goto out;
  }
  ok = cudaGraphInstantiate(exec, g, 0) == cudaSuccess;
out:
  if (ok) *graph = g;
  else if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  return ok ? 0 : 1;
}

/* The "unrolled" graph: UNROLL_ITERS iterations captured from the stream. */
template <typename V>
int build_unrolled(solver<V> *S, cudaGraphExec_t *exec) {
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
template <typename V>
int enqueue_chunk(solver<V> *S, int how, cudaGraphExec_t exec, long long chunk) {
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
template <typename V>
int run_loop(solver<V> *S, state *hs, cudaEvent_t ev[2], gkcu_solve_result *res, int *stopped) {
  gkcu_ctx *ctx = S->ctx;
  cudaStream_t str = ctx->stream;
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t graph = nullptr; /* the while graph, alive as long as exec */
  int how = forced_how(), rc = 0;
  /* "while" only when asked for: with the condition set by the iteration's
   * last kernel and the node made in the stream's (green) context it runs
   * everywhere, but it was still slower on every problem (H200,
   * bench/RESULTS.md: 1138_bus 67k against 82k it/s, the 2048^2 Laplacian
   * 6,784 against 6,946): the device-side relaunch of the body costs more
   * than 8 host-launched iterations do. */
  if (how == HOW_WHILE) {
    if (build_while(S, &exec, &graph))
      return gkcu__fail(ctx, GKC_EDEVICE_ERROR, "solve: GKCU_SOLVE_GRAPH=while, but this driver"
                        " or runtime cannot build a conditional graph");
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
  if (graph) (void)cudaGraphDestroy(graph);
  return rc;
}

/* PCG is CG with Jacobi; CG with Jacobi runs as PCG (its fused kernels). */
int eff_precond(int method, int precond) { return method == GKCU_SOLVE_PCG ? GKCU_PRECOND_JACOBI : precond; }
int eff_method(int method, int precond) {
  return method == GKCU_SOLVE_CG && precond == GKCU_PRECOND_JACOBI ? GKCU_SOLVE_PCG : method;
}

}  // namespace

extern "C" size_t gkcu_solve_work_bytes(int method, int precond, int32_t n, int64_t max_iter,
                                        int with_history, int fp32) {
  if (n < 1 || method < 0 || method > GKCU_SOLVE_BICGSTAB || max_iter < 1 ||
      precond < GKCU_PRECOND_NONE || precond > GKCU_PRECOND_AMG)
    return 0;
  const int pc = eff_precond(method, precond);
  method = eff_method(method, pc);
  size_t vb = up256((size_t)n * (fp32 ? sizeof(float) : sizeof(double)));
  size_t total = nvec(method, pc) * vb + up256(sizeof(state)) + up256(2 * MAX_BLOCKS * sizeof(double));
  if (with_history) {
    if ((uint64_t)max_iter > (SIZE_MAX - total - 256) / sizeof(double)) return 0;
    total += up256((size_t)max_iter * sizeof(double));
  }
  return total;
}

namespace {

/* The solve with vectors of type V (args checked). */
template <typename V>
int solve_t(gkcu_ctx *ctx, const gkcu_solve_args *a, gkcu_solve_result *res) {
  solver<V> S = {};
  S.ctx = ctx;
  S.a = a;
  const int n = a->n;
  const size_t vb = up256((size_t)n * sizeof(V));
  char *w = (char *)a->work;
  w += layout<V>(a->method, a->precond, &S.v, w, vb) * vb;
  S.v.st = (state *)w;
  w += up256(sizeof(state));
  S.v.part = (double *)w;
  w += up256(2 * MAX_BLOCKS * sizeof(double));
  S.v.hist = a->history ? (double *)w : nullptr;

  S.w = gkcu__row_width(ctx->sm_count, n, a->nnz, a->max_row > 0 ? a->max_row : -1);
  /* the cycle's level 0: the solve's float32 values, or (a float64
   * matrix) the rounded copy its hierarchy keeps (gkcu_solve checked it) */
  const float *va0 = a->values_f64 ? (a->amg ? gkcu_amg_level0_values(a->amg) : nullptr)
                                   : (const float *)a->values;
  S.amg = {ctx, a->amg, a->row_ptr, a->col_idx, va0, S.w, S.v.st, S.v.part,
           ctx->sm_count > 0 ? ctx->sm_count : 1};
  int sms = ctx->sm_count > 0 ? ctx->sm_count : 1;
  int occ_v = 0, occ_s = 0;
  void (*kv)(int, V *, const V *, V *, const V *, state *, double *, int) = k_cg_update<V>;
  void (*ks)(int, const int *, const int *, const float *, const V *, V *, const float *,
             const double *, const V *, const V *, int, state *, double *, int) = k_spmv<8, V, V, float>;
  GKCU__TRY_CUDA(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_v, kv, NT, 0));
  GKCU__TRY_CUDA(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_s, ks, NT, 0));
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
  vecs<V> *v = &S.v;
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
  /* pinned once per context (cudaFreeHost would wait for the whole device) */
  if (!ctx->solve_host) TRY(cudaMallocHost(&ctx->solve_host, 2 * sizeof(state)));
  hs = (state *)ctx->solve_host;
  TRY(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
  TRY(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));

  /* The start: the state, x, (PCG) 1/diag, ||b||, r = b - A x, ||r||.
   * Again from the x reached (restart > 0) when a float64 x converged by
   * the recurrence's residual but not by its own (below). */
  for (int restart = 0;; restart++) {
    long long it0 = restart ? hs[0].it : 0;
    memset(&hs[0], 0, sizeof(state));
    hs[0].rtol = a->rtol, hs[0].atol = a->atol, hs[0].max_iter = a->max_iter;
    hs[0].hist = v->hist, hs[0].reason = -1, hs[0].bad_row = 0x7fffffff;
    hs[0].it = it0; /* iterations go on counting, and the history on filling */
    TRY(cudaMemcpyAsync(v->st, &hs[0], sizeof(state), cudaMemcpyHostToDevice, str));
    if (!restart) {
      if (a->io_f64) k_init_x<double, V><<<g, NT, 0, str>>>(n, (const double *)a->x0, v->x);
      else k_init_x<float, V><<<g, NT, 0, str>>>(n, (const float *)a->x0, v->x);
      LAUNCHED("k_init_x");
      if (a->precond == GKCU_PRECOND_JACOBI) {
        if (a->values_f64)
          k_dinv<V, double><<<g, NT, 0, str>>>(n, a->row_ptr, a->col_idx, (const double *)a->values,
                                               v->dinv, v->st);
        else
          k_dinv<V, float><<<g, NT, 0, str>>>(n, a->row_ptr, a->col_idx, (const float *)a->values,
                                              v->dinv, v->st);
        LAUNCHED("k_dinv");
      }
    }
    if (a->io_f64) k_norm2f<double><<<g, NT, 0, str>>>(n, (const double *)a->b, v->st, v->part);
    else k_norm2f<float><<<g, NT, 0, str>>>(n, (const float *)a->b, v->st, v->part);
    LAUNCHED("k_norm2f");
    if ((rc = launch_spmv_t<V, V>(&S, v->x, v->r, a->b, nullptr, nullptr, 1, S_RES))) goto out;
    TRY(cudaMemcpyAsync(&hs[1], v->st, sizeof(state), cudaMemcpyDeviceToHost, str));
    TRY(cudaStreamSynchronize(str));
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
      TRY(cudaMemsetAsync(v->x, 0, (size_t)n * sizeof(V), str));
      why = GKCU_SOLVE_CONVERGED;
    } else if (!isfinite(rn)) {
      why = GKCU_SOLVE_NON_FINITE;
    } else if (rn <= s0.tol) {
      why = GKCU_SOLVE_CONVERGED;
    } else if (it0 >= a->max_iter) {
      why = GKCU_SOLVE_MAX_ITER;
    }
    if (why < 0) {
      /* the method's start, then the loop */
      if (a->method == GKCU_SOLVE_CG && a->precond != GKCU_PRECOND_AMG) {
        TRY(cudaMemcpyAsync(v->p, v->r, (size_t)n * sizeof(V), cudaMemcpyDeviceToDevice, str));
        s0.rz = s0.rr;
      } else if (a->method == GKCU_SOLVE_BICGSTAB) {
        TRY(cudaMemcpyAsync(v->rhat, v->r, (size_t)n * sizeof(V), cudaMemcpyDeviceToDevice,
                            str));
        s0.rhat_n = rn, s0.rho = s0.rr, s0.rho_prev = 1, s0.alpha = 1, s0.omega = 1;
      }
      hs[0] = s0;
      TRY(cudaMemcpyAsync(v->st, &hs[0], sizeof(state), cudaMemcpyHostToDevice, str));
      if (a->method == GKCU_SOLVE_PCG) {
        k_pcg_init<V><<<g, NT, 0, str>>>(n, v->r, v->dinv, v->z, v->p, v->st, v->part);
        LAUNCHED("k_pcg_init");
      } else if (a->method == GKCU_SOLVE_CG && a->precond == GKCU_PRECOND_AMG) {
        /* z = M^-1 r with rz = r.z (S_PCG_INIT), p = z */
        if ((rc = amg_apply<V>(S.amg, v->r, v->z, S_PCG_INIT))) goto out;
        TRY(cudaMemcpyAsync(v->p, v->z, (size_t)n * sizeof(V), cudaMemcpyDeviceToDevice, str));
      }
      /* hs[0] is read by the copy above: wait before the loop reuses it */
      TRY(cudaStreamSynchronize(str));
      double loop_before = res->loop_us;
      if ((rc = run_loop(&S, hs, ev, res, &stopped))) goto out;
      res->loop_us += loop_before;
    } else {
      res->reason = why;
    }
    /* x in the request's type, and the residual of exactly that x */
    if (a->io_f64) {
      k_store_x<V, double><<<g, NT, 0, str>>>(n, v->x, (double *)a->x);
      LAUNCHED("k_store_x");
      if ((rc = launch_spmv_t<double, V>(&S, (const double *)a->x, (V *)nullptr, a->b, nullptr, nullptr, 1,
                                         S_FINAL)))
        goto out;
    } else {
      k_store_x<V, float><<<g, NT, 0, str>>>(n, v->x, (float *)a->x);
      LAUNCHED("k_store_x");
      if ((rc = launch_spmv_t<float, V>(&S, (const float *)a->x, (V *)nullptr, a->b, nullptr, nullptr, 1,
                                        S_FINAL)))
        goto out;
    }
    TRY(cudaMemcpyAsync(&hs[0], v->st, sizeof(state), cudaMemcpyDeviceToHost, str));
    TRY(cudaStreamSynchronize(str));
    const state *sf = &hs[0];
    if (why < 0) {
      res->iterations = sf->it;
      /* the device's own reason when it stopped, else the poll's */
      if (sf->reason >= 0) res->reason = sf->reason;
      else if (stopped) res->reason = stopped;
      else rc = gkcu__fail(ctx, GKC_EINTERNAL, "solve: the loop ended with the solve running");
    } else if (restart) {
      res->iterations = it0;
    }
    res->residual = s0.bn == 0 ? 0 : sqrt(sf->final_rr) / s0.bn;
    if (rc) goto out;
    /* A float64 x is held to the tolerance itself, as cpu_solve.h's: when
     * the recurrence's residual has drifted below the true one, the
     * iteration starts again from the true residual of the x reached (at
     * most MAX_RESTARTS times, within max_iter).  A float32 x is rounded
     * after the solve and keeps the recurrence's verdict. */
    if (!(a->io_f64 && !a->fp32 && res->reason == GKCU_SOLVE_CONVERGED && s0.bn > 0 &&
          sqrt(sf->final_rr) > s0.tol && res->iterations < a->max_iter && restart < MAX_RESTARTS))
      break;
    hs[0].it = res->iterations;
  }
  if (a->history && res->iterations > 0)
    TRY(cudaMemcpy(a->history, v->hist, (size_t)res->iterations * sizeof(double),
                   cudaMemcpyDeviceToHost));
out:
  if (rc) (void)cudaStreamSynchronize(str); /* nothing may still use the workspace */
  if (ev[0]) cudaEventDestroy(ev[0]);
  if (ev[1]) cudaEventDestroy(ev[1]);
#undef LAUNCHED
#undef TRY
  return rc;
}

}  // namespace

extern "C" int gkcu_solve(gkcu_ctx *ctx, const gkcu_solve_args *a, gkcu_solve_result *res) {
  GKCU__CHECK_ARG(ctx, a && res && a->n >= 1 && a->nnz >= 0 && a->row_ptr && a->b && a->x);
  GKCU__CHECK_ARG(ctx, a->method >= 0 && a->method <= GKCU_SOLVE_BICGSTAB && a->max_iter >= 1);
  GKCU__CHECK_ARG(ctx, a->nnz == 0 || (a->col_idx && a->values));
  GKCU__CHECK_ARG(ctx, a->precond >= GKCU_PRECOND_NONE && a->precond <= GKCU_PRECOND_AMG);
  size_t need = gkcu_solve_work_bytes(a->method, a->precond, a->n, a->max_iter,
                                      a->history != nullptr, a->fp32);
  GKCU__CHECK_ARG(ctx, need > 0 && a->work && a->work_bytes >= need &&
                           ((uintptr_t)a->work & 255) == 0);
  /* what runs: PCG is CG with Jacobi, and CG with Jacobi runs as PCG */
  gkcu_solve_args e = *a;
  e.precond = eff_precond(a->method, a->precond);
  e.method = eff_method(a->method, e.precond);
  if (e.precond == GKCU_PRECOND_AMG)
    GKCU__CHECK_ARG(ctx, a->amg && gkcu_amg_rows(a->amg) == a->n &&
                             (!a->values_f64 || gkcu_amg_level0_values(a->amg)));
  memset(res, 0, sizeof *res);
  res->bad_row = -1;
  res->how = "none";
  return a->fp32 ? solve_t<float>(ctx, &e, res) : solve_t<double>(ctx, &e, res);
}
