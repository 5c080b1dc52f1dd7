/* metrics.h: gkcd's counters in the Prometheus text exposition format.
 *
 * Most figures are read from the daemon's state when the text is rendered
 * (queue depth, connections, memory, devices); what status does not keep is
 * counted here as requests are answered: requests by method and result
 * code, a latency histogram by method and lane, kernel seconds by method
 * and algo.  Everything here belongs to the event loop thread: the HTTP
 * listener (http.h) asks the loop for the text, never reads it directly.
 *
 * Names follow Prometheus' conventions: a gkcd_ prefix, base units
 * (seconds, bytes), _total on counters.  The "metrics" method returns the
 * same text as GET /metrics.
 */
#ifndef GKCD_METRICS_H
#define GKCD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "budget.h"
#include "devices.h"
#include "proto_methods.h"
#include "scheduler.h"

/* Upper bounds of the latency buckets, in seconds (then +Inf). */
#define METRICS_BUCKETS 18
/* Result codes counted per method: 0 ("ok") and -1 .. -(METRICS_CODES-1). */
#define METRICS_CODES 32
/* Distinct (method, algo) pairs with kernel time; algos are the backends'
 * static names, so a few dozen at most. */
#define METRICS_ALGOS 96

typedef struct {
  uint64_t count;
  double sum;                        /* seconds */
  uint64_t bucket[METRICS_BUCKETS];  /* not cumulative: one per bucket */
} metrics_hist;

typedef struct {
  uint64_t requests[PROTO_M_COUNT][METRICS_CODES];
  metrics_hist lat[PROTO_M_COUNT][SCHED_MAX_LANES];
  struct {
    int method;
    const char *algo; /* a backend's static string */
    double seconds;
  } kernel[METRICS_ALGOS];
  int nkernel;
} gkcd_metrics;

/* The daemon's state as the exposition shows it, gathered by the server
 * when it asks for the text (status.c). */
typedef struct {
  const gkcd_metrics *counted; /* what was counted as requests were answered */
  gkcd_sched *sched;           /* queue depths by lane */
  const gkcd_devices *devs;    /* each device: name, up, served, memory */
  const gkcd_budget *budget;
  const char *backend;         /* the backend's name */
  uint64_t start_ns;           /* CLOCK_MONOTONIC when gkcd started */
  uint64_t connections, in_flight, bad_frames, refused;
  uint64_t region_bytes, max_conn_pinned; /* clients' shared-memory regions */
  uint64_t regions_kept_bytes, regions_kept_hits; /* released ones kept mapped (pinner.h) */
} metrics_view;

struct gkcd_job;

/* A request of method was answered with code (0 or a negative gkc_error). */
void metrics_count(gkcd_metrics *m, int method, int code);
/* A job's reply is going out at now_ns: counts it with its code, observes
 * its time in gkcd (decoded to reply) by method and lane, adds its kernel
 * time by method and algo when it succeeded. */
void metrics_job_done(gkcd_metrics *m, const struct gkcd_job *job, uint64_t now_ns);

/* The whole exposition, malloc'd and NUL-terminated (*len without the NUL);
 * NULL when out of memory.  Loop thread. */
char *metrics_render(const metrics_view *v, size_t *len);

#endif
