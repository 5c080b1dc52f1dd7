/* gkc_ring.c: setting a blocking connection's shared-memory ring up (see
 * gkc.h, gkc_set_ring; PROTOCOL.md, "Rings").
 *
 * At the first blocking call on an idle connection (and again after a
 * reconnect) the library makes a sealed memfd laid out as proto_ring.h
 * says, sends it with `ring_register`, and once gkcd has answered (on the
 * socket) moves every later frame through it.  Anything that goes wrong
 * (an older gkcd without the method, no memfd, a refusal) leaves the
 * connection on the socket for good, as if the ring had been turned off:
 * a call never fails because the ring could not be had.
 *
 * An asynchronous context takes its ring at connect instead (gkc_async.c,
 * ring_try: the same ring_start, in blocking mode for that one round
 * trip); its event loop keeps watching the socket, where the doorbells
 * arrive.
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

/* 256 KiB each way: a small request and its reply take a few hundred
 * bytes, and a big one streams through. */
#define RING_SQ_BYTES ((uint32_t)1 << 18)
#define RING_CQ_BYTES ((uint32_t)1 << 18)
/* A wait polls at most this long before it sleeps ($GKC_RING_SPIN_US):
 * RING_SPIN_US, or RING_SPIN_US_BIG on a host of RING_BIG_CPUS or more.
 * There a client's own polling takes no CPU gkcd needs, and a reply that
 * comes 60-150 us later (a resident sgemm 1024^3) is caught polling rather
 * than after a sleep's wake-up: 1.30x the kernel against 1.49x on the H200
 * host (bench/RESULTS.md, session 15), as CUDA's own synchronize spins. */
#define RING_SPIN_US 50
#define RING_SPIN_US_BIG 200
#define RING_BIG_CPUS 8

static void pack_register(msgpack_packer *pk, const gkc__req *r) {
  (void)r;
  msgpack_pack_map(pk, 2);
  proto_pack_cstr(pk, "sq_bytes"), msgpack_pack_uint32(pk, RING_SQ_BYTES);
  proto_pack_cstr(pk, "cq_bytes"), msgpack_pack_uint32(pk, RING_CQ_BYTES);
}

static int take_register(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)req, (void)res;
  uint64_t sq = 0, cq = 0;
  for (uint32_t i = 0; r->type == MSGPACK_OBJECT_MAP && i < r->via.map.size; i++) {
    const msgpack_object_kv *kv = &r->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 4 &&
        !memcmp(kv->key.via.str.ptr, "ring", 4) && kv->val.type == MSGPACK_OBJECT_BOOLEAN &&
        !kv->val.via.boolean)
      return gkc__fail(c, GKC_EUNKNOWN_METHOD, "gkcd offers no rings"); /* the socket, then */
  }
  int rc = gkc__get_uint(c, r, "sq_bytes", UINT32_MAX, &sq);
  if (rc == 0) rc = gkc__get_uint(c, r, "cq_bytes", UINT32_MAX, &cq);
  if (rc == 0 && (sq != RING_SQ_BYTES || cq != RING_CQ_BYTES))
    rc = gkc__fail(c, GKC_EPROTOCOL, "gkcd took rings of other sizes than asked");
  return rc;
}

/* The hook (gkc_internal.h ring_start): 0 with c->ring set, or nonzero
 * with the connection left on the socket for good; when the connection
 * broke meanwhile, its error (c->errmsg says why), which the call that
 * asked then fails with, as it would have. */
static int ring_start(gkc_conn *c) {
  /* Without the arena every array goes in the frames, and a big frame
   * through a 256 KiB ring is copied there by gkcd's event loop, where on
   * the socket its reader threads take it: eight connections sending 4-64
   * MiB arrays inline ran at 2-6 GB/s through rings against 15-18 on the
   * socket (bench/RESULTS.md, session 15).  And where descriptors cannot
   * be passed (GKC_NO_SHM's reason) a ring cannot be had either.  So the
   * ring goes with the arena, unless the program asked for it. */
  if (!c->ring_asked && !gkc_shm_state(c, NULL)) return -1;
  c->ring_mode = GKC__RING_BUSY;
  size_t bytes = proto_ring_bytes(RING_SQ_BYTES, RING_CQ_BYTES);
  proto_ring *ring = calloc(1, sizeof *ring);
  void *p = MAP_FAILED;
  int fd = memfd_create("gkc-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int rc = -1;
  if (!ring || fd < 0 || ftruncate(fd, (off_t)bytes) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    goto out;
  p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) goto out;
  proto_ring_init(ring, p, RING_SQ_BYTES, RING_CQ_BYTES, PROTO_RING_CLIENT, -1);
  gkc__req r;
  gkc_result res;
  gkc__req_init(&r);
  gkc__result_init(&res);
  r.method = "ring_register", r.pack = pack_register, r.take = take_register;
  r.fd = fd;
  rc = gkc__run(c, &r, &res);
  if (rc == 0 && c->fd >= 0) {
    ring->sock = c->fd;
    c->ring = ring;
    c->ring_wait_avg_ns = (uint64_t)c->ring_spin_us * 500; /* polls for all of it at first */
    c->ring_bytes = bytes;
    ring = NULL;
    p = MAP_FAILED;
  }
out:
  if (p != MAP_FAILED) munmap(p, bytes);
  free(ring);
  if (fd >= 0) close(fd);
  c->ring_mode = c->ring ? GKC__RING_TRY : GKC__RING_OFF;
  if (c->ring) return 0;
  if (c->fd < 0) return rc ? rc : GKC_EIO; /* the connection's end, with its message */
  c->errmsg[0] = 0; /* refused: the socket serves, and the caller's call has not begun */
  return -1;
}

void gkc__ring_init(gkc_conn *c) {
  const char *off = getenv("GKC_NO_RING");
  c->ring_mode = off && *off && strcmp(off, "0") ? GKC__RING_OFF : GKC__RING_TRY;
  const char *spin = getenv("GKC_RING_SPIN_US");
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  c->ring_spin_us = spin && *spin ? atoi(spin) : cpus >= RING_BIG_CPUS ? RING_SPIN_US_BIG : RING_SPIN_US;
  if (c->ring_spin_us < 0) c->ring_spin_us = 0;
  c->ring_start = ring_start;
}

int gkc_set_ring(gkc_conn *c, int on) {
  if (!c) return GKC_EINVALID_ARGUMENT;
  if (c->ring && !on)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "the ring is in use: turn it off before the"
                     " connection's first call (or with GKC_NO_RING=1)");
  if (!c->ring) c->ring_mode = on ? GKC__RING_TRY : GKC__RING_OFF;
  c->ring_asked = on != 0;
  return 0;
}

int gkc_ring_active(const gkc_conn *c) { return c && c->ring != NULL; }
