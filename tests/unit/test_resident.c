/* test_resident: the resident table (daemon/resident.c) on its own, with
 * backends that count what they are asked to free: ids, who may find what,
 * the limits, when memory goes back (to the right device, once, after the
 * last job), the budget's books, and the release requests. */
#include <errno.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "budget.h"
#include "devices.h"
#include "gkc_errors.h"
#include "part.h"
#include "proto_methods.h"
#include "resident.h"
#include "test.h"

/* --- devices that count -------------------------------------------------- */

#define NDEV 3
static gkcd_devices g_devs;
static gkcd_backend g_be[NDEV];
static gkcd_budget g_budget;
static gkcd_residents g_res;

static int g_freed[NDEV];      /* res_free calls, by device */
static void *g_freed_ptr[NDEV]; /* the last pointer freed there */
/* Regions: registered and unregistered on the pinner's thread, so these
 * are read once res_free_all has waited for it. */
static atomic_int g_pinned, g_unpinned, g_pin_fails, g_order_bad;
static void *g_unpinned_ptr;
static pthread_t g_main;
static int g_parts_freed;

static void count_free(gkcd_backend *be, void *ptr, size_t cap) {
  (void)cap;
  g_freed[be->device]++;
  g_freed_ptr[be->device] = ptr;
}
/* Registration is slow (a sleep stands for cudaHostRegister) and may be
 * refused (g_pin_fails): neither may hold up the caller. */
static int count_pin(gkcd_backend *be, void *ptr, size_t bytes) {
  (void)ptr, (void)bytes;
  if (be->device != 0 || pthread_equal(pthread_self(), g_main)) atomic_fetch_add(&g_order_bad, 1);
  nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
  if (atomic_load(&g_pin_fails)) return -1;
  atomic_fetch_add(&g_pinned, 1);
  return 0;
}
static void count_unpin(gkcd_backend *be, void *ptr) {
  ASSERT_EQ(be->device, 0); /* regions are pinned with device 0's backend */
  /* never before its registration, never on the loop */
  if (atomic_load(&g_pinned) <= atomic_load(&g_unpinned) || pthread_equal(pthread_self(), g_main))
    atomic_fetch_add(&g_order_bad, 1);
  g_unpinned++;
  g_unpinned_ptr = ptr;
}
/* part.c is not linked: a partitioned matrix's blocks are its business. */
void part_free(gkcd_part *p) {
  if (p) g_parts_freed++;
  free(p);
}

static void reset(void) {
  memset(&g_devs, 0, sizeof g_devs);
  memset(g_be, 0, sizeof g_be);
  g_devs.n = NDEV;
  for (int d = 0; d < NDEV; d++) {
    g_be[d].device = d;
    g_be[d].res_free = count_free;
    g_be[d].region_pin = count_pin;
    g_be[d].region_unpin = count_unpin;
    g_devs.dev[d].be = &g_be[d];
  }
  memset(&g_budget, 0, sizeof g_budget);
  g_budget.limit = (size_t)1 << 30;
  memset(g_freed, 0, sizeof g_freed);
  g_pinned = g_unpinned = g_pin_fails = g_order_bad = 0;
  g_parts_freed = 0;
  res_init(&g_res, &g_devs, &g_budget);
}

/* An array of n bytes on device d, charged as rpc.c's adopt() charges it. */
static gkcd_res *array(res_owner *owner, int d, size_t n) {
  gkcd_res *r = res_add(&g_res, RES_ARRAY, owner);
  ASSERT(r);
  r->device = d;
  r->bytes = r->cap = n;
  r->ptr = (void *)(uintptr_t)(0x1000 * (r->id + 1)); /* never dereferenced */
  budget_take(&g_budget, BUDGET_RESIDENT, res_charge(r));
  return r;
}

/* --- ids and who may find what ------------------------------------------ */

static void test_ids_and_owners(void) {
  reset();
  res_owner a = {0}, b = {0};
  gkcd_res *ra = array(&a, 0, 16), *rb = array(&b, 1, 16), *rs = array(NULL, 2, 16);
  ASSERT(ra->id != 0 && rb->id != 0 && rs->id != 0);
  ASSERT(ra->id != rb->id && rb->id != rs->id && ra->id != rs->id);
  ASSERT(res_find(&g_res, &a, ra->id) == ra);
  ASSERT(res_find(&g_res, &b, ra->id) == NULL);  /* another connection's */
  ASSERT(res_find(&g_res, &b, rb->id) == rb);
  ASSERT(res_find(&g_res, &a, rs->id) == rs);     /* shared: anyone's */
  ASSERT(res_find(&g_res, &b, rs->id) == rs);
  ASSERT(res_find(&g_res, &a, rs->id + 1000) == NULL);
  ASSERT(res_find(&g_res, &a, 0) == NULL);
  ASSERT_EQ(a.n_objects, 1);
  ASSERT_EQ(b.n_objects, 1);
  ASSERT_EQ(g_res.n_shared, 1);
  ASSERT_EQ(g_res.live[RES_ARRAY], 3);
  res_free_all(&g_res);
  ASSERT_EQ(g_res.live[RES_ARRAY], 0);
  ASSERT_EQ(g_freed[0] + g_freed[1] + g_freed[2], 3);
  ASSERT_EQ(g_budget.by_kind[BUDGET_RESIDENT], 0);
}

/* Each table gets its own random instance id, and its ids start at a
 * random point (so an old client's id rarely names anything here); an
 * object restored under its saved id keeps it, and an id in use is
 * refused. */
static void test_instance_and_restored_ids(void) {
  reset();
  uint64_t first = g_res.instance;
  ASSERT(first != 0);
  ASSERT_EQ(g_res.shared_instance, first);
  res_free_all(&g_res);
  reset();
  ASSERT(g_res.instance != first);
  res_owner a = {0};
  gkcd_res *r = res_add_id(&g_res, RES_ARRAY, NULL, 77);
  ASSERT(r && r->id == 77 && g_res.n_shared == 1);
  ASSERT(res_add_id(&g_res, RES_ARRAY, NULL, 77) == NULL);
  ASSERT(res_add_id(&g_res, RES_ARRAY, NULL, 0) == NULL);
  ASSERT(res_find(&g_res, &a, 77) == r);
  char hex[17];
  res_instance_hex(0x1a2bull, hex);
  ASSERT_STR_EQ(hex, "0000000000001a2b");
  res_release(&g_res, r);
  res_free_all(&g_res);
}

/* Once the counter wraps, ids still in use are skipped, and 0 never comes. */
static void test_id_wrap(void) {
  reset();
  g_res.next_id = 0; /* res_init starts at random; the wrap is tested from 0 */
  res_owner a = {0};
  gkcd_res *first = array(&a, 0, 8);  /* id 1 */
  gkcd_res *second = array(&a, 0, 8); /* id 2 */
  ASSERT_EQ(first->id, 1);
  ASSERT_EQ(second->id, 2);
  g_res.next_id = UINT32_MAX - 1;
  gkcd_res *top = array(&a, 0, 8);
  ASSERT_EQ(top->id, UINT32_MAX);
  gkcd_res *wrapped = array(&a, 0, 8);
  ASSERT_EQ(wrapped->id, 3); /* not 0, not 1 or 2 (in use) */
  ASSERT(res_find(&g_res, &a, 1) == first);
  ASSERT(res_find(&g_res, &a, 3) == wrapped);
  res_release(&g_res, first);
  g_res.next_id = UINT32_MAX;
  ASSERT_EQ(array(&a, 0, 8)->id, 1); /* free again: taken */
  res_free_all(&g_res);
}

/* --- lifetime: released at once, freed after the last job ---------------- */

static void test_release_after_jobs(void) {
  reset();
  res_owner a = {0};
  gkcd_res *r = array(&a, 1, 4096);
  uint32_t id = r->id;
  void *ptr = r->ptr;
  ASSERT_EQ(g_budget.by_kind[BUDGET_RESIDENT], 4096);
  res_ref(r); /* a job uses it */
  res_release(&g_res, r);
  ASSERT(res_find(&g_res, &a, id) == NULL); /* unknown at once */
  ASSERT_EQ(a.n_objects, 0);
  ASSERT_EQ(g_res.live[RES_ARRAY], 0);
  ASSERT_EQ(g_freed[1], 0); /* but the job still reads it */
  ASSERT_EQ(g_budget.by_kind[BUDGET_RESIDENT], 4096);
  res_release(&g_res, r); /* twice: nothing more */
  ASSERT_EQ(g_freed[1], 0);
  res_unref(&g_res, r); /* the job is done */
  ASSERT_EQ(g_freed[1], 1);
  ASSERT(g_freed_ptr[1] == ptr);
  ASSERT_EQ(g_freed[0] + g_freed[2], 0);
  ASSERT_EQ(g_budget.by_kind[BUDGET_RESIDENT], 0);
}

/* A replicated array: one copy per device of its mask, charged once each. */
static void test_replicated(void) {
  reset();
  res_owner a = {0};
  gkcd_res *r = res_add(&g_res, RES_ARRAY, &a);
  ASSERT(r);
  r->bytes = 100;
  r->rep_mask = 0x5; /* devices 0 and 2 */
  r->copies = calloc(NDEV, sizeof *r->copies);
  ASSERT(r->copies);
  r->copies[0].ptr = (void *)0x100, r->copies[2].ptr = (void *)0x300;
  ASSERT_EQ(res_charge(r), 200);
  budget_take(&g_budget, BUDGET_RESIDENT, res_charge(r));
  res_release(&g_res, r);
  ASSERT_EQ(g_freed[0], 1);
  ASSERT_EQ(g_freed[1], 0);
  ASSERT_EQ(g_freed[2], 1);
  ASSERT(g_freed_ptr[0] == (void *)0x100 && g_freed_ptr[2] == (void *)0x300);
  ASSERT_EQ(g_budget.by_kind[BUDGET_RESIDENT], 0);
}

/* A partitioned matrix: its blocks go with part_free, nothing else. */
static void test_partitioned(void) {
  reset();
  res_owner a = {0};
  gkcd_res *r = res_add(&g_res, RES_MATRIX, &a);
  ASSERT(r);
  r->part = calloc(1, sizeof *r->part);
  ASSERT(r->part);
  r->bytes = 64;
  budget_take(&g_budget, BUDGET_RESIDENT, res_charge(r));
  res_release(&g_res, r);
  ASSERT_EQ(g_parts_freed, 1);
  ASSERT_EQ(g_freed[0] + g_freed[1] + g_freed[2], 0);
  ASSERT_EQ(g_budget.by_kind[BUDGET_RESIDENT], 0);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *page_map(size_t page) {
  void *map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT(map != MAP_FAILED);
  return map;
}

static int unmapped(void *map, size_t page) {
  errno = 0;
  return msync(map, page, MS_ASYNC) == -1 && errno == ENOMEM;
}

/* A region: registered with device 0's backend in the background (its
 * requests copy it unregistered until then), unregistered and unmapped
 * after the last reference, never charged. */
static void test_region(void) {
  reset();
  res_owner a = {0};
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void *map = page_map(page);
  gkcd_res *r = res_add(&g_res, RES_REGION, &a);
  ASSERT(r);
  r->ptr = map, r->bytes = page;
  double t0 = now_s();
  res_region_pin(&g_res, r, 0, 0, 0);
  ASSERT(now_s() - t0 < 0.015);  /* the 20 ms registration did not run here */
  ASSERT(!res_region_pinned(r)); /* not yet */
  while (!res_region_pinned(r) && now_s() - t0 < 10) nanosleep(&(struct timespec){0, 1000000}, NULL);
  ASSERT(res_region_pinned(r));
  ASSERT_EQ(a.n_regions, 1);
  ASSERT_EQ(a.n_objects, 0);
  res_ref(r); /* a job still uses it: released, but kept */
  res_release(&g_res, r);
  ASSERT_EQ(a.n_regions, 0);
  ASSERT(!unmapped(map, page));
  res_unref(&g_res, r);
  res_free_all(&g_res); /* waits for the pinner */
  ASSERT_EQ(g_pinned, 1);
  ASSERT_EQ(g_unpinned, 1);
  ASSERT(g_unpinned_ptr == map);
  ASSERT(unmapped(map, page));
  ASSERT_EQ(g_order_bad, 0);
  ASSERT_EQ(g_freed[0] + g_freed[1] + g_freed[2], 0);
  ASSERT_EQ(g_budget.used, 0);

  /* Released before its registration ran: unregistered after it, in order. */
  reset();
  map = page_map(page);
  r = res_add(&g_res, RES_REGION, &a);
  r->ptr = map, r->bytes = page;
  res_region_pin(&g_res, r, 0, 0, 0);
  res_release(&g_res, r);
  res_free_all(&g_res);
  ASSERT_EQ(g_pinned, 1);
  ASSERT_EQ(g_unpinned, 1);
  ASSERT(unmapped(map, page));
  ASSERT_EQ(g_order_bad, 0);

  /* Registration refused: used unregistered, never unregistered, unmapped. */
  reset();
  g_pin_fails = 1;
  map = page_map(page);
  r = res_add(&g_res, RES_REGION, &a);
  r->ptr = map, r->bytes = page;
  res_region_pin(&g_res, r, 0, 0, 0);
  res_release(&g_res, r);
  res_free_all(&g_res);
  ASSERT_EQ(g_pinned, 0);
  ASSERT_EQ(g_unpinned, 0);
  ASSERT(unmapped(map, page));

  /* Registered already (shm_register with "pinned"): ready at once, never
   * registered again, unregistered and unmapped at the end. */
  reset();
  map = page_map(page);
  r = res_add(&g_res, RES_REGION, &a);
  r->ptr = map, r->bytes = page;
  res_region_pin(&g_res, r, 1, 0, 0);
  ASSERT(res_region_pinned(r));
  res_release(&g_res, r);
  res_free_all(&g_res);
  ASSERT_EQ(g_pinned, 0);
  ASSERT_EQ(g_unpinned, 1);
  ASSERT(g_unpinned_ptr == map);
  ASSERT(unmapped(map, page));

  /* A backend that registers nothing (the CPU's): a handle that is never
   * ready, unmapped by the pinner after the release. */
  reset();
  for (int d = 0; d < NDEV; d++) g_be[d].region_pin = NULL;
  res_init(&g_res, &g_devs, &g_budget);
  map = page_map(page);
  r = res_add(&g_res, RES_REGION, &a);
  r->ptr = map, r->bytes = page;
  res_region_pin(&g_res, r, 0, 0, 0);
  ASSERT(r->pin && !res_region_pinned(r));
  res_release(&g_res, r);
  res_free_all(&g_res);
  ASSERT(unmapped(map, page));
  ASSERT_EQ(g_unpinned, 0);
}

static size_t kept_bytes(void) {
  size_t b;
  uint64_t hits;
  pinner_kept(&g_res.pinner, &b, &hits);
  return b;
}

/* Waits (up to 10 s) until the pinner keeps want bytes. */
static void settle_kept(size_t want) {
  double t0 = now_s();
  while (kept_bytes() != want && now_s() - t0 < 10) nanosleep(&(struct timespec){0, 1000000}, NULL);
  ASSERT_EQ(kept_bytes(), want);
}

/* Kept registrations (pinner.h): a released region of a known file stays
 * mapped and registered, taken again by the same file and size only; the
 * oldest go past the bound, all after keep_ms, and at the end. */
/* Waits (up to 10 s) for the pinner to unmap map. */
static void unmapped_soon(void *map, size_t page) {
  double t0 = now_s();
  while (!unmapped(map, page) && now_s() - t0 < 10) nanosleep(&(struct timespec){0, 1000000}, NULL);
  ASSERT(unmapped(map, page));
}

/* Waits (up to 10 s) for r's registration. */
static void pinned_soon(gkcd_res *r) {
  double t0 = now_s();
  while (!res_region_pinned(r) && now_s() - t0 < 10) nanosleep(&(struct timespec){0, 1000000}, NULL);
  ASSERT(res_region_pinned(r));
}

/* A one-page region of file (dev, ino) for owner a, its registration
 * done; its mapping in *map. */
static gkcd_res *region_pinned(res_owner *a, size_t page, uint64_t dev, uint64_t ino, void **map) {
  *map = page_map(page);
  gkcd_res *r = res_add(&g_res, RES_REGION, a);
  ASSERT(r);
  r->ptr = *map, r->bytes = page;
  res_region_pin(&g_res, r, 0, dev, ino);
  pinned_soon(r);
  return r;
}

static void test_region_kept(void) {
  reset();
  res_owner a = {0};
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  g_res.pinner.keep_max = 2 * page;
  void *map, *m2, *m3, *m4, *m5;
  gkcd_res *r = region_pinned(&a, page, 7, 42, &map);
  res_release(&g_res, r);
  settle_kept(page);
  ASSERT(!unmapped(map, page));
  ASSERT_EQ(g_unpinned, 0);
  int pinned = -1;
  ASSERT(pinner_take_kept(&g_res.pinner, 7, 43, page, &pinned) == NULL);       /* another file */
  ASSERT(pinner_take_kept(&g_res.pinner, 8, 42, page, &pinned) == NULL);       /* another device */
  ASSERT(pinner_take_kept(&g_res.pinner, 7, 42, 2 * page, &pinned) == NULL);   /* another size */
  ASSERT(pinner_take_kept(&g_res.pinner, 7, 42, page, &pinned) == map);
  ASSERT_EQ(pinned, 1);
  ASSERT_EQ(kept_bytes(), 0);
  ASSERT(pinner_take_kept(&g_res.pinner, 7, 42, page, &pinned) == NULL);       /* taken once */
  /* Adopted again: registered already, never registered twice. */
  r = res_add(&g_res, RES_REGION, &a);
  r->ptr = map, r->bytes = page;
  res_region_pin(&g_res, r, 1, 7, 42);
  ASSERT(res_region_pinned(r));
  ASSERT_EQ(g_pinned, 1);
  res_release(&g_res, r);
  settle_kept(page);
  /* Two more: past the bound of two pages the oldest (map) goes. */
  gkcd_res *r2 = region_pinned(&a, page, 7, 2, &m2), *r3 = region_pinned(&a, page, 7, 3, &m3);
  res_release(&g_res, r2);
  settle_kept(2 * page);
  res_release(&g_res, r3);
  unmapped_soon(map, page);
  ASSERT_EQ(kept_bytes(), 2 * page);
  ASSERT(!unmapped(m2, page) && !unmapped(m3, page));
  /* A file unknown (ino 0) or bigger than the bound is never kept. */
  gkcd_res *r4 = region_pinned(&a, page, 0, 0, &m4);
  res_release(&g_res, r4);
  unmapped_soon(m4, page);
  /* After keep_ms every kept one goes, unregistered. */
  int unpinned = g_unpinned;
  pthread_mutex_lock(&g_res.pinner.mu);
  g_res.pinner.keep_ms = 50;
  pthread_cond_signal(&g_res.pinner.cv);
  pthread_mutex_unlock(&g_res.pinner.mu);
  settle_kept(0);
  ASSERT(unmapped(m2, page) && unmapped(m3, page));
  ASSERT_EQ(g_unpinned, unpinned + 2);
  /* And at the end, whatever is kept. */
  pthread_mutex_lock(&g_res.pinner.mu);
  g_res.pinner.keep_ms = PINNER_KEEP_MS;
  pthread_mutex_unlock(&g_res.pinner.mu);
  gkcd_res *r5 = region_pinned(&a, page, 7, 5, &m5);
  res_release(&g_res, r5);
  settle_kept(page);
  res_free_all(&g_res);
  ASSERT(unmapped(m5, page));
  ASSERT_EQ(g_order_bad, 0);
}

/* --- limits ---------------------------------------------------------------- */

static void fill_to_limit(res_owner *owner, int kind, int limit, const char *says) {
  char msg[200];
  for (int i = 0; i < limit; i++) {
    ASSERT_EQ(res_room(&g_res, owner, kind, msg, sizeof msg), 0);
    ASSERT(res_add(&g_res, kind, owner));
  }
  ASSERT_EQ(res_room(&g_res, owner, kind, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(msg, says);
}

static void test_limits(void) {
  reset();
  res_owner a = {0}, b = {0};
  fill_to_limit(&a, RES_ARRAY, RES_MAX_OBJECTS, "this connection holds 4096 resident objects");
  fill_to_limit(&a, RES_REGION, RES_MAX_REGIONS, "this connection holds 64 regions");
  fill_to_limit(NULL, RES_ARRAY, RES_MAX_SHARED, "the daemon holds 4096 shared objects");
  char msg[200];
  /* Counts are per owner; arrays and matrices share one. */
  ASSERT_EQ(res_room(&g_res, &b, RES_ARRAY, msg, sizeof msg), 0);
  ASSERT_EQ(res_room(&g_res, &a, RES_MATRIX, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  /* Releasing one makes room for one. */
  for (int bk = 0; bk < RES_BUCKETS; bk++)
    for (gkcd_res *r = g_res.bucket[bk]; r; r = r->next)
      if (r->owner == &a && r->kind == RES_ARRAY) {
        res_release(&g_res, r);
        goto released;
      }
released:
  ASSERT_EQ(res_room(&g_res, &a, RES_ARRAY, msg, sizeof msg), 0);
  res_free_all(&g_res);
  ASSERT_EQ(a.n_objects + a.n_regions + g_res.n_shared, 0);
}

/* A connection that closes takes its own objects, nobody else's. */
static void test_drop_owner(void) {
  reset();
  res_owner a = {0}, b = {0};
  gkcd_res *ra1 = array(&a, 0, 8), *ra2 = array(&a, 1, 8);
  gkcd_res *rb = array(&b, 2, 8), *rs = array(NULL, 0, 8);
  uint32_t id1 = ra1->id, id2 = ra2->id;
  res_ref(ra2); /* a job of a's still runs */
  res_drop_owner(&g_res, &a, 1);
  ASSERT(res_find(&g_res, &a, id1) == NULL && res_find(&g_res, &a, id2) == NULL);
  ASSERT(res_find(&g_res, &b, rb->id) == rb);
  ASSERT(res_find(&g_res, &b, rs->id) == rs);
  ASSERT_EQ(a.n_objects, 0);
  ASSERT_EQ(g_freed[0], 1); /* ra1; ra2 waits for its job */
  ASSERT_EQ(g_freed[1], 0);
  res_unref(&g_res, ra2);
  ASSERT_EQ(g_freed[1], 1);
  res_free_all(&g_res);
  ASSERT_EQ(g_freed[2], 1);
  ASSERT_EQ(g_freed[0], 2);
}

/* --- the release and shm_release requests ------------------------------- */

/* {key: id} (id < 0: a string), released by asker. */
static int release(int method, res_owner *asker, const char *key, int64_t id, char *msg, size_t len) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, key, strlen(key));
  if (id < 0) msgpack_pack_str_with_body(&pk, "one", 3);
  else msgpack_pack_int64(&pk, id);
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  ASSERT(msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
  msg[0] = 0;
  int rc = res_release_request(&g_res, asker, method, &u.data, msg, len);
  msgpack_unpacked_destroy(&u);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

static void test_release_requests(void) {
  reset();
  res_owner a = {0}, b = {0};
  char msg[320];
  gkcd_res *arr = array(&a, 0, 8);
  gkcd_res *mat = res_add(&g_res, RES_MATRIX, &a);
  gkcd_res *reg = res_add(&g_res, RES_REGION, &a);
  ASSERT(mat && reg);
  void *map = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT(map != MAP_FAILED);
  reg->ptr = map, reg->bytes = 4096;
  uint32_t ia = arr->id, im = mat->id, ir = reg->id;

  /* Another connection's, the wrong kind, no such id, not an id. */
  ASSERT_EQ(release(PROTO_M_RELEASE, &b, "handle", ia, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(msg, "argument 'handle': no handle");
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "matrix", ia, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(msg, "argument 'matrix': no matrix");
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", ir, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(release(PROTO_M_SHM_RELEASE, &a, "region", ia, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(msg, "argument 'region': no region");
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", 999999, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", 0, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(msg, "handle");
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", (int64_t)UINT32_MAX + 1, msg, sizeof msg),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", -1, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "region", ir, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(g_res.live[RES_ARRAY] + g_res.live[RES_MATRIX] + g_res.live[RES_REGION], 3);

  /* "handle" names a matrix too (one id space); "matrix" a matrix;
   * shm_release's "region" a region. */
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", im, msg, sizeof msg), 0);
  ASSERT(res_find(&g_res, &a, im) == NULL);
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", ia, msg, sizeof msg), 0);
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "handle", ia, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(release(PROTO_M_SHM_RELEASE, &a, "region", ir, msg, sizeof msg), 0);
  ASSERT_EQ(a.n_objects + a.n_regions, 0);
  ASSERT_EQ(g_res.live[RES_ARRAY] + g_res.live[RES_MATRIX] + g_res.live[RES_REGION], 0);

  gkcd_res *m2 = res_add(&g_res, RES_MATRIX, &a);
  ASSERT(m2);
  ASSERT_EQ(release(PROTO_M_RELEASE, &a, "matrix", m2->id, msg, sizeof msg), 0);
}

int main(void) {
  g_main = pthread_self();
  test_ids_and_owners();
  test_id_wrap();
  test_instance_and_restored_ids();
  test_release_after_jobs();
  test_replicated();
  test_partitioned();
  test_region();
  test_region_kept();
  test_limits();
  test_drop_owner();
  test_release_requests();
  printf("test_resident: ok\n");
  return 0;
}
