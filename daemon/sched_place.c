/* sched_place.c: see sched_place.h.  Placement's rule itself (which
 * device, where a new object goes) is place.c's, a split's split.c's; this
 * is the scheduler's side of them: the slots, the backlog and the homes it
 * counts per device.  It hands nothing to the pool: the scheduler does,
 * once this has said where. */
#include "sched_place.h"

#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "place.h"
#include "split.h"

/* --- co-location (place.h, "Where a new object goes") -------------------- */

static void set_home(sched_place *p, int *home, int d) {
  if (*home == d || d < 0 || d >= p->devs->n) return;
  if (*home >= 0) p->dev[*home].homes--;
  p->dev[d].homes++;
  *home = d;
}

/* Binds a new object without `device` to its connection's home (choosing
 * one when needed), before it queues: pipelined uploads are thus placed in
 * the order they arrived, and one waits for a slot on the home device, as
 * every request on the connection's data there does, rather than land on
 * another device whose slot happens to be free.  Other jobs fix the home
 * where they name it (place_home_hint). */
void sched_place_colocate(sched_place *p, gkcd_job *job, int *home) {
  gkcd_devices *dv = p->devs;
  if (dv->n < 2) return;
  if (!place_homeless(job)) {
    set_home(p, home, place_home_hint(job));
    return;
  }
  uint64_t room[GKCD_MAX_DEVICES] = {0};
  int homes[GKCD_MAX_DEVICES] = {0};
  for (int d = 0; d < dv->n; d++) {
    gkcd_device_info info;
    memset(&info, 0, sizeof info);
    /* What is free now, less what is already on its way there. */
    if (dv->dev[d].be->devices(dv->dev[d].be, &info, 1) == 1)
      room[d] = info.memory_free > p->dev[d].new_bytes ? info.memory_free - p->dev[d].new_bytes : 0;
    homes[d] = p->dev[d].homes;
  }
  int d = place_home(dv->n, job->dev_mask, *home, room, homes, job->out_bytes);
  if (d < 0) return; /* no live device: sched_place_job answers it device_lost */
  set_home(p, home, d);
  job->dev_mask = 1ull << d;
  job->new_on = d;
  p->dev[d].new_bytes += job->out_bytes;
}

void sched_place_uncolocate(sched_place *p, gkcd_job *job) {
  if (job->new_on < 0) return;
  sched_dev *sd = &p->dev[job->new_on];
  sd->new_bytes -= sd->new_bytes < job->out_bytes ? sd->new_bytes : job->out_bytes;
  job->new_on = -1;
}

/* --- dispatch ------------------------------------------------------------ */

/* A job (or a part) bound to device d's lane, its slot taken. */
static void start_on(sched_place *p, gkcd_job *job, int d, int l, double cost_us) {
  job->device = d;
  job->be = p->devs->dev[d].be;
  job->lane = l;
  job->dev_cost_us = cost_us;
  p->dev[d].running[l]++;
  p->dev[d].outstanding_us += cost_us;
}

/* Places job among the free devices (place.h), split across them when
 * that pays (split.h).  The slots taken, or -1 when the job failed instead
 * (answered from the pump). */
int sched_place_job(sched_place *p, gkcd_job *job, int l, uint64_t live, uint64_t freem) {
  gkcd_devices *dv = p->devs;
  uint64_t elig = (job->replicate ? live : job->dev_mask & live);
  if (!elig) {
    char msg[sizeof job->errmsg];
    if (place_operands(job, dv, msg, sizeof msg) == 0)
      snprintf(msg, sizeof msg, "every device it could run on was lost");
    job_fail(job, GKC_EDEVICE_LOST, "%s", msg);
    return -1;
  }
  if (job->gang_mask) {
    char msg[sizeof job->errmsg];
    if (job->gang_mask & ~live) {
      if (place_operands(job, dv, msg, sizeof msg) == 0)
        snprintf(msg, sizeof msg, "a device it needs was lost");
      job_fail(job, GKC_EDEVICE_LOST, "%s", msg);
      return -1;
    }
    /* It runs on its first device's worker; the others' slots are held
     * for it (their share of its predicted time with them). */
    int first = __builtin_ctzll(job->gang_mask), k = __builtin_popcountll(job->gang_mask);
    int slots = 1;
    for (int d = first + 1; d < dv->n; d++)
      if (job->gang_mask & (1ull << d)) {
        p->dev[d].running[l]++;
        p->dev[d].outstanding_us += job->cost_us / k;
        slots++;
      }
    start_on(p, job, first, l, job->cost_us / k);
    return slots;
  }
  double cost[GKCD_MAX_DEVICES] = {0}, out[GKCD_MAX_DEVICES] = {0};
  int devs[GKCD_MAX_DEVICES], k = 0;
  uint64_t cramped = 0;
  for (int d = 0; d < dv->n; d++) {
    out[d] = p->dev[d].outstanding_us;
    if (!(freem & (1ull << d))) continue;
    cost[d] = cost_predict(dv->dev[d].cost, job);
    /* Operands that must come from another device first: their bytes
     * over the device's memory rate (a copy reads and writes them). */
    if ((elig & (1ull << d)) && place_needs_move(job, d)) {
      double bytes = place_move_bytes(job, d);
      cost[d] += 2 * bytes / dv->dev[d].be->rates.bytes_per_us;
      /* The copies need room there while it runs: a device without it
       * would only fail the request, so it is passed over while another
       * operand's device will do. */
      gkcd_device_info info;
      memset(&info, 0, sizeof info);
      if (dv->dev[d].be->devices(dv->dev[d].be, &info, 1) == 1 && (double)info.memory_free < bytes)
        cramped |= 1ull << d;
    }
    devs[k++] = d;
  }
  /* A new resident object goes where it fits: each device has memory of
   * its own, and one that is full should not get it while another has room. */
  uint64_t cand = elig & freem;
  if (cand & ~cramped) cand &= ~cramped;
  if (job->out_kind == OUT_RES_NEW && dv->n > 1 && !job->replicate) {
    uint64_t roomy = 0;
    for (int d = 0; d < dv->n; d++) {
      if (!(cand & (1ull << d))) continue;
      gkcd_device_info info;
      memset(&info, 0, sizeof info);
      if (dv->dev[d].be->devices(dv->dev[d].be, &info, 1) == 1 && info.memory_free >= job->out_bytes)
        roomy |= 1ull << d;
    }
    if (roomy) cand = roomy;
  }
  int best = place_pick(dv->n, cand, out, cost);
  int kind = split_kind(job);
  if (kind == SPLIT_COPIES ||
      (kind != SPLIT_NONE && k >= 2 &&
       split_worth(job, cost[best], k, p->handoff_us, dv->dev[best].be->rates.host_bytes_per_us))) {
    if (kind == SPLIT_COPIES) /* every live device, the chosen one first (its copy is the home) */
      for (int i = 0; i < k; i++)
        if (devs[i] == best) devs[i] = devs[0], devs[0] = best;
    if (split_make(job, devs, k)) return -1;
    p->splits++;
    job->dev_cost_us = 0; /* the last part finishes the parent (split.c), to the loop's queue */
    for (int i = 0; i < job->nparts; i++) {
      gkcd_job *part = job->parts[i];
      start_on(p, part, part->device, l, cost_predict(dv->dev[part->device].cost, part));
    }
    return job->nparts;
  }
  start_on(p, job, best, l, cost[best]);
  return 1;
}

/* --- completion ---------------------------------------------------------- */

int sched_place_release(sched_place *p, gkcd_job *job) {
  int slots = 0;
  /* Each device gives back its slot and learns from what its part took. */
  int nparts = job->nparts ? job->nparts : 1;
  for (int i = 0; i < nparts; i++) {
    gkcd_job *part = job->nparts ? job->parts[i] : job;
    sched_dev *sd = &p->dev[part->device];
    sd->running[job->lane]--;
    sd->outstanding_us -= part->dev_cost_us;
    if (sd->outstanding_us < 0) sd->outstanding_us = 0;
    slots++;
    p->devs->dev[part->device].served++;
    double us = part->t_done_ns > part->t_run_ns ? (double)(part->t_done_ns - part->t_run_ns) / 1e3 : 0;
    if (!job->gang_mask) cost_observe(p->devs->dev[part->device].cost, part, us);
  }
  /* A gang job gives back the slots it held beside its own. */
  for (int d = job->device + 1; job->gang_mask && d < p->devs->n; d++)
    if (job->gang_mask & (1ull << d)) {
      sched_dev *sd = &p->dev[d];
      sd->running[job->lane]--;
      sd->outstanding_us -= job->dev_cost_us;
      if (sd->outstanding_us < 0) sd->outstanding_us = 0;
      slots++;
      p->devs->dev[d].served++;
    }
  if (job->nparts && !job->err)
    p->handoff_us += 0.25 * (split_observed_overhead(job) - p->handoff_us);
  return slots;
}
