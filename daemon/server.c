/* server.c: start-up of the pieces, the loop, signals, and orderly shutdown. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "notify.h"
#include "server.h"

static void begin_drain(gkcd_server *srv, const char *why) {
  if (srv->draining) {
    log_info("%s again: still finishing %llu requests", why, (unsigned long long)srv->in_flight);
    return;
  }
  srv->draining = 1;
  notify_stopping(srv);
  log_info("%s: no longer accepting connections; finishing %llu requests in flight", why,
           (unsigned long long)srv->in_flight);
  listen_close(srv);
  for (gkcd_conn *c = srv->conns, *next; c; c = next) {
    next = c->next;
    if (c->jobs == 0 && c->npend == 0) conn_close(c);
  }
  server_maybe_finish(srv);
}

static void on_signal(uv_signal_t *h, int signum) {
  begin_drain(h->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

void server_maybe_finish(gkcd_server *srv) {
  static int finished;
  if (!srv->draining || finished || srv->nconns > 0 || srv->in_flight > 0) return;
  finished = 1;
  pool_stop(srv->pool);
  /* Closing the signal handles would give SIGTERM back its default action,
   * and a second signal during teardown would kill us with a non-zero
   * status.  Unreferenced, they let uv_run return; server_close blocks the
   * signals before closing them. */
  uv_unref((uv_handle_t *)&srv->sigint);
  uv_unref((uv_handle_t *)&srv->sigterm);
  log_info("all requests answered; exiting");
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void server_run(gkcd_server *srv) {
  const uint64_t spin_ns = (uint64_t)srv->cfg.spin_us * 1000;
  uint64_t until = 0, seen = srv->events;
  for (;;) {
    int alive;
    if (spin_ns && now_ns() < until) {
      srv->polling = 1;
      alive = uv_run(srv->loop, UV_RUN_NOWAIT);
      srv->polling = 0;
      sched_yield(); /* the CPU goes to whoever else needs it first */
    } else {
      alive = uv_run(srv->loop, UV_RUN_ONCE);
    }
    if (!alive) return;
    if (spin_ns && srv->events != seen) {
      seen = srv->events;
      until = now_ns() + spin_ns;
    }
  }
}

void server_close(gkcd_server *srv) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* late signals stay pending until exit */
  uv_close((uv_handle_t *)&srv->sigint, NULL);
  uv_close((uv_handle_t *)&srv->sigterm, NULL);
  uv_close((uv_handle_t *)&srv->flush, NULL);
  uv_close((uv_handle_t *)&srv->sweep, NULL);
  notify_close(srv);
  uv_run(srv->loop, UV_RUN_DEFAULT);
  resident_free_all(srv);
}

static void on_check(uv_check_t *h) { conn_flush_all(h->data); }
static void on_sweep(uv_timer_t *t) { conn_sweep_idle(t->data); }


int server_start(gkcd_server *srv, uv_loop_t *loop, gkcd_backend *be) {
  int rc;
  srv->loop = loop;
  srv->be = be;
  srv->listen_fd = -1;
  srv->start_ns = now_ns();
  srv->limits.max_bytes = srv->cfg.max_request_bytes;
  srv->limits.max_objects = PROTO_MAX_OBJECTS;
  srv->limits.max_depth = PROTO_MAX_DEPTH;
  signal(SIGPIPE, SIG_IGN); /* a vanished client is an EPIPE, not a death */

  if (listen_open(srv) != 0) return -1;
  struct stat st;
  srv->socket_gid = stat(srv->cfg.socket_path, &st) == 0 ? st.st_gid : getgid();
  if ((rc = pool_start(&srv->pool, loop, srv->cfg.threads, srv->cfg.max_queue, srv->cfg.spin_us, be,
                       rpc_job_done, srv))) {
    log_err("cannot start the worker threads (%d)", rc);
    return -1;
  }
  if ((rc = uv_signal_init(loop, &srv->sigint)) || (rc = uv_signal_init(loop, &srv->sigterm)) ||
      (rc = uv_signal_start(&srv->sigint, on_signal, SIGINT)) ||
      (rc = uv_signal_start(&srv->sigterm, on_signal, SIGTERM))) {
    log_err("signal handling: %s", uv_strerror(rc));
    return -1;
  }
  srv->sigint.data = srv->sigterm.data = srv;
  if ((rc = uv_check_init(loop, &srv->flush)) || (rc = uv_check_start(&srv->flush, on_check))) {
    log_err("uv_check: %s", uv_strerror(rc));
    return -1;
  }
  srv->flush.data = srv;
  uv_unref((uv_handle_t *)&srv->flush);
  double every = srv->cfg.idle_timeout_s > 0 && srv->cfg.idle_timeout_s < 4
                     ? srv->cfg.idle_timeout_s / 4 : 1.0;
  if ((rc = uv_timer_init(loop, &srv->sweep)) ||
      (rc = uv_timer_start(&srv->sweep, on_sweep, (uint64_t)(every * 1000),
                           (uint64_t)(every * 1000)))) {
    log_err("uv_timer: %s", uv_strerror(rc));
    return -1;
  }
  srv->sweep.data = srv;
  uv_unref((uv_handle_t *)&srv->sweep);
  return 0;
}
