/* server.h: the daemon's state, owned by the event loop thread.
 *
 * server.c starts the pieces and wires them together: listen.c accepts,
 * conn.c (conn.h, below all of these) moves bytes and hands frames to the
 * hooks server.c installs, rpc.c turns frames into replies, status.c
 * answers "status", server_loop.c runs the loop until the drain is done.
 * Only the scheduler's workers and the backend run elsewhere, and they touch
 * nothing here.
 *
 * Implemented in: server.c, server_loop.c, listen.c, rpc.c, status.c
 */
#ifndef GKCD_SERVER_H
#define GKCD_SERVER_H

#include <stdint.h>
#include <msgpack.h>
#include <uv.h>

#include "backend.h"
#include "budget.h"
#include "config.h"
#include "conn.h"
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

/* What the server keeps per connection, in the connection's owner area
 * (conn_owner): its queues in the scheduler and the objects it owns. */
typedef struct gkcd_client {
  sched_client sc;  /* first: the scheduler's gate hook names a client by it */
  res_owner owns;
  gkcd_conn *conn;
} gkcd_client;

static inline gkcd_client *client_of(gkcd_conn *c) { return (gkcd_client *)conn_owner(c); }

struct gkcd_server {
  uv_loop_t *loop;
  gkcd_config cfg;
  gkcd_devices devs;   /* every device served from (devices.h) */
  gkcd_backend *be;    /* device 0: the kind, the algo names, region pinning */
  gkcd_pool *pool;
  gkcd_sched *sched;
  gkcd_budget budget;  /* every byte held for clients (budget.h) */
  bufpool bufpool;     /* big input, frame and result buffers kept for reuse (bufpool.h) */
  proto_limits limits;
  int listen_fd;
  uv_poll_t listen_poll;
  uv_timer_t listen_pause; /* after EMFILE */
  int bound;           /* we bound the socket file, so we remove it */
  uv_signal_t sigint, sigterm;
  uv_async_t done;     /* workers' finished jobs (job_finish) -> rpc_jobs_done */
  job_done_queue done_q; /* what they are (job.h) */
  uv_check_t pass;     /* after I/O, only while asked for: the scheduler's pump,
                        * paused connections (server.c on_pass) */
  uv_timer_t sweep;    /* closes idle, stalled and too slow connections */
  int listening;
  int activated;       /* the listening socket came from systemd */
  gkcd_notify notify;  /* systemd's READY, STATUS, WATCHDOG (notify.h) */
  int draining;        /* SIGINT/SIGTERM received */
  int stop_signal;     /* the first of them (SIGTERM saves shared objects: fdstore.h) */
  gkcd_conns conns;    /* the connections, wired to rpc.c (conn.h) */
  uint64_t served;
  gkcd_residents res;   /* resident arrays, matrices and regions (resident.h) */
  uint64_t start_ns;
  uint64_t in_flight;
  uint64_t requests[PROTO_M_COUNT], errors[PROTO_M_COUNT];
  double kernel_us[PROTO_M_COUNT]; /* total kernel time of successful jobs */
  uint64_t bad_frames; /* requests that never reached a method */
  /* server_run's polling (--spin-us): frames and completions handled since
   * start, and how many of them a poll found rather than a wake-up. */
  uint64_t events, loop_spin_hits;
  int polling;
  void (*take_done)(uv_async_t *h); /* rpc_jobs_done, for server_run's polling (server.c sets it) */
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

/* rpc.c */
/* Handles one complete frame; frame is malloc'd and ownership is taken. */
void rpc_handle_frame(gkcd_conn *c, void *frame, size_t len);
/* Answers an error the connection itself ran into (msgid when known). */
void rpc_send_error(gkcd_conn *c, int msgid_known, uint32_t msgid, int code, const char *msg);
/* Answers a frame the scanner rejected (scan_rc < 0). */
void rpc_reject_frame(gkcd_conn *c, int scan_rc, const proto_frame_info *info);
/* Scheduler callback: a job it finished itself. */
void rpc_job_done(gkcd_job *job, void *srv);
/* The done handle's callback (srv->done): every job the workers finished
 * since, answered in completion order, the replies to one connection in
 * one write. */
void rpc_jobs_done(uv_async_t *h);

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
