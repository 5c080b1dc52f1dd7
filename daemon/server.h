/* server.h: the daemon's state, owned by the event loop thread.
 *
 * server.c listens and accepts, conn.c moves bytes, rpc.c turns frames into
 * replies, status.c answers "status".  Only the scheduler's workers and the
 * backend run elsewhere, and they touch nothing here.
 */
#ifndef GKCD_SERVER_H
#define GKCD_SERVER_H

#include <stdint.h>
#include <msgpack.h>
#include <uv.h>

#include "backend.h"
#include "budget.h"
#include "config.h"
#include "cost.h"
#include "devices.h"
#include "http.h"
#include "metrics.h"
#include "notify.h"
#include "proto_frame.h"
#include "proto_rpc.h"
#include "proto_methods.h"
#include "pool.h"
#include "resident.h"
#include "scheduler.h"

typedef struct gkcd_server gkcd_server;

#define CONN_MAX_FDS 16 /* descriptors received and not yet taken by shm_register */

struct gkcd_conn {
  uv_poll_t poll;
  int fd;
  int events;          /* what poll watches: UV_READABLE and/or UV_WRITABLE */
  int fds[CONN_MAX_FDS]; /* received descriptors, oldest first */
  int nfds;
  size_t pend_off;     /* bytes of pend[0] already written */
  gkcd_server *srv;
  uint64_t id;
  int pid, uid;        /* the peer, from SO_PEERCRED */
  int refs;            /* the open handle, plus one per job or write in flight */
  int closing;         /* uv_close called: replies are dropped */
  int reading;         /* the socket is being read */
  int taking;          /* frames are being taken from it (not paused by back-pressure) */
  int close_when_flushed; /* an unrecoverable error was answered */
  int parsing;         /* inside parse_frames: replies must not re-enter it */
  int peer_closed;     /* the peer shut down its sending side */
  int wait_mem;        /* not read: no memory budget to grow the input buffer */
  int mem_clock;       /* resumed after wait_mem: the request clock keeps running */
  int copy_wait;       /* a whole frame waits for input allowance to be copied out */
  res_owner owns;      /* counts of the resident objects and regions it owns */
  unsigned char *buf;  /* received bytes not yet parsed into frames */
  size_t len, cap;     /* cap is charged to the memory budget (input) */
  size_t need;         /* scanner's hint: rescan once len reaches it */
  size_t jobs;         /* in flight, including those queued or held */
  uint64_t last_active_ms; /* uv_now of the last byte in or out */
  uint64_t req_start_ms;   /* when the partial request in buf began; 0: none */
  uint64_t send_since_ms;  /* replies pending and the socket took none since */
  sched_client sc;     /* its queues in the scheduler; sc.reply_queued: unwritten bytes */
  /* Replies collected during one loop iteration, written together. */
  uv_buf_t *pend;
  size_t npend, pend_cap;
  gkcd_conn *next_dirty;
  int dirty;
  gkcd_conn *prev, *next;
};

#define LINGER_MAX 64 /* refused sockets kept open briefly so the refusal is read */

struct gkcd_server {
  uv_loop_t *loop;
  gkcd_config cfg;
  gkcd_devices devs;   /* every device served from (devices.h) */
  gkcd_backend *be;    /* device 0: the kind, the algo names, region pinning */
  gkcd_pool *pool;
  gkcd_sched *sched;
  gkcd_budget budget;  /* every byte held for clients (budget.h) */
  proto_limits limits;
  int listen_fd;
  uv_poll_t listen_poll;
  uv_timer_t listen_pause; /* after EMFILE */
  int bound;           /* we bound the socket file, so we remove it */
  uv_signal_t sigint, sigterm;
  uv_check_t flush;    /* once per iteration: scheduler, resumed reads, writes */
  uv_timer_t sweep;    /* closes idle, stalled and too slow connections */
  int listening;
  int activated;       /* the listening socket came from systemd */
  gkcd_notify notify;  /* systemd's READY, STATUS, WATCHDOG (notify.h) */
  int draining;        /* SIGINT/SIGTERM received */
  gid_t socket_gid;    /* allowed by default */
  gkcd_conn *dirty;    /* connections with replies to write */
  int paused_full;     /* some connections are unread because the queues were full */
  int paused_mem;      /* some connections are unread for lack of memory budget */
  gkcd_conn *overdraft; /* may finish receiving a request past the budget (conn.c) */
  int linger_fds[LINGER_MAX]; /* refused connections, closed by the sweep */
  uint64_t linger_ms[LINGER_MAX];
  int nlinger;
  uint64_t served, refused;
  uint64_t refused_slots;     /* of refused: no slot (max-connections, max-conn-per-user) */
  uint64_t closed_send_timeout, closed_request_timeout, closed_idle;
  gkcd_residents res;   /* resident arrays, matrices and regions (resident.h) */
  uint64_t start_ns;
  uint64_t next_conn_id;
  gkcd_conn *conns;
  uint64_t nconns;
  uint64_t in_flight;
  uint64_t requests[PROTO_M_COUNT], errors[PROTO_M_COUNT];
  double kernel_us[PROTO_M_COUNT]; /* total kernel time of successful jobs */
  uint64_t bad_frames; /* requests that never reached a method */
  /* server_run's polling (--spin-us): frames and completions handled since
   * start, and how many of them a poll found rather than a wake-up. */
  uint64_t events, loop_spin_hits;
  int polling;
  uint64_t expect_ns;       /* a running request is predicted to end by then (server_expect) */
  gkcd_metrics metrics;     /* counted as requests are answered (metrics.h) */
  gkcd_http *http;          /* --metrics-listen (http.h), or NULL */
};

/* Opens the listening socket, starts the workers of each of the n devices
 * be[0..n) (all of one kind) and signal handling.  0, or -1 after logging
 * why; the backends are the server's from then on either way
 * (server_destroy_devices). */
int server_start(gkcd_server *srv, uv_loop_t *loop, gkcd_backend **be, int n);
/* After server_close, or a failed server_start: destroys the backends. */
void server_destroy_devices(gkcd_server *srv, gkcd_backend **be, int n);
/* Runs the loop until the server is done.  With --spin-us, for that long
 * after each frame or completion, and until that long past the expected end
 * of a short request still running (server_expect), it polls
 * (UV_RUN_NOWAIT) instead of sleeping in epoll, so a completion or the next
 * request of a busy client is seen without the wake-up of a sleeping
 * thread. */
void server_run(gkcd_server *srv);
/* A request predicted to take cost_us (the scheduler's worker time) has
 * been queued.  When that is at most SERVER_SPIN_AHEAD spin windows, the
 * loop keeps polling until one window past its predicted end: a completion
 * 90 us away would otherwise come just after the window that its request
 * opened had closed, and pay the loop's wake-up (bench/RESULTS.md,
 * resident sgemm).  Longer requests are left to the wake-up, which is
 * small beside them.  Loop thread. */
#define SERVER_SPIN_AHEAD 10
void server_expect(gkcd_server *srv, double cost_us);
/* The socket serves: tells systemd so (notify.h), when it started gkcd. */
void server_ready(gkcd_server *srv);
/* After server_run has returned: closes the last handles. */
void server_close(gkcd_server *srv);
/* Called whenever in-flight work or a connection goes away while draining:
 * once nothing is left, closes every handle so uv_run returns. */
void server_maybe_finish(gkcd_server *srv);

/* listen.c */
/* Takes the socket systemd passed or binds one (replacing a stale socket
 * file, refusing when a gkcd answers there), and starts accepting. */
int listen_open(gkcd_server *srv);
/* Stops accepting and removes the socket file if we made it. */
void listen_close(gkcd_server *srv);

/* conn.c */
/* Takes a freshly accepted descriptor. */
void conn_accept(gkcd_server *srv, int fd);
/* The oldest descriptor received on c and not yet taken, or -1. */
int conn_take_fd(gkcd_conn *c);
/* Sends head (malloc'd, ownership taken) then body (malloc'd or NULL,
 * ownership taken).  Dropped silently when the connection is closing. */
void conn_send(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len);
void conn_close(gkcd_conn *c);
void conn_unref(gkcd_conn *c);
/* Starts or stops reading from c as its limits allow; after any change in
 * its jobs, queued replies or the server's state. */
void conn_update_reading(gkcd_conn *c);
/* Resumes the connections paused for full queues or memory once that has
 * passed (part of the uv_check callback). */
void conn_resume_paused(gkcd_server *srv);
/* Writes what every connection collected (the uv_check callback). */
void conn_flush_all(gkcd_server *srv);
/* Closes connections past a deadline: idle (--idle-timeout), replies not
 * read (--send-timeout), a request arriving too slowly (--request-timeout);
 * and refused sockets whose linger is over. */
void conn_sweep(gkcd_server *srv);
/* Closes every lingering refused socket (shutdown). */
void conn_linger_close_all(gkcd_server *srv);

/* rpc.c */
/* Handles one complete frame; frame is malloc'd and ownership is taken. */
void rpc_handle_frame(gkcd_conn *c, void *frame, size_t len);
/* Answers an error the connection itself ran into (msgid when known). */
void rpc_send_error(gkcd_conn *c, int msgid_known, uint32_t msgid, int code, const char *msg);
/* Answers a frame the scanner rejected (scan_rc < 0). */
void rpc_reject_frame(gkcd_conn *c, int scan_rc, const proto_frame_info *info);
/* Scheduler callback: a job came back. */
void rpc_job_done(gkcd_job *job, void *srv);

/* status.c: the daemon's state for those who ask */
/* The "status" method's result map. */
void status_pack(gkcd_server *srv, msgpack_packer *pk);
/* The metrics exposition (metrics.h) of the state now, for the "metrics"
 * method and GET /metrics (an http_render_fn; arg is the server):
 * malloc'd, or NULL when out of memory. */
char *status_metrics(void *srv, size_t *len);
/* systemd's STATUS= line (a notify_status_fn; arg is the server). */
void status_line(void *srv, char *buf, size_t len);

#endif
