/* echo_server.c: the floor that bench_rpc measures gkcd against.
 *
 * A forked process with one epoll loop, shaped like gkcd's single libuv loop
 * thread, that does nothing with the bytes: whatever one read returns goes
 * straight back in one write.  The bench's requests are msgpack frames, so
 * the client gets its own request back as the reply and frames it with the
 * same code it uses against gkcd.  Pipelined requests that arrive together
 * go back together, which is the least any server on this socket must do:
 * one wake-up, one read, one write.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#define ECHO_BUF (64 * 1024)
#define ECHO_EVENTS 64

/* Blocks only when the peer's receive buffer is full, which the bench's
 * bounded window never causes; kept correct anyway. */
static int write_all(int fd, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd pf = {.fd = fd, .events = POLLOUT};
      poll(&pf, 1, -1);
      continue;
    }
    if (w < 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void serve(int lfd) {
  static unsigned char buf[ECHO_BUF];
  struct epoll_event ev = {.events = EPOLLIN}, evs[ECHO_EVENTS];
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) _exit(1);
  ev.data.fd = lfd;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) _exit(1);
  for (;;) {
    int n = epoll_wait(ep, evs, ECHO_EVENTS, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) _exit(1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == lfd) {
        int c;
        while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
          if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) != 0) close(c);
        }
        continue;
      }
      /* Level-triggered: bytes left unread are reported again next turn. */
      ssize_t r = read(fd, buf, sizeof buf);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0 || write_all(fd, buf, (size_t)r) != 0) close(fd); /* also leaves epoll */
    }
  }
}

/* Binds and listens on path in the calling process, so that a connect right
 * after return cannot race the child; then forks the server, restricted to
 * cpus unless that is NULL.  Returns the child's pid, or -1 with errno set.
 * The child dies with its parent and on SIGTERM; the caller unlinks path. */
pid_t echo_server_start(const char *path, const cpu_set_t *cpus) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (lfd < 0) return -1;
  unlink(path);
  if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 128) != 0) {
    int e = errno;
    close(lfd);
    errno = e;
    return -1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(lfd);
    errno = e;
    return -1;
  }
  if (pid == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0); /* the parent died before prctl */
    if (cpus && sched_setaffinity(0, sizeof *cpus, cpus) != 0) _exit(1);
    serve(lfd);
  }
  close(lfd);
  return pid;
}
