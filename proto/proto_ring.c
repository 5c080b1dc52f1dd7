/* proto_ring.c: see proto_ring.h.
 *
 * The words in the header are touched only with __atomic loads and stores
 * (acquire for what the peer published, release for what we publish), and
 * the wake protocol's two halves each put a sequentially consistent fence
 * between their store and their load: without it each side could miss the
 * other's store (the store-buffer race of Dekker's algorithm) and both
 * sleep.
 */
#include "proto_ring.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint32_t *word(const proto_ring *r, uint32_t off) { return (uint32_t *)(void *)(r->base + off); }

static uint32_t load(const proto_ring *r, uint32_t off) {
  return __atomic_load_n(word(r, off), __ATOMIC_ACQUIRE);
}
static void store(const proto_ring *r, uint32_t off, uint32_t v) {
  __atomic_store_n(word(r, off), v, __ATOMIC_RELEASE);
}

/* Where each side's words are. */
static uint32_t in_tail_off(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? PROTO_RING_OFF_SQ_TAIL : PROTO_RING_OFF_CQ_TAIL;
}
static uint32_t in_head_off(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? PROTO_RING_OFF_SQ_HEAD : PROTO_RING_OFF_CQ_HEAD;
}
static uint32_t out_tail_off(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? PROTO_RING_OFF_CQ_TAIL : PROTO_RING_OFF_SQ_TAIL;
}
static uint32_t out_head_off(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? PROTO_RING_OFF_CQ_HEAD : PROTO_RING_OFF_SQ_HEAD;
}
static uint32_t my_flags_off(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? PROTO_RING_OFF_DFLAGS : PROTO_RING_OFF_CFLAGS;
}
static uint32_t peer_flags_off(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? PROTO_RING_OFF_CFLAGS : PROTO_RING_OFF_DFLAGS;
}
static uint8_t *in_data(const proto_ring *r) {
  return r->base + PROTO_RING_HDR + (r->side == PROTO_RING_DAEMON ? 0 : r->sq_size);
}
static uint8_t *out_data(const proto_ring *r) {
  return r->base + PROTO_RING_HDR + (r->side == PROTO_RING_DAEMON ? r->sq_size : 0);
}
static uint32_t in_size(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? r->sq_size : r->cq_size;
}
static uint32_t out_size(const proto_ring *r) {
  return r->side == PROTO_RING_DAEMON ? r->cq_size : r->sq_size;
}

int proto_ring_size_ok(uint64_t n) {
  return n >= PROTO_RING_MIN && n <= PROTO_RING_MAX && (n & (n - 1)) == 0;
}

size_t proto_ring_bytes(uint32_t sq_size, uint32_t cq_size) {
  return (size_t)PROTO_RING_HDR + sq_size + cq_size;
}

void proto_ring_init(proto_ring *r, void *base, uint32_t sq_size, uint32_t cq_size, int side,
                     int sock) {
  memset(r, 0, sizeof *r);
  r->base = base;
  r->sq_size = sq_size;
  r->cq_size = cq_size;
  r->side = side;
  r->sock = sock;
  if (side == PROTO_RING_CLIENT) {
    store(r, PROTO_RING_OFF_MAGIC, PROTO_RING_MAGIC);
    store(r, PROTO_RING_OFF_MAGIC + 4, PROTO_RING_VERSION);
  }
}

ssize_t proto_ring_avail(proto_ring *r) {
  uint32_t n = load(r, in_tail_off(r)) - r->mine_in_head;
  return n > in_size(r) ? PROTO_RING_ECORRUPT : (ssize_t)n;
}

ssize_t proto_ring_room(proto_ring *r) {
  uint32_t used = r->mine_out_tail - load(r, out_head_off(r));
  return used > out_size(r) ? PROTO_RING_ECORRUPT : (ssize_t)(out_size(r) - used);
}

/* After publishing an index: the peer sleeps waiting for it? */
static void wake_if(proto_ring *r, uint32_t flag) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (load(r, peer_flags_off(r)) & flag) proto_ring_wake_peer(r);
}

ssize_t proto_ring_read(proto_ring *r, void *dst, size_t max) {
  ssize_t avail = proto_ring_avail(r);
  if (avail <= 0) return avail;
  size_t n = (size_t)avail < max ? (size_t)avail : max;
  if (n == 0) return 0;
  uint32_t size = in_size(r), at = r->mine_in_head & (size - 1);
  size_t first = size - at < n ? size - at : n;
  memcpy(dst, in_data(r) + at, first);
  memcpy((uint8_t *)dst + first, in_data(r), n - first);
  r->mine_in_head += (uint32_t)n;
  store(r, in_head_off(r), r->mine_in_head);
  wake_if(r, PROTO_RING_WANT_ROOM);
  return (ssize_t)n;
}

ssize_t proto_ring_writev(proto_ring *r, const struct iovec *iov, size_t n) {
  ssize_t room = proto_ring_room(r);
  if (room <= 0) return room;
  uint32_t size = out_size(r);
  uint8_t *data = out_data(r);
  size_t left = (size_t)room, put = 0;
  for (size_t i = 0; i < n && left; i++) {
    const uint8_t *src = iov[i].iov_base;
    size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
    uint32_t at = (r->mine_out_tail + (uint32_t)put) & (size - 1);
    size_t first = size - at < k ? size - at : k;
    memcpy(data + at, src, first);
    memcpy(data, src + first, k - first);
    put += k;
    left -= k;
  }
  if (!put) return 0;
  r->mine_out_tail += (uint32_t)put;
  store(r, out_tail_off(r), r->mine_out_tail);
  wake_if(r, PROTO_RING_WANT_DATA);
  return (ssize_t)put;
}

int proto_ring_want(proto_ring *r, uint32_t flags) {
  if (flags != r->mine_flags) {
    r->mine_flags = flags;
    store(r, my_flags_off(r), flags);
  }
  if (!flags) return 0;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (flags & PROTO_RING_WANT_DATA) {
    ssize_t a = proto_ring_avail(r);
    if (a != 0) return a < 0 ? PROTO_RING_ECORRUPT : 1;
  }
  if (flags & PROTO_RING_WANT_ROOM) {
    ssize_t room = proto_ring_room(r);
    if (room != 0) return room < 0 ? PROTO_RING_ECORRUPT : 1;
  }
  return 0;
}

uint32_t proto_ring_peer_flags(const proto_ring *r) { return load(r, peer_flags_off(r)); }

void proto_ring_wake_peer(proto_ring *r) {
  if (r->sock < 0) return;
  static const uint8_t bell = 0;
  r->wakes_sent++;
  /* EAGAIN: the peer has doorbells enough waiting.  Any other error is the
   * socket's, and its owner sees it on its next read. */
  while (send(r->sock, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

void proto_ring_count_fd_msg(proto_ring *r) {
  store(r, PROTO_RING_OFF_FD_MSGS, ++r->mine_fd_msgs);
}

uint32_t proto_ring_fd_msgs(const proto_ring *r) { return load(r, PROTO_RING_OFF_FD_MSGS); }
