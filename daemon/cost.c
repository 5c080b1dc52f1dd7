/* cost.c: see cost.h. */
#include "cost.h"

#include <math.h>
#include <stdlib.h>

#include "gkc_errors.h"
#include "proto_methods.h"

#define BUCKETS 24 /* base predictions of 2^0 .. 2^23 us */
#define ALGOS 9    /* auto, then the backend's first eight algos (the rest share the last) */
#define LANES 2    /* bulk, latency (scheduler.h's numbers) */

struct gkcd_cost {
  cost_rates r;
  double corr[LANES][PROTO_M_COUNT][ALGOS][BUCKETS]; /* measured / base, running average */
  uint64_t seen_ns[LANES][PROTO_M_COUNT][ALGOS][BUCKETS]; /* last observed or forgotten */
};

static int lane_key(const gkcd_job *job) { return job->lane == 1 ? 1 : 0; }

/* The algo as the model tells them apart: 0 for auto. */
#define COST_STEP_MAX 2.0794415416798357 /* log(8) */
/* cost_forget: a correction no measurement has refreshed for this long
 * keeps half of its distance from the base prediction (in log space).  An
 * 8x correction (a 1024^3 sgemm on 8 SMs) is back under 2x a minute after
 * its last measurement, so such a kind is tried again about once a minute:
 * rare enough not to matter to anyone's share, soon enough that a burst
 * of contention does not exile a kind of request for good. */
#define COST_HALF_LIFE_NS 30e9

static int algo_key(const gkcd_job *job) {
  int a = job->algo + 1;
  return a < 0 ? 0 : a >= ALGOS ? ALGOS - 1 : a;
}

int cost_create(gkcd_cost **out, const cost_rates *rates) {
  gkcd_cost *c = calloc(1, sizeof *c);
  if (!c) return GKC_EOUT_OF_MEMORY;
  c->r = *rates;
  for (int l = 0; l < LANES; l++)
    for (int m = 0; m < PROTO_M_COUNT; m++)
      for (int a = 0; a < ALGOS; a++)
        for (int b = 0; b < BUCKETS; b++) c->corr[l][m][a][b] = 1.0;
  *out = c;
  return 0;
}

void cost_destroy(gkcd_cost *c) { free(c); }

/* Bytes of a span that must cross from host memory to the backend's. */
static double host_bytes(const gkcd_span *s) { return s->ptr && s->where == SPAN_HOST ? (double)s->bytes : 0; }

/* The napkin: flops, bytes touched, bytes crossing to and from the device. */
static double base_us(const gkcd_cost *c, const gkcd_job *job) {
  double flops = 0, bytes = 0, xfer = 0;
  switch (job->method) {
    case PROTO_M_SGEMM: {
      const __typeof__(job->in.sgemm) *s = &job->in.sgemm;
      double m = s->m, n = s->n, k = s->k;
      flops = 2 * m * n * k;
      bytes = 4 * (m * k + k * n + m * n * (s->c.ptr ? 2 : 1));
      xfer = host_bytes(&s->a) + host_bytes(&s->b) + host_bytes(&s->c) +
             (job->out_kind == OUT_RES || job->out_kind == OUT_RES_NEW ? 0 : 4 * m * n);
      break;
    }
    case PROTO_M_REDUCE:
      flops = (double)job->in.reduce.n;
      bytes = 4.0 * (double)job->in.reduce.n;
      xfer = host_bytes(&job->in.reduce.x);
      break;
    case PROTO_M_SPMV: {
      const __typeof__(job->in.spmv) *s = &job->in.spmv;
      flops = 2.0 * (double)s->nnz;
      bytes = 8.0 * (double)s->nnz + 4.0 * s->rows * (s->y.ptr ? 3 : 2) + 4.0 * s->cols;
      xfer = host_bytes(&s->row_ptr) + host_bytes(&s->col_idx) + host_bytes(&s->values) +
             host_bytes(&s->x) + host_bytes(&s->y);
      break;
    }
    case PROTO_M_DOT:
    case PROTO_M_AXPBY:
      flops = 2.0 * (double)job->in.vec.n;
      bytes = (job->method == PROTO_M_DOT ? 8.0 : 12.0) * (double)job->in.vec.n;
      xfer = host_bytes(&job->in.vec.x) + host_bytes(&job->in.vec.y);
      break;
    case PROTO_M_UPLOAD:
    case PROTO_M_DOWNLOAD:
      bytes = (double)job->in.upload.data.bytes;
      xfer = bytes;
      break;
    case PROTO_M_CSR_UPLOAD:
      bytes = 12.0 * (double)job->in.csr.nnz + 4.0 * job->in.csr.rows;
      xfer = bytes;
      break;
    case PROTO_M_SOLVE: {
      /* Per iteration: an spmv and a handful of vector passes; the count is
       * unknown until it converges, so assume the bound, capped: a solve is
       * long work however quickly it may turn out to converge. */
      const __typeof__(job->in.solve) *s = &job->in.solve;
      double it = (double)(s->max_iter < 10000 ? s->max_iter : 10000);
      flops = it * (2.0 * (double)s->nnz + 12.0 * s->n);
      bytes = it * (8.0 * (double)s->nnz + 40.0 * s->n);
      xfer = host_bytes(&s->b) + host_bytes(&s->x0) + 4.0 * s->n;
      break;
    }
    case PROTO_M_BATCH:
      for (int i = 0; i < job->in.batch.nsteps; i++) {
        const gkcd_step *st = &job->in.batch.steps[i];
        double n = (double)st->n;
        switch (st->op) {
          case BATCH_SGEMM:
            flops += 2.0 * st->m * n * st->k;
            bytes += 4.0 * ((double)st->m * st->k + st->k * n + 2.0 * st->m * n);
            break;
          case BATCH_SPMV:
            flops += 2.0 * (double)st->nnz;
            bytes += 8.0 * (double)st->nnz + 12.0 * st->m;
            break;
          default:
            flops += 2.0 * n;
            bytes += 12.0 * n;
        }
      }
      break;
    default: /* shm_register and whatever has no shape: the fixed cost */
      break;
  }
  double us = c->r.fixed_us + flops / c->r.flops_per_us + bytes / c->r.bytes_per_us;
  if (c->r.host_bytes_per_us > 0) us += xfer / c->r.host_bytes_per_us;
  return us;
}

static int bucket(double us) {
  int b = us < 1 ? 0 : (int)log2(us);
  return b >= BUCKETS ? BUCKETS - 1 : b;
}

double cost_predict(gkcd_cost *c, const gkcd_job *job) {
  double base = base_us(c, job);
  return base * c->corr[lane_key(job)][job->method][algo_key(job)][bucket(base)];
}

void cost_observe(gkcd_cost *c, const gkcd_job *job, double measured_us) {
  if (!(measured_us > 0) || job->err) return;
  double base = base_us(c, job);
  int l = lane_key(job), m = job->method, a = algo_key(job), b = bucket(base);
  double *k = &c->corr[l][m][a][b];
  c->seen_ns[l][m][a][b] = job->t_done_ns;
  /* A quarter of the way to each new measurement, in log space, and each
   * step at most a factor of COST_STEP_MAX: a few requests adapt it, and one
   * outlier (a page fault, a cold cache, a GPU module loaded on a kernel's
   * first launch: 100x the usual time) moves it at most 8^(1/4) = 1.7x, so
   * it cannot push a tiny request out of the latency lane on its own.  A
   * linear average moved it 25x in one step. */
  double step = log(measured_us / base / *k);
  if (step > COST_STEP_MAX) step = COST_STEP_MAX;
  if (step < -COST_STEP_MAX) step = -COST_STEP_MAX;
  *k *= exp(0.25 * step);
}

void cost_forget(gkcd_cost *c, const gkcd_job *job, uint64_t now_ns) {
  int l = lane_key(job), m = job->method, a = algo_key(job), b = bucket(base_us(c, job));
  uint64_t *seen = &c->seen_ns[l][m][a][b];
  if (now_ns <= *seen) return;
  double *k = &c->corr[l][m][a][b];
  *k = exp(log(*k) * exp2(-(double)(now_ns - *seen) / COST_HALF_LIFE_NS));
  *seen = now_ns;
}
