/* cpu_reduce.c: sum, min and max of a float array, over OpenMP threads. */
#include "cpu_kernels.h"

#include <math.h>
#include <omp.h>

enum {
  /* Below this many elements per thread, waking a thread costs more than
   * the share of memory it would stream; so n < 64K runs on one thread. */
  REDUCE_MIN_PER_THREAD = 32768,
  /* Bounds the partial results kept on the stack; a memory-bound pass has
   * stopped scaling long before this. */
  REDUCE_MAX_THREADS = 256,
  /* Independent accumulators per loop: they break the add/compare latency
   * chain and form fixed-width blocks that GCC vectorises at -O2 without
   * -ffast-math (which would let it reorder the sum on its own).  GCC keeps
   * min/max's acc[LANES] in registers; sum_range spells its eight out. */
  LANES = 8
};

static double sum_range(const float *x, int64_t n) {
  /* Spelled out rather than a double acc[LANES]: GCC 12 -O2 keeps that
   * array in memory, and the store-to-load round trip made the loop 3x
   * slower than memory. */
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 += x[i], a1 += x[i + 1], a2 += x[i + 2], a3 += x[i + 3];
    a4 += x[i + 4], a5 += x[i + 5], a6 += x[i + 6], a7 += x[i + 7];
  }
  for (; i < n; i++) a0 += x[i];
  return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

/* min and max start from the identity (+inf / -inf) and keep it when the
 * comparison with a NaN is false, so NaNs are skipped without a branch;
 * cpu_reduce tells an all-NaN input from one of infinities afterwards. */
static float min_range(const float *x, int64_t n) {
  float acc[LANES];
  for (int l = 0; l < LANES; l++) acc[l] = INFINITY;
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) acc[l] = x[i + l] < acc[l] ? x[i + l] : acc[l];
  for (; i < n; i++) acc[0] = x[i] < acc[0] ? x[i] : acc[0];
  float m = acc[0];
  for (int l = 1; l < LANES; l++) m = acc[l] < m ? acc[l] : m;
  return m;
}

static float max_range(const float *x, int64_t n) {
  float acc[LANES];
  for (int l = 0; l < LANES; l++) acc[l] = -INFINITY;
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  for (; i < n; i++) acc[0] = x[i] > acc[0] ? x[i] : acc[0];
  float m = acc[0];
  for (int l = 1; l < LANES; l++) m = acc[l] > m ? acc[l] : m;
  return m;
}

static double reduce_range(const float *x, int64_t n, int op) {
  switch (op) {
  case CPU_SUM: return sum_range(x, n);
  case CPU_MIN: return min_range(x, n);
  case CPU_MAX: return max_range(x, n);
  default: return NAN;
  }
}

/* Partials combine in thread order, so a sum is reproducible for a given
 * thread count.  NaN-free partials (min/max) combine as plain comparisons. */
static double combine(const double *part, int count, int op) {
  double r = part[0];
  for (int t = 1; t < count; t++) {
    if (op == CPU_SUM) r += part[t];
    else if (op == CPU_MIN) r = part[t] < r ? part[t] : r;
    else r = part[t] > r ? part[t] : r;
  }
  return r;
}

static int reduce_threads(int64_t n, int nthreads) {
  int64_t t = nthreads > 0 ? nthreads : omp_get_max_threads();
  int64_t most = n / REDUCE_MIN_PER_THREAD;
  if (t > most) t = most;
  if (t > REDUCE_MAX_THREADS) t = REDUCE_MAX_THREADS;
  return t < 1 ? 1 : (int)t;
}

/* min/max only reach their identity when no element is finite.  That is
 * rare, so a second pass settles it rather than the hot loop tracking it:
 * an infinity of that sign present -> it is the answer; else all are NaN. */
static double settle_identity(const float *x, int64_t n, double r) {
  for (int64_t i = 0; i < n; i++)
    if (x[i] == r) return r;
  return NAN;
}

double cpu_reduce(const float *x, int64_t n, int op, int nthreads) {
  double part[REDUCE_MAX_THREADS];
  int used = 1;
  int t = reduce_threads(n, nthreads);
  if (t == 1) {
    part[0] = reduce_range(x, n, op);
  } else {
#pragma omp parallel num_threads(t)
    {
      /* The runtime may grant fewer threads than asked: split by the count
       * actually running. */
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      int64_t chunk = (n + nt - 1) / nt;
      int64_t lo = id * chunk < n ? id * chunk : n;
      int64_t hi = lo + chunk < n ? lo + chunk : n;
      part[id] = reduce_range(x + lo, hi - lo, op);
      if (id == 0) used = nt;
    }
  }
  double r = combine(part, used, op);
  if ((op == CPU_MIN && r == INFINITY) || (op == CPU_MAX && r == -INFINITY))
    return settle_identity(x, n, r);
  return r;
}
