/* conn.c: see conn.h.  One client connection: bytes in, frames out,
 * replies back.
 *
 * Input accumulates in one growing buffer.  After every read the buffer is
 * scanned for complete frames (proto_frame_scan), each of which is handed to
 * the frame hook (rpc.c, as the server wires it) as its own allocation, so
 * the buffer can keep receiving while jobs still use earlier requests.  The
 * buffer grows only with bytes actually received, never with what a frame
 * claims it will send, and each growth is charged to the memory budget
 * first: when the budget is spent the connection is simply not read until
 * memory comes back.
 *
 * Big requests (bufpool.h): once the scanner has seen that the frame in
 * the buffer is a big one (BUFPOOL_MIN bytes or more), the buffer is
 * replaced, once, by an idle one of the pool that holds all of it, when
 * the pool has one (else it grows by doubling as before: fresh memory is
 * never allocated on the peer's word).  Its charge still grows only with
 * the bytes received (cap, not phys); the
 * part of a pooled buffer beyond cap was already touched memory and stays
 * charged to the pool (pool_extra) until the buffer is handed on.  The
 * frame that is the whole buffer (or its head, the few bytes after it
 * moved to a small buffer of their own) is handed to the job as it is;
 * the job charges its length, and what the buffer has beyond that is at
 * most a quarter of it plus BUFPOOL_SLACK (else it is trimmed, as before).
 * The server gives the frame back to the pool when the job is done, and
 * a big reply body goes back to it once written.
 *
 * A reply is written when it is made, with one sendmsg for what a batch
 * made: the replies to the frames one read delivered (the loop answers
 * some, refuses others) go out together once those frames are handed on,
 * and the owner says when more replies to the same connection follow at
 * once (conn_job_done's `more`: the replies of jobs that finished
 * together), so a pipelining client costs one write per batch rather than
 * one per reply, and nothing waits for the end of the loop's iteration.
 * A big body
 * at the head of them (1 MiB or more left) is sent by a writer thread
 * instead (hand_off_write, the reader threads' other direction), the loop
 * sending nothing on that socket until it is back.  A reply's
 * bytes stay charged to the memory budget and to its connection until the
 * socket has taken them.
 *
 * Back-pressure: frames are not taken from a connection while it has
 * max-conn-requests jobs in flight, while its unwritten replies reach
 * max-conn-reply-bytes, while the scheduler holds one of its requests
 * because the result would take it past that (scheduler.h), or while the
 * scheduler's queues are full; its socket then fills and the client waits,
 * as with a full pipe.  Except that a connection with replies waiting to be
 * written is still read (not parsed) while the input allowance lasts: its
 * client may be blocked writing to us, unable to read until that write
 * completes.
 *
 * Deadlines (conn_sweep): a connection whose pending replies make no
 * progress for --send-timeout, or whose next request takes longer than
 * --request-timeout to arrive while we read, is closed, and everything it
 * held is freed; an idle one after --idle-timeout.
 *
 * Big frames' payloads are received off the loop (reader.h): one thread
 * copying every socket's bytes was the ceiling with several connections
 * sending big frames at once.  Once the scanner has seen the length of a
 * big frame (c->need, BUFPOOL_MIN or more, READER_MIN_REST of it still to
 * come), hand_off gives the receiving of it to a reader thread, into a
 * buffer that holds all of it when it has one (an idle one of the pool,
 * or one grown that far), else as far as one doubling of the buffer takes
 * it (the reader comes back when that is full and the next doubling goes
 * out): never memory allocated on the peer's word, exactly as when the
 * loop reads.  It charges the input first for every byte the reader may
 * write, within the allowance or as the overdraft as reserve() would,
 * stops watching the socket for reading and hands socket and buffer over
 * (c->rbusy).  Until the reader hands them back (on_reader_done) the loop
 * neither reads the socket nor touches buf, len or cap, and does not close
 * the descriptor: conn_close waits for the reader (cancelling it) and
 * closes once it is back; a deadline cancels it too.  Replies are still
 * written meanwhile, and the request clock runs as while the loop reads.
 * Back on the loop, the frame goes on exactly as after a read on the loop:
 * scanned, handed to the hook, the rest read, back-pressure, close.
 *
 * The socket is read with recvmsg under a uv_poll_t rather than as a libuv
 * stream, because clients may attach file descriptors (shared-memory
 * regions) to their bytes, which libuv's pipes would not hand over; they
 * queue up in c->fds for shm_register.  Writes go out with sendmsg from the
 * same poll handle.
 *
 * A ring (proto_ring.h) replaces the socket's bytes, not the path: its
 * code is conn_ring.c's, which conn.c reaches only through the ring's ops
 * (conn_ring_ops, conn.h), and which serves a ring's connection with the
 * functions conn.h lists as conn.c's for it.
 *
 * Lifetime: refs counts the open handle and each job in flight; the memory
 * goes when the last of them is done.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "conn.h"

#include <msgpack.h>

#include "gkc_errors.h"
#include "log.h"
#include "proto_rpc.h"

#define READ_CHUNK (64 * 1024)
#define CONN_POOLED_INPUT 1
/* A frame's rest goes to a reader only when at least this much of it is
 * still to come (in that step): the hand-over and the hand-back are two
 * thread wake-ups, which on a loaded 2-core machine cost about what
 * copying a few hundred KiB does; at 256 KiB, 1-2 MiB requests on one
 * connection took 0.6 ms instead of 0.3-0.5 (bench_inline). */
#define READER_MIN_REST ((size_t)1 << 20)
/* A reply body goes to a writer when this much of it is left to send: the
 * same trade. */
#define WRITER_MIN_REST ((size_t)1 << 20)

/* --- buffers and their charges ------------------------------------------ */

/* Some connection is paused for one of the reasons conn_resume_paused
 * looks at (*flag, of set): the owner is asked for that pass. */
static void pause_on(gkcd_conns *set, int *flag) {
  *flag = 1;
  if (set->hooks.pass) set->hooks.pass(set);
}

/* The connection that may read past the memory budget (reserve). */
static void drop_overdraft(gkcd_conn *c) {
  if (c->set->overdraft != c) return;
  c->set->overdraft = NULL;
  pause_on(c->set, &c->set->paused_mem); /* someone else may take it */
}

/* Charges the part of a pooled buffer past cap to the pool (conn.h). */
static void charge_extra(gkcd_conn *c) {
  size_t want = c->pooled && c->phys > c->cap ? c->phys - c->cap : 0;
  gkcd_budget *b = c->set->budget;
  if (want > c->pool_extra)
    budget_take(b, BUDGET_POOL, want - c->pool_extra);
  else if (want < c->pool_extra)
    budget_give(b, BUDGET_POOL, c->pool_extra - want);
  c->pool_extra = want;
}

/* Lets go of the input buffer's charges (its memory is someone else's now,
 * or about to be freed). */
static void drop_input_charge(gkcd_conn *c) {
  budget_give(c->set->budget, BUDGET_INPUT, c->cap);
  c->cap = c->len = c->phys = 0;
  c->pooled = 0;
  charge_extra(c);
}

static void free_input(gkcd_conn *c) {
  drop_overdraft(c);
  bufpool_put(c->set->pool, c->buf); /* a small one is freed */
  c->buf = NULL;
  drop_input_charge(c);
}

/* Frees the replies not yet written: once closing, nobody will read them. */
static void free_pending(gkcd_conn *c) {
  size_t bytes = 0;
  for (size_t i = 0; i < c->npend; i++) {
    bytes += c->pend[i].len;
    bufpool_put(c->set->pool, c->pend[i].base);
  }
  bytes -= c->pend_off;
  c->npend = c->pend_off = 0;
  budget_give(c->set->budget, BUDGET_REPLIES, bytes);
  c->unwritten -= bytes;
}

static void on_closed(uv_handle_t *h) {
  gkcd_conn *c = h->data;
  gkcd_conns *set = c->set;
  close(c->fd);
  for (int i = 0; i < c->nfds; i++) close(c->fds[i]);
  c->nfds = 0;
  if (c->prev)
    c->prev->next = c->next;
  else
    set->head = c->next;
  if (c->next) c->next->prev = c->prev;
  set->n--;
  log_debug("connection %llu closed", (unsigned long long)c->id);
  set->hooks.closed(c);
  conn_unref(c);
}

void conn_unref(gkcd_conn *c) {
  if (--c->refs > 0) return;
  free(c->pend);
  free(c);
}

/* Unwritten replies and unparsed input freed, the handle closed: once no
 * reader or writer thread has any of it. */
static void finish_close(gkcd_conn *c) {
  free_pending(c);
  free_input(c);
  if (c->ring) c->set->ring_ops->unmap(c); /* nothing reads or writes it from here on */
  uv_close((uv_handle_t *)&c->poll, on_closed);
}

void conn_close(gkcd_conn *c) {
  if (c->closing) return;
  c->closing = 1;
  c->reading = 0;
  /* What it holds goes now, not when its last job returns: queued jobs are
   * dropped, unwritten replies and unparsed input freed. */
  c->set->hooks.closing(c);
  if (c->rbusy || c->wbusy) {
    /* A reader owns the socket and the input buffer, a writer the reply it
     * sends: they go once both have let go (on_reader_done,
     * on_writer_done), asked to at once, never before, so that no thread
     * touches freed memory or a descriptor closed (and perhaps reused)
     * under it.  Until then nothing is watched. */
    uv_poll_stop(&c->poll);
    c->events = 0;
    if (c->rbusy) reader_cancel(&c->rt);
    if (c->wbusy) reader_cancel(&c->wt);
    return;
  }
  finish_close(c);
}

int conn_take_fd(gkcd_conn *c) {
  if (c->nfds == 0) return -1;
  int fd = c->fds[0];
  memmove(c->fds, c->fds + 1, (size_t)--c->nfds * sizeof c->fds[0]);
  return fd;
}

/* Closes c if it has nothing left to do: after errors that end it, and
 * while the daemon drains for shutdown. */
static void close_if_done(gkcd_conn *c) {
  if (c->closing || c->npend > 0) return;
  if (c->close_when_flushed || ((c->set->draining || c->peer_closed) && c->jobs == 0))
    conn_close(c);
}

void conn_drain(gkcd_conns *set) {
  set->draining = 1;
  for (gkcd_conn *c = set->head, *next; c; c = next) {
    next = c->next;
    if (c->jobs == 0 && c->npend == 0) conn_close(c);
  }
}

static void on_poll(uv_poll_t *h, int status, int events);

void conn_watch(gkcd_conn *c) {
  if (c->closing) return;
  /* While a reader has the socket, the loop does not read it; while a
   * writer has it, the loop does not write. */
  int rd = c->ring ? !c->peer_closed : c->reading && !c->rbusy; /* a ring's socket: doorbells */
  int wr = c->npend && !c->wbusy && (!c->ring || c->sock_pend);
  int want = (rd ? UV_READABLE : 0) | (wr ? UV_WRITABLE : 0);
  if (want == c->events) return;
  int rc = want ? uv_poll_start(&c->poll, want, on_poll) : uv_poll_stop(&c->poll);
  if (rc) {
    log_warn("connection %llu: poll: %s", (unsigned long long)c->id, uv_strerror(rc));
    conn_close(c);
    return;
  }
  c->events = want;
}

/* --- writing ------------------------------------------------------------- */

/* w more bytes of the pending replies went out: those written whole go
 * (a big body back to the pool, to serve again). */
static void wrote(gkcd_conn *c, size_t w) {
  size_t done = 0, left = w + c->pend_off;
  while (done < c->npend && left >= c->pend[done].len) {
    left -= c->pend[done].len;
    bufpool_put(c->set->pool, c->pend[done].base);
    done++;
  }
  memmove(c->pend, c->pend + done, (c->npend - done) * sizeof *c->pend);
  c->npend -= done;
  c->pend_off = left;
  if (c->sock_pend) {
    c->sock_pend = c->sock_pend > done ? c->sock_pend - done : 0;
    if (!c->sock_pend) c->ring->sock = c->fd; /* its doorbell may ring now */
  }
}

/* The charges of written bytes go; the clocks see the progress. */
static void account_written(gkcd_conn *c, size_t written) {
  gkcd_conns *set = c->set;
  c->unwritten -= written;
  budget_give(set->budget, BUDGET_REPLIES, written);
  if (c->closing) return; /* its owner let go of it already */
  c->last_active_ms = uv_now(set->loop);
  c->send_since_ms = c->npend ? c->last_active_ms : 0;
  if (c->held) set->hooks.drained(c);
}

static int hand_off_write(gkcd_conn *c);

/* Writes what the socket (or ring) takes now of c's pending replies. */
static void flush_out(gkcd_conn *c) {
  if (c->wbusy) return; /* the writer's return (on_writer_done) goes on */
  size_t written = 0;
  while (c->npend > 0 && !c->closing) {
    if (hand_off_write(c)) break;
    struct iovec iov[64];
    size_t n = c->npend < 64 ? c->npend : 64;
    for (size_t i = 0; i < n; i++) {
      iov[i].iov_base = c->pend[i].base;
      iov[i].iov_len = c->pend[i].len;
    }
    iov[0].iov_base = (char *)iov[0].iov_base + c->pend_off;
    iov[0].iov_len -= c->pend_off;
    ssize_t w;
    if (c->ring && !c->sock_pend) {
      if ((w = c->set->ring_ops->writev(c, iov, n)) < 0) return; /* it broke its bounds: closed */
      if (w == 0) break; /* full: the client's doorbell says when it has room */
      written += (size_t)w;
      wrote(c, (size_t)w);
      continue;
    }
    if (c->ring && n > c->sock_pend) n = c->sock_pend;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
    w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      log_debug("connection %llu: write: %s", (unsigned long long)c->id, strerror(errno));
      conn_close(c);
      return;
    }
    written += (size_t)w;
    wrote(c, (size_t)w);
  }
  if (written) account_written(c, written);
  conn_watch(c);
}

void conn_write_pending(gkcd_conn *c) {
  if (c->wbusy) return; /* the writer's return (on_writer_done) goes on */
  flush_out(c);
  if (!c->closing) {
    conn_update_reading(c);
    close_if_done(c);
  }
}

static int pend(gkcd_conn *c, void *p, size_t len) {
  if (c->npend == c->pend_cap) {
    size_t ncap = c->pend_cap ? c->pend_cap * 2 : 8;
    uv_buf_t *np = realloc(c->pend, ncap * sizeof *np);
    if (!np) return -1;
    c->pend = np;
    c->pend_cap = ncap;
  }
  c->pend[c->npend++] = uv_buf_init(p, (unsigned)len);
  c->unwritten += len;
  budget_take(c->set->budget, BUDGET_REPLIES, len);
  if (!c->send_since_ms) c->send_since_ms = uv_now(c->set->loop);
  return 0;
}

/* Queues head and body (ownership taken): 0, or -1 when c is closing or
 * was closed for lack of memory (what was not queued is freed). */
static int queue_reply(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len) {
  if (c->closing) goto drop;
  if (pend(c, head, head_len) != 0) goto oom;
  head = NULL;
  if (body_len && pend(c, body, body_len) != 0) goto oom;
  return 0;
oom:
  log_err("connection %llu: out of memory queueing a reply", (unsigned long long)c->id);
  conn_close(c);
drop:
  free(head);
  free(body);
  return -1;
}

void conn_send(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len) {
  if (queue_reply(c, head, head_len, body, body_len)) return;
  /* Inside parse_frames the batch is written once its frames are handed
   * on; otherwise now. */
  if (!c->parsing) conn_write_pending(c);
}

void conn_job_done(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len, int more) {
  c->jobs--;
  if (queue_reply(c, head, head_len, body, body_len) == 0 && !more && !c->parsing) conn_write_pending(c);
  conn_unref(c); /* the job's reference */
}

/* --- reading ------------------------------------------------------------- */

/* Room for at least one more chunk in the input buffer, charged to the
 * memory budget: 0; 1 when the budget has no room (reading pauses); -1 when
 * out of memory.
 *
 * Two exceptions keep everyone moving when the budget is spent.  A
 * connection's first chunk is always granted, so small requests (status,
 * ping, a small reduce) are read even then: what that can add is 64 KiB per
 * connection.  And one connection at a time, the overdraft, may go on
 * receiving a request it has started: partial requests that together fill
 * the budget would otherwise wait for each other forever.  What that can
 * add is one request (--max-request-bytes). */
/* A buffer of at least ncap bytes for c, its received bytes kept.  For a
 * big frame whose length the scanner has seen (c->need), an idle buffer of
 * the pool that holds all of it, if there is one: memory that exists
 * already, so taking it on the peer's word allocates nothing.  Otherwise
 * the buffer grows to ncap as it always did, or, without fresh_ok, stays
 * as it is.  0; 1 when it stayed; -1 when out of memory.  The caller
 * settles the charges (charge_extra). */
static int grow_buffer(gkcd_conn *c, size_t ncap, int fresh_ok) {
  bufpool *pool = c->set->pool;
  size_t ask = ncap;
  if (c->need >= BUFPOOL_MIN && c->need + READ_CHUNK > ask) ask = c->need + READ_CHUNK;
  /* Off for now (CONN_POOLED_INPUT 0): a pooled input buffer's part past
   * cap stays charged to the pool while its frame arrives, where the
   * budget cannot reclaim it; e2e_service_inline's small budget hung once
   * under ASan (2026-11-28), which this may be.  Inputs grow as before;
   * frames, results and reply bodies still go through the pool. */
  if (CONN_POOLED_INPUT && pool && ask >= BUFPOOL_MIN) {
    size_t phys;
    /* Only an idle one: a miss must not malloc the declared size, even to
     * free it at once (1 GiB per read of a hostile client's frame). */
    unsigned char *nb = bufpool_get_idle(pool, ask, &phys);
    if (nb) { /* the received bytes move over: a chunk or so, the length being seen early */
      if (c->len) memcpy(nb, c->buf, c->len);
      /* One that came from the pool was the size of an earlier frame and
       * goes back; one grown by doubling is a step of that growth (8, 16,
       * 32 MiB on the way to 64), the size of no request: kept, such steps
       * filled the pool's slots and made it drop the frame-sized buffers
       * that the next requests needed (8 connections sending 64 MiB). */
      if (c->pooled)
        bufpool_put(pool, c->buf);
      else
        free(c->buf);
      bufpool_sync(pool); /* its idle charge goes; charge_extra charges what cap leaves */
      c->buf = nb;
      c->phys = phys;
      c->pooled = 1;
      return 0;
    }
  }
  if (!fresh_ok) return 1;
  unsigned char *nb = realloc(c->buf, ncap);
  if (!nb) return -1;
  c->buf = nb;
  c->phys = ncap;
  c->pooled = 0;
  return 0;
}

static int reserve(gkcd_conn *c) {
  if (c->cap - c->len >= READ_CHUNK) return 0;
  /* Doubling keeps the cost of growth linear; capacity stays within twice
   * what the peer has really sent, plus one chunk. */
  size_t ncap = c->cap ? c->cap * 2 : READ_CHUNK;
  /* Not past the frame and a chunk once its length is known: a buffer
   * doubled past it (32 MiB for a 16 MiB frame) is too big for the pool to
   * hand to the next frame of that size (bufpool_get's quarter), so every
   * such request grew fresh memory again (1.1 GB/s inline from 16 to 64
   * MiB on the H200 host, 2026-11-29). */
  if (c->need > c->len && ncap > c->need + READ_CHUNK) ncap = c->need + READ_CHUNK;
  if (ncap < c->len + READ_CHUNK) ncap = c->len + READ_CHUNK;
  /* A buffer already sized for the frame (grow_buffer) is filled before any
   * other is sought. */
  if (ncap > c->phys && c->phys >= c->len + READ_CHUNK) ncap = c->phys;
  gkcd_conns *set = c->set;
  gkcd_budget *b = set->budget;
  if (c->cap && !budget_input_fits(b, ncap - c->cap)) {
    size_t least = c->len + READ_CHUNK; /* the least that lets the read go on */
    if (budget_input_fits(b, least - c->cap)) {
      ncap = least;
    } else {
      /* Past the allowance: only as the overdraft, and then growing by
       * doubling as usual (a chunk at a time would copy the buffer over and
       * over: quadratic in the request's size). */
      if (set->overdraft && set->overdraft != c) return 1;
      set->overdraft = c;
    }
  }
  if (ncap > c->phys && grow_buffer(c, ncap, 1) != 0) return -1;
  budget_take(b, BUDGET_INPUT, ncap - c->cap);
  c->cap = ncap;
  charge_extra(c);
  return 0;
}

/* Keeps the descriptors a message carried; the surplus is closed. */
static void take_rights(gkcd_conn *c, struct msghdr *mh) {
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    int *fds = (int *)CMSG_DATA(cm);
    for (int i = 0; i < n; i++) {
      if (c->nfds < CONN_MAX_FDS) {
        c->fds[c->nfds++] = fds[i];
      } else {
        log_warn("connection %llu: more than %d descriptors waiting; closing the extra one",
                 (unsigned long long)c->id, CONN_MAX_FDS);
        close(fds[i]);
      }
    }
  }
  if (mh->msg_flags & MSG_CTRUNC)
    log_warn("connection %llu: descriptors were dropped (too many in one message)",
             (unsigned long long)c->id);
}

ssize_t conn_recv(gkcd_conn *c, void *buf, size_t len) {
  for (;;) {
    struct iovec iov = {buf, len};
    union {
      char buf[CMSG_SPACE(sizeof(int) * CONN_MAX_FDS)];
      struct cmsghdr align;
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
      log_debug("connection %llu: read: %s", (unsigned long long)c->id, strerror(errno));
      conn_close(c);
      return -1;
    }
    if (mh.msg_controllen > 0) take_rights(c, &mh);
    return n;
  }
}

int conn_make_room(gkcd_conn *c) {
  int r = reserve(c);
  if (r < 0) {
    log_err("connection %llu: out of memory for input, closing", (unsigned long long)c->id);
    conn_close(c);
    return -1;
  }
  if (r > 0) { /* resumed by conn_resume_paused once memory comes back */
    c->wait_mem = 1;
    pause_on(c->set, &c->set->paused_mem);
    return 1;
  }
  return 0;
}

/* Reads what the socket holds; 0, or -1 when the connection was closed. */
static int read_some(gkcd_conn *c) {
  for (int rounds = 0; rounds < 16 && c->reading; rounds++) {
    int r = conn_make_room(c);
    if (r) return r < 0 ? -1 : 0;
    size_t room = c->cap - c->len;
    ssize_t n = conn_recv(c, c->buf + c->len, room);
    if (n < 0) return c->closing ? -1 : 0;
    if (n == 0) {
      /* The peer will send no more, but may still read: answer what it
       * sent (buffered frames, jobs in flight), then close. */
      log_debug("connection %llu: peer finished sending", (unsigned long long)c->id);
      c->peer_closed = 1;
      c->reading = 0;
      return 0;
    }
    c->last_active_ms = uv_now(c->set->loop);
    if (c->len == 0) c->req_start_ms = c->last_active_ms;
    c->len += (size_t)n;
    if ((size_t)n < room) return 0; /* drained */
  }
  return 0;
}

static int may_take_frames(const gkcd_conn *c) {
  const gkcd_conns *set = c->set;
  return !c->closing && !c->wait_mem && !c->copy_wait && !c->close_when_flushed && c->jobs < set->cfg->max_conn_requests &&
         c->unwritten + c->expected < set->cfg->max_conn_reply_bytes && !c->held && !set->full;
}

/* A frame that will never be completed: the peer stopped sending in the
 * middle of it.  Say so, since the client may still be reading. */
static void reject_truncated(gkcd_conn *c, size_t pos) {
  proto_frame_info info;
  memset(&info, 0, sizeof info);
  (void)proto_frame_scan(c->buf + pos, c->len - pos, c->set->limits, &info);
  char msg[160];
  snprintf(msg, sizeof msg, "connection closed in the middle of a request (%zu bytes of it received)",
           c->len - pos);
  c->set->hooks.truncated(c, &info, msg);
}

/* Hands complete frames in the buffer to the frame hook while the limits
 * allow. */
static void parse_frames(gkcd_conn *c) {
  gkcd_conns *set = c->set;
  size_t pos = 0;
  if (c->parsing || c->rbusy) return; /* a reader's buffer is the reader's */
  c->parsing = 1;
  while (pos < c->len && may_take_frames(c)) {
    if (c->need > c->len && !c->peer_closed) break;
    proto_frame_info info;
    ssize_t r = proto_frame_scan(c->buf + pos, c->len - pos, set->limits, &info);
    if (r == PROTO_PARTIAL) {
      if (c->peer_closed) {
        reject_truncated(c, pos);
        pos = c->len;
        break;
      }
      /* info.need is relative to pos, and pos is about to move to 0. */
      c->need = info.need > c->len - pos ? info.need : 0;
      break;
    }
    c->need = c->pool_asked = 0; /* the next frame is another */
    if (r < 0) {
      /* The frame's end is unknown, so nothing after it can be trusted:
       * answer, then close once the answer is out. */
      c->close_when_flushed = 1;
      c->by_gkcd = 1;
      set->hooks.reject(c, (int)r, &info);
      pos = c->len;
      break;
    }
    void *frame;
    int handed = 0; /* the buffer itself went with the frame */
    if (pos == 0 && ((size_t)r == c->len || (size_t)r >= BUFPOOL_MIN)) {
      /* The frame is the buffer's head, a big one or all of it: take the
       * buffer as it is, and give its input charge back; the job the hook
       * makes of it charges its length.  Bytes after it (the start of the
       * next request) move to a buffer of their own.  Much room past the
       * frame is trimmed first (a shrinking realloc moves no bytes); a
       * little is kept, so that it can serve the next frame of this size
       * once it is back in the pool. */
      size_t tail = c->len - (size_t)r;
      unsigned char *rest = NULL;
      if (tail && !(rest = malloc(tail + READ_CHUNK))) {
        log_err("connection %llu: out of memory for input", (unsigned long long)c->id);
        c->parsing = 0;
        conn_close(c);
        return;
      }
      if (rest) memcpy(rest, c->buf + r, tail);
      frame = c->buf;
      size_t keep = (size_t)r < BUFPOOL_MIN ? (size_t)r : (size_t)r + READ_CHUNK;
      if (c->phys > keep && ((size_t)r < BUFPOOL_MIN || c->phys - keep > keep / 4 + BUFPOOL_SLACK)) {
        void *f = realloc(c->buf, keep);
        if (f) frame = f;
      }
      c->buf = NULL;
      drop_input_charge(c);
      if (rest) {
        c->buf = rest;
        c->len = tail;
        c->cap = c->phys = tail + READ_CHUNK;
        budget_take(set->budget, BUDGET_INPUT, c->cap); /* bytes already received */
        c->req_start_ms = uv_now(set->loop);
      }
      handed = 1;
    } else if (c->jobs && !budget_input_fits(set->budget, (size_t)r)) {
      /* Copying it out would take input memory the allowance does not have:
       * wait for this connection's own jobs to give some back (each one's
       * completion calls conn_update_reading, which tries again).  With none
       * in flight nothing of its own could free memory, so it goes on past
       * the allowance by one frame. */
      c->copy_wait = 1;
      break;
    } else if (!(frame = malloc((size_t)r))) {
      log_err("connection %llu: out of memory for a %zd-byte frame", (unsigned long long)c->id, r);
      c->parsing = 0;
      conn_close(c);
      return;
    } else {
      memcpy(frame, c->buf + pos, (size_t)r);
    }
    if (!handed) pos += (size_t)r;
    drop_overdraft(c); /* its request is whole: the next one waits its turn */
    set->hooks.frame(c, frame, (size_t)r);
    if (!c->buf || c->closing) break;
  }
  c->parsing = 0;
  /* What the loop answered or refused of these frames goes out together. */
  if (c->npend && !c->closing) flush_out(c);
  if (!c->buf || c->closing) return;
  if (pos > 0) {
    memmove(c->buf, c->buf + pos, c->len - pos);
    c->len -= pos;
    /* What is left is the start of the next request, just received. */
    c->req_start_ms = c->len ? uv_now(set->loop) : 0;
  }
  /* An empty buffer is given back, so an idle connection holds none of
   * the memory budget (and its own next request never waits for it). */
  if (c->len == 0) free_input(c);
}

static void hand_off(gkcd_conn *c);

void conn_update_reading(gkcd_conn *c) {
  if (c->closing || c->parsing) return; /* parse_frames' caller decides afterwards */
  if (c->rbusy) { /* its return (on_reader_done) decides; replies still go out */
    conn_watch(c);
    return;
  }
  c->copy_wait = 0;
  int want = may_take_frames(c);
  if (want && c->len > 0) {
    /* Frames that arrived while we paused (or only drained) are served first. */
    parse_frames(c);
    if (c->closing) return;
    want = may_take_frames(c);
  }
  if (!want && !c->closing && c->set->full && !c->set->paused_full) pause_on(c->set, &c->set->paused_full);
  /* A client with replies waiting may be stuck writing to us, unable to
   * read them until its write completes: keep reading it (into the input
   * allowance, without parsing) so that neither side waits for the other. */
  int drain = !want && c->npend && !c->close_when_flushed && !c->wait_mem &&
              budget_input_fits(c->set->budget, READ_CHUNK);
  c->reading = (want || drain) && !c->peer_closed;
  /* The request clock runs only while we take frames: a pause for
   * back-pressure is not the client's.  A wait for memory keeps it running,
   * so that connections whose partial requests fill the input allowance
   * between them cannot wait for each other forever. */
  if (want && !c->taking && c->len && !c->mem_clock) c->req_start_ms = uv_now(c->set->loop);
  if (want) c->mem_clock = 0;
  c->taking = want;
  hand_off(c);
  conn_watch(c);
}

void conn_hold(gkcd_conn *c, int held) {
  if (c->held == held) return;
  c->held = held;
  if (!held && !c->closing) {
    c->wake = 1;
    pause_on(c->set, &c->set->paused_held);
  }
}

void conn_set_full(gkcd_conns *set, int full) { set->full = full; }

int conn_paused(const gkcd_conns *set) { return set->paused_full || set->paused_mem || set->paused_held; }

void conn_resume_paused(gkcd_conns *set) {
  int full = set->paused_full && !set->full;
  int mem = set->paused_mem && (budget_input_fits(set->budget, READ_CHUNK) || !set->overdraft);
  int held = set->paused_held;
  if (!full && !mem && !held) return;
  if (full) set->paused_full = 0;
  if (mem) set->paused_mem = 0;
  set->paused_held = 0;
  for (gkcd_conn *c = set->head, *next; c; c = next) {
    next = c->next;
    int woken = c->wake;
    c->wake = 0;
    if (c->closing || (!full && !mem && !woken)) continue;
    if (mem && c->wait_mem) {
      c->wait_mem = 0;
      c->mem_clock = 1;
    }
    conn_update_reading(c);
  }
}

void conn_after_input(gkcd_conn *c) {
  parse_frames(c);
  if (!c->closing) {
    conn_update_reading(c);
    close_if_done(c);
  }
}

static void on_poll(uv_poll_t *h, int status, int events) {
  gkcd_conn *c = h->data;
  if (status < 0) {
    log_debug("connection %llu: poll: %s", (unsigned long long)c->id, uv_strerror(status));
    conn_close(c);
    return;
  }
  if ((events & UV_WRITABLE) && c->npend) conn_write_pending(c);
  if (c->ring) {
    c->set->ring_ops->poll(c, events);
    return;
  }
  if (c->closing || !(events & UV_READABLE) || !c->reading || c->rbusy) return;
  if (read_some(c) != 0) return;
  if (c->peer_closed || c->wait_mem) conn_watch(c);
  conn_after_input(c);
}

/* --- reading off the loop ------------------------------------------------ */

static void on_reader_done(reader_task *t);

/* Hands the receiving of the big frame in c's buffer to a reader (conn.c's
 * header says when), for as much of it as the buffer may hold now:
 *  - when the buffer holds all of it (an idle one of the pool, asked for
 *    once per frame, or one grown that far), all of it;
 *  - else as far as one doubling takes it, as reserve() grows it on the
 *    loop: never more than twice what the peer has really sent, plus a
 *    chunk.  The reader comes back when that is full, and the next
 *    doubling goes out again: about log2(frame / 1 MiB) round trips for a
 *    frame the pool could not hold, each a wake-up of the loop, while the
 *    copies (and the page faults of fresh memory) are the reader's.
 * Only when READER_MIN_REST or more is to come in that step.  The input is
 * charged for all of it first, within the allowance or as the overdraft as
 * in reserve(); when neither is possible, or no reader can be started, it
 * does nothing, and the loop reads on (and waits for memory) as before;
 * it is tried again at each conn_update_reading.  Only while frames are
 * taken (c->taking): the request clock runs while the reader has the
 * socket, as it does while the loop reads. */
static void hand_off(gkcd_conn *c) {
  gkcd_conns *set = c->set;
  if (c->rbusy || c->closing || !c->reading || !c->taking || c->peer_closed || c->wait_mem ||
      c->close_when_flushed || c->ring)
    return;
  if (!set->readers.started || c->need < BUFPOOL_MIN || c->need <= c->len ||
      c->need - c->len < READER_MIN_REST)
    return;
  if (c->phys < c->need && c->pool_asked != c->need) {
    /* Asked once per frame (and by reserve() at each doubling, as
     * before): asked at every read, connections whose buffers were
     * growing took each buffer the moment a job gave it back, copying
     * what they had received into it, and the connection whose next frame
     * it would have served grew its own (8 connections x 64 MiB: the pool
     * was empty nearly all the time). */
    c->pool_asked = c->need;
    if (grow_buffer(c, c->need + READ_CHUNK, 0) == 0) charge_extra(c);
  }
  /* The frame and a chunk after it (the rest of the frame past its big
   * bin, usually in the same write), or one doubling. */
  size_t whole = c->need + READ_CHUNK, ncap;
  if (c->phys >= c->need) {
    ncap = c->phys < whole ? c->phys : whole;
  } else {
    ncap = c->cap * 2;
    if (ncap < c->len + READ_CHUNK) ncap = c->len + READ_CHUNK;
    if (ncap > whole) ncap = whole;
  }
  if (ncap < c->cap) ncap = c->cap;
  if (ncap - c->len < READER_MIN_REST) return; /* the loop's next read grows it */
  gkcd_budget *b = set->budget;
  if (ncap > c->cap && !budget_input_fits(b, ncap - c->cap)) {
    if (set->overdraft && set->overdraft != c) return; /* reserve() will wait for memory */
    set->overdraft = c;
  }
  if (ncap > c->phys && grow_buffer(c, ncap, 1) != 0) return; /* reserve() will say so */
  budget_take(b, BUDGET_INPUT, ncap - c->cap);
  c->cap = ncap;
  charge_extra(c);
  reader_task *t = &c->rt;
  t->fd = c->fd;
  t->buf = c->buf;
  t->len = c->len;
  t->want = c->need < c->cap ? c->need : c->cap;
  t->cap = c->cap;
  t->write = 0;
  t->done = on_reader_done;
  if (reader_submit(&set->readers, t, &c->wt) != 0) return; /* read on the loop, as before */
  c->rbusy = 1;
  c->refs++; /* c lives until the reader is back */
  conn_watch(c);
}

/* The reader is back and has let go of c's socket and buffer: what it
 * received is c's, and c goes on as on_poll does after a read (or closes,
 * when conn_close was waiting for it). */
static void on_reader_done(reader_task *t) {
  gkcd_conn *c = (gkcd_conn *)((char *)t - offsetof(gkcd_conn, rt));
  gkcd_conns *set = c->set;
  c->rbusy = 0;
  size_t got = t->len - c->len;
  c->len = t->len;
  if (t->fds_closed)
    log_warn("connection %llu: descriptors were dropped (more than %d in one message or while"
             " receiving one request)", (unsigned long long)c->id, READER_MAX_FDS);
  for (int i = 0; i < t->nfds; i++) {
    if (!c->closing && c->nfds < CONN_MAX_FDS) {
      c->fds[c->nfds++] = t->fds[i];
    } else {
      if (!c->closing)
        log_warn("connection %llu: more than %d descriptors waiting; closing the extra one",
                 (unsigned long long)c->id, CONN_MAX_FDS);
      close(t->fds[i]);
    }
  }
  t->nfds = 0;
  if (c->closing) { /* conn_close waited for the reader (and the writer?) */
    if (!c->wbusy) finish_close(c);
    conn_unref(c);
    return;
  }
  if (got) c->last_active_ms = uv_now(set->loop);
  if (t->status == READER_ERROR) {
    log_debug("connection %llu: read: %s", (unsigned long long)c->id, strerror(t->err));
    conn_close(c);
    conn_unref(c);
    return;
  }
  if (t->status == READER_EOF) {
    log_debug("connection %llu: peer finished sending", (unsigned long long)c->id);
    c->peer_closed = 1;
    c->reading = 0;
  }
  /* READER_CANCELLED without closing: a deadline's answer is on its way
   * (timeout_close); close_when_flushed keeps the frame from being taken. */
  conn_watch(c);
  conn_after_input(c);
  conn_unref(c);
}

/* --- writing off the loop ------------------------------------------------ */

static void on_writer_done(reader_task *t);

/* Hands the sending of the big body at the head of c's replies (what is
 * left of it: WRITER_MIN_REST or more) to a writer thread (reader.h), as
 * hand_off does the receiving of a big frame: one copy of 256 MiB per
 * download was the loop's, and with it every other connection's wait.
 * Until it is back (on_writer_done) the loop sends nothing on c's socket
 * and leaves that body alone; replies queued meanwhile go after it.  1 when
 * it went. */
static int hand_off_write(gkcd_conn *c) {
  gkcd_conns *set = c->set;
  if (c->wbusy || c->closing || !set->readers.started || !c->npend || (c->ring && !c->sock_pend))
    return 0;
  const uv_buf_t *h = &c->pend[0];
  if (h->len - c->pend_off < WRITER_MIN_REST) return 0;
  reader_task *t = &c->wt;
  t->fd = c->fd;
  t->buf = (unsigned char *)h->base;
  t->len = c->pend_off;
  t->want = t->cap = h->len;
  t->write = 1;
  t->done = on_writer_done;
  if (reader_submit(&set->readers, t, &c->rt) != 0) return 0; /* written on the loop, as before */
  c->wbusy = 1;
  c->wprog = c->pend_off;
  c->refs++; /* c lives until the writer is back */
  return 1;
}

/* The writer is back and has let go of the body: its bytes sent are
 * accounted as conn_write_pending's are, and c goes on writing (or closes, when
 * conn_close was waiting for it). */
static void on_writer_done(reader_task *t) {
  gkcd_conn *c = (gkcd_conn *)((char *)t - offsetof(gkcd_conn, wt));
  c->wbusy = 0;
  size_t written = t->len - c->pend_off;
  wrote(c, written);
  if (written) account_written(c, written);
  if (c->closing) {
    if (!c->rbusy) finish_close(c);
    conn_unref(c);
    return;
  }
  if (t->status == READER_ERROR) {
    log_debug("connection %llu: write: %s", (unsigned long long)c->id, strerror(t->err));
    conn_close(c);
    conn_unref(c);
    return;
  }
  conn_write_pending(c); /* the rest; then reading, and a close that waited for the replies */
  conn_unref(c);
}

void conn_start_readers(gkcd_conns *set) { (void)reader_init(&set->readers, set->loop); }

void conn_stop_readers(gkcd_conns *set) {
  if (set->readers.loop) reader_stop(&set->readers);
}
