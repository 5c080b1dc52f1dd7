/* fuzz_ring.c: libFuzzer target for the shared-memory ring's frame
 * extraction (proto_ring.h), as gkcd runs it (conn.c read_some and
 * parse_frames, write_pending), with a hostile client on the other side.
 *
 * The input is the client's whole share of the mapping: the sizes (a
 * choice of powers of two), the words it writes (sq tail, cq head, its
 * flags and descriptor count), where gkcd's private indices stand (so that
 * wrap-around is reached), and the ring's bytes; the rest of the input is
 * replayed as "what the client writes next", between gkcd's steps.  gkcd's
 * side then does what the loop does: bound the tail, copy what is there
 * into a buffer of its own, cut it with proto_frame_scan, copy each frame
 * out, and write replies into the cq as far as its (bounded) room goes.
 *
 * The mapping is placed just before a PROT_NONE page, picohttpparser's
 * way, so that a read or write past the rings faults even where ASan's
 * redzones would not reach (they do not cover mmap'd memory).  Checked:
 * every read returns at most the ring's size, a refusal happens exactly
 * when the peer's index is out of bounds, and nothing touches the guard.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proto_frame.h"
#include "proto_ring.h"

#define CHECK(c) \
  do {           \
    if (!(c)) __builtin_trap(); \
  } while (0)

static const uint32_t SIZES[4] = {4096, 8192, 16384, 65536};

typedef struct {
  const uint8_t *p;
  size_t n;
} cursor;

static uint32_t take32(cursor *c) {
  uint32_t v = 0;
  size_t k = c->n < 4 ? c->n : 4;
  memcpy(&v, c->p, k);
  c->p += k, c->n -= k;
  return v;
}

static void put(uint8_t *base, uint32_t off, uint32_t v) { memcpy(base + off, &v, 4); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cursor in = {data, size};
  uint32_t pick = take32(&in);
  uint32_t sq = SIZES[pick & 3], cq = SIZES[(pick >> 2) & 3];
  size_t bytes = proto_ring_bytes(sq, cq), page = (size_t)sysconf(_SC_PAGESIZE);
  size_t mapped = (bytes + page - 1) / page * page;
  uint8_t *m = mmap(NULL, mapped + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  CHECK(mprotect(m + mapped, page, PROT_NONE) == 0);
  uint8_t *base = m + mapped - bytes; /* the rings end at the guard page */
  proto_ring r;
  proto_ring_init(&r, base, sq, cq, PROTO_RING_DAEMON, -1);
  r.mine_in_head = take32(&in); /* wherever a long-lived connection's indices are */
  r.mine_out_tail = take32(&in);
  static const proto_limits lim = {(size_t)1 << 20, 4096, 32};
  size_t cap = (size_t)sq * 2 + 65536, len = 0;
  uint8_t *buf = malloc(cap);
  CHECK(buf);
  static const uint8_t reply[300] = {0x94, 0x01};
  for (int step = 0; step < 64 && in.n; step++) {
    /* The client writes: its words, then some bytes anywhere in the rings. */
    uint32_t what = take32(&in);
    if (what & 1) put(base, PROTO_RING_OFF_SQ_TAIL, take32(&in));
    if (what & 2) put(base, PROTO_RING_OFF_CQ_HEAD, take32(&in));
    if (what & 4) put(base, PROTO_RING_OFF_CFLAGS, take32(&in));
    if (what & 8) put(base, PROTO_RING_OFF_FD_MSGS, take32(&in));
    size_t k = (what >> 8) & 1023;
    if (k > in.n) k = in.n;
    if (k) {
      uint32_t at = take32(&in) % (uint32_t)(sq + cq);
      if (k > in.n) k = in.n;
      if (k > sq + cq - at) k = sq + cq - at;
      memcpy(base + PROTO_RING_HDR + at, in.p, k);
      in.p += k, in.n -= k;
    }
    /* gkcd reads: bounded tail, bounded copy, then frames cut and copied out. */
    uint32_t tail;
    memcpy(&tail, base + PROTO_RING_OFF_SQ_TAIL, 4);
    ssize_t avail = proto_ring_avail(&r);
    CHECK(avail == ((uint32_t)(tail - r.mine_in_head) > sq ? PROTO_RING_ECORRUPT
                                                             : (ssize_t)(uint32_t)(tail - r.mine_in_head)));
    if (avail < 0) break; /* gkcd closes the connection */
    if (len == cap) len = 0; /* a frame larger than the limit: gkcd refuses it */
    ssize_t got = proto_ring_read(&r, buf + len, cap - len);
    CHECK(got >= 0 && got <= avail && (size_t)got <= sq);
    len += (size_t)got;
    size_t pos = 0;
    while (pos < len) {
      proto_frame_info info;
      ssize_t f = proto_frame_scan(buf + pos, len - pos, &lim, &info);
      if (f == PROTO_PARTIAL) break;
      if (f < 0) { /* answered and closed in gkcd; here the stream restarts */
        pos = len;
        break;
      }
      CHECK((size_t)f <= len - pos);
      uint8_t *frame = malloc((size_t)f);
      CHECK(frame);
      memcpy(frame, buf + pos, (size_t)f);
      free(frame);
      pos += (size_t)f;
      /* A reply for it, into the cq as far as it has room. */
      struct iovec iov[2] = {{(void *)reply, 1 + (what >> 20) % sizeof reply}, {(void *)reply, 7}};
      ssize_t room = proto_ring_room(&r);
      ssize_t w = proto_ring_writev(&r, iov, 2);
      CHECK(w == (room < 0 ? PROTO_RING_ECORRUPT
                           : (ssize_t)((size_t)room < iov[0].iov_len + 7 ? (size_t)room
                                                                            : iov[0].iov_len + 7)));
      if (w < 0) break;
    }
    memmove(buf, buf + pos, len - pos);
    len -= pos;
    (void)proto_ring_want(&r, (what >> 4) & 3);
  }
  free(buf);
  munmap(m, mapped + page);
  return 0;
}
