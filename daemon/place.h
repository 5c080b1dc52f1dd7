/* place.h: which device a request runs on.  The scheduler's rule, kept
 * apart so that it reads (and is tested) on its own.
 *
 *  1. Where it may run (place_operands, at submission): a request whose
 *     resident operands all live on one device runs there; a replicated
 *     object is on every live device.  A pinned request (`device`) and a
 *     request that writes a resident array (`out` {handle}) run on that
 *     device.  When the operands sit on different devices the request may
 *     run on any of their devices (or the one it must run on), and the
 *     worker first moves what is missing there, peer to peer (work.c).
 *     A method that writes its operands in place (batch: method.h in_place)
 *     cannot work on copies: its operands must share a device.
 *  2. Where it goes (place_pick, at dispatch): among those devices that
 *     have a free slot, the one where it would finish first, counting the
 *     predicted cost of the work already handed to that device and the
 *     request's own predicted cost there (each device has its own cost
 *     model).  Ties go to the lower index.
 *  3. Where a new object goes (place_home, at submission; issue 26): an
 *     upload or csr_upload that names no `device` (and is not replicated
 *     or partitioned) goes to its connection's home, the device of the last
 *     object the connection uploaded or of the last matrix one of its
 *     requests read, so that a connection's vectors land beside its matrix
 *     and its requests move nothing.  A connection without a home, or whose
 *     home lacks the room or was lost, gets the device with room that is
 *     home to the fewest connections (then the most free memory, then the
 *     lower index): connections spread over the devices, each keeping its
 *     objects together.  The reasons are in place.c.
 */
#ifndef GKCD_PLACE_H
#define GKCD_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"

typedef struct gkcd_devices gkcd_devices;

/* The device in candidates (bit d: device d, d < n) with the least
 * outstanding_us[d] + cost_us[d]; -1 when candidates is empty. */
int place_pick(int n, uint64_t candidates, const double *outstanding_us, const double *cost_us);

/* Sets job->dev_mask from its operands (job->res), its `out` and its
 * `device` (job->pin_device), given the devices that serve now.  0, or
 * GKC_EDEVICE_LOST / GKC_EINVALID_ARGUMENT with msg naming the handle or
 * argument. */
int place_operands(gkcd_job *job, const gkcd_devices *devs, char *msg, size_t msglen);

/* 1 when a job placed on device d must first copy operands from others. */
int place_needs_move(const gkcd_job *job, int d);
/* The bytes of the job's resident operands that device d does not hold
 * (what a run there would first copy). */
double place_move_bytes(const gkcd_job *job, int d);

/* The device for a new object of `bytes` from a connection whose home is
 * `home` (-1: none): the home when it is live and room[home] >= bytes,
 * else, among the live devices with room (all live ones when none has),
 * the one with the fewest homes[d] (not counting the connection itself at
 * its old home), then the most room, then the lower index.  n <= 64; -1
 * when no device is live. */
int place_home(int n, uint64_t live, int home, const uint64_t *room, const int *homes,
               uint64_t bytes);

/* 1 when job makes a new resident object whose device is the scheduler's
 * to choose by place_home: an upload or csr_upload without `device`,
 * `replicate` or `devices`, from data sent (not from a resident array,
 * where it runs instead). */
int place_homeless(const gkcd_job *job);

/* The device that job fixes as its connection's home: the one it pins a
 * new object to (`device`), else the one of the first resident matrix it
 * reads that lives on one device (not replicated, not partitioned); -1
 * when none. */
int place_home_hint(const gkcd_job *job);

#endif
