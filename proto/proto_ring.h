/* proto_ring.h: the shared-memory request ring (PROTOCOL.md, "Rings").
 *
 * A client on the same host may move its requests and replies through
 * shared memory instead of the socket: one memfd holds a header page, a
 * submission ring (sq: client -> gkcd) and a completion ring (cq: gkcd ->
 * client).  Each ring is a byte pipe, not a table of slots: the producer
 * appends msgpack-rpc frames exactly as it would write them to the socket,
 * and the consumer copies bytes out and cuts them into frames with
 * proto_frame_scan, so one scanner and one decoder serve both transports,
 * and a frame bigger than the ring simply streams through it.
 *
 * Indices are free-running uint32 byte counters (position = index mod the
 * ring's size, a power of two), each written by one side only.  Neither
 * side ever reads back the indices it owns from shared memory: it keeps
 * its own copy (proto_ring.mine_*), and bounds every index the peer wrote
 * (tail - head never above the ring's size) before using it.  A peer that
 * scribbles on the header or the data gets PROTO_RING_ECORRUPT here, or
 * bytes the frame scanner refuses: never a read or write out of bounds.
 *
 * Waking: each side has a flags word.  A side that is about to sleep sets
 * WANT_DATA (wake me when bytes arrive) and/or WANT_ROOM (wake me when my
 * outgoing ring has room), fences, and looks once more (proto_ring_want);
 * the other side, after publishing an index, fences and rings the
 * sleeper's doorbell only when the matching flag is set.  A side that
 * polls leaves its flags clear, and the peer makes no system call.
 *
 * The doorbell is one byte sent on the connection's socket (MSG_DONTWAIT),
 * not an eventfd: an eventfd's blocking mode lives in the open file
 * description both processes share, so a client could switch it back to
 * blocking (or fill its counter) and stall the daemon's loop on a read or
 * a write of it.  A send or recv with MSG_DONTWAIT never blocks, whatever
 * the peer does, and the socket already tells each side that the other
 * went away.
 *
 * Allocates nothing; the caller maps the memory and owns the descriptors.
 *
 * Implemented in: proto_ring.c
 */
#ifndef PROTO_RING_H
#define PROTO_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define PROTO_RING_MAGIC 0x47524b47u /* the bytes "GKRG" read as a little-endian u32 */
#define PROTO_RING_VERSION 1u
#define PROTO_RING_HDR 4096u          /* the header page; the sq follows it, then the cq */
#define PROTO_RING_MIN ((uint32_t)4096)
#define PROTO_RING_MAX ((uint32_t)1 << 24) /* 16 MiB per ring */

/* Offsets in the header page, each word on its own cache line, and who
 * writes it.  The daemon never reads what it writes; the client never reads
 * what it writes either. */
#define PROTO_RING_OFF_MAGIC 0u         /* client: PROTO_RING_MAGIC, then u32 version at 4 */
#define PROTO_RING_OFF_SQ_TAIL 64u      /* client */
#define PROTO_RING_OFF_SQ_HEAD 128u     /* daemon */
#define PROTO_RING_OFF_CQ_TAIL 192u     /* daemon */
#define PROTO_RING_OFF_CQ_HEAD 256u     /* client */
#define PROTO_RING_OFF_DFLAGS 320u      /* daemon: its PROTO_RING_WANT_* */
#define PROTO_RING_OFF_CFLAGS 384u      /* client: its PROTO_RING_WANT_* */
#define PROTO_RING_OFF_FD_MSGS 448u     /* client: descriptor-carrying bytes it sent on the socket */

#define PROTO_RING_WANT_DATA 1u /* wake me when my incoming ring has bytes */
#define PROTO_RING_WANT_ROOM 2u /* wake me when my outgoing ring has room */

#define PROTO_RING_ECORRUPT (-1) /* the peer's index is out of bounds */

enum { PROTO_RING_DAEMON = 0, PROTO_RING_CLIENT = 1 };

typedef struct {
  uint8_t *base;        /* the mapping: PROTO_RING_HDR + sq_size + cq_size bytes */
  uint32_t sq_size, cq_size;
  int side;             /* PROTO_RING_DAEMON or PROTO_RING_CLIENT */
  /* This side's own indices: the head of the ring it reads, the tail of
   * the one it writes (the copies in shared memory are only published). */
  uint32_t mine_in_head, mine_out_tail;
  uint32_t mine_flags;
  int sock;             /* where the doorbell is rung (the connection's socket); -1: not yet */
  uint32_t mine_fd_msgs; /* client: descriptor-carrying bytes sent so far */
  uint64_t wakes_sent;  /* doorbells rung (the system calls the flags avoid) */
} proto_ring;

/* 1 when n is a ring size gkcd accepts (a power of two in [MIN, MAX]). */
int proto_ring_size_ok(uint64_t n);
/* The memfd's size for these rings. */
size_t proto_ring_bytes(uint32_t sq_size, uint32_t cq_size);
/* Sets r up on a mapping of proto_ring_bytes(sq, cq) bytes, every index at
 * 0 (a fresh memfd is zeroed).  The client also writes the magic. */
void proto_ring_init(proto_ring *r, void *base, uint32_t sq_size, uint32_t cq_size, int side,
                     int sock);

/* Bytes waiting in the incoming ring (0: none), or PROTO_RING_ECORRUPT. */
ssize_t proto_ring_avail(proto_ring *r);
/* Room in the outgoing ring, or PROTO_RING_ECORRUPT. */
ssize_t proto_ring_room(proto_ring *r);
/* Copies up to max incoming bytes to dst and consumes them (waking the
 * peer when it waits for room); returns how many (0: none), or
 * PROTO_RING_ECORRUPT. */
ssize_t proto_ring_read(proto_ring *r, void *dst, size_t max);
/* Appends as much of iov[0..n) as fits to the outgoing ring and publishes
 * it (waking the peer when it waits for data); returns the bytes taken (0:
 * full), or PROTO_RING_ECORRUPT. */
ssize_t proto_ring_writev(proto_ring *r, const struct iovec *iov, size_t n);
/* Sets this side's flags (PROTO_RING_WANT_*; 0 while polling), then, with
 * a full fence between, looks once more: 1 when what a set flag waits for
 * is already there (do not sleep), 0 when it may sleep, or
 * PROTO_RING_ECORRUPT. */
int proto_ring_want(proto_ring *r, uint32_t flags);
/* The peer's flags as it last published them (PROTO_RING_WANT_*). */
uint32_t proto_ring_peer_flags(const proto_ring *r);
/* Rings the peer's doorbell: one byte on r->sock, never blocking (a full
 * socket buffer holds doorbells enough). */
void proto_ring_wake_peer(proto_ring *r);
/* Client: counts a byte it sent on the socket with descriptors attached
 * (before the frame that takes them goes into the sq).  Daemon: that count,
 * as last published: when it moved, the socket is read before the sq, so
 * the descriptors are there before the frame. */
void proto_ring_count_fd_msg(proto_ring *r);
uint32_t proto_ring_fd_msgs(const proto_ring *r);

#endif
