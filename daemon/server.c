/* server.c: the listening socket, signals, and orderly shutdown. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "notify.h"
#include "server.h"

static void on_connection(uv_stream_t *listener, int status) {
  gkcd_server *srv = listener->data;
  if (status < 0) {
    log_warn("accept: %s", uv_strerror(status));
    return;
  }
  conn_accept(srv);
}

/* Decides what to do about a file already at path: nothing there is fine; a
 * socket nobody listens on is left over from a crash and is removed; a live
 * gkcd or anything that is not a socket makes us refuse to start. */
static int clear_stale_socket(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return 0;
    log_err("cannot inspect %s: %s", path, strerror(errno));
    return -1;
  }
  if (!S_ISSOCK(st.st_mode)) {
    log_err("%s exists and is not a socket; refusing to replace it", path);
    return -1;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    log_err("socket: %s", strerror(errno));
    return -1;
  }
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
  int err = errno;
  close(fd);
  if (rc == 0) {
    log_err("another gkcd is already listening on %s; refusing to start", path);
    return -1;
  }
  if (err != ECONNREFUSED) {
    log_err("cannot tell whether %s is in use (%s); refusing to start", path, strerror(err));
    return -1;
  }
  if (unlink(path) != 0 && errno != ENOENT) {
    log_err("cannot remove stale socket %s: %s", path, strerror(errno));
    return -1;
  }
  log_info("removed stale socket %s", path);
  return 0;
}

static void begin_drain(gkcd_server *srv, const char *why) {
  if (srv->draining) {
    log_info("%s again: still finishing %llu requests", why, (unsigned long long)srv->in_flight);
    return;
  }
  srv->draining = 1;
  notify_stopping(srv);
  log_info("%s: no longer accepting connections; finishing %llu requests in flight", why,
           (unsigned long long)srv->in_flight);
  if (srv->listening) {
    uv_close((uv_handle_t *)&srv->listener, NULL);
    srv->listening = 0;
    /* New clients should fail fast rather than connect to a closing daemon.
     * A socket systemd made is systemd's: it will activate us again. */
    if (!srv->activated && unlink(srv->cfg.socket_path) != 0 && errno != ENOENT)
      log_warn("cannot remove %s: %s", srv->cfg.socket_path, strerror(errno));
  }
  for (gkcd_conn *c = srv->conns, *next; c; c = next) {
    next = c->next;
    if (c->jobs == 0 && c->writes == 0 && c->npend == 0) conn_close(c);
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
}

static void on_check(uv_check_t *h) { conn_flush_all(h->data); }
static void on_sweep(uv_timer_t *t) { conn_sweep_idle(t->data); }

/* Takes the listening socket systemd passed (socket activation): 1 when
 * there is one, 0 when gkcd should bind its own, -1 on error. */
static int take_activated(gkcd_server *srv) {
  int n = sd_listen_fds(1);
  if (n <= 0) return n < 0 ? (log_err("sd_listen_fds: %s", strerror(-n)), -1) : 0;
  if (n > 1) {
    log_err("systemd passed %d sockets; gkcd takes exactly one (ListenStream=)", n);
    return -1;
  }
  int fd = SD_LISTEN_FDS_START;
  if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
    log_err("the socket systemd passed is not a listening Unix stream socket");
    return -1;
  }
  int rc;
  if ((rc = uv_pipe_init(srv->loop, &srv->listener, 0)) || (rc = uv_pipe_open(&srv->listener, fd))) {
    log_err("cannot use the socket systemd passed: %s", uv_strerror(rc));
    return -1;
  }
  srv->listener.data = srv;
  srv->listening = 1;
  srv->activated = 1;
  size_t len = sizeof srv->cfg.socket_path;
  if (uv_pipe_getsockname(&srv->listener, srv->cfg.socket_path, &len) != 0)
    snprintf(srv->cfg.socket_path, sizeof srv->cfg.socket_path, "(fd %d from systemd)", fd);
  return 1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int listen_on(gkcd_server *srv) {
  const char *path = srv->cfg.socket_path;
  int rc = take_activated(srv);
  if (rc < 0) return -1;
  if (rc == 1) {
    if ((rc = uv_listen((uv_stream_t *)&srv->listener, 511, on_connection))) {
      log_err("listen on the socket systemd passed: %s", uv_strerror(rc));
      return -1;
    }
    return 0;
  }
  if (clear_stale_socket(path) != 0) return -1;
  if ((rc = uv_pipe_init(srv->loop, &srv->listener, 0))) {
    log_err("uv_pipe_init: %s", uv_strerror(rc));
    return -1;
  }
  srv->listener.data = srv;
  srv->listening = 1;
  /* The umask makes the socket file appear with the final mode already, so
   * there is no moment when a wider audience could connect. */
  mode_t old = umask(~srv->cfg.socket_mode & 0777);
  rc = uv_pipe_bind(&srv->listener, path);
  umask(old);
  if (rc) {
    log_err("cannot bind %s: %s", path, uv_strerror(rc));
    return -1;
  }
  if (chmod(path, srv->cfg.socket_mode) != 0) {
    log_err("chmod %s: %s", path, strerror(errno));
    return -1;
  }
  if ((rc = uv_listen((uv_stream_t *)&srv->listener, 511, on_connection))) {
    log_err("listen on %s: %s", path, uv_strerror(rc));
    return -1;
  }
  return 0;
}

int server_start(gkcd_server *srv, uv_loop_t *loop, gkcd_backend *be) {
  int rc;
  srv->loop = loop;
  srv->be = be;
  srv->start_ns = now_ns();
  srv->limits.max_bytes = srv->cfg.max_request_bytes;
  srv->limits.max_objects = PROTO_MAX_OBJECTS;
  srv->limits.max_depth = PROTO_MAX_DEPTH;
  signal(SIGPIPE, SIG_IGN); /* a vanished client is an EPIPE, not a death */

  if (listen_on(srv) != 0) return -1;
  struct stat st;
  srv->socket_gid = stat(srv->cfg.socket_path, &st) == 0 ? st.st_gid : getgid();
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
  if ((rc = pool_start(&srv->pool, loop, srv->cfg.threads, srv->cfg.max_queue, be,
                        rpc_job_done, srv))) {
    log_err("cannot start the scheduler (%d)", rc);
    return -1;
  }
  if ((rc = uv_signal_init(loop, &srv->sigint)) || (rc = uv_signal_init(loop, &srv->sigterm)) ||
      (rc = uv_signal_start(&srv->sigint, on_signal, SIGINT)) ||
      (rc = uv_signal_start(&srv->sigterm, on_signal, SIGTERM))) {
    log_err("signal handling: %s", uv_strerror(rc));
    return -1;
  }
  srv->sigint.data = srv->sigterm.data = srv;
  return 0;
}
