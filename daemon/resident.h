/* resident.h: what outlives a request: resident arrays and matrices in the
 * backend's memory, and shared-memory regions mapped from a client.
 *
 * Every object has an id from one counter, an owner connection (NULL when
 * shared) and a reference count: one for being registered, one for each
 * job using it.  Releasing it (by request, or when its owner disconnects)
 * makes the id unknown at once, and frees the memory when the last job
 * using it is done.  Loop thread only.
 */
#ifndef GKCD_RESIDENT_H
#define GKCD_RESIDENT_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

typedef struct gkcd_server gkcd_server;

enum { RES_ARRAY = 1, RES_MATRIX = 2, RES_REGION = 3 };
enum { DT_F32 = 0, DT_I32 = 1 };

#define RES_MAX_REGIONS 64   /* per connection */
#define RES_MAX_OBJECTS 4096 /* resident arrays and matrices per connection */
#define RES_MAX_SHARED 4096  /* shared arrays and matrices, all connections together */

struct gkcd_res {
  uint32_t id;
  int kind;
  gkcd_conn *owner; /* NULL: shared */
  int refs;
  int released;
  size_t bytes;     /* array or region size; a matrix's three arrays together */
  void *ptr;        /* array, matrix: backend memory; region: the mapping */
  size_t cap;       /* backend allocation size */
  int dtype;        /* array */
  int pinned;       /* region registered with the backend for DMA */
  int32_t rows, cols; /* matrix: row_ptr at ptr, then col_idx, then values */
  int64_t nnz;
  int32_t max_row;
  int algo;         /* matrix: the spmv algo auto uses */
  size_t plan_off;  /* matrix: offset of the backend's spmv plan in ptr, past
                     * the arrays and within cap (0: none) */
  int device;       /* array, matrix: the device its memory is on */
  uint64_t rep_mask; /* replicated: the devices holding a copy (bit d); 0: not */
  gkcd_copy *copies; /* replicated: copies[d] for each d in rep_mask (ptr, cap are
                      * copies[device]); read-only, so never an `out` */
  struct gkcd_part *part; /* matrix partitioned by rows over several devices (part.h), or
                           * NULL; ptr is then NULL and device its first device */
  gkcd_res *next;   /* hash chain */
};

/* Registers a new object (refs = 1) and returns it, or NULL when out of
 * memory; fills id. */
gkcd_res *res_add(gkcd_server *srv, int kind, gkcd_conn *owner);
/* The live object with this id that asker may use, or NULL. */
gkcd_res *res_find(gkcd_server *srv, gkcd_conn *asker, uint32_t id);
void res_ref(gkcd_res *r);
/* The bytes r holds against the memory budget: one copy per device. */
size_t res_charge(const gkcd_res *r);
/* Drops a reference; the last one frees the memory (backend memory, or the
 * mapping of a region). */
void res_unref(gkcd_server *srv, gkcd_res *r);
/* Makes the id unknown and drops the registration's reference. */
void res_release(gkcd_server *srv, gkcd_res *r);
/* Releases every object the connection owns (when it closes). */
void res_drop_owner(gkcd_server *srv, gkcd_conn *owner);
/* 0 when owner (NULL: shared) may create one more object of kind, else
 * GKC_EINVALID_ARGUMENT with the limit in msg. */
int res_room(gkcd_server *srv, gkcd_conn *owner, int kind, char *msg, size_t msglen);
/* The shm_release {region} and release {handle | matrix} requests (method
 * PROTO_M_SHM_RELEASE or PROTO_M_RELEASE, params their map): releases the
 * object of c's that the request names and returns 0, or returns
 * GKC_EINVALID_ARGUMENT with a message in msg. */
int res_release_request(gkcd_conn *c, int method, const msgpack_object *params, char *msg,
                        size_t msglen);
/* At exit: releases everything. */
void resident_free_all(gkcd_server *srv);

#endif
