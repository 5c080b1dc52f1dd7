/* test_proto_ring.c: the shared-memory ring's two sides (proto_ring.h)
 * without a daemon: bytes in order across the wrap of the indices and of
 * the data area, a stream longer than the ring, every out-of-bounds index
 * refused (and nothing read or written then), the wake flags, and no access
 * past the rings (they end at a PROT_NONE page). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto_ring.h"
#include "test.h"

enum { SQ = 4096, CQ = 8192 };

typedef struct {
  uint8_t *map;   /* the whole mapping, guard page included */
  size_t mapped;
  uint8_t *base;  /* the rings, ending at the guard page */
  proto_ring d, c; /* gkcd's side and the client's */
  int sv[2];      /* the doorbell socket: sv[0] gkcd's end, sv[1] the client's */
} pair;

static void pair_open(pair *p) {
  size_t bytes = proto_ring_bytes(SQ, CQ), page = (size_t)sysconf(_SC_PAGESIZE);
  p->mapped = (bytes + page - 1) / page * page + page;
  p->map = mmap(NULL, p->mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT(p->map != MAP_FAILED);
  ASSERT(mprotect(p->map + p->mapped - page, page, PROT_NONE) == 0);
  p->base = p->map + p->mapped - page - bytes;
  ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, p->sv) == 0);
  proto_ring_init(&p->c, p->base, SQ, CQ, PROTO_RING_CLIENT, p->sv[1]);
  proto_ring_init(&p->d, p->base, SQ, CQ, PROTO_RING_DAEMON, p->sv[0]);
  uint32_t magic;
  memcpy(&magic, p->base, 4);
  ASSERT_EQ(magic, PROTO_RING_MAGIC);
}

static void pair_close(pair *p) {
  munmap(p->map, p->mapped);
  close(p->sv[0]);
  close(p->sv[1]);
}

/* Doorbell bytes waiting on fd (drained). */
static int bells(int fd) {
  char b[256];
  int n = 0;
  for (ssize_t r; (r = recv(fd, b, sizeof b, MSG_DONTWAIT)) > 0;) n += (int)r;
  return n;
}

static uint64_t rnd(uint64_t *s) { /* xorshift64 */
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static void put(uint8_t *base, uint32_t off, uint32_t v) { memcpy(base + off, &v, 4); }

/* A stream of 1 MiB, in odd-sized pieces, each side starting just before
 * its indices wrap at 2^32: everything arrives, in order. */
static void test_stream_and_wrap(void) {
  pair p;
  pair_open(&p);
  uint32_t start = 0xFFFFFFFFu - 1000;
  p.c.mine_out_tail = p.d.mine_in_head = start;
  put(p.base, PROTO_RING_OFF_SQ_TAIL, start);
  put(p.base, PROTO_RING_OFF_SQ_HEAD, start); /* as each would have published them */
  size_t total = 1 << 20, sent = 0, got = 0;
  uint8_t *src = malloc(total), *dst = malloc(total);
  uint64_t st = 7;
  for (size_t i = 0; i < total; i++) src[i] = (uint8_t)rnd(&st);
  while (got < total) {
    size_t k = 1 + rnd(&st) % 3000;
    if (k > total - sent) k = total - sent;
    struct iovec iov[2] = {{src + sent, k / 2}, {src + sent + k / 2, k - k / 2}};
    ssize_t w = proto_ring_writev(&p.c, iov, 2);
    ASSERT(w >= 0 && (size_t)w <= k && w <= SQ);
    sent += (size_t)w;
    ssize_t r = proto_ring_read(&p.d, dst + got, 1 + rnd(&st) % 5000);
    ASSERT(r >= 0 && (size_t)r <= sent - got);
    got += (size_t)r;
  }
  ASSERT(memcmp(src, dst, total) == 0);
  ASSERT_EQ(proto_ring_avail(&p.d), 0);
  ASSERT_EQ(proto_ring_room(&p.c), SQ);
  ASSERT(p.c.mine_out_tail < start); /* it wrapped */
  free(src), free(dst);
  pair_close(&p);
}

/* Indices the peer wrote out of bounds are refused; nothing moves then. */
static void test_bounds(void) {
  pair p;
  pair_open(&p);
  uint8_t buf[SQ + CQ];
  /* sq tail more than a ring ahead of gkcd's head */
  put(p.base, PROTO_RING_OFF_SQ_TAIL, SQ + 1);
  ASSERT_EQ(proto_ring_avail(&p.d), PROTO_RING_ECORRUPT);
  ASSERT_EQ(proto_ring_read(&p.d, buf, sizeof buf), PROTO_RING_ECORRUPT);
  ASSERT_EQ(p.d.mine_in_head, 0);
  /* behind it (tail - head wraps to a huge distance) */
  put(p.base, PROTO_RING_OFF_SQ_TAIL, 0xFFFFFFF0u);
  ASSERT_EQ(proto_ring_read(&p.d, buf, sizeof buf), PROTO_RING_ECORRUPT);
  /* exactly a full ring is fine */
  put(p.base, PROTO_RING_OFF_SQ_TAIL, SQ);
  ASSERT_EQ(proto_ring_read(&p.d, buf, sizeof buf), SQ);
  /* cq head past what gkcd wrote: no room, refused, nothing written */
  put(p.base, PROTO_RING_OFF_CQ_HEAD, 5);
  struct iovec iov = {buf, 10};
  ASSERT_EQ(proto_ring_room(&p.d), PROTO_RING_ECORRUPT);
  ASSERT_EQ(proto_ring_writev(&p.d, &iov, 1), PROTO_RING_ECORRUPT);
  ASSERT_EQ(p.d.mine_out_tail, 0);
  /* a head that stays within the ring: room as it says */
  put(p.base, PROTO_RING_OFF_CQ_HEAD, 0);
  ASSERT_EQ(proto_ring_room(&p.d), CQ);
  ASSERT_EQ(proto_ring_writev(&p.d, &iov, 1), 10);
  /* the client bounds gkcd's indices the same way */
  put(p.base, PROTO_RING_OFF_CQ_TAIL, CQ + 100);
  ASSERT_EQ(proto_ring_read(&p.c, buf, sizeof buf), PROTO_RING_ECORRUPT);
  /* gkcd never reads back what it wrote: scribbling its own words changes nothing */
  put(p.base, PROTO_RING_OFF_CQ_TAIL, 0xDEAD);
  put(p.base, PROTO_RING_OFF_SQ_HEAD, 0xBEEF);
  put(p.base, PROTO_RING_OFF_CQ_HEAD, 10);
  ASSERT_EQ(proto_ring_room(&p.d), CQ);
  ASSERT_EQ(proto_ring_avail(&p.d), 0); /* sq tail SQ, its head SQ */
  pair_close(&p);
}

/* A doorbell only for a side that asked; the recheck after raising a flag. */
static void test_flags(void) {
  pair p;
  pair_open(&p);
  uint8_t buf[64] = {1, 2, 3};
  struct iovec iov = {buf, 3};
  /* nobody asked: no doorbell */
  ASSERT_EQ(proto_ring_writev(&p.c, &iov, 1), 3);
  ASSERT_EQ(bells(p.sv[0]), 0);
  /* gkcd asks for data, but the data is there already: do not sleep */
  ASSERT_EQ(proto_ring_want(&p.d, PROTO_RING_WANT_DATA), 1);
  ASSERT_EQ(proto_ring_read(&p.d, buf, sizeof buf), 3);
  ASSERT_EQ(proto_ring_want(&p.d, PROTO_RING_WANT_DATA), 0); /* now it may */
  ASSERT_EQ(proto_ring_writev(&p.c, &iov, 1), 3);
  ASSERT_EQ(bells(p.sv[0]), 1);
  ASSERT_EQ(p.c.wakes_sent, 1);
  /* polling again: flags down, no doorbell */
  ASSERT_EQ(proto_ring_want(&p.d, 0), 0);
  ASSERT_EQ(proto_ring_writev(&p.c, &iov, 1), 3);
  ASSERT_EQ(bells(p.sv[0]), 0);
  /* the client waits for room in a full sq: rung when gkcd consumes */
  ASSERT_EQ(proto_ring_read(&p.d, buf, sizeof buf), 6);
  uint8_t big[SQ];
  struct iovec bi = {big, sizeof big};
  ASSERT_EQ(proto_ring_writev(&p.c, &bi, 1), SQ);
  ASSERT_EQ(proto_ring_writev(&p.c, &bi, 1), 0);
  ASSERT_EQ(proto_ring_want(&p.c, PROTO_RING_WANT_ROOM), 0);
  ASSERT_EQ(proto_ring_peer_flags(&p.d), PROTO_RING_WANT_ROOM);
  ASSERT_EQ(proto_ring_read(&p.d, buf, 1), 1);
  ASSERT_EQ(bells(p.sv[1]), 1);
  ASSERT_EQ(proto_ring_want(&p.c, PROTO_RING_WANT_ROOM), 1);
  /* descriptor count */
  ASSERT_EQ(proto_ring_fd_msgs(&p.d), 0);
  proto_ring_count_fd_msg(&p.c);
  proto_ring_count_fd_msg(&p.c);
  ASSERT_EQ(proto_ring_fd_msgs(&p.d), 2);
  pair_close(&p);
}

static void test_sizes(void) {
  ASSERT(proto_ring_size_ok(4096) && proto_ring_size_ok(1 << 24));
  ASSERT(!proto_ring_size_ok(2048) && !proto_ring_size_ok(6000) && !proto_ring_size_ok(1 << 25));
  ASSERT(!proto_ring_size_ok(0));
  ASSERT_EQ(proto_ring_bytes(SQ, CQ), (size_t)PROTO_RING_HDR + SQ + CQ);
}

int main(void) {
  test_sizes();
  test_stream_and_wrap();
  test_bounds();
  test_flags();
  printf("test_proto_ring: ok\n");
  return 0;
}
