/* gkc_ring_io.c: a blocking connection's bytes through its shared-memory
 * ring (proto_ring.h; PROTOCOL.md, "Rings").
 *
 * A wait (for replies in the cq, or for room in the sq) polls the ring
 * first: a small request's reply usually comes within microseconds, and
 * then neither side makes a system call.  Then it raises its flag, looks
 * once more, and sleeps in poll() on the socket, where gkcd's doorbell byte
 * (or its end) arrives.  How long a wait for a reply polls adapts: twice
 * the recent waits (a moving average), at most ring_spin_us, and not at
 * all while they take longer than that: polling for a reply that comes
 * late only takes a CPU from gkcd (on a small machine, the one it needs).
 *
 * A sleep is bounded (RING_NAP_MS) as a safety net: when it runs out with
 * our request still in the sq while gkcd's flag says it waits for bytes,
 * the doorbell is rung again, so that a lost wake costs a few
 * milliseconds, not a hang.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include "gkc_internal.h"

#define RING_NAP_MS 20

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* Whether what flag waits for is there (or the ring is broken: the
 * caller's next ring call says so). */
static int ready(gkc_conn *c, uint32_t flag) {
  return flag == PROTO_RING_WANT_DATA ? proto_ring_avail(c->ring) != 0 : proto_ring_room(c->ring) != 0;
}

/* Drains doorbells; 1 when gkcd has closed the socket. */
static int drain_bells(gkc_conn *c) {
  unsigned char b[256];
  for (;;) {
    ssize_t n = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return 1;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : 1;
  }
}

/* How long the next wait for flag polls before it sleeps. */
static uint64_t spin_budget(const gkc_conn *c, uint32_t flag) {
  uint64_t max = (uint64_t)c->ring_spin_us * 1000;
  if (flag != PROTO_RING_WANT_DATA) return max;
  uint64_t avg = c->ring_wait_avg_ns;
  return avg > max ? 0 : avg * 2 < max ? avg * 2 : max;
}

/* A wait for data took ns: into the moving average (weight 1/4). */
static void note_wait(gkc_conn *c, uint32_t flag, uint64_t ns) {
  if (flag == PROTO_RING_WANT_DATA) c->ring_wait_avg_ns = (3 * c->ring_wait_avg_ns + ns) / 4;
}

static int wait_sleep(gkc_conn *c, uint32_t flag);

/* Waits until flag's condition holds: 0, or -1 when gkcd is gone. */
static int wait_for(gkc_conn *c, uint32_t flag) {
  uint64_t t0 = now_ns(), end = t0 + spin_budget(c, flag);
  for (unsigned i = 0;; i++) {
    if (ready(c, flag)) {
      note_wait(c, flag, now_ns() - t0);
      return 0;
    }
    if ((i & 63) == 63) {
      if (now_ns() >= end) break;
      sched_yield(); /* the daemon may need this CPU to answer */
    }
    relax();
  }
  int rc = wait_sleep(c, flag);
  note_wait(c, flag, now_ns() - t0);
  return rc;
}

/* The rest of a wait, asleep on the socket between looks. */
static int wait_sleep(gkc_conn *c, uint32_t flag) {
  for (;;) {
    int r = proto_ring_want(c->ring, flag);
    if (r != 0) break;
    struct pollfd pf = {.fd = c->fd, .events = POLLIN};
    int n = poll(&pf, 1, RING_NAP_MS);
    if (n < 0 && errno != EINTR) break;
    if (n > 0 && drain_bells(c)) {
      (void)proto_ring_want(c->ring, 0);
      return ready(c, flag) ? 0 : -1; /* what gkcd wrote before it went is read first */
    }
    /* Our bytes wait unread while gkcd says it waits for bytes: a doorbell
     * was lost; ring again.  (Its flag clear, it is polling, or holding
     * this connection back, and looks again by itself.) */
    if (n == 0 && proto_ring_room(c->ring) != (ssize_t)c->ring->sq_size &&
        (proto_ring_peer_flags(c->ring) & PROTO_RING_WANT_DATA))
      proto_ring_wake_peer(c->ring);
  }
  (void)proto_ring_want(c->ring, 0);
  return 0;
}

ssize_t gkc__ring_send(gkc_conn *c, const struct iovec *iov, size_t n) {
  for (;;) {
    ssize_t w = proto_ring_writev(c->ring, iov, n);
    if (w != 0) {
      if (w < 0) errno = EPROTO;
      return w < 0 ? -1 : w;
    }
    if (c->nonblock) {
      errno = EAGAIN;
      return -1;
    }
    if (wait_for(c, PROTO_RING_WANT_ROOM) != 0) {
      errno = EPIPE;
      return -1;
    }
  }
}

int gkc__ring_pass_fd(gkc_conn *c, int fd) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } cm;
  memset(&cm, 0, sizeof cm);
  static const unsigned char bell = 0;
  struct iovec iov = {(void *)&bell, 1};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                      .msg_controllen = sizeof cm.buf};
  struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof(int));
  for (;;) {
    ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | (c->nonblock ? MSG_DONTWAIT : 0));
    if (w == 1) break;
    if (w < 0 && errno == EINTR) continue;
    return -1;
  }
  /* Counted before the request goes into the sq: gkcd reads the socket
   * before the sq whenever the count moved. */
  proto_ring_count_fd_msg(c->ring);
  return 0;
}

ssize_t gkc__ring_recv(gkc_conn *c, void *dst, size_t len) {
  for (;;) {
    ssize_t n = proto_ring_read(c->ring, dst, len);
    if (n != 0) {
      if (n < 0) errno = EPROTO;
      return n < 0 ? -1 : n;
    }
    if (c->nonblock) { /* a look between calls (gkc__live): gkcd's end shows on the socket */
      if (drain_bells(c)) return proto_ring_avail(c->ring) != 0 ? gkc__ring_recv(c, dst, len) : 0;
      errno = EAGAIN;
      return -1;
    }
    if (wait_for(c, PROTO_RING_WANT_DATA) != 0) return 0;
  }
}

void gkc__ring_end(gkc_conn *c) {
  if (!c->ring) return;
  munmap(c->ring->base, c->ring_bytes);
  free(c->ring);
  c->ring = NULL;
  if (c->ring_mode != GKC__RING_OFF) c->ring_mode = GKC__RING_TRY;
}
