/* scheduler.c: see scheduler.h. */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices.h"
#include "gkc_errors.h"
#include "log.h"
#include "method.h"
#include "place.h"
#include "proto_methods.h"
#include "res_object.h"
#include "sched_place.h"
#include "split.h"

#define WAIT_RING 1024   /* queue waits kept per lane for the percentiles */
#define SWEEP_MS 5       /* how often queued jobs are checked for expiry */
#define SURPRISE_US 50   /* a job is charged at most twice its prediction and this (sched_finished) */

typedef struct {
  int workers;           /* per device */
  int slots;             /* jobs handed to one device's pool lane at once: workers + primed */
  size_t queued, running; /* running: device slots in use, all devices */
  uint64_t served;
  sched_client *active;  /* clients with jobs queued in this lane */
  double waits[WAIT_RING];
  size_t nwaits;         /* total recorded; the ring holds the last WAIT_RING */
} lane;

struct gkcd_sched {
  const gkcd_config *cfg;
  gkcd_budget *budget;
  sched_place pl;        /* the devices, and what each was handed (sched_place.h) */
  gkcd_pool *pool;
  sched_done_cb done;
  sched_gate_cb gate;
  sched_pass_cb pass;
  void *arg;
  int full_said;                 /* what the gate hook last said of the queues */
  int nlanes;
  lane lanes[SCHED_MAX_LANES];
  gkcd_job *mem_head, *mem_tail; /* waiting for memory, oldest first */
  size_t mem_waiting;
  gkcd_job *fin_head, *fin_tail; /* finished here, for the done hook */
  sched_client *held;            /* clients whose held job may be able to go on */
  uv_timer_t timer;
  int timer_on;
  sched_counters n;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- small lists --------------------------------------------------------- */

static void append(gkcd_job **head, gkcd_job **tail, gkcd_job *job) {
  job->next = NULL;
  if (*tail)
    (*tail)->next = job;
  else
    *head = job;
  *tail = job;
}

/* The reply bytes a job's result will add to its connection. */
static size_t reply_bytes(const gkcd_job *job) { return job->out_kind == OUT_BIN ? job->out_bytes : 0; }
/* The memory its result needs while it runs and until it is sent. */
static size_t result_bytes(const gkcd_job *job) {
  return job->out_kind == OUT_BIN || job->out_kind == OUT_RES_NEW ? job->out_bytes : 0;
}

/* The pass hook: the next pump has work (scheduler.h). */
static void want_pass(gkcd_sched *s) {
  if (s->pass) s->pass(s->arg);
}

/* Answers job (failed already) from the next pump, never from under the
 * caller. */
static void finish_here(gkcd_sched *s, gkcd_job *job) {
  append(&s->fin_head, &s->fin_tail, job);
  want_pass(s);
}

static void cancel(gkcd_sched *s, gkcd_job *job) {
  job_fail(job, GKC_ECANCELLED, "the client disconnected before the request started");
  finish_here(s, job);
}

/* --- fair queues --------------------------------------------------------- */

static void activate(gkcd_sched *s, sched_client *c, int l) {
  lane *ln = &s->lanes[l];
  /* Level with the least-served busy client: idling earns no credit. */
  double floor = -1;
  for (sched_client *a = ln->active; a; a = a->next_active[l])
    if (floor < 0 || a->vtime[l] < floor) floor = a->vtime[l];
  if (floor >= 0 && c->vtime[l] < floor) c->vtime[l] = floor;
  c->active[l] = 1;
  c->prev_active[l] = NULL;
  c->next_active[l] = ln->active;
  if (ln->active) ln->active->prev_active[l] = c;
  ln->active = c;
}

static void deactivate(gkcd_sched *s, sched_client *c, int l) {
  if (!c->active[l]) return;
  if (c->prev_active[l])
    c->prev_active[l]->next_active[l] = c->next_active[l];
  else
    s->lanes[l].active = c->next_active[l];
  if (c->next_active[l]) c->next_active[l]->prev_active[l] = c->prev_active[l];
  c->active[l] = 0;
  c->next_active[l] = c->prev_active[l] = NULL;
}

static void timer_arm(gkcd_sched *s);

/* A job with its memory reserved joins its client's queue in its lane. */
static void enqueue(gkcd_sched *s, gkcd_job *job) {
  sched_client *c = job->client;
  int l = job->lane;
  append(&c->head[l], &c->tail[l], job);
  c->queued[l]++;
  s->lanes[l].queued++;
  if (!c->active[l]) activate(s, c, l);
}

static gkcd_job *pop(gkcd_sched *s, sched_client *c, int l) {
  gkcd_job *job = c->head[l];
  c->head[l] = job->next;
  if (!c->head[l]) c->tail[l] = NULL;
  job->next = NULL;
  c->queued[l]--;
  s->lanes[l].queued--;
  if (!c->head[l]) deactivate(s, c, l);
  return job;
}

/* 1 when job must not start: answered deadline_exceeded or busy. */
static int expired(gkcd_sched *s, gkcd_job *job, uint64_t now) {
  if (job->deadline_ns && now >= job->deadline_ns) {
    s->n.expired_deadline++;
    job_fail(job, GKC_EDEADLINE_EXCEEDED, "waited %.1f ms in the queue, past its deadline_ms",
             (double)(now - job->t_start_ns) / 1e6);
    finish_here(s, job);
    return 1;
  }
  uint64_t wait_ns = (uint64_t)(s->cfg->queue_wait_s * 1e9);
  if (wait_ns && now - job->t_start_ns >= wait_ns) {
    s->n.expired_wait++;
    job_fail(job, GKC_EBUSY, "waited %.1f s in the queue (--queue-wait %g); retry later",
             (double)(now - job->t_start_ns) / 1e9, s->cfg->queue_wait_s);
    finish_here(s, job);
    return 1;
  }
  return 0;
}

/* The devices whose lane l has a free slot, among live. */
static uint64_t free_devices(const gkcd_sched *s, int l, uint64_t live) {
  uint64_t m = 0;
  for (int d = 0; d < s->pl.devs->n; d++)
    if ((live & (1ull << d)) && s->pl.dev[d].running[l] < (size_t)s->lanes[l].slots) m |= 1ull << d;
  return m;
}

/* The devices job needs at once: all live ones for a replicate, else any
 * one of its eligible devices. */
static int can_start(const gkcd_job *job, uint64_t live, uint64_t freem) {
  /* A gang job takes a slot on each of its devices at once (part.h): it
   * waits until all are free, and one of them lost answers it at once. */
  if (job->gang_mask)
    return (job->gang_mask & ~live) || (job->gang_mask & freem) == job->gang_mask;
  uint64_t need = job->replicate ? live : job->dev_mask & live;
  if (!need) return 1; /* it will be answered device_lost */
  return job->replicate ? (need & freem) == need : (need & freem) != 0;
}

/* Hands jobs to the lane's devices while one has room: the least-served
 * client whose head job can start on a device with a free slot goes
 * first, to the device where it finishes soonest.  A job whose client had
 * nothing running goes to the front of the pool's queue (job->first).
 * (Letting such a client also take one slot more than the lane has, so
 * that it need not wait for one to free, skewed the shares of the clients
 * that are never without a job running: e2e_sched's fair-queuing check
 * failed, 9.5% against 30%.)
 * Returns how many left the queues. */
static int dispatch(gkcd_sched *s, int l) {
  lane *ln = &s->lanes[l];
  int moved = 0;
  uint64_t now = now_ns();
  while (ln->active) {
    uint64_t live = devices_live(s->pl.devs), freem = free_devices(s, l, live);
    if (!freem && live) break;
    sched_client *best = NULL;
    for (sched_client *c = ln->active; c; c = c->next_active[l])
      if ((!best || c->vtime[l] < best->vtime[l]) && can_start(c->head[l], live, freem)) best = c;
    if (!best) break;
    gkcd_job *job = pop(s, best, l);
    moved++;
    if (expired(s, job, now)) continue;
    job->first = best->running == 0;
    int slots = sched_place_job(&s->pl, job, l, live, freem);
    if (slots < 0) {
      finish_here(s, job);
      continue;
    }
    if (job->nparts)
      for (int i = 0; i < job->nparts; i++) pool_submit(s->pool, job->parts[i]);
    else
      pool_submit(s->pool, job);
    ln->running += (size_t)slots;
    best->vtime[l] += job->cost_us / best->weight;
    best->running++;
    job->run_prev = NULL;
    job->run_next = best->running_list;
    if (best->running_list) best->running_list->run_prev = job;
    best->running_list = job;
    job->dispatched = 1;
    double wait = (double)(now - job->t_start_ns) / 1e3;
    ln->waits[ln->nwaits++ % WAIT_RING] = wait;
  }
  return moved;
}

/* Expiry watches what is still queued (on_timer): started when something
 * is left waiting, it stops itself once nothing is. */
static void watch_queues(gkcd_sched *s) {
  if (sched_queued(s) || s->mem_waiting) timer_arm(s);
}

/* --- admission ----------------------------------------------------------- */

/* Reserves the result's memory and queues the job, or makes it wait for
 * memory behind the jobs already waiting. */
/* The job's bytes become work: its frame moves from the input allowance
 * to the work pool, its result is reserved there. */
static void take_work(gkcd_sched *s, gkcd_job *job) {
  size_t need = result_bytes(job);
  budget_move(s->budget, BUDGET_INPUT, BUDGET_JOBS, job->frame_charge);
  budget_take(s->budget, BUDGET_JOBS, need);
  job->out_charge = need;
  job->frame_is_work = 1;
}

static void admit(gkcd_sched *s, gkcd_job *job) {
  sched_client *c = job->client;
  job->reply_charge = reply_bytes(job);
  *c->expected += job->reply_charge;
  if (!s->mem_head && budget_fits(s->budget, job->frame_charge + result_bytes(job))) {
    take_work(s, job);
    enqueue(s, job);
    return;
  }
  append(&s->mem_head, &s->mem_tail, job);
  s->mem_waiting++;
  c->mem_waiting++;
  s->n.mem_waited++;
  if (s->mem_waiting > s->n.mem_waiting_peak) s->n.mem_waiting_peak = s->mem_waiting;
  timer_arm(s);
  want_pass(s); /* memory may come back from outside the scheduler (replies written) */
}

/* 1 when job's reply would take its client past --max-conn-reply-bytes
 * while the client has other replies outstanding.  A client with nothing
 * outstanding may always have one: a single result larger than the limit
 * is refused as too_large elsewhere only when it exceeds the request limit. */
static int must_hold(const gkcd_sched *s, const sched_client *c, const gkcd_job *job) {
  size_t out = *c->unwritten + *c->expected;
  return out > 0 && out + reply_bytes(job) > s->cfg->max_conn_reply_bytes;
}

/* The gate hook, told what changed: c's own gate (held or not), or the
 * queues' (full or not). */
static void gate_client(gkcd_sched *s, sched_client *c) {
  int shut = c->held != NULL;
  if (shut == c->gate_shut) return;
  c->gate_shut = shut;
  if (s->gate) s->gate(c, !shut, s->arg);
}

static void gate_queues(gkcd_sched *s) {
  int full = sched_full(s);
  if (full == s->full_said) return;
  s->full_said = full;
  if (s->gate) s->gate(NULL, !full, s->arg);
}

int sched_submit(gkcd_sched *s, gkcd_job *job, char *msg, size_t msglen) {
  const gkcd_config *cfg = s->cfg;
  size_t result = result_bytes(job);
  size_t total = job->frame_bytes + result;
  /* A new resident array must fit beside what is resident already, or it
   * would wait forever. */
  size_t resident = s->budget->by_kind[BUDGET_RESIDENT];
  if (job->out_kind == OUT_RES_NEW && resident + total > cfg->memory_budget) {
    snprintf(msg, msglen, "keeping %zu more bytes resident would exceed the memory budget of %zu"
             " (--memory-budget; %zu bytes are resident): release some first", job->out_bytes,
             cfg->memory_budget, resident);
    return GKC_EOUT_OF_MEMORY;
  }
  if (total > cfg->memory_budget) {
    snprintf(msg, msglen, "the request and its result need %zu bytes, more than the whole"
             " memory budget of %zu (--memory-budget)", total, cfg->memory_budget);
    return GKC_ETOO_LARGE;
  }
  /* Where it may run, from where its operands live (place.h); its
   * prediction is for the fastest of those devices. */
  job->device = -1;
  job->new_on = -1;
  int prc = place_operands(job, s->pl.devs, msg, msglen);
  if (prc) return prc;
  if (job->client) sched_place_colocate(&s->pl, job, &job->client->home);
  /* A solve runs as long as it takes to converge, and a batch is a chain of
   * kernels that each want the whole GPU (a CG step on a 512^2 Laplacian,
   * predicted under --latency-us, ran at 0.27x the vendor's speed on the
   * latency lane's 8 SMs and 0.42x on the bulk lane): bulk work, whatever
   * the prediction says; so is a gang job (all of a partitioned matrix's
   * devices).  The others are predicted for the latency lane first, from
   * what that lane has measured (cost.h): those it would not finish within
   * --latency-us go to the bulk lane, predicted there. */
  int bulk_only = job->row->bulk_only || job->gang_mask;
  job->lane = bulk_only ? LANE_BULK : sched_lane_for(s, 0);
  uint64_t live = devices_live(s->pl.devs);
  for (;;) {
    job->cost_us = -1;
    for (int d = 0; d < s->pl.devs->n; d++)
      if ((job->dev_mask & live) & (1ull << d)) {
        double us = cost_predict(s->pl.devs->dev[d].cost, job);
        if (job->cost_us < 0 || us < job->cost_us) job->cost_us = us;
      }
    if (job->cost_us < 0) job->cost_us = cost_predict(s->pl.devs->dev[0].cost, job);
    if (job->lane == LANE_BULK || sched_lane_for(s, job->cost_us) == LANE_LATENCY) break;
    uint64_t now = now_ns();
    for (int d = 0; d < s->pl.devs->n; d++)
      if ((job->dev_mask & live) & (1ull << d)) cost_forget(s->pl.devs->dev[d].cost, job, now);
    job->lane = LANE_BULK;
  }
  /* The request's bytes are held from now on: input until it is admitted. */
  budget_take(s->budget, BUDGET_INPUT, job->frame_bytes);
  job->frame_charge = job->frame_bytes;
  sched_client *c = job->client;
  if (must_hold(s, c, job) || c->held) {
    if (c->held) { /* the connection stops reading once one is held */
      log_err("sched: client %llu already has a held job", (unsigned long long)c->id);
      budget_give(s->budget, BUDGET_INPUT, job->frame_charge);
      job->frame_charge = 0;
      sched_place_uncolocate(&s->pl, job);
      snprintf(msg, msglen, "internal: a second held request");
      return GKC_EINTERNAL;
    }
    c->held = job;
    s->n.held++;
    gate_client(s, c); /* the connection stops reading once one is held */
    return 0;
  }
  admit(s, job);
  /* Dispatched now when its lane has room: the fair choice among what is
   * queued, made without waiting for the end of the loop's iteration. */
  dispatch(s, job->lane);
  watch_queues(s);
  gate_queues(s);
  return 0;
}

void sched_client_drained(gkcd_sched *s, sched_client *c) {
  if (!c->held || c->on_held_list) return;
  c->on_held_list = 1;
  c->next_held = s->held;
  s->held = c;
  want_pass(s);
}


/* --- completion and cancellation ---------------------------------------- */

void sched_finished(gkcd_sched *s, gkcd_job *job) {
  sched_client *c = job->client;
  if (job->dispatched) {
    if (job->run_prev)
      job->run_prev->run_next = job->run_next;
    else
      c->running_list = job->run_next;
    if (job->run_next) job->run_next->run_prev = job->run_prev;
    job->run_prev = job->run_next = NULL;
    lane *ln = &s->lanes[job->lane];
    ln->served++;
    c->running--;
    double measured = job->t_done_ns > job->t_run_ns ? (double)(job->t_done_ns - job->t_run_ns) / 1e3 : 0;
    /* Charge what the job really cost, not what was predicted: but at
     * most twice the prediction and SURPRISE_US more.  A worker thread
     * descheduled mid-job (a loaded host) makes a 20-us reduce measure
     * 200 ms; charged in full, its client then waited while every other
     * busy client was served 200 ms too, thousands of tiny jobs each:
     * seconds, long enough for --queue-wait to answer its next requests
     * busy (e2e_backpressure's flood under ASan on 2 cores answered 232
     * requests of 3 of its 64 connections busy; e2e_sched stalls one job
     * on purpose: a 1000-float reduce waited over 5 s behind 8 busy
     * clients, and still 1.2-1.5 s with a 10 ms bound, their jobs taking
     * ~2 us).  A misprediction beyond the bound is left to the cost
     * model, which corrects its prediction within a few requests, rather
     * than made up by starving the client. */
    double charge = measured < 2 * job->cost_us + SURPRISE_US ? measured : 2 * job->cost_us + SURPRISE_US;
    c->vtime[job->lane] += (charge - job->cost_us) / c->weight;
    if (c->vtime[job->lane] < 0) c->vtime[job->lane] = 0;
    c->served++;
    c->served_us += measured;
    ln->running -= (size_t)sched_place_release(&s->pl, job);
    job->dispatched = 0;
  }
  sched_place_uncolocate(&s->pl, job);
  *c->expected -= job->reply_charge;
  job->reply_charge = 0;
  if (job->out_charge) budget_give(s->budget, BUDGET_JOBS, job->out_charge);
  if (job->frame_charge) budget_give(s->budget, job->frame_is_work ? BUDGET_JOBS : BUDGET_INPUT, job->frame_charge);
  job->out_charge = job->frame_charge = 0;
  if (c->held) sched_client_drained(s, c);
  /* Its slot goes at once to what is queued.  The memory it gave back goes
   * to the jobs waiting for memory (and held ones) at the pass, once the
   * caller has counted its reply's bytes: admitted now, they would take
   * memory the reply is about to (e2e_service_budget's peak went past the
   * budget). */
  for (int l = 0; l < s->nlanes; l++) dispatch(s, l);
  if (s->mem_head || s->held) want_pass(s);
  watch_queues(s);
  gate_queues(s);
}

void sched_drop_client(gkcd_sched *s, sched_client *c) {
  uint64_t n = 0;
  if (c->home >= 0) s->pl.dev[c->home].homes--; /* no longer a home: its objects go with it */
  c->home = -1;
  /* Long jobs (solve, batch) look at this between iterations and stop. */
  for (gkcd_job *job = c->running_list; job; job = job->run_next) atomic_store(&job->cancel, 1);
  for (int l = 0; l < s->nlanes; l++)
    while (c->head[l]) {
      cancel(s, pop(s, c, l));
      n++;
    }
  if (c->mem_waiting) {
    gkcd_job **pp = &s->mem_head, *prev = NULL;
    while (*pp) {
      gkcd_job *job = *pp;
      if (job->client != c) {
        prev = job;
        pp = &job->next;
        continue;
      }
      *pp = job->next;
      if (s->mem_tail == job) s->mem_tail = prev;
      s->mem_waiting--;
      c->mem_waiting--;
      cancel(s, job);
      n++;
    }
  }
  if (c->held) {
    cancel(s, c->held);
    c->held = NULL;
    c->gate_shut = 0; /* its connection is closing: nobody to tell */
    n++;
  }
  if (c->on_held_list) {
    for (sched_client **pp = &s->held; *pp; pp = &(*pp)->next_held)
      if (*pp == c) {
        *pp = c->next_held;
        break;
      }
    c->on_held_list = 0;
  }
  s->n.cancelled += n;
  gate_queues(s);
}

/* --- the pump ------------------------------------------------------------ */

/* Held jobs whose clients have read enough go on to admission. */
static int release_held(gkcd_sched *s) {
  int moved = 0;
  sched_client *list = s->held;
  s->held = NULL;
  while (list) {
    sched_client *c = list;
    list = c->next_held;
    c->on_held_list = 0;
    if (c->held && !must_hold(s, c, c->held)) {
      gkcd_job *job = c->held;
      c->held = NULL;
      gate_client(s, c);
      admit(s, job);
      moved++;
    }
  }
  return moved;
}

/* Jobs waiting for memory start, oldest first, while they fit. */
static int admit_waiting(gkcd_sched *s) {
  int moved = 0;
  while (s->mem_head && budget_fits(s->budget, s->mem_head->frame_charge + result_bytes(s->mem_head))) {
    gkcd_job *job = s->mem_head;
    s->mem_head = job->next;
    if (!s->mem_head) s->mem_tail = NULL;
    s->mem_waiting--;
    job->client->mem_waiting--;
    take_work(s, job);
    enqueue(s, job);
    moved++;
  }
  return moved;
}

void sched_pump(gkcd_sched *s) {
  /* Each step can make room for another (a cancelled job frees memory, a
   * dispatch frees queue space), so go round until nothing moves. */
  for (int round = 0; round < 64; round++) {
    int moved = release_held(s) + admit_waiting(s);
    for (int l = 0; l < s->nlanes; l++) moved += dispatch(s, l);
    gkcd_job *fin = s->fin_head;
    s->fin_head = s->fin_tail = NULL;
    while (fin) {
      gkcd_job *next = fin->next;
      fin->next = NULL;
      s->done(fin, s->arg);
      fin = next;
      moved++;
    }
    if (!moved) break;
  }
  watch_queues(s);
  gate_queues(s);
}

int sched_pending(const gkcd_sched *s) { return s->fin_head || s->held || s->mem_head; }

/* Expiry: queued jobs past their deadline or --queue-wait are answered now,
 * not when a worker would have reached them. */
static void on_timer(uv_timer_t *t) {
  gkcd_sched *s = t->data;
  uint64_t now = now_ns();
  for (int l = 0; l < s->nlanes; l++)
    for (sched_client *c = s->lanes[l].active, *cn; c; c = cn) {
      cn = c->next_active[l];
      gkcd_job **pp = &c->head[l], *prev = NULL;
      while (*pp) {
        gkcd_job *job = *pp;
        if (!(job->deadline_ns && now >= job->deadline_ns) &&
            !(s->cfg->queue_wait_s > 0 && now - job->t_start_ns >= (uint64_t)(s->cfg->queue_wait_s * 1e9))) {
          prev = job;
          pp = &job->next;
          continue;
        }
        *pp = job->next;
        if (c->tail[l] == job) c->tail[l] = prev;
        c->queued[l]--;
        s->lanes[l].queued--;
        expired(s, job, now);
      }
      if (!c->head[l]) deactivate(s, c, l);
    }
  gkcd_job **pp = &s->mem_head, *prev = NULL;
  while (*pp) {
    gkcd_job *job = *pp;
    int late = (job->deadline_ns && now >= job->deadline_ns) ||
               (s->cfg->queue_wait_s > 0 && now - job->t_start_ns >= (uint64_t)(s->cfg->queue_wait_s * 1e9));
    if (!late) {
      prev = job;
      pp = &job->next;
      continue;
    }
    *pp = job->next;
    if (s->mem_tail == job) s->mem_tail = prev;
    s->mem_waiting--;
    job->client->mem_waiting--;
    if (!(job->deadline_ns && now >= job->deadline_ns)) s->n.mem_refused++;
    expired(s, job, now);
  }
  if (!sched_queued(s) && !s->mem_waiting) {
    uv_timer_stop(&s->timer);
    s->timer_on = 0;
  }
  sched_pump(s);
}

static void timer_arm(gkcd_sched *s) {
  if (s->timer_on) return;
  int rc = uv_timer_start(&s->timer, on_timer, SWEEP_MS, SWEEP_MS);
  if (rc) {
    log_err("sched: uv_timer_start: %s", uv_strerror(rc));
    return;
  }
  s->timer_on = 1;
}

/* --- set-up and figures -------------------------------------------------- */

int sched_create(gkcd_sched **out, uv_loop_t *loop, const gkcd_config *cfg, gkcd_budget *budget,
                 gkcd_pool *pool, gkcd_devices *devs, int nlanes, const int *workers,
                 sched_done_cb done, void *arg) {
  if (nlanes < 1 || nlanes > SCHED_MAX_LANES) return GKC_EINVALID_ARGUMENT;
  gkcd_sched *s = calloc(1, sizeof *s);
  if (!s) return GKC_EOUT_OF_MEMORY;
  s->cfg = cfg;
  s->budget = budget;
  s->pool = pool;
  s->pl.devs = devs;
  s->pl.handoff_us = devs->n > 1 ? split_measure_handoff() : 0;
  s->done = done;
  s->arg = arg;
  s->nlanes = nlanes;
  for (int l = 0; l < nlanes; l++) {
    s->lanes[l].workers = workers[l];
    /* One job ready behind each busy bulk worker would delay a newcomer by
     * a whole bulk job, so the bulk lane keeps one job primed in all; the
     * latency lane's jobs are short, so each worker gets one ready. */
    s->lanes[l].slots = workers[l] + (l == LANE_LATENCY ? workers[l] : 1);
  }
  int rc = uv_timer_init(loop, &s->timer);
  if (rc) {
    free(s);
    return rc;
  }
  s->timer.data = s;
  uv_unref((uv_handle_t *)&s->timer);
  *out = s;
  return 0;
}

static void on_timer_closed(uv_handle_t *h) { free(h->data); }

void sched_destroy(gkcd_sched *s) {
  uv_timer_stop(&s->timer);
  uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}

void sched_client_init(gkcd_sched *s, sched_client *c, uint64_t id, int uid, const size_t *unwritten,
                       size_t *expected) {
  memset(c, 0, sizeof *c);
  c->id = id;
  c->uid = uid;
  c->weight = 1.0;
  c->home = -1;
  c->unwritten = unwritten;
  c->expected = expected;
  for (int i = 0; i < s->cfg->n_weights; i++)
    if (s->cfg->weight_uids[i] == (uid_t)uid) c->weight = s->cfg->weights[i];
}

int sched_full(const gkcd_sched *s) {
  return sched_queued(s) + s->mem_waiting >= s->cfg->max_queue ||
         (s->mem_waiting > 0 && s->mem_waiting >= s->cfg->budget_queue);
}

void sched_on_gate(gkcd_sched *s, sched_gate_cb gate, sched_pass_cb pass) {
  s->gate = gate;
  s->pass = pass;
}

int sched_lane_for(const gkcd_sched *s, double cost_us) {
  return s->nlanes > 1 && cost_us < s->cfg->latency_us ? LANE_LATENCY : LANE_BULK;
}

int sched_nlanes(const gkcd_sched *s) { return s->nlanes; }

size_t sched_queued(const gkcd_sched *s) {
  size_t n = 0;
  for (int l = 0; l < s->nlanes; l++) n += s->lanes[l].queued;
  return n;
}

size_t sched_mem_waiting(const gkcd_sched *s) { return s->mem_waiting; }

void sched_counters_get(const gkcd_sched *s, sched_counters *out) { *out = s->n; }

void sched_device_stats_get(const gkcd_sched *s, int d, sched_device_stats *out) {
  memset(out, 0, sizeof *out);
  if (d < 0 || d >= s->pl.devs->n) return;
  for (int l = 0; l < s->nlanes; l++) {
    size_t waiting = pool_waiting(s->pool, d, l), running = s->pl.dev[d].running[l];
    out->queued += waiting;
    out->running += running > waiting ? running - waiting : 0;
  }
  out->outstanding_us = s->pl.dev[d].outstanding_us;
}

double sched_split_overhead_us(const gkcd_sched *s) { return s->pl.handoff_us; }
uint64_t sched_splits(const gkcd_sched *s) { return s->pl.splits; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void sched_lane_stats_get(gkcd_sched *s, int l, sched_lane_stats *out) {
  lane *ln = &s->lanes[l];
  memset(out, 0, sizeof *out);
  out->workers = ln->workers;
  out->queued = ln->queued;
  out->running = ln->running;
  out->served = ln->served;
  size_t n = ln->nwaits < WAIT_RING ? ln->nwaits : WAIT_RING;
  if (!n) return;
  double v[WAIT_RING];
  memcpy(v, ln->waits, n * sizeof *v);
  qsort(v, n, sizeof *v, cmp_double);
  out->wait_p50_us = v[(n - 1) / 2];
  out->wait_p99_us = v[(size_t)((double)(n - 1) * 0.99)];
}
