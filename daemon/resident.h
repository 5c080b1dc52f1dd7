/* resident.h: the table of what outlives a request: resident arrays and
 * matrices in the backend's memory, and shared-memory regions mapped from a
 * client (each a gkcd_res, res_object.h).
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

#include "budget.h"
#include "devices.h"
#include "job.h"
#include "pinner.h"
#include "res_object.h"

#define RES_MAX_REGIONS 64   /* per connection */
#define RES_MAX_OBJECTS 4096 /* resident arrays and matrices per connection */
#define RES_MAX_SHARED 4096  /* shared arrays and matrices, all connections together */
#define RES_BUCKETS 1024

/* The table of every live object, owned by the server. */
typedef struct gkcd_residents {
  gkcd_res *bucket[RES_BUCKETS]; /* by id */
  uint32_t next_id;              /* starts at random: ids of two instances rarely meet */
  /* This gkcd's instance id, random at start, and the instance whose shared
   * objects it holds: its own, or the saved one when it restored shared
   * objects from systemd's fd store (fdstore.h), so that clients holding
   * them know they survived.  PROTOCOL.md, "Instances". */
  uint64_t instance, shared_instance;
  uint64_t restored, restored_bytes; /* objects and bytes brought back at start */
  uint64_t precond_bytes;        /* AMG hierarchies kept with matrices (gkcd_res.precond) */
  uint64_t live[4];              /* by kind */
  int n_shared;                  /* shared objects, owned by nobody */
  gkcd_devices *devs;            /* where arrays and matrices live; dev[0] pins regions */
  gkcd_budget *budget;           /* charged BUDGET_RESIDENT for arrays and matrices */
  size_t max_conn_pinned;        /* what one owner's regions may add up to (--max-conn-pinned) */
  uint64_t pinned;               /* every owner's region bytes together */
  gkcd_pinner pinner;            /* registers regions for DMA, off the loop (pinner.h) */
} gkcd_residents;

/* An empty table whose objects' memory belongs to devs and is charged to
 * budget, with a fresh random instance id. */
void res_init(gkcd_residents *t, gkcd_devices *devs, gkcd_budget *budget);
/* Registers a new object (refs = 1) and returns it, or NULL when out of
 * memory; fills id. */
gkcd_res *res_add(gkcd_residents *t, int kind, res_owner *owner);
/* Registers an object under a given id (restoring one saved by an earlier
 * instance): NULL when out of memory or when the id is 0 or in use. */
gkcd_res *res_add_id(gkcd_residents *t, int kind, res_owner *owner, uint32_t id);
/* Writes an instance id as 16 hex digits (buf: at least 17 bytes). */
void res_instance_hex(uint64_t instance, char *buf);
/* The live object with this id that asker may use, or NULL. */
gkcd_res *res_find(gkcd_residents *t, const res_owner *asker, uint32_t id);
void res_ref(gkcd_res *r);
/* The bytes r holds against the memory budget: one copy per device. */
size_t res_charge(const gkcd_res *r);
/* Drops a reference; the last one frees the memory (backend memory, or the
 * mapping of a region). */
void res_unref(gkcd_residents *t, gkcd_res *r);
/* Makes the id unknown and drops the registration's reference. */
void res_release(gkcd_residents *t, gkcd_res *r);
/* Releases every object owner holds (when its connection closes). */
void res_drop_owner(gkcd_residents *t, res_owner *owner, int keep_regions);
/* 0 when owner (NULL: shared) may create one more object of kind, else
 * GKC_EINVALID_ARGUMENT with the limit in msg. */
int res_room(const gkcd_residents *t, const res_owner *owner, int kind, char *msg, size_t msglen);
/* The shm_release {region} and release {handle | matrix} requests (method
 * PROTO_M_SHM_RELEASE or PROTO_M_RELEASE, params their map): releases the
 * object of asker's that the request names and returns 0, or returns
 * GKC_EINVALID_ARGUMENT with a message in msg. */
int res_release_request(gkcd_residents *t, res_owner *asker, int method,
                        const msgpack_object *params, char *msg, size_t msglen);
/* A region of bytes about to be registered for owner: 0 with the bytes
 * counted against the owner's --max-conn-pinned, else GKC_EOUT_OF_MEMORY
 * naming the limit.  res_unpin gives them back (a registration that failed;
 * a region released does it itself). */
int res_pin(gkcd_residents *t, res_owner *owner, size_t bytes, char *msg, size_t msglen);
void res_unpin(gkcd_residents *t, res_owner *owner, size_t bytes);
/* Starts registering region r (its ptr and bytes set; the file dev, ino)
 * for DMA in the background; until that is done res_region_pinned(r) is 0
 * and requests copy it as unregistered memory.  pinned: shm_register
 * registered it already (region.c, or a kept registration), so it is
 * ready now. */
void res_region_pin(gkcd_residents *t, gkcd_res *r, int pinned, uint64_t dev, uint64_t ino);
/* r is a region registered for DMA. */
static inline int res_region_pinned(const gkcd_res *r) { return pinner_ready(r->pin); }
/* At exit: releases everything, and waits for the regions' unregistering. */
void res_free_all(gkcd_residents *t);

#endif
