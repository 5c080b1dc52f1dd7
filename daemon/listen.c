/* listen.c: the listening socket: taken from systemd or bound here, and
 * accepted from with accept4 under a uv_poll_t.
 *
 * Connections are not libuv streams because a client may pass file
 * descriptors (shared-memory regions) with its bytes, and only our own
 * recvmsg sees those (conn.c); so the listener hands out plain descriptors.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

#define BACKLOG 511
#define EMFILE_PAUSE_MS 100

static void on_listen(uv_poll_t *h, int status, int events);
static void resume(uv_timer_t *t);

/* Stops polling the listening socket for EMFILE_PAUSE_MS (resume starts it
 * again).  Should the timer not start, polling goes on: spinning on the
 * queued connection is better than a daemon that silently accepts no
 * more. */
static void pause_accepting(gkcd_server *srv) {
  uv_poll_stop(&srv->listen_poll); /* returns 0 */
  int rc = uv_timer_start(&srv->listen_pause, resume, EMFILE_PAUSE_MS, 0);
  if (rc) {
    log_err("cannot pause accepting (uv_timer_start: %s); accepting on", uv_strerror(rc));
    if ((rc = uv_poll_start(&srv->listen_poll, UV_READABLE, on_listen)))
      log_err("listening socket: uv_poll_start: %s; no more connections are accepted",
              uv_strerror(rc));
  }
}

static void resume(uv_timer_t *t) {
  gkcd_server *srv = t->data;
  if (!srv->listening) return;
  int rc = uv_poll_start(&srv->listen_poll, UV_READABLE, on_listen);
  if (rc) {
    log_warn("listening socket: uv_poll_start: %s; trying again in %d ms", uv_strerror(rc),
             EMFILE_PAUSE_MS);
    pause_accepting(srv);
  }
}

static void on_listen(uv_poll_t *h, int status, int events) {
  gkcd_server *srv = h->data;
  (void)events;
  if (status < 0) {
    log_warn("listening socket: %s", uv_strerror(status));
    return;
  }
  for (int i = 0; i < 64 && srv->listening; i++) {
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      conn_accept(&srv->conns, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE) {
      /* The pending connection stays queued and the socket stays readable:
       * stop polling for a moment instead of spinning on it. */
      log_warn("accept: %s; pausing for %d ms", strerror(errno), EMFILE_PAUSE_MS);
      pause_accepting(srv);
    } else if (errno != EAGAIN) {
      log_warn("accept: %s", strerror(errno));
    }
    return;
  }
}

/* A new Unix stream socket and path's address in sa; -1 after logging why.
 * The configured path was checked to fit sun_path when it was resolved. */
static int unix_socket(const char *path, struct sockaddr_un *sa) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    log_err("socket: %s", strerror(errno));
    return -1;
  }
  *sa = (struct sockaddr_un){.sun_family = AF_UNIX};
  snprintf(sa->sun_path, sizeof sa->sun_path, "%s", path);
  return fd;
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
  struct sockaddr_un sa;
  int fd = unix_socket(path, &sa);
  if (fd < 0) return -1;
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

/* The socket systemd passed (socket activation): its fd, -2 when gkcd
 * should bind its own, -1 on error. */
static int activated_fd(gkcd_server *srv) {
  int n = sd_listen_fds(1);
  if (n < 0) {
    log_err("sd_listen_fds: %s", strerror(-n));
    return -1;
  }
  /* Besides the socket, systemd passes what its fd store holds: those
   * descriptors (not sockets) were fdstore.c's to take. */
  int fd = -1, sockets = 0;
  for (int i = 0; i < n; i++)
    if (sd_is_socket(SD_LISTEN_FDS_START + i, AF_UNSPEC, 0, -1) > 0) {
      sockets++;
      if (fd < 0) fd = SD_LISTEN_FDS_START + i;
    }
  for (int i = 0; i < n; i++) /* fdstore.c's, kept open until now */
    if (SD_LISTEN_FDS_START + i != fd && sd_is_socket(SD_LISTEN_FDS_START + i, AF_UNSPEC, 0, -1) <= 0)
      close(SD_LISTEN_FDS_START + i);
  if (sockets == 0) return -2;
  if (sockets > 1) {
    log_err("systemd passed %d sockets; gkcd takes exactly one (ListenStream=)", sockets);
    return -1;
  }
  if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
    log_err("the socket systemd passed is not a listening Unix stream socket");
    return -1;
  }
  struct sockaddr_un sa = {0};
  socklen_t len = sizeof sa;
  if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && len > sizeof sa.sun_family &&
      sa.sun_path[0])
    snprintf(srv->cfg.socket_path, sizeof srv->cfg.socket_path, "%.107s", sa.sun_path);
  else
    snprintf(srv->cfg.socket_path, sizeof srv->cfg.socket_path, "(fd %d from systemd)", fd);
  srv->activated = 1;
  return fd;
}

static int bind_own(gkcd_server *srv) {
  const char *path = srv->cfg.socket_path;
  if (clear_stale_socket(path) != 0) return -1;
  struct sockaddr_un sa;
  int fd = unix_socket(path, &sa);
  if (fd < 0) return -1;
  /* The umask makes the socket file appear with the final mode already, so
   * there is no moment when a wider audience could connect. */
  mode_t old = umask(~srv->cfg.socket_mode & 0777);
  int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
  int err = errno;
  umask(old);
  if (rc != 0) {
    log_err("cannot bind %s: %s", path, strerror(err));
    close(fd);
    return -1;
  }
  srv->bound = 1; /* from here on the file is ours to remove */
  if (chmod(path, srv->cfg.socket_mode) != 0) {
    log_err("chmod %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (listen(fd, BACKLOG) != 0) {
    log_err("listen on %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

int listen_open(gkcd_server *srv) {
  int fd = activated_fd(srv);
  if (fd == -2) fd = bind_own(srv);
  if (fd < 0) return -1;
  int flags = 1;
  if (ioctl(fd, FIONBIO, &flags) != 0) {
    log_err("cannot make the listening socket non-blocking: %s", strerror(errno));
    close(fd);
    return -1;
  }
  srv->listen_fd = fd;
  int rc;
  if ((rc = uv_poll_init(srv->loop, &srv->listen_poll, fd)) ||
      (rc = uv_poll_start(&srv->listen_poll, UV_READABLE, on_listen)) ||
      (rc = uv_timer_init(srv->loop, &srv->listen_pause))) {
    log_err("polling the listening socket: %s", uv_strerror(rc));
    close(fd);
    return -1;
  }
  srv->listen_poll.data = srv->listen_pause.data = srv;
  uv_unref((uv_handle_t *)&srv->listen_pause);
  srv->listening = 1;
  return 0;
}

static void on_listen_closed(uv_handle_t *h) {
  gkcd_server *srv = h->data;
  close(srv->listen_fd);
  srv->listen_fd = -1;
}

void listen_close(gkcd_server *srv) {
  if (!srv->listening) return;
  srv->listening = 0;
  uv_close((uv_handle_t *)&srv->listen_poll, on_listen_closed);
  uv_close((uv_handle_t *)&srv->listen_pause, NULL);
  /* New clients should fail fast rather than connect to a closing daemon.
   * A socket systemd made is systemd's: it will activate us again. */
  if (srv->bound && unlink(srv->cfg.socket_path) != 0 && errno != ENOENT)
    log_warn("cannot remove %s: %s", srv->cfg.socket_path, strerror(errno));
}
