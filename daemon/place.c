/* place.c: see place.h. */
#include "place.h"

#include <stdio.h>

#include "devices.h"
#include "gkc_errors.h"
#include "method.h"
#include "proto_methods.h"
#include "part.h"
#include "res_object.h"

int place_pick(int n, uint64_t candidates, const double *outstanding_us, const double *cost_us) {
  int best = -1;
  double best_us = 0;
  for (int d = 0; d < n && d < 64; d++) {
    if (!(candidates & (1ull << d))) continue;
    double us = outstanding_us[d] + cost_us[d];
    if (best < 0 || us < best_us) best = d, best_us = us;
  }
  return best;
}

/* Resident arrays and matrices (regions are host memory, on no device). */
static int on_device(const gkcd_res *r) { return r->kind == RES_ARRAY || r->kind == RES_MATRIX; }

/* The devices that hold r now. */
static uint64_t holders(const gkcd_res *r, uint64_t live) {
  if (r->part) return (r->part->mask & ~live) ? 0 : r->part->mask;
  return (r->rep_mask ? r->rep_mask : 1ull << r->device) & live;
}

static const char *kind_name(const gkcd_res *r) { return r->kind == RES_MATRIX ? "matrix" : "handle"; }

int place_operands(gkcd_job *job, const gkcd_devices *devs, char *msg, size_t msglen) {
  uint64_t live = devices_live(devs), all = ~0ull, any = 0;
  char why[400];
  if (job->pin_device >= 0 && !(live & (1ull << job->pin_device))) {
    snprintf(msg, msglen, "argument 'device': %s",
             devices_lost_msg(devs->dev[job->pin_device].be, why, sizeof why));
    return GKC_EDEVICE_LOST;
  }
  /* With none left gkcd exits (devices.c), but a device is lost on its
   * worker's thread and the loop hears of it a moment later: work it takes
   * meanwhile has nowhere to run. */
  if (!live) {
    snprintf(msg, msglen, "every device was lost");
    return GKC_EDEVICE_LOST;
  }
  /* A region is mapped and pinned once, by device 0 (resident.c unpins
   * it there). */
  if (job->row->makes == RES_REGION) {
    job->dev_mask = live & 1 ? 1 : live;
    return 0;
  }
  /* Each device's copy of a replicate is made from the request's own
   * bytes; a resident source lives on one device only. */
  if (job->replicate)
    for (int i = 0; i < job->nres; i++)
      if (on_device(job->res[i])) {
        snprintf(msg, msglen, "argument 'replicate': a replicated object is made from data sent"
                 " with the request (bin or region), not from %s %u", kind_name(job->res[i]),
                 job->res[i]->id);
        return GKC_EINVALID_ARGUMENT;
      }
  for (int i = 0; i < job->nres; i++) {
    const gkcd_res *r = job->res[i];
    if (!on_device(r)) continue;
    uint64_t h = holders(r, live);
    if (!h && r->part) {
      int d = __builtin_ctzll(r->part->mask & ~live);
      snprintf(msg, msglen, "matrix %u was partitioned over devices including device %d, which"
               " was lost (%s)", r->id, d, backend_lost_reason(devs->dev[d].be));
      return GKC_EDEVICE_LOST;
    }
    if (!h) {
      snprintf(msg, msglen, "%s %u lived on device %d, which was lost (%s)", kind_name(r), r->id,
               r->device, backend_lost_reason(devs->dev[r->device].be));
      return GKC_EDEVICE_LOST;
    }
    all &= h;
    any |= h;
  }
  /* A gang job (part.h) runs on all its devices, whatever else it reads
   * (it reads other arrays through their own devices). */
  if (job->gang_mask) {
    if (job->gang_mask & ~live) {
      snprintf(msg, msglen, "argument 'devices': %s",
               devices_lost_msg(devs->dev[__builtin_ctzll(job->gang_mask & ~live)].be, why,
                                sizeof why));
      return GKC_EDEVICE_LOST;
    }
    job->dev_mask = job->gang_mask;
    return 0;
  }
  /* Where it must run: the pinned device, or the array it writes. */
  uint64_t must = live;
  if (job->pin_device >= 0) must &= 1ull << job->pin_device;
  if (job->out_kind == OUT_RES && job->out_res && on_device(job->out_res))
    must &= 1ull << job->out_res->device;
  if (!must) {
    snprintf(msg, msglen, "argument 'device': device %d is not where the 'out' handle %u lives"
             " (device %d)", job->pin_device, job->out_res->id, job->out_res->device);
    return GKC_EINVALID_ARGUMENT;
  }
  if (must & all) {
    job->dev_mask = must & all;
    return 0;
  }
  if (job->row->in_place) {
    size_t off = 0;
    why[0] = 0;
    for (int i = 0, n = 0; i < job->nres && n < 6; i++) {
      const gkcd_res *r = job->res[i];
      if (!on_device(r) || r->rep_mask) continue;
      int k = snprintf(why + off, sizeof why - off, "%s%s %u on device %d", n++ ? ", " : "",
                       kind_name(r), r->id, r->device);
      if (k < 0 || (size_t)k >= sizeof why - off) break;
      off += (size_t)k;
    }
    snprintf(msg, msglen, "the resident operands of a %s, which writes them in place, must live"
             " on one device (%s%s); upload them with the same 'device', or 'replicate' the"
             " ones it only reads",
             proto_method_name(job->method), why,
             job->pin_device >= 0 || job->out_kind == OUT_RES ? ", and where it must run" : "");
    return GKC_EINVALID_ARGUMENT;
  }
  /* Operands on several devices: run where one of them is (or where it
   * must), and move the rest there. */
  job->dev_mask = must != live ? must : (any ? any : live);
  return 0;
}

/* 1 when r must be copied to device d for a job there: a partitioned
 * matrix never is (its job runs on all its devices). */
static int missing_on(const gkcd_res *r, int d) {
  return on_device(r) && !r->part && !((r->rep_mask ? r->rep_mask : 1ull << r->device) & (1ull << d));
}

int place_needs_move(const gkcd_job *job, int d) {
  for (int i = 0; i < job->nres; i++)
    if (missing_on(job->res[i], d)) return 1;
  return 0;
}

double place_move_bytes(const gkcd_job *job, int d) {
  double bytes = 0;
  for (int i = 0; i < job->nres; i++) {
    const gkcd_res *r = job->res[i];
    /* What move.c copies: an array's bytes, a matrix's whole allocation
     * (its spmv plan follows the arrays). */
    if (missing_on(r, d)) bytes += (double)(r->kind == RES_ARRAY || r->cap < r->bytes ? r->bytes : r->cap);
  }
  return bytes;
}

/* Co-location (issue 26).  Where a new object goes decides what every
 * later request on it costs, so it is chosen for those requests, not for
 * the upload:
 *
 *  - A request whose operands live apart first copies the missing ones
 *    (move.c): their bytes over the peer link (NVLink's hundreds of GB/s,
 *    or staged through the host over PCIe at tens), on every request, plus
 *    their size in the target's memory while it runs.  An spmv reads its
 *    matrix once (12 bytes a nonzero), so moving the matrix costs about as
 *    much as the product over NVLink and several times it over PCIe; even
 *    moving only its x and y adds 8 bytes a row to each product.  Placing
 *    the object beside the others costs nothing per request.
 *  - What is lost is balance: a connection's objects share one device, so
 *    its requests do too.  But they did already: a request runs where its
 *    matrix lives, so vectors placed elsewhere only added copies.  One
 *    connection is one computation (a solver's matrix and vectors, one
 *    process's pipeline), so the unit kept together is the connection,
 *    and the unit spread is the connection too: many processes (or one
 *    with a connection per worker, each with its own matrix) spread over
 *    the devices, one home each.
 *  - Homes are spread by count, not by the work queued at upload time:
 *    objects outlive the moment, and on an idle gkcd every device has no
 *    work queued, so that rule put every connection's first object on
 *    device 0.  Free memory breaks ties (devices of unequal size, or
 *    connections that made more than others).
 *  - The home follows the last object placed, named or not: a connection
 *    that names `device` for its matrix gets its unnamed vectors there,
 *    and one whose home filled up moves on with its later objects.  A
 *    request reading a matrix that lives on one device also makes that
 *    device the home, so a second connection of a client working on a
 *    `shared` matrix uploads its vectors beside it.  Replicated and
 *    partitioned objects are on several devices and fix nothing; a client
 *    that wants its work spread replicates what it shares, or names
 *    `device`, which is always obeyed.
 *  - Room: an object goes elsewhere rather than fail, and its requests
 *    then move operands, reporting peer_bytes.
 */
int place_home(int n, uint64_t live, int home, const uint64_t *room, const int *homes,
               uint64_t bytes) {
  if (n > 64) n = 64;
  if (home >= 0 && home < n && (live & (1ull << home)) && room[home] >= bytes) return home;
  uint64_t roomy = 0;
  for (int d = 0; d < n; d++)
    if ((live & (1ull << d)) && room[d] >= bytes) roomy |= 1ull << d;
  uint64_t cand = roomy ? roomy : live;
  int best = -1, best_homes = 0;
  for (int d = 0; d < n; d++) {
    if (!(cand & (1ull << d))) continue;
    int h = homes[d] - (d == home); /* the connection leaving its old home */
    if (best < 0 || h < best_homes || (h == best_homes && room[d] > room[best])) best = d, best_homes = h;
  }
  return best;
}

int place_homeless(const gkcd_job *job) {
  int makes = job->row->makes;
  if (!((makes == RES_ARRAY || makes == RES_MATRIX) && job->out_kind == OUT_RES_NEW &&
        job->pin_device < 0 && !job->replicate && !job->gang_mask))
    return 0;
  /* An upload copying a resident array runs where that array is, as it
   * always did: the copy is made there, not moved. */
  for (int i = 0; i < job->nres; i++)
    if (on_device(job->res[i])) return 0;
  return 1;
}

int place_home_hint(const gkcd_job *job) {
  int makes = job->row->makes;
  if (makes == RES_ARRAY || makes == RES_MATRIX)
    return job->pin_device >= 0 && !job->replicate && !job->gang_mask ? job->pin_device : -1;
  for (int i = 0; i < job->nres; i++) {
    const gkcd_res *r = job->res[i];
    if (r->kind == RES_MATRIX && !r->rep_mask && !r->part) return r->device;
  }
  return -1;
}
