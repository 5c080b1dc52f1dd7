/* conn.h: the transport: client connections, bytes in, frames out, replies
 * back.
 *
 * conn accepts a descriptor (checking the peer and the connection limits),
 * reads with back-pressure and the memory budget, keeps the descriptors
 * that came with the bytes, cuts the input into frames (proto_frame_scan),
 * writes replies, and closes connections past their deadlines.  It never
 * looks inside a frame and never calls the code above it by name: every
 * complete frame, every frame it must reject and every connection that
 * closes goes to a hook the owner installed (conn_hooks), on the loop
 * thread; the answers come back down through conn_send.  The server wires
 * the hooks to rpc.c and the scheduler.
 *
 * Back-pressure needs the owner's word (is this client's next request
 * held? are the queues full?), which conn does not ask for: the owner
 * tells it when that changes (conn_hold, conn_set_full), and keeps the
 * counts conn weighs beside its own (jobs, expected).  Whatever the owner
 * keeps per connection lives in the connection's owner area (conn_owner),
 * sized by the owner, so conn needs none of its types.
 *
 * Everything here belongs to the loop thread; the rest of a big frame is
 * received by a reader thread (reader.h), which owns the connection's
 * socket for reading and its input buffer meanwhile, and a big reply body
 * is sent by one, which owns the socket for writing and that body (conn.c
 * says how).
 */
/* Implemented in: conn.c, conn_admit.c (accepting, the deadlines), conn_ring.c (rings) */
#ifndef GKCD_CONN_H
#define GKCD_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <uv.h>

#include "budget.h"
#include "bufpool.h"
#include "config.h"
#include "proto_frame.h"
#include "proto_ring.h"
#include "reader.h"

typedef struct gkcd_conn gkcd_conn;
typedef struct gkcd_conns gkcd_conns;
typedef struct conn_ring_ops conn_ring_ops;

#define CONN_MAX_FDS 16     /* descriptors received and not yet taken by shm_register */
#define CONN_LINGER_MAX 64  /* refused sockets kept open briefly so the refusal is read */

/* Where conn hands what it cannot deal with itself.  Each is called on the
 * loop thread, from inside conn.c, with c alive. */
typedef struct conn_hooks {
  /* A complete frame; frame is malloc'd and ownership is taken. */
  void (*frame)(gkcd_conn *c, void *frame, size_t len);
  /* The scanner rejected a frame (scan_rc < 0): the connection closes once
   * the answer (conn_send) is written. */
  void (*reject)(gkcd_conn *c, int scan_rc, const proto_frame_info *info);
  /* The peer stopped sending in the middle of a frame (info as far as the
   * scanner got): answer msg, a parse error, since the client may still
   * read. */
  void (*truncated)(gkcd_conn *c, const proto_frame_info *info, const char *msg);
  /* c was accepted (its id and peer known; conn_owner(c) zeroed): the
   * owner sets up what it keeps for it. */
  void (*accepted)(gkcd_conn *c);
  /* c starts closing (conn_close): its queued work may go now. */
  void (*closing)(gkcd_conn *c);
  /* Some of c's replies were written while c was held (conn_hold): its
   * held request may go on. */
  void (*drained)(gkcd_conn *c);
  /* c's handle has closed and c is off the list: what the owner keeps for
   * it goes now.  c's memory goes after the hook, with its last reference. */
  void (*closed)(gkcd_conn *c);
  /* Some connection is now paused for full queues, memory or a released
   * hold: the owner calls conn_resume_paused soon, on the loop, and again
   * while conn_paused says so.  Must only record that. */
  void (*pass)(gkcd_conns *set);
} conn_hooks;

struct gkcd_conn {
  uv_poll_t poll;
  gkcd_conns *set;     /* the transport it belongs to */
  struct gkcd_server *srv; /* the owner's (gkcd_conns.srv), for the hooks; conn never looks inside */
  int fd;
  int events;          /* what poll watches: UV_READABLE and/or UV_WRITABLE */
  int fds[CONN_MAX_FDS]; /* received descriptors, oldest first */
  int nfds;
  size_t pend_off;     /* bytes of pend[0] already written */
  uint64_t id;
  int pid, uid;        /* the peer, from SO_PEERCRED */
  int refs;            /* the open handle, plus one per job or write in flight */
  int closing;         /* uv_close called: replies are dropped */
  int reading;         /* the socket is being read */
  int taking;          /* frames are being taken from it (not paused by back-pressure) */
  int close_when_flushed; /* an unrecoverable error was answered */
  int by_gkcd;         /* closed by gkcd's decision (a deadline, a bad frame), not its peer's */
  int parsing;         /* inside parse_frames: replies must not re-enter it */
  int peer_closed;     /* the peer shut down its sending side */
  int wait_mem;        /* not read: no memory budget to grow the input buffer */
  int mem_clock;       /* resumed after wait_mem: the request clock keeps running */
  int copy_wait;       /* a whole frame waits for input allowance to be copied out */
  int rbusy;           /* rt is out: a reader receives into buf (its len, cap are the reader's) */
  reader_task rt;      /* the rest of a big frame, received off the loop (reader.h) */
  int wbusy;           /* wt is out: a writer sends pend[0]; the loop sends nothing */
  reader_task wt;      /* a big reply body, sent off the loop */
  size_t wprog;        /* wt's progress as the sweep last saw it (--send-timeout) */
  unsigned char *buf;  /* received bytes not yet parsed into frames */
  size_t len, cap;     /* cap is charged to the memory budget (input) */
  size_t phys;         /* buf's true size, >= cap */
  int pooled;          /* buf came from the pool: its bytes past cap are charged as pool_extra */
  size_t pool_extra;   /* charged to BUDGET_POOL for it */
  size_t need;         /* scanner's hint: rescan once len reaches it */
  size_t pool_asked;   /* the need for which hand_off last asked the pool for a buffer */
  size_t jobs;         /* in flight, including those queued or held (counted by the owner) */
  int batch;           /* the owner's: its replies still due in the batch it is answering */
  size_t expected;     /* reply bytes its admitted jobs are predicted to add (the owner's) */
  size_t unwritten;    /* reply bytes queued here and not yet taken by the socket */
  int held;            /* the owner holds one of its requests: take no frames (conn_hold) */
  int wake;            /* released from held: to be looked at again (conn_resume_paused) */
  uint64_t last_active_ms; /* uv_now of the last byte in or out */
  uint64_t req_start_ms;   /* when the partial request in buf began; 0: none */
  uint64_t send_since_ms;  /* replies pending and the socket took none since */
  /* Replies collected during one loop iteration, written together. */
  uv_buf_t *pend;
  size_t npend, pend_cap;
  /* The shared-memory ring (conn_ring_start), or NULL: the socket then
   * carries only doorbells and descriptors, after the sock_pend replies
   * still due on it. */
  proto_ring *ring;
  size_t ring_map_bytes; /* its mapping's length (munmapped at close) */
  size_t sock_pend;      /* pending replies (pend entries) that go on the socket first */
  uint32_t fd_msgs_seen; /* the client's descriptor count when the socket was last read */
  gkcd_conn *prev, *next;
  max_align_t owner[]; /* the owner's, gkcd_conns.owner_size bytes (conn_owner) */
};

/* Every connection, and what they share. */
struct gkcd_conns {
  /* The owner's, set before the first conn_accept. */
  uv_loop_t *loop;
  const gkcd_config *cfg;     /* limits, deadlines, allowed users and groups */
  const proto_limits *limits; /* what the frame scanner accepts */
  gkcd_budget *budget;        /* input and replies are charged to it */
  bufpool *pool;              /* big input buffers come from it, big replies go back to it; may be NULL */
  size_t owner_size;          /* bytes of each connection's owner area */
  int full;                   /* the owner's queues are full: take no frames (conn_set_full) */
  gid_t socket_gid;           /* allowed when no group is configured */
  struct gkcd_server *srv;    /* handed to each connection (c->srv) */
  conn_hooks hooks;
  /* conn.c's. */
  gkcd_conn *head;     /* open and closing connections */
  uint64_t n;          /* of them */
  uint64_t next_id;
  int draining;        /* conn_drain: each closes once it has nothing left to do */
  int paused_full;     /* some connections are unread because the queues were full */
  int paused_mem;      /* some connections are unread for lack of memory budget */
  int paused_held;     /* some connections were released from held (conn_hold) */
  size_t nrings;       /* connections with a ring (conn_ring_start) */
  const conn_ring_ops *ring_ops; /* conn_ring.c's, set by conn_ring_start */
  int rings_polled;    /* the loop polls the rings now: no doorbells wanted */
  uint64_t ring_corrupt; /* connections closed for a ring that broke its bounds */
  gkcd_conn *overdraft; /* may finish receiving a request past the budget */
  reader_pool readers; /* receive big frames' rest off the loop (conn_start_readers) */
  int linger_fds[CONN_LINGER_MAX]; /* refused connections, closed by the sweep */
  uint64_t linger_ms[CONN_LINGER_MAX];
  int nlinger;
  uint64_t refused;           /* connections closed at once on accept */
  uint64_t refused_slots;     /* of refused: no slot (max-connections, max-conn-per-user) */
  uint64_t closed_send_timeout, closed_request_timeout, closed_idle;
};

/* The owner's area of c (gkcd_conns.owner_size bytes, zeroed at accept). */
static inline void *conn_owner(gkcd_conn *c) { return c->owner; }
/* The owner holds one of c's requests (held 1: take no more frames from c,
 * and call the drained hook as its replies are written) or no longer does
 * (0: c is looked at again by the next conn_resume_paused, or at once by a
 * conn_update_reading).  Only records: safe inside the frame hook. */
void conn_hold(gkcd_conn *c, int held);
/* The owner's queues are full (1: no connection's frames are taken) or no
 * longer (0: those paused resume at the next conn_resume_paused). */
void conn_set_full(gkcd_conns *set, int full);

/* From now on c's frames come from ring (mapped at ring->base, map_bytes
 * long; taken over: unmapped when c closes) and its replies go to it,
 * except those queued now and the next `then` reply buffers, which still
 * go on the socket (the answer to the request that set the ring up).  0;
 * -1 when c has a ring already. */
int conn_ring_start(gkcd_conn *c, proto_ring *ring, size_t map_bytes, size_t then);
/* Once per loop iteration (server_run): polling 1 when the loop is about
 * to poll without sleeping (the rings' flags cleared: clients ring no
 * doorbell), 0 when it may sleep (each ring's WANT_* flags set as its
 * connection waits).  Either way, serves each ring with something to do
 * now; 1 when one had (the loop must not sleep this time). */
int conn_rings_poll(gkcd_conns *set, int polling);

/* Takes a freshly accepted descriptor: refused (and closed, or kept open a
 * moment to say why) or served. */
void conn_accept(gkcd_conns *set, int fd);
/* The oldest descriptor received on c and not yet taken, or -1. */
int conn_take_fd(gkcd_conn *c);
/* Sends head (malloc'd, ownership taken) then body (malloc'd or NULL,
 * ownership taken): written now, or, from inside the frame hook, with the
 * other replies to the frames of the same read once they are handed on.
 * Dropped silently when the connection is closing. */
void conn_send(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len);
/* A job of c's is answered: as conn_send, then c's job count and the job's
 * reference (refs) go.  more: another reply to c follows at once (jobs
 * that finished together), so this one waits to go out with it.  c may be
 * gone once it returns. */
void conn_job_done(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len, int more);
void conn_close(gkcd_conn *c);
/* Drops a reference (conn.h refs): the owner takes one per job in flight. */
void conn_unref(gkcd_conn *c);
/* Starts or stops reading from c as its limits allow; after any change in
 * its jobs, queued replies or the server's state. */
void conn_update_reading(gkcd_conn *c);
/* From now on each connection closes once it has no job in flight and no
 * reply to write; those idle now close at once. */
void conn_drain(gkcd_conns *set);
/* Resumes the connections paused for full queues, memory or a held
 * request once that has passed (the owner's pass, asked for by the pass
 * hook). */
void conn_resume_paused(gkcd_conns *set);
/* 1 while some connection is paused for one of those reasons. */
int conn_paused(const gkcd_conns *set);
/* Closes connections past a deadline: idle (--idle-timeout), replies not
 * read (--send-timeout), a request arriving too slowly (--request-timeout);
 * and refused sockets whose linger is over. */
void conn_sweep(gkcd_conns *set);
/* Closes every lingering refused socket (shutdown). */
void conn_linger_close_all(gkcd_conns *set);
/* Sets up the reader threads' pool (reader.h; its threads start when
 * frames need them), once loop is set; without it every frame is read on
 * the loop. */
void conn_start_readers(gkcd_conns *set);
/* Stops the reader threads (shutdown, once every connection has closed:
 * none then has a reader out). */
void conn_stop_readers(gkcd_conns *set);

/* What conn.c does to a connection's ring (conn_ring.c's, reached only
 * through these, which conn_ring_start sets: conn_ring.c is built on the
 * conn.c functions below, and the layers check wants no call back by
 * name).  Called only while c->ring is set. */
struct conn_ring_ops {
  /* c's socket was polled with events (on_poll, after the replies it took):
   * doorbells, descriptors and its end, then the ring served. */
  void (*poll)(gkcd_conn *c, int events);
  /* Puts iov[0..n) into the completion ring as far as it has room: the
   * bytes taken (0: full, the client's doorbell says when it has room);
   * -1 when the ring broke its bounds (c closed). */
  ssize_t (*writev)(gkcd_conn *c, const struct iovec *iov, size_t n);
  /* Unmaps and frees c's ring (finish_close: nothing reads or writes it
   * from here on); c->ring is NULL after it. */
  void (*unmap)(gkcd_conn *c);
};

/* conn.c's, for conn_ring.c, which serves a ring's connection with them as
 * on_poll serves a socket's. */
/* Tells the poll handle what we wait for now. */
void conn_watch(gkcd_conn *c);
/* Receives up to len bytes from c's socket into buf, keeping the
 * descriptors that came with them: the bytes received (0: the peer
 * finished sending), or -1 when there is nothing now or the socket failed
 * (c then closing). */
ssize_t conn_recv(gkcd_conn *c, void *buf, size_t len);
/* Room for at least one more chunk in c's input buffer (conn.c's reserve):
 * 0; 1 when the budget has none (c waits for memory, resumed by
 * conn_resume_paused); -1 when out of memory (c closed). */
int conn_make_room(gkcd_conn *c);
/* After input arrived: the complete frames in c's buffer go to the frame
 * hook, then reading as the limits now allow, and a close if nothing is
 * left to do. */
void conn_after_input(gkcd_conn *c);
/* Writes as much of the pending replies as the socket (or the ring) takes
 * now; a big body at their head goes to a writer thread (hand_off_write). */
void conn_write_pending(gkcd_conn *c);

#endif
