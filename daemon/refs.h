/* refs.h: array arguments given by value (bin), by region or by handle,
 * and where array results go (`out`).  See PROTOCOL.md, "Data that stays".
 *
 * Every check happens here, on the loop, before anything is allocated:
 * region bounds and alignment, handle ownership, dtype and length.  Objects
 * a job uses are referenced by the job, so a release meanwhile cannot free
 * memory under it.
 */
#ifndef GKCD_REFS_H
#define GKCD_REFS_H

#include <stdint.h>

#include "args.h"
#include "devices.h"
#include "job.h"
#include "resident.h"

/* One request being parsed into a job: its arguments and what they may
 * name. */
typedef struct refs_ctx {
  args_ctx *a;
  gkcd_residents *res;  /* the objects handles and regions name */
  res_owner *asker;     /* the asking connection's share of them */
  gkcd_devices *devs;   /* where it may run: dev[0]'s algo names, `devices` */
  int fd;               /* the descriptor sent with it (shm_register), or -1 */
  gkcd_job *job;
} refs_ctx;

#define REFS_ANY_LEN UINT64_MAX /* any positive multiple of 4 bytes */

/* The array argument key: a bin, {"region", "offset", "bytes"} or
 * {"handle"}, holding want_bytes bytes (or any multiple of 4 with
 * REFS_ANY_LEN, >= 4 unless allow_empty) of dtype.  what says where
 * want_bytes comes from ("m*k = 3*4"), for the message that gives both
 * lengths when they differ.  Absent and optional: span left empty. */
int refs_array(refs_ctx *r, const char *key, int required, uint64_t want_bytes, int allow_empty,
               int dtype, const char *what, gkcd_span *out);

/* The same length check for a span already taken: have bytes of dtype where
 * what requires want (not REFS_ANY_LEN). */
int refs_check_len(refs_ctx *r, const char *key, uint64_t have, uint64_t want, int dtype,
                   const char *what);

/* "float32" or "int32", as messages name the element types. */
const char *refs_type_name(int dtype);

/* The result's destination from the optional `out` map, whose only key
 * must be name ("c" or "y"): sets job->out_kind and, for OUT_HOST/OUT_RES,
 * job->out_ptr. */
int refs_out(refs_ctx *r, const char *name, size_t out_bytes);

/* The resident object id under key, of the given kind, usable by this
 * connection; referenced by the job. */
int refs_object(refs_ctx *r, const char *key, int kind, gkcd_res **out);

#endif
