/* resident.c: see resident.h. */
#include "resident.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "gkc_errors.h"
#include "log.h"
#include "part.h"
#include "proto_methods.h"

static gkcd_res **bucket(gkcd_residents *t, uint32_t id) { return &t->bucket[id % RES_BUCKETS]; }

/* The counter of objects like r's, by owner and kind. */
static int *counter(gkcd_residents *t, res_owner *owner, int kind) {
  if (!owner) return &t->n_shared;
  return kind == RES_REGION ? &owner->n_regions : &owner->n_objects;
}

static int id_in_use(gkcd_residents *t, uint32_t id) {
  for (gkcd_res *r = *bucket(t, id); r; r = r->next)
    if (r->id == id) return 1;
  return 0;
}

/* 64 random bits; getrandom does not fail for 8 bytes once the pool is
 * ready, but if it ever does the clock and pid still make two starts differ. */
static uint64_t random64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
    log_warn("getrandom failed: the instance id comes from the clock and pid");
  }
  return v;
}

void res_instance_hex(uint64_t instance, char *buf) {
  snprintf(buf, 17, "%016llx", (unsigned long long)instance);
}

void res_init(gkcd_residents *t, gkcd_devices *devs, gkcd_budget *budget) {
  memset(t, 0, sizeof *t);
  do t->instance = random64();
  while (t->instance == 0); /* 0 means "unknown" to clients */
  t->shared_instance = t->instance;
  /* Ids count up from a random point, so that an id an old client kept
   * from an earlier instance is unlikely to name anything here. */
  t->next_id = (uint32_t)(t->instance >> 32);
  t->devs = devs;
  t->budget = budget;
  t->max_conn_pinned = SIZE_MAX; /* the server sets --max-conn-pinned */
  /* Regions are registered by device 0's backend, portable to all. */
  pinner_init(&t->pinner, devs && devs->n ? devs->dev[0].be : NULL);
}

void res_region_pin(gkcd_residents *t, gkcd_res *r, int pinned, uint64_t dev, uint64_t ino) {
  r->pin = pinned ? pinner_adopt(&t->pinner, r->ptr, r->bytes, dev, ino)
                  : pinner_pin(&t->pinner, r->ptr, r->bytes, dev, ino);
}

gkcd_res *res_add(gkcd_residents *t, int kind, res_owner *owner) {
  gkcd_res *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  /* 0 is never an id, and once the counter has wrapped (2^32 objects made
   * over gkcd's life) an id still in use is skipped: a handle must never
   * name two objects.  It skips at most as many ids as there are live
   * objects. */
  do r->id = ++t->next_id;
  while (r->id == 0 || id_in_use(t, r->id));
  r->kind = kind;
  r->owner = owner;
  r->refs = 1;
  r->pos_offdiag = -1; /* not known: what csr_upload measures (restored matrices do not) */
  gkcd_res **b = bucket(t, r->id);
  r->next = *b;
  *b = r;
  t->live[kind]++;
  (*counter(t, owner, kind))++;
  return r;
}

gkcd_res *res_add_id(gkcd_residents *t, int kind, res_owner *owner, uint32_t id) {
  if (id == 0 || id_in_use(t, id)) return NULL;
  gkcd_res *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->id = id;
  r->kind = kind;
  r->owner = owner;
  r->refs = 1;
  r->pos_offdiag = -1; /* not known: what csr_upload measures (restored matrices do not) */
  gkcd_res **b = bucket(t, r->id);
  r->next = *b;
  *b = r;
  t->live[kind]++;
  (*counter(t, owner, kind))++;
  return r;
}

gkcd_res *res_find(gkcd_residents *t, const res_owner *asker, uint32_t id) {
  for (gkcd_res *r = *bucket(t, id); r; r = r->next)
    if (r->id == id && !r->released && (r->owner == NULL || r->owner == asker)) return r;
  return NULL;
}

void res_ref(gkcd_res *r) { r->refs++; }

size_t res_charge(const gkcd_res *r) {
  return r->bytes * (r->rep_mask ? (size_t)__builtin_popcountll(r->rep_mask) : 1);
}

void res_unref(gkcd_residents *t, gkcd_res *r) {
  if (--r->refs > 0) return;
  gkcd_device *dev = t->devs->dev;
  if (r->kind == RES_REGION) {
    if (r->pin) /* after its registration, off the loop */
      pinner_release(&t->pinner, r->pin);
    else
      munmap(r->ptr, r->bytes);
  } else {
    if (r->part) { /* partitioned: one block per device */
      part_free(r->part);
    } else if (r->copies) { /* replicated: one copy per device */
      for (int d = 0; d < t->devs->n; d++)
        if (r->rep_mask & (1ull << d)) dev[d].be->res_free(dev[d].be, r->copies[d].ptr, r->copies[d].cap);
      free(r->copies);
    } else {
      dev[r->device].be->res_free(dev[r->device].be, r->ptr, r->cap);
    }
    budget_give(t->budget, BUDGET_RESIDENT, res_charge(r));
    if (r->precond) { /* the AMG hierarchy a solve built for it */
      gkcd_backend *be = dev[r->device].be;
      if (be->precond_free) be->precond_free(be, r->precond);
      budget_give(t->budget, BUDGET_RESIDENT, r->precond_bytes);
      t->precond_bytes -= r->precond_bytes;
    }
  }
  free(r);
}

void res_release(gkcd_residents *t, gkcd_res *r) {
  if (r->released) return;
  r->released = 1;
  t->live[r->kind]--;
  (*counter(t, r->owner, r->kind))--;
  if (r->kind == RES_REGION && r->owner) res_unpin(t, r->owner, r->bytes);
  for (gkcd_res **p = bucket(t, r->id); *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  res_unref(t, r);
}

void res_drop_owner(gkcd_residents *t, res_owner *owner, int keep_regions) {
  for (int b = 0; b < RES_BUCKETS; b++)
    for (gkcd_res *r = t->bucket[b], *next; r; r = next) {
      next = r->next;
      if (r->owner != owner) continue;
      if (!keep_regions && r->kind == RES_REGION && r->pin) r->pin->ino = 0; /* never kept */
      res_release(t, r);
    }
}

int res_room(const gkcd_residents *t, const res_owner *owner, int kind, char *msg, size_t msglen) {
  int limit = !owner ? RES_MAX_SHARED : kind == RES_REGION ? RES_MAX_REGIONS : RES_MAX_OBJECTS;
  int have = !owner ? t->n_shared : kind == RES_REGION ? owner->n_regions : owner->n_objects;
  if (have < limit) return 0;
  snprintf(msg, msglen, "%s %d %s already: release some first", owner ? "this connection holds" :
           "the daemon holds", limit, !owner ? "shared objects" : kind == RES_REGION ? "regions" :
           "resident objects");
  return GKC_EINVALID_ARGUMENT;
}

int res_pin(gkcd_residents *t, res_owner *owner, size_t bytes, char *msg, size_t msglen) {
  if (owner->pinned + bytes > t->max_conn_pinned) {
    snprintf(msg, msglen, "registering %zu bytes would make this connection's regions %llu bytes,"
             " over gkcd's limit of %zu (--max-conn-pinned): release a region or send inline",
             bytes, (unsigned long long)(owner->pinned + bytes), t->max_conn_pinned);
    return GKC_EOUT_OF_MEMORY;
  }
  owner->pinned += bytes;
  t->pinned += bytes;
  return 0;
}

void res_unpin(gkcd_residents *t, res_owner *owner, size_t bytes) {
  owner->pinned -= bytes;
  t->pinned -= bytes;
}

void res_free_all(gkcd_residents *t) {
  for (int b = 0; b < RES_BUCKETS; b++)
    while (t->bucket[b]) res_release(t, t->bucket[b]);
  pinner_stop(&t->pinner);
}

/* shm_release {region} and release {handle | matrix}, on the loop. */
int res_release_request(gkcd_residents *t, res_owner *asker, int method,
                        const msgpack_object *params, char *msg, size_t msglen) {
  args_ctx a = {params, msg, msglen};
  const char *key = method == PROTO_M_SHM_RELEASE ? "region"
                    : args_present(&a, "matrix")  ? "matrix"
                                                  : "handle";
  const char *keys[] = {key, NULL};
  int64_t id;
  int rc;
  if ((rc = args_known(&a, keys)) || (rc = args_int(&a, key, 1, 1, UINT32_MAX, &id))) return rc;
  gkcd_res *r = res_find(t, asker, (uint32_t)id);
  /* Handles and matrices share one id space: "handle" names either. */
  int ok = r && (key[0] == 'r' ? r->kind == RES_REGION
                 : key[0] == 'm' ? r->kind == RES_MATRIX
                                 : r->kind != RES_REGION);
  if (!ok) {
    snprintf(msg, msglen, "argument '%s': no %s %lld on this connection", key, key, (long long)id);
    return GKC_EINVALID_ARGUMENT;
  }
  /* A region its client released is done with: not kept for a next
   * registration (pinner.h), as one whose connection closed is. */
  if (r->kind == RES_REGION && r->pin) r->pin->ino = 0;
  res_release(t, r);
  return 0;
}
