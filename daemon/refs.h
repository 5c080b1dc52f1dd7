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
  /* The dtype of the request's float arrays (refs_floats): DT_F32 unless
   * settled otherwise, by fdt_from ("dtype", an argument's name; NULL: the
   * default).  f32_only: the method takes float32 alone (sgemm, reduce). */
  int fdt;
  const char *fdt_from;
  int f32_only;
  const char *where;    /* a prefix for argument names in f64_arg ("steps[3]."), or NULL */
  const char *op;       /* what messages call the operation (a batch step's op); NULL: the method */
} refs_ctx;

#define REFS_ANY_LEN UINT64_MAX /* any positive whole number of elements */
#define REFS_FLOAT (-1)         /* refs_array's dtype: the request's float dtype (fdt) */

/* Settles the dtype of the request's float arrays, r->fdt: the `dtype`
 * argument when given ("f32" or "f64"); else that of the first argument of
 * keys (NULL-terminated, in the method's order) that carries one (a handle
 * to a float array, a region reference with "dtype"); else DT_F32.  An
 * argument that does not name a float array is left for refs_array to
 * report.  With f32_only the dtype is DT_F32: a `dtype` of "f64" is
 * invalid_argument naming both dtypes, and refs_array refuses a float64
 * handle or region the same way, naming it. */
int refs_floats(refs_ctx *r, const char *const *keys, int f32_only);

/* Bytes of x*y elements of dtype, or UINT64_MAX when that overflows (or
 * does not fit a size_t, so every later size computation is safe). */
uint64_t refs_bytes(uint64_t x, uint64_t y, int dtype);

/* The array argument key: a bin, {"region", "offset", "bytes"[, "dtype"]}
 * or {"handle"}, holding want_bytes bytes (or any whole number of elements
 * with REFS_ANY_LEN, >= 1 unless allow_empty) of dtype (REFS_FLOAT: the
 * request's float dtype, r->fdt).  A handle or a region reference of
 * another dtype is invalid_argument naming both.  what says where
 * want_bytes comes from ("m*k = 3*4"), for the message that gives both
 * lengths when they differ.  Sets out->dtype.  Absent and optional: span
 * left empty. */
int refs_array(refs_ctx *r, const char *key, int required, uint64_t want_bytes, int allow_empty,
               int dtype, const char *what, gkcd_span *out);

/* The same length check for a span already taken: have bytes of dtype where
 * what requires want (not REFS_ANY_LEN). */
int refs_check_len(refs_ctx *r, const char *key, uint64_t have, uint64_t want, int dtype,
                   const char *what);

/* "float32 (f32)", as messages name the element types. */
const char *refs_type_name(int dtype);

/* The result's destination from the optional `out` map, whose only key
 * must be name ("c" or "y"): sets job->out_kind, job->out_dtype (the
 * result's dtype) and, for OUT_HOST/OUT_RES, job->out_ptr. */
int refs_out(refs_ctx *r, const char *name, size_t out_bytes, int dtype);

/* A region target, the map t under argument arg: {"region": r, "offset":
 * o}, with allow_bytes also an optional "bytes" that must equal out_bytes,
 * for a result of out_bytes bytes of dtype.  The region must be this
 * connection's, o a multiple of the element's size, and [o, o + out_bytes)
 * inside the region (checked without overflow); the region is then held by
 * the job, *reg and *offset set.  refs_out's region form, and a batch
 * step's (method_batch.c). */
int refs_region_target(refs_ctx *r, const char *arg, const msgpack_object *t, size_t out_bytes,
                       int dtype, int allow_bytes, gkcd_res **reg, uint64_t *offset);

/* Notes that argument key holds float64 (job->f64_arg, its first). */
void refs_note_f64(refs_ctx *r, const char *key);

/* The resident object id under key, of the given kind, usable by this
 * connection; referenced by the job. */
int refs_object(refs_ctx *r, const char *key, int kind, gkcd_res **out);

#endif
