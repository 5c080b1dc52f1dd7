/* cost.c: see cost.h. */
#include "cost.h"

#include <math.h>
#include <stdlib.h>

#include "gkc_errors.h"
#include "method.h"
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

/* The napkin (the method's row: flops, bytes touched, bytes crossing to
 * and from the device) through the device's rates.  A row without work()
 * (shm_register) costs the fixed cost. */
static double base_us(const gkcd_cost *c, const gkcd_job *job) {
  method_work w = {0, 0, 0};
  if (job->row && job->row->work) job->row->work(job, &w);
  double flops = w.flops, bytes = w.bytes, xfer = w.xfer;
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
