/* method_ring.c: the row of `ring_register` (PROTOCOL.md, "Rings"): maps a
 * client's sealed memfd as its connection's submission and completion
 * rings (proto_ring.h) and hands them to the transport (conn_ring_start),
 * which from the answer on takes the connection's frames from the ring and
 * puts its replies there.  Answered on the loop: the ring is small (at
 * most 2 x 16 MiB), mapping it costs microseconds, and the connection must
 * switch over between this answer and the next reply.
 *
 * What is checked before anything is mapped: the sizes (powers of two in
 * the bounds), a descriptor that came with the request, a regular file of
 * exactly the layout's size, sealed against shrinking and growing (a
 * mapping of a file that shrinks later would kill gkcd with SIGBUS). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "conn.h"
#include "gkc_errors.h"
#include "method.h"
#include "proto_ring.h"
#include "proto_rpc.h"

/* Checks and maps fd as rings of sq and cq bytes: the mapping, or NULL
 * with msg set. */
static void *map_ring(int fd, size_t bytes, char *msg, size_t msglen) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(msg, msglen, "the descriptor is not a memfd or regular file");
    return NULL;
  }
  int seals = fcntl(fd, F_GET_SEALS);
  int need = F_SEAL_SHRINK | F_SEAL_GROW;
  if (seals < 0 || (seals & need) != need) {
    snprintf(msg, msglen, "the memfd is not sealed against resizing: add F_SEAL_SHRINK and"
             " F_SEAL_GROW (fcntl F_ADD_SEALS) before sending it");
    return NULL;
  }
  if ((uint64_t)st.st_size != bytes) {
    snprintf(msg, msglen, "the memfd holds %lld bytes; rings of these sizes need %zu (%u + sq_bytes"
             " + cq_bytes)", (long long)st.st_size, bytes, PROTO_RING_HDR);
    return NULL;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    snprintf(msg, msglen, "cannot map the ring: %s", strerror(errno));
    return NULL;
  }
  return p;
}

static int answer_register(const method_env *env, const msgpack_object *params, msgpack_packer *pk,
                           void **body, size_t *body_len, char *msg, size_t msglen) {
  static const char *const keys[] = {"sq_bytes", "cq_bytes", NULL};
  (void)body, (void)body_len;
  gkcd_conn *c = env->conn;
  /* Taken before anything is checked, so that a refused request still
   * consumes its own descriptor (as shm_register's does). */
  int fd = conn_take_fd(c);
  args_ctx a = {params, msg, msglen};
  int64_t sq, cq;
  int rc;
  if (!env->rings) { /* a policy, not the client's error: no error counted */
    msgpack_pack_map(pk, 2);
    proto_pack_cstr(pk, "ring"), msgpack_pack_false(pk);
    proto_pack_cstr(pk, "why"), proto_pack_cstr(pk, "this gkcd offers no rings (--rings off, or auto"
                                                  " with --spin-us 0: a ring pays only while gkcd"
                                                  " polls it); stay on the socket");
    rc = 0;
    goto out;
  }
  if ((rc = args_known(&a, keys)) ||
      (rc = args_int(&a, "sq_bytes", 1, PROTO_RING_MIN, PROTO_RING_MAX, &sq)) ||
      (rc = args_int(&a, "cq_bytes", 1, PROTO_RING_MIN, PROTO_RING_MAX, &cq)))
    goto out;
  rc = GKC_EINVALID_ARGUMENT;
  if (!proto_ring_size_ok((uint64_t)sq) || !proto_ring_size_ok((uint64_t)cq)) {
    snprintf(msg, msglen, "sq_bytes and cq_bytes must be powers of two from %u to %u",
             PROTO_RING_MIN, PROTO_RING_MAX);
    goto out;
  }
  if (fd < 0) {
    snprintf(msg, msglen, "no file descriptor came with this request (send the memfd as"
             " SCM_RIGHTS ancillary data with its bytes)");
    goto out;
  }
  if (c->ring) {
    snprintf(msg, msglen, "this connection has its ring already");
    goto out;
  }
  size_t bytes = proto_ring_bytes((uint32_t)sq, (uint32_t)cq);
  void *p = map_ring(fd, bytes, msg, msglen);
  if (!p) goto out;
  proto_ring *ring = malloc(sizeof *ring);
  if (!ring) {
    munmap(p, bytes);
    snprintf(msg, msglen, "out of memory");
    rc = GKC_EOUT_OF_MEMORY;
    goto out;
  }
  proto_ring_init(ring, p, (uint32_t)sq, (uint32_t)cq, PROTO_RING_DAEMON, -1);
  conn_ring_start(c, ring, bytes, 1); /* this answer still goes on the socket */
  msgpack_pack_map(pk, 4);
  proto_pack_cstr(pk, "ring"), msgpack_pack_true(pk);
  proto_pack_cstr(pk, "sq_bytes"), msgpack_pack_uint64(pk, (uint64_t)sq);
  proto_pack_cstr(pk, "cq_bytes"), msgpack_pack_uint64(pk, (uint64_t)cq);
  proto_pack_cstr(pk, "version"), msgpack_pack_uint32(pk, PROTO_RING_VERSION);
  rc = 0;
out:
  if (fd >= 0) close(fd);
  return rc;
}

const gkcd_method method_row_RING_REGISTER = {
    .id = PROTO_M_RING_REGISTER, .where = METHOD_LOOP, .makes = -1, .answer = answer_register,
};
