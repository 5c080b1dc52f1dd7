/* scheduler.h: every decision about when a request runs, and where.
 *
 * A validated job enters here and leaves for a worker.  On the way it
 * passes, in order:
 *
 *  1. its connection's reply allowance: a job whose result would take the
 *     connection's unwritten replies plus the predicted replies of its
 *     admitted jobs past --max-conn-reply-bytes is held (one per client;
 *     the connection is not read meanwhile) until the client reads;
 *  2. the memory budget: its result is reserved before it may queue; jobs
 *     that do not fit wait in one FIFO (so a large request is not starved
 *     by small ones);
 *  3. its lane, from the cost model's prediction (cost.h): jobs predicted
 *     under --latency-us go to the latency lane, all others to the bulk lane;
 *  4. fair queuing: each client (a connection) has a queue per lane, and a
 *     lane's free slot, on any device, takes the head of the client that has received the
 *     least service, counted in predicted cost over the client's weight and
 *     corrected by the measured time when a job comes back (a virtual token
 *     counter, as VTC does for LLM serving), up to twice the prediction
 *     and 50 us more: a stall is not the client's service (scheduler.c,
 *     sched_finished).  A client that becomes busy
 *     starts level with the least-served busy client, so idling earns no
 *     credit and a deep queue delays a newcomer by about one job per lane.
 *  5. placement (place.h; sched_place.h, with the devices' slots): a new
 *     object without `device` is bound at submission to its connection's
 *     home device (so pipelined uploads land together, in arrival
 *     order); the job chosen goes to the device, among those that hold its
 *     operands and have a free slot in its lane, where it would finish
 *     first; a long sgemm or reduce is split across the free
 *     devices when that pays (split.h), a replicated upload goes to all.
 *     The least-served client whose head job can start somewhere goes
 *     first, so a job waiting for a busy device does not hold up others.
 *
 * A queued job that reaches its deadline_ms is answered deadline_exceeded,
 * one that has waited --queue-wait is answered busy, and the queued jobs of
 * a client that disconnects are dropped; none of them ever runs.  While more
 * than --max-queue jobs wait (or --budget-queue wait for memory), new
 * requests are left unread in their sockets: clients simply wait.
 *
 * Work moves as soon as it can, not once per loop iteration: a job is
 * dispatched at submission when its lane has a free slot, and a finished
 * job's slot goes at once to what is queued (sched_finished).  Refusals made at submission are returned to the
 * caller; everything the scheduler finishes on its own (expiry,
 * cancellation, a device lost) reaches the done hook from sched_pump,
 * never from under a caller: the pass hook asks for that pump.  Loop
 * thread only.
 */
#ifndef GKCD_SCHED_H
#define GKCD_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "budget.h"
#include "config.h"
#include "cost.h"
#include "job.h"
#include "pool.h"

#define SCHED_MAX_LANES POOL_MAX_LANES
enum { LANE_BULK = 0, LANE_LATENCY = 1 };

typedef struct gkcd_sched gkcd_sched;

/* A client's place in the scheduler: embedded in its connection. */
typedef struct sched_client {
  gkcd_job *head[SCHED_MAX_LANES], *tail[SCHED_MAX_LANES];
  size_t queued[SCHED_MAX_LANES];
  double vtime[SCHED_MAX_LANES];  /* service received, in predicted us / weight */
  struct sched_client *next_active[SCHED_MAX_LANES], *prev_active[SCHED_MAX_LANES];
  int active[SCHED_MAX_LANES];    /* on the lane's list of clients with queued jobs */
  double weight;                  /* --weights, by the client's user; default 1 */
  gkcd_job *held;                 /* waiting for the client to read (step 1) */
  struct sched_client *next_held;
  int on_held_list;
  const size_t *unwritten;        /* its unwritten reply bytes (its connection's count) */
  int gate_shut;                  /* what the gate hook last said: no new requests */
  size_t *expected;               /* result bytes of its admitted jobs (its connection's count) */
  size_t mem_waiting;             /* its jobs in the memory FIFO */
  size_t running;                 /* dispatched and not yet back */
  gkcd_job *running_list;         /* those jobs, so a disconnect can cancel them */
  uint64_t served;                /* jobs finished */
  double served_us;               /* their measured cost */
  uint64_t id;
  int uid;
  int home;                       /* the device its new objects go to (place.h), -1: none yet */
} sched_client;

/* Called from sched_pump for each job the scheduler finished itself
 * (job->err set: deadline_exceeded, busy, cancelled). */
typedef void (*sched_done_cb)(gkcd_job *job, void *arg);

/* The gate: the scheduler's say on whether new requests are taken, told
 * when it changes (never asked for on every request): c != NULL, c's own
 * (shut while one of its requests is held, step 1 above); c == NULL, every
 * client's (shut while the queues are full).  open: 1 opened, 0 shut.  It
 * is called from inside sched_submit, the pump and sched_drop_client: it
 * must only record the change, not submit. */
typedef void (*sched_gate_cb)(sched_client *c, int open, void *arg);

/* The pass hook: the scheduler has something for the next sched_pump (jobs
 * it finished itself to answer, a held client that read, jobs waiting for
 * memory that may come back from elsewhere).  It must only record that a
 * pump is due, and have sched_pump run soon, on the loop, until
 * sched_pending says nothing is left. */
typedef void (*sched_pass_cb)(void *arg);

/* Per-lane figures for status. */
typedef struct {
  int workers;
  size_t queued, running;
  uint64_t served;
  double wait_p50_us, wait_p99_us; /* queue wait of recent jobs */
} sched_lane_stats;

typedef struct gkcd_devices gkcd_devices;

/* workers: per lane, on each device (devs). */
int sched_create(gkcd_sched **out, uv_loop_t *loop, const gkcd_config *cfg, gkcd_budget *budget,
                 gkcd_pool *pool, gkcd_devices *devs, int nlanes, const int *workers,
                 sched_done_cb done, void *arg);
void sched_destroy(gkcd_sched *s);

/* The gate and pass hooks (arg: sched_create's), before the first client. */
void sched_on_gate(gkcd_sched *s, sched_gate_cb gate, sched_pass_cb pass);

/* unwritten: the client's count of reply bytes not yet written, kept by
 * its transport, which the scheduler reads (and is told through
 * sched_client_drained when it falls while c is held); expected: where the
 * scheduler keeps the result bytes of c's admitted jobs, for the transport
 * to weigh beside it. */
void sched_client_init(gkcd_sched *s, sched_client *c, uint64_t id, int uid, const size_t *unwritten,
                       size_t *expected);

/* Takes a validated job (job->client and its arguments set).  0: the scheduler owns
 * it now.  Otherwise an error code with msg filled, and the caller still
 * owns the job (and answers it). */
int sched_submit(gkcd_sched *s, gkcd_job *job, char *msg, size_t msglen);

/* A job came back (before its reply is sent): its slot goes at once to
 * what is queued; its memory to what waits for memory at the next pump. */
void sched_finished(gkcd_sched *s, gkcd_job *job);

/* The client is going away: its queued and held jobs are dropped (answered
 * cancelled through the done hook at the next pump, and counted). */
void sched_drop_client(gkcd_sched *s, sched_client *c);

/* The client's unwritten reply bytes fell while its gate was shut: a held
 * job may go on, the gate may open. */
void sched_client_drained(gkcd_sched *s, sched_client *c);

/* Admits, expires and dispatches what it can; runs the done hook for what
 * the scheduler finished.  Called when the pass hook asked, and after
 * timers. */
void sched_pump(gkcd_sched *s);

/* 1 while a pump has something to do that nothing else will start: jobs
 * finished here to answer, held clients that read, jobs waiting for
 * memory. */
int sched_pending(const gkcd_sched *s);

/* 1 while new requests should be left unread (queues full). */
int sched_full(const gkcd_sched *s);

/* The lane a job of predicted cost_us goes to. */
int sched_lane_for(const gkcd_sched *s, double cost_us);

/* Figures for status. */
int sched_nlanes(const gkcd_sched *s);
void sched_lane_stats_get(gkcd_sched *s, int lane, sched_lane_stats *out);
size_t sched_queued(const gkcd_sched *s);        /* in clients' queues */
size_t sched_mem_waiting(const gkcd_sched *s);   /* in the memory FIFO */
typedef struct {
  size_t mem_waiting_peak;
  uint64_t mem_waited, mem_refused; /* waited for memory; of those, answered busy */
  uint64_t cancelled, expired_deadline, expired_wait, held;
} sched_counters;
void sched_counters_get(const gkcd_sched *s, sched_counters *out);
/* One device's share: handed to it and not yet taken by a worker (queued),
 * being worked on (running), and their predicted time. */
typedef struct {
  size_t queued, running;
  double outstanding_us;
} sched_device_stats;
void sched_device_stats_get(const gkcd_sched *s, int device, sched_device_stats *out);
/* The split model (split.h): the per-part overhead now believed, in us,
 * and how many requests were split. */
double sched_split_overhead_us(const gkcd_sched *s);
uint64_t sched_splits(const gkcd_sched *s);

#endif
