/* test_cost: the cost model's corrections (daemon/cost.c) on their own:
 * they learn a steady ratio of measured to predicted time within a few
 * dozen jobs, in either direction, one outlier cannot throw a tiny
 * request's prediction past the latency lane's threshold, and each lane
 * learns apart. */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "cost.h"
#include "method.h"
#include "proto_methods.h"
#include "test.h"

/* The reduce row's napkin (method_reduce.c): this test links cost.c alone. */
static void reduce_work(const gkcd_job *job, method_work *w) {
  w->flops = (double)job->in.reduce.n;
  w->bytes = 4.0 * (double)job->in.reduce.n;
  w->xfer = job->in.reduce.x.ptr ? (double)job->in.reduce.x.bytes : 0;
}
static const gkcd_method reduce_row = {.id = PROTO_M_REDUCE, .work = reduce_work};

static gkcd_job reduce_job(int64_t n) {
  gkcd_job j;
  memset(&j, 0, sizeof j);
  j.method = PROTO_M_REDUCE;
  j.row = &reduce_row;
  j.algo = GKCD_ALGO_AUTO;
  j.in.reduce.n = n;
  j.in.reduce.x.bytes = (size_t)n * 4;
  return j;
}

int main(void) {
  cost_rates r = {.flops_per_us = 5e7, .bytes_per_us = 3e6, .host_bytes_per_us = 2e4, .fixed_us = 15};
  gkcd_cost *c;
  ASSERT_EQ(cost_create(&c, &r), 0);
  gkcd_job j = reduce_job(1000);
  double base = cost_predict(c, &j);
  ASSERT(base > 0 && base < 200);

  /* One outlier 100x the prediction: at most 8^(1/4) higher afterwards. */
  cost_observe(c, &j, 100 * base);
  double after = cost_predict(c, &j);
  ASSERT(after > base && after <= base * pow(8, 0.25) * (1 + 1e-9));
  ASSERT(after < 200); /* still a latency-lane request (--latency-us 200) */

  /* A steady ratio is learned either way: 3x slower, then 2x faster. */
  for (int i = 0; i < 60; i++) cost_observe(c, &j, 3 * base);
  double p = cost_predict(c, &j);
  ASSERT(fabs(p / (3 * base) - 1) < 0.01);
  for (int i = 0; i < 60; i++) cost_observe(c, &j, 0.5 * base);
  p = cost_predict(c, &j);
  ASSERT(fabs(p / (0.5 * base) - 1) < 0.01);

  /* A failed job or a non-positive time teaches nothing. */
  cost_observe(c, &j, 0);
  cost_observe(c, &j, -5);
  j.err = -1;
  cost_observe(c, &j, 1000 * base);
  j.err = 0;
  ASSERT(cost_predict(c, &j) == p);

  /* Other sizes (buckets) keep their own correction. */
  gkcd_job big = reduce_job((int64_t)1 << 26);
  gkcd_cost *fresh;
  ASSERT_EQ(cost_create(&fresh, &r), 0);
  ASSERT(cost_predict(c, &big) == cost_predict(fresh, &big));
  /* The lanes learn apart: a job 7x slower on the latency lane (its few
   * SMs) raises that lane's prediction only; the bulk lane keeps its own. */
  gkcd_job g = reduce_job(1 << 20);
  g.lane = 1;
  double lat0 = cost_predict(c, &g);
  g.lane = 0;
  double bulk0 = cost_predict(c, &g);
  ASSERT(lat0 == bulk0); /* both start from the napkin */
  for (int i = 0; i < 60; i++) {
    g.lane = 1;
    cost_observe(c, &g, 7 * lat0);
    g.lane = 0;
    cost_observe(c, &g, bulk0);
  }
  g.lane = 1;
  ASSERT(fabs(cost_predict(c, &g) / (7 * lat0) - 1) < 0.01);
  g.lane = 0;
  ASSERT(fabs(cost_predict(c, &g) / bulk0 - 1) < 0.01);
  /* Forgetting: a lane's correction that no measurement refreshes fades
   * toward the base with the time since it was last measured (half-life
   * 30 s, in log space), and touches no other lane. */
  g.lane = 1;
  g.t_done_ns = 1000000000ull; /* its measurement's time */
  cost_observe(c, &g, 7 * lat0);
  double slow = cost_predict(c, &g);
  cost_forget(c, &g, g.t_done_ns); /* no time has passed: unchanged */
  ASSERT(cost_predict(c, &g) == slow);
  double prev = slow;
  for (int i = 1; i <= 30; i++) { /* every 2 s for a minute */
    cost_forget(c, &g, g.t_done_ns + (uint64_t)i * 2000000000ull);
    double now = cost_predict(c, &g);
    ASSERT(now < prev && now > lat0);
    prev = now;
  }
  /* two half-lives: a quarter of the distance is left, in log space */
  ASSERT(fabs(log(prev / lat0) / log(slow / lat0) - 0.25) < 1e-9);
  cost_forget(c, &g, g.t_done_ns + 3600000000000ull); /* an hour later */
  ASSERT(fabs(cost_predict(c, &g) / lat0 - 1) < 1e-6);
  g.lane = 0;
  ASSERT(fabs(cost_predict(c, &g) / bulk0 - 1) < 0.01);
  cost_destroy(fresh);
  cost_destroy(c);
  printf("test_cost: all passed\n");
  return 0;
}
