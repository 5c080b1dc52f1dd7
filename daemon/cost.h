/* cost.h: how long a job will hold its worker, predicted from its shape.
 *
 * The base prediction is napkin math: floating-point work over the
 * backend's compute rate, bytes touched over its memory bandwidth, bytes
 * crossing to the device over the host link, plus a fixed overhead; the
 * rates are what the backend measured at start-up.  A correction factor per
 * method, algo (auto is one more) and size bucket (powers of two of the base
 * prediction) is a running average of measured over predicted, so the model
 * learns what the napkin misses (small sgemm tiles poorly, spmv depends on
 * the matrix) within a few requests.  Expect ~10-30% error: good enough to
 * tell a 20 us request from a 20 ms one, which is all the lanes need.
 *
 * Each lane (scheduler.h) learns apart: the latency lane may run on a few
 * SMs of its own (green contexts: 8 of 132 on an H100), where a 1024^3
 * sgemm takes 680 us against 90 us on the bulk lane.  With one table for
 * both, that sgemm's prediction swung across --latency-us with every run
 * and 37% of the requests of one client went to the 8 SMs
 * (bench/RESULTS.md, resident sgemm 1024^3).  The scheduler asks for the
 * latency lane's prediction first; a kind of request whose latency-lane
 * prediction has risen past --latency-us goes to the bulk lane and no
 * longer feeds that prediction.  That stale correction fades toward the
 * base with the time since it was last measured (cost_forget: half-life
 * 30 s), so a kind slowed there once (a burst of contention) is tried on
 * the latency lane again within a minute or two, whatever the request
 * rate, and one that is really slow there goes straight back up.
 *
 * Loop thread only.
 */
#ifndef GKCD_COST_H
#define GKCD_COST_H

#include <stdint.h>

#include "job.h"

typedef struct {
  double flops_per_us;  /* float32 multiply-adds count 2 */
  double bytes_per_us;  /* the backend's memory */
  double host_bytes_per_us; /* host memory to the backend's (0: same memory) */
  double fixed_us;      /* launch and hand-off */
} cost_rates;

typedef struct gkcd_cost gkcd_cost;

int cost_create(gkcd_cost **out, const cost_rates *rates);
void cost_destroy(gkcd_cost *c);
/* Predicted worker time of job on job->lane, in microseconds (> 0). */
double cost_predict(gkcd_cost *c, const gkcd_job *job);
/* job came back from job->lane having held its worker measured_us: refine
 * that lane's model. */
void cost_observe(gkcd_cost *c, const gkcd_job *job, double measured_us);
/* job will not run on job->lane (its prediction there was too long): that
 * lane's correction for it, last refreshed at some earlier time (a
 * measurement's job->t_done_ns, or the last call), fades toward the base
 * prediction with a half-life of 30 s in log space, as of now_ns
 * (CLOCK_MONOTONIC, the clock of job->t_done_ns). */
void cost_forget(gkcd_cost *c, const gkcd_job *job, uint64_t now_ns);

#endif
