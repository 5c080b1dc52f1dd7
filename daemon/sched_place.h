/* sched_place.h: the scheduler's devices: where a job it has chosen runs,
 * and what it has handed each device.
 *
 * scheduler.c decides when a job runs (the reply allowance, the memory
 * budget, lanes, fair queues, expiry: scheduler.h's steps 1-4); this is
 * step 5, placement, with the state it needs.  At submission a new object
 * without `device` is bound to its connection's home (sched_place_colocate,
 * place.h's "Where a new object goes").  At dispatch the job goes to the
 * device among the free ones where it would finish first (place.h), split
 * across them when that pays (split.h), each part taking a slot of its
 * lane there (sched_place_job), and scheduler.c hands it (or its parts)
 * to the pool; the
 * slots come back, and each device's cost model and the split model learn
 * from what the work took, when it is back (sched_place_release).
 *
 * Nothing here orders, queues or runs work, and nothing calls the scheduler:
 * scheduler.c counts the slots in its lanes from what these return.  Loop
 * thread only.
 */
#ifndef GKCD_SCHED_PLACE_H
#define GKCD_SCHED_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "devices.h"
#include "job.h"
#include "pool.h"

/* What the scheduler has handed one device. */
typedef struct {
  size_t running[POOL_MAX_LANES]; /* slots in use, by lane */
  double outstanding_us;           /* predicted worker time of that work */
  int homes;                       /* open connections whose home it is (place.h) */
  uint64_t new_bytes;              /* new objects bound here and not yet made */
} sched_dev;

/* The devices as the scheduler sees them (embedded in it). */
typedef struct {
  gkcd_devices *devs;
  sched_dev dev[GKCD_MAX_DEVICES];
  double handoff_us;     /* per part of a split: measured, then refined (split.h) */
  uint64_t splits;
} sched_place;

/* Binds a new object without `device` (job) to the connection's home
 * (*home, a device or -1: chosen, or fixed where the job names one),
 * before it queues. */
void sched_place_colocate(sched_place *p, gkcd_job *job, int *home);
/* Undoes the binding's count of bytes on their way to the home (the job
 * is done, or refused before it queued). */
void sched_place_uncolocate(sched_place *p, gkcd_job *job);
/* Places job, of lane l, among the devices free in that lane (freem, of
 * live): job->device and job->lane set, or job->parts made (a split), for
 * the scheduler to hand to the pool.  The slots it took (one per device it
 * occupies), or -1 when the job failed instead (answered from the pump). */
int sched_place_job(sched_place *p, gkcd_job *job, int l, uint64_t live, uint64_t freem);
/* The dispatched job came back: each device gives back its slots and
 * learns from what its part took.  The slots given back. */
int sched_place_release(sched_place *p, gkcd_job *job);

#endif
