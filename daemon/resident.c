/* resident.c: see resident.h. */
#include "resident.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "args.h"
#include "gkc_errors.h"
#include "log.h"
#include "part.h"
#include "proto_methods.h"
#include "server.h"

static int *counter(gkcd_server *srv, gkcd_conn *owner, int kind);

static gkcd_res **bucket(gkcd_server *srv, uint32_t id) {
  return &srv->res_table[id % RES_BUCKETS];
}

gkcd_res *res_add(gkcd_server *srv, int kind, gkcd_conn *owner) {
  gkcd_res *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->id = ++srv->next_res_id;
  if (r->id == 0) r->id = ++srv->next_res_id; /* 0 is never an id */
  r->kind = kind;
  r->owner = owner;
  r->refs = 1;
  gkcd_res **b = bucket(srv, r->id);
  r->next = *b;
  *b = r;
  srv->res_live[kind]++;
  (*counter(srv, owner, kind))++;
  return r;
}

gkcd_res *res_find(gkcd_server *srv, gkcd_conn *asker, uint32_t id) {
  for (gkcd_res *r = *bucket(srv, id); r; r = r->next)
    if (r->id == id && !r->released && (r->owner == NULL || r->owner == asker)) return r;
  return NULL;
}

void res_ref(gkcd_res *r) { r->refs++; }

size_t res_charge(const gkcd_res *r) {
  return r->bytes * (r->rep_mask ? (size_t)__builtin_popcountll(r->rep_mask) : 1);
}

void res_unref(gkcd_server *srv, gkcd_res *r) {
  if (--r->refs > 0) return;
  if (r->kind == RES_REGION) {
    if (r->pinned && srv->be->region_unpin) srv->be->region_unpin(srv->be, r->ptr);
    munmap(r->ptr, r->bytes);
  } else {
    if (r->part) { /* partitioned: one block per device */
      part_free(r->part);
    } else if (r->copies) { /* replicated: one copy per device */
      for (int d = 0; d < srv->devs.n; d++)
        if (r->rep_mask & (1ull << d))
          srv->devs.dev[d].be->res_free(srv->devs.dev[d].be, r->copies[d].ptr, r->copies[d].cap);
      free(r->copies);
    } else {
      gkcd_backend *be = srv->devs.dev[r->device].be;
      be->res_free(be, r->ptr, r->cap);
    }
    budget_give(&srv->budget, BUDGET_RESIDENT, res_charge(r));
  }
  free(r);
}

void res_release(gkcd_server *srv, gkcd_res *r) {
  if (r->released) return;
  r->released = 1;
  srv->res_live[r->kind]--;
  (*counter(srv, r->owner, r->kind))--;
  for (gkcd_res **p = bucket(srv, r->id); *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  res_unref(srv, r);
}

void res_drop_owner(gkcd_server *srv, gkcd_conn *owner) {
  for (int b = 0; b < RES_BUCKETS; b++)
    for (gkcd_res *r = srv->res_table[b], *next; r; r = next) {
      next = r->next;
      if (r->owner == owner) res_release(srv, r);
    }
}

/* The counter of objects like r's, by owner and kind. */
static int *counter(gkcd_server *srv, gkcd_conn *owner, int kind) {
  if (!owner) return &srv->n_shared;
  return kind == RES_REGION ? &owner->n_regions : &owner->n_objects;
}

int res_room(gkcd_server *srv, gkcd_conn *owner, int kind, char *msg, size_t msglen) {
  int limit = !owner ? RES_MAX_SHARED : kind == RES_REGION ? RES_MAX_REGIONS : RES_MAX_OBJECTS;
  if (*counter(srv, owner, kind) < limit) return 0;
  snprintf(msg, msglen, "%s %d %s already: release some first", owner ? "this connection holds" :
           "the daemon holds", limit, !owner ? "shared objects" : kind == RES_REGION ? "regions" :
           "resident objects");
  return GKC_EINVALID_ARGUMENT;
}

void resident_free_all(gkcd_server *srv) {
  for (int b = 0; b < RES_BUCKETS; b++)
    while (srv->res_table[b]) res_release(srv, srv->res_table[b]);
}

/* shm_release {region} and release {handle | matrix}, on the loop. */
int res_release_request(gkcd_conn *c, int method, const msgpack_object *params, char *msg,
                        size_t msglen) {
  args_ctx a = {params, msg, msglen};
  const char *key = method == PROTO_M_SHM_RELEASE ? "region"
                    : args_present(&a, "matrix")  ? "matrix"
                                                  : "handle";
  const char *keys[] = {key, NULL};
  int64_t id;
  int rc;
  if ((rc = args_known(&a, keys)) || (rc = args_int(&a, key, 1, 1, UINT32_MAX, &id))) return rc;
  gkcd_res *r = res_find(c->srv, c, (uint32_t)id);
  /* Handles and matrices share one id space: "handle" names either. */
  int ok = r && (key[0] == 'r' ? r->kind == RES_REGION
                 : key[0] == 'm' ? r->kind == RES_MATRIX
                                 : r->kind != RES_REGION);
  if (!ok) {
    snprintf(msg, msglen, "argument '%s': no %s %lld on this connection", key, key, (long long)id);
    return GKC_EINVALID_ARGUMENT;
  }
  res_release(c->srv, r);
  return 0;
}
