/* gkc_region.c: shared-memory regions (see gkc.h, "Regions and resident data").
 *
 * A region is a memfd sealed against shrinking and growing, mapped here and
 * registered with gkcd, which maps the same pages.  The seals are what make
 * it safe for the daemon: an unsealed file could be truncated under its
 * mapping, and a read past the new end would kill gkcd with SIGBUS.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gkc_internal.h"
#include "gkc_reply.h"
#include "proto_rpc.h"

struct gkc_region {
  int fd;
  void *data;
  size_t bytes;
  uint32_t id;
};

/* --- the protocol methods ------------------------------------------------------------- */

static void pack_register(msgpack_packer *pk, const gkc__req *r) {
  int flags = r->a.shm_register.pinned;
  int reuse = (flags & GKC__REG_REUSE) != 0, pinned = (flags & ~GKC__REG_REUSE) != 0;
  msgpack_pack_map(pk, 1 + pinned + reuse);
  proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, r->a.shm_register.bytes);
  if (pinned) proto_pack_cstr(pk, "pinned"), msgpack_pack_true(pk);
  if (reuse) proto_pack_cstr(pk, "reuse"), msgpack_pack_true(pk);
}

static int take_register(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)req;
  uint64_t v = 0;
  int rc = gkc__get_uint(c, r, "region", UINT32_MAX, &v);
  res->id = (uint32_t)v;
  if (rc == 0) gkc__obj_made(c, GKC__OBJ_REGION, res->id, 0, NULL);
  return rc;
}

int gkc__prep_shm_register(gkc_conn *c, gkc__req *r, const gkc_shm_register_args *a) {
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  r->a.shm_register = *a;
  r->fd = a->fd;
  r->method = "shm_register", r->pack = pack_register, r->take = take_register;
  return 0;
}

int gkc__shm_register(gkc_conn *c, int fd, size_t bytes, int pinned, uint32_t *region) {
  gkc_shm_register_args a = {fd, bytes, pinned};
  gkc__req r;
  gkc_result res;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  gkc__prep_shm_register(c, &r, &a);
  int rc = gkc__run(c, &r, &res);
  if (rc == 0 && region) *region = res.id;
  return rc;
}

int gkc_shm_register(gkc_conn *c, int fd, size_t bytes, uint32_t *region) {
  return gkc__shm_register(c, fd, bytes, 0, region);
}

static void pack_release(msgpack_packer *pk, const gkc__req *r) {
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, "region"), gkc__pack_id(pk, r->a.shm_release.region);
}

static int take_shm_release(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  gkc__obj_gone(c, req->a.shm_release.region);
  return gkc__take_map(c, r, req, res);
}

int gkc__prep_shm_release(gkc_conn *c, gkc__req *r, const gkc_shm_release_args *a) {
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  r->a.shm_release = *a;
  r->method = "shm_release", r->pack = pack_release, r->take = take_shm_release;
  return 0;
}

int gkc_shm_release(gkc_conn *c, uint32_t region) {
  gkc_shm_release_args a = {region};
  gkc__req r;
  gkc_result res;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  gkc__prep_shm_release(c, &r, &a);
  return gkc__run(c, &r, &res);
}

/* --- regions ---------------------------------------------------------------------------- */

void gkc__region_free(gkc_region *r) {
  if (!r) return;
  if (r->data && r->data != MAP_FAILED) munmap(r->data, r->bytes);
  if (r->fd >= 0) close(r->fd);
  free(r);
}

int gkc__region_fd(const gkc_region *r) { return r->fd; }
void gkc__region_set_id(gkc_region *r, uint32_t id) { r->id = id; }

int gkc__region_alloc(gkc_conn *c, size_t bytes, gkc_region **out) {
  *out = NULL;
  if (bytes < 1 || bytes > (size_t)INT64_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "a region needs 1 to 2^63 - 1 bytes, not %zu", bytes);
  gkc_region *r = calloc(1, sizeof *r);
  if (!r) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  r->bytes = bytes;
  r->fd = memfd_create("gkc-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  const char *step = "memfd_create";
  if (r->fd < 0) goto sys_fail;
  step = "ftruncate";
  if (ftruncate(r->fd, (off_t)bytes) != 0) goto sys_fail;
  step = "fcntl(F_ADD_SEALS)";
  /* F_SEAL_SEAL too: nobody holding the descriptor (gkcd included) can add
   * F_SEAL_WRITE and so make the pages read-only under the other side. */
  if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) goto sys_fail;
  step = "mmap";
  r->data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->data == MAP_FAILED) goto sys_fail;
  *out = r;
  return 0;
sys_fail:;
  int e = errno;
  int rc = e == ENOMEM || e == ENOSPC || e == EFBIG ? GKC_EOUT_OF_MEMORY : GKC_EIO;
  gkc__fail(c, rc, "cannot create a %zu-byte region: %s: %s", bytes, step, strerror(e));
  gkc__region_free(r);
  return rc;
}

int gkc_region_create(gkc_conn *c, size_t bytes, gkc_region **out) {
  gkc_region *r;
  *out = NULL;
  int rc = gkc__region_alloc(c, bytes, &r);
  if (rc) return rc;
  if ((rc = gkc_shm_register(c, r->fd, bytes, &r->id)) != 0) {
    gkc__region_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

void *gkc_region_data(const gkc_region *r) { return r ? r->data : NULL; }
float *gkc_region_floats(const gkc_region *r) { return r ? (float *)r->data : NULL; }
size_t gkc_region_bytes(const gkc_region *r) { return r ? r->bytes : 0; }
uint32_t gkc_region_id(const gkc_region *r) { return r ? r->id : 0; }

int gkc_region_release(gkc_conn *c, gkc_region *r) {
  if (!r) return 0;
  int rc = c ? gkc_shm_release(c, r->id) : 0;
  gkc__region_free(r);
  return rc;
}
