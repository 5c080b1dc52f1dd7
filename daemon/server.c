/* server.c: start-up of the pieces and their wiring (conn's hooks to
 * rpc.c, the pool's and the scheduler's completions to rpc_job_done),
 * signals, and orderly shutdown.  The loop's run and its end are
 * server_loop.c's, so that rpc.c, below this file, can reach them. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gkc_errors.h"
#include "fdstore.h"
#include "log.h"
#include "server.h"
#include "work.h"

static void begin_drain(gkcd_server *srv, const char *why) {
  if (srv->draining) {
    log_info("%s again: still finishing %llu requests", why, (unsigned long long)srv->in_flight);
    return;
  }
  srv->draining = 1;
  notify_stopping(&srv->notify);
  log_info("%s: no longer accepting connections; finishing %llu requests in flight", why,
           (unsigned long long)srv->in_flight);
  listen_close(srv);
  conn_drain(&srv->conns);
  server_maybe_finish(srv);
}

static void on_signal(uv_signal_t *h, int signum) {
  gkcd_server *srv = h->data;
  if (!srv->stop_signal) srv->stop_signal = signum;
  begin_drain(srv, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void server_ready(gkcd_server *srv) { notify_ready(&srv->notify, srv->loop, status_line, srv); }

void server_close(gkcd_server *srv) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* late signals wait, then are ignored (below) */
  uv_close((uv_handle_t *)&srv->sigint, NULL);
  uv_close((uv_handle_t *)&srv->sigterm, NULL);
  /* libuv gave SIGINT and SIGTERM their default action back as their
   * handles closed (just now, in uv_close).  A late one goes to any thread
   * that has them unblocked, and not every thread is ours: OpenBLAS starts
   * its pool from a library constructor, before main() blocked them.  So
   * they are ignored at once, not after the teardown below (devices, the
   * fd store: long enough for e2e_lifecycle's second SIGTERM to kill gkcd
   * now and then).  Ignoring them also discards what is pending: we are
   * exiting anyway. */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  uv_close((uv_handle_t *)&srv->pass, NULL);
  uv_close((uv_handle_t *)&srv->sweep, NULL);
  notify_close(&srv->notify);
  http_stop(&srv->http);
  conn_stop_readers(&srv->conns); /* every connection has closed, so no reader is out */
  /* A planned stop (systemctl stop/restart sends SIGTERM), drained: the
   * shared objects go to systemd's fd store while the devices still serve
   * copies.  SIGINT (an interactive stop) releases them. */
  if (srv->stop_signal == SIGTERM) fdstore_save(&srv->res, srv->cfg.restore_max_bytes);
  devices_close(&srv->devs);
  uv_run(srv->loop, UV_RUN_DEFAULT);
  res_free_all(&srv->res);
  job_set_out_alloc(NULL, NULL, NULL); /* the workers are gone */
  bufpool_destroy(&srv->bufpool);
}

/* After I/O, in the iterations that asked for it (want_pass): the
 * scheduler's pump (what it finished itself, held clients that read, jobs
 * waiting for memory) and the connections paused for queues, memory or a
 * hold.  Work that moves on its own (a frame dispatched, a reply written,
 * a slot given back) never waits for it.  It goes on running while either
 * has something left, then stops, so an idle daemon runs nothing per
 * iteration. */
static void on_pass(uv_check_t *h) {
  gkcd_server *srv = h->data;
  bufpool_sync(&srv->bufpool); /* the charges of result buffers the workers took */
  if (srv->sched) sched_pump(srv->sched);
  conn_resume_paused(&srv->conns);
  if (!(srv->sched && sched_pending(srv->sched)) && !conn_paused(&srv->conns)) {
    int rc = uv_check_stop(&srv->pass);
    if (rc) log_err("uv_check_stop: %s", uv_strerror(rc)); /* cannot fail */
  }
}

static void want_pass(gkcd_server *srv) {
  if (uv_is_active((uv_handle_t *)&srv->pass) || uv_is_closing((uv_handle_t *)&srv->pass)) return;
  int rc = uv_check_start(&srv->pass, on_pass);
  if (rc) log_err("uv_check_start: %s", uv_strerror(rc)); /* cannot fail */
}

static void on_sched_pass(void *arg) { want_pass(arg); }
static void on_conn_pass(gkcd_conns *set) { want_pass(set->srv); }

static void on_sweep(uv_timer_t *t) {
  gkcd_server *srv = t->data;
  conn_sweep(&srv->conns);
  bufpool_trim(&srv->bufpool);
  on_pass(&srv->pass); /* a timer is not followed by a check until the next I/O */
}

/* Workers per lane and device: --threads for the bulk lane, the backend's
 * own number for the latency lane.  On a GPU no more than the lane has
 * streams: a worker without a stream would only wait for one inside the
 * backend, first come first served, where the scheduler's fair queuing
 * cannot order it and its wait would be charged to its client as work
 * (e2e_sched's shares drifted past 10% on an H100 with 16 workers on 4
 * streams). */
static int lane_workers(gkcd_server *srv, int *workers) {
  int nlanes = srv->cfg.latency_sms <= 0 ? 1 : 2;
  workers[LANE_BULK] = srv->cfg.threads;
  if (nlanes > 1)
    workers[LANE_LATENCY] = srv->be->latency_workers > 0 ? srv->be->latency_workers : 1;
  for (int l = 0; l < nlanes && srv->be->lane_info; l++) {
    gkcd_lane_info li = {0};
    srv->be->lane_info(srv->be, l, &li);
    if (li.streams > 0 && workers[l] > li.streams) workers[l] = li.streams;
  }
  return nlanes;
}

/* Every period the sweep must keep: a quarter of the shortest deadline,
 * between 50 ms and 1 s. */
static double sweep_every(const gkcd_config *cfg) {
  double t[] = {cfg->idle_timeout_s, cfg->send_timeout_s, cfg->request_timeout_s}, every = 1.0;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (t[i] > 0 && t[i] / 4 < every) every = t[i] / 4;
  return every < 0.05 ? 0.05 : every;
}


/* The loop, once a device is out of service: the work queued for it alone
 * can be answered now. */
static void on_device_lost(int device, void *arg) {
  gkcd_server *srv = arg;
  (void)device;
  if (srv->sched) sched_pump(srv->sched); /* its replies are written as they are made */
}

/* conn's hooks (conn.h): frames go to rpc.c. */

/* The peer stopped sending inside a request: a bad frame, answered as rpc.c
 * answers one. */
static void on_truncated(gkcd_conn *c, const proto_frame_info *info, const char *msg) {
  c->srv->bad_frames++;
  rpc_send_error(c, info->msgid_known, info->msgid, GKC_EPARSE_ERROR, msg);
}

/* A connection has gone: the objects it owned alone go with it (its
 * regions kept a while for their process to register again, pinner.h,
 * unless gkcd closed it: a deadline, a bad frame), and the drain may be
 * over. */
static void on_conn_closed(gkcd_conn *c) {
  gkcd_server *srv = c->srv;
  res_drop_owner(&srv->res, &client_of(c)->owns, !c->by_gkcd);
  server_maybe_finish(srv);
}

/* A connection accepted: its client in the scheduler, which reads the
 * connection's unwritten reply bytes and keeps its expected ones. */
static void on_conn_accepted(gkcd_conn *c) {
  gkcd_client *cl = client_of(c);
  cl->conn = c;
  sched_client_init(c->srv->sched, &cl->sc, c->id, c->uid, &c->unwritten, &c->expected);
}

/* A connection closing: its queued and held requests go (answered
 * cancelled at the next pump). */
static void on_conn_closing(gkcd_conn *c) {
  if (c->srv->sched) sched_drop_client(c->srv->sched, &client_of(c)->sc);
}

/* A held connection's replies went out: its held request may go on (the
 * scheduler asks for the pass that releases it). */
static void on_conn_drained(gkcd_conn *c) {
  if (c->srv->sched) sched_client_drained(c->srv->sched, &client_of(c)->sc);
}

/* The scheduler's gate (scheduler.h), passed on to the transport: a
 * client's request held or released, the queues full or not. */
static void on_gate(sched_client *sc, int open, void *arg) {
  gkcd_server *srv = arg;
  if (sc)
    conn_hold(((gkcd_client *)sc)->conn, !open);
  else
    conn_set_full(&srv->conns, !open);
}

/* The pool's clock: the loop's. */
static uint64_t loop_ms(void *loop) { return uv_now(loop); }

static const conn_hooks conn_wiring = {
    .frame = rpc_handle_frame,
    .reject = rpc_reject_frame,
    .truncated = on_truncated,
    .accepted = on_conn_accepted,
    .closing = on_conn_closing,
    .drained = on_conn_drained,
    .closed = on_conn_closed,
    .pass = on_conn_pass,
};

void server_destroy_devices(gkcd_server *srv, gkcd_backend **be, int n) {
  if (srv->devs.n) {
    devices_destroy(&srv->devs);
    return;
  }
  for (int i = 0; i < n; i++) be[i]->destroy(be[i]);
}

int server_start(gkcd_server *srv, uv_loop_t *loop, gkcd_backend **bes, int ndev) {
  int rc;
  srv->loop = loop;
  srv->be = bes[0];
  gkcd_backend *be = bes[0];
  if (devices_init(&srv->devs, loop, bes, ndev, on_device_lost, srv) != 0) return -1;
  res_init(&srv->res, &srv->devs, &srv->budget);
  srv->res.max_conn_pinned = srv->cfg.max_conn_pinned;
  srv->res.pinner.keep_max = srv->cfg.max_conn_pinned; /* one client's worth kept (pinner.h) */
  srv->budget.limit = srv->cfg.memory_budget;
  srv->budget.input_limit = budget_input_allowance(srv->budget.limit);
  /* Before the listening socket is taken (listen.c clears LISTEN_FDS) and
   * before anyone can connect: the shared objects a planned restart saved. */
  fdstore_restore(&srv->res, srv->cfg.restore_max_bytes);
  srv->listen_fd = -1;
  srv->start_ns = now_ns();
  srv->limits.max_bytes = srv->cfg.max_request_bytes;
  srv->limits.max_objects = PROTO_MAX_OBJECTS;
  srv->limits.max_depth = PROTO_MAX_DEPTH;
  signal(SIGPIPE, SIG_IGN); /* a vanished client is an EPIPE, not a death */

  srv->conns.loop = loop;
  srv->conns.cfg = &srv->cfg;
  srv->conns.limits = &srv->limits;
  srv->conns.budget = &srv->budget;
  srv->conns.srv = srv;
  srv->conns.hooks = conn_wiring;
  srv->conns.owner_size = sizeof(gkcd_client);
  conn_start_readers(&srv->conns);

  if (listen_open(srv) != 0) return -1;
  struct stat st;
  srv->conns.socket_gid = stat(srv->cfg.socket_path, &st) == 0 ? st.st_gid : getgid();
  srv->budget.limit = srv->cfg.memory_budget;
  /* A quarter of the budget at most, and never in the way of work (bufpool.h). */
  if (bufpool_init(&srv->bufpool, &srv->budget, srv->cfg.memory_budget / 4, loop_ms, loop) != 0) return -1;
  srv->conns.pool = &srv->bufpool;
  job_set_out_alloc(bufpool_out_alloc, bufpool_out_give, &srv->bufpool); /* workers' results */
  int workers[SCHED_MAX_LANES];
  int nlanes = lane_workers(srv, workers);
  /* Finished jobs come back to rpc.c through srv->done (job_finish). */
  if ((rc = uv_async_init(loop, &srv->done, rpc_jobs_done))) {
    log_err("uv_async_init: %s", uv_strerror(rc));
    return -1;
  }
  srv->done.data = srv;
  srv->take_done = rpc_jobs_done;
  job_done_setup(&srv->done_q, &srv->done);
  if ((rc = pool_start(&srv->pool, ndev, nlanes, workers, srv->cfg.spin_us, work_run, NULL)) ||
      (rc = sched_create(&srv->sched, loop, &srv->cfg, &srv->budget, srv->pool, &srv->devs, nlanes,
                         workers, rpc_job_done, srv))) {
    log_err("cannot start the scheduler and its worker threads (%d)", rc);
    return -1;
  }
  sched_on_gate(srv->sched, on_gate, on_sched_pass);
  log_info("cost model starts from %.3g GFLOP/s, %.3g GB/s%s", be->rates.flops_per_us / 1e3,
           be->rates.bytes_per_us / 1e3, be->rates.host_bytes_per_us > 0 ? " (device memory)" : "");
  if (ndev > 1)
    log_info("%d devices, each with its own workers; a split costs a measured %.1f us per part",
             ndev, sched_split_overhead_us(srv->sched));
  if (nlanes > 1)
    log_info("lanes: latency (requests predicted under %g us) %d worker(s), bulk %d", srv->cfg.latency_us,
             workers[LANE_LATENCY], workers[LANE_BULK]);
  if ((rc = uv_signal_init(loop, &srv->sigint)) || (rc = uv_signal_init(loop, &srv->sigterm)) ||
      (rc = uv_signal_start(&srv->sigint, on_signal, SIGINT)) ||
      (rc = uv_signal_start(&srv->sigterm, on_signal, SIGTERM))) {
    log_err("signal handling: %s", uv_strerror(rc));
    return -1;
  }
  srv->sigint.data = srv->sigterm.data = srv;
  if ((rc = uv_check_init(loop, &srv->pass))) {
    log_err("uv_check: %s", uv_strerror(rc));
    return -1;
  }
  srv->pass.data = srv;
  uv_unref((uv_handle_t *)&srv->pass);
  double every = sweep_every(&srv->cfg);
  if ((rc = uv_timer_init(loop, &srv->sweep)) ||
      (rc = uv_timer_start(&srv->sweep, on_sweep, (uint64_t)(every * 1000),
                           (uint64_t)(every * 1000)))) {
    log_err("uv_timer: %s", uv_strerror(rc));
    return -1;
  }
  srv->sweep.data = srv;
  uv_unref((uv_handle_t *)&srv->sweep);
  return http_start(&srv->http, loop, srv->cfg.metrics_listen, status_metrics, srv);
}
