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
#include "proto_rpc.h"

struct gkc_region {
  int fd;
  void *data;
  size_t bytes;
  uint32_t id;
};

/* --- the protocol methods ------------------------------------------------------------- */

typedef struct {
  size_t bytes;
  uint32_t *region;
} register_call;

static int pack_register(msgpack_packer *pk, const void *arg) {
  const register_call *r = arg;
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, r->bytes);
  return 0;
}

/* An unsigned id in [0, 2^32) under key; 0 or GKC_EPROTOCOL. */
static int get_id(gkc_conn *c, const msgpack_object *m, const char *key, uint32_t *id) {
  const msgpack_object *o = m->type == MSGPACK_OBJECT_MAP ? proto_map_get(m, key) : NULL;
  if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > UINT32_MAX)
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks an integer '%s'", key);
  *id = (uint32_t)o->via.u64;
  return 0;
}

static int take_register(gkc_conn *c, const msgpack_object *r, void *arg) {
  register_call *rc = arg;
  return get_id(c, r, "region", rc->region);
}

int gkc_shm_register(gkc_conn *c, int fd, size_t bytes, uint32_t *region) {
  uint32_t dummy;
  register_call r = {bytes, region ? region : &dummy};
  return gkc__call_fd(c, fd, "shm_register", pack_register, &r, take_register, &r);
}

static int pack_release(msgpack_packer *pk, const void *arg) {
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, "region"), msgpack_pack_uint32(pk, *(const uint32_t *)arg);
  return 0;
}

static int take_nothing(gkc_conn *c, const msgpack_object *r, void *arg) {
  (void)arg;
  if (r->type != MSGPACK_OBJECT_MAP) return gkc__fail(c, GKC_EPROTOCOL, "result is not a map");
  return 0;
}

int gkc_shm_release(gkc_conn *c, uint32_t region) {
  return gkc__call(c, "shm_release", pack_release, &region, take_nothing, NULL);
}

/* --- regions ---------------------------------------------------------------------------- */

static void region_free(gkc_region *r) {
  if (r->data && r->data != MAP_FAILED) munmap(r->data, r->bytes);
  if (r->fd >= 0) close(r->fd);
  free(r);
}

int gkc_region_create(gkc_conn *c, size_t bytes, gkc_region **out) {
  *out = NULL;
  if (bytes < 1 || bytes > (size_t)INT64_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "a region needs 1 to 2^63 - 1 bytes, not %zu", bytes);
  gkc_region *r = calloc(1, sizeof *r);
  if (!r) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  r->bytes = bytes;
  r->fd = memfd_create("gkc-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int rc;
  const char *step = "memfd_create";
  if (r->fd < 0) goto sys_fail;
  step = "ftruncate";
  if (ftruncate(r->fd, (off_t)bytes) != 0) goto sys_fail;
  step = "fcntl(F_ADD_SEALS)";
  if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) goto sys_fail;
  step = "mmap";
  r->data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->data == MAP_FAILED) goto sys_fail;
  if ((rc = gkc_shm_register(c, r->fd, bytes, &r->id)) != 0) {
    region_free(r);
    return rc;
  }
  *out = r;
  return 0;
sys_fail:
  rc = errno == ENOMEM || errno == ENOSPC || errno == EFBIG ? GKC_EOUT_OF_MEMORY : GKC_EIO;
  gkc__fail(c, rc, "cannot create a %zu-byte region: %s: %s", bytes, step, strerror(errno));
  region_free(r);
  return rc;
}

void *gkc_region_data(const gkc_region *r) { return r ? r->data : NULL; }
float *gkc_region_floats(const gkc_region *r) { return r ? (float *)r->data : NULL; }
size_t gkc_region_bytes(const gkc_region *r) { return r ? r->bytes : 0; }
uint32_t gkc_region_id(const gkc_region *r) { return r ? r->id : 0; }

int gkc_region_release(gkc_conn *c, gkc_region *r) {
  if (!r) return 0;
  int rc = c ? gkc_shm_release(c, r->id) : 0;
  region_free(r);
  return rc;
}
