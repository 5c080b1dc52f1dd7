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

#endif
