/* fdstore_standin.c: see fdstore_standin.h. */
#include "fdstore_standin.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int fs_set_put(fs_set *s, int fd, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->name[i], name)) {
      close(s->fd[i]);
      s->fd[i] = fd;
      return 0;
    }
  if (s->n >= FS_MAXFD) {
    close(fd);
    return -1;
  }
  s->fd[s->n] = fd;
  snprintf(s->name[s->n], sizeof s->name[0], "%s", name);
  s->n++;
  return 0;
}

int fs_set_find(const fs_set *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->name[i], name)) return i;
  return -1;
}

void fs_set_remove(fs_set *s, int i) {
  close(s->fd[i]);
  s->fd[i] = s->fd[s->n - 1];
  memcpy(s->name[i], s->name[s->n - 1], sizeof s->name[0]);
  s->n--;
}

void fs_set_clear(fs_set *s) {
  for (int i = 0; i < s->n; i++) close(s->fd[i]);
  s->n = 0;
}

void fs_set_copy(fs_set *to, const fs_set *from) {
  to->n = 0;
  for (int i = 0; i < from->n; i++) {
    to->fd[i] = fcntl(from->fd[i], F_DUPFD_CLOEXEC, 3);
    snprintf(to->name[i], sizeof to->name[0], "%s", from->name[i]);
    to->n++;
  }
}

int fs_notify_open(fs_notify *N, const char *path) {
  memset(N, 0, sizeof *N);
  snprintf(N->path, sizeof N->path, "%s", path);
  N->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (N->fd < 0) return -1;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  if (bind(N->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(N->fd);
    N->fd = -1;
    return -1;
  }
  /* A save sends one datagram per object: room for all of them. */
  int big = 1 << 20;
  setsockopt(N->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  return 0;
}

int fs_notify_drain(fs_notify *N) {
  for (;;) {
    char buf[4096];
    union {
      struct cmsghdr h;
      char b[CMSG_SPACE(sizeof(int) * 8)];
    } cm;
    struct iovec iov = {buf, sizeof buf - 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
                        .msg_controllen = sizeof cm.b};
    ssize_t n = recvmsg(N->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
    buf[n] = 0;
    int fd = -1;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(h), sizeof fd);
    const char *nm = strstr(buf, "FDNAME=");
    char name[64] = "stored";
    if (nm) sscanf(nm + 7, "%63[^\n]", name);
    if (strstr(buf, "FDSTORE=1") && fd >= 0) {
      fs_set_put(&N->store, fd, name);
    } else if (strstr(buf, "FDSTOREREMOVE=1")) {
      N->removed++;
      int i = fs_set_find(&N->store, name);
      if (i >= 0) fs_set_remove(&N->store, i);
      if (fd >= 0) close(fd);
    } else if (fd >= 0) {
      close(fd);
    }
  }
}

void fs_notify_close(fs_notify *N) {
  fs_set_clear(&N->store);
  if (N->fd >= 0) close(N->fd);
  N->fd = -1;
  unlink(N->path);
}

pid_t fs_spawn(const fs_set *pass, const char *notify_path, const char *log_path,
               char *const argv[]) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failing caller must not leave gkcd behind */
  int n = pass ? pass->n : 0, high[FS_MAXFD];
  /* Out of the way of 3..3+n first, then into place, inheritable. */
  for (int i = 0; i < n; i++) high[i] = fcntl(pass->fd[i], F_DUPFD, 100);
  for (int i = 0; i < n; i++) dup2(high[i], 3 + i);
  static char names[FS_MAXFD * 65];
  names[0] = 0;
  for (int i = 0; i < n; i++) {
    if (i) strcat(names, ":");
    strcat(names, pass->name[i]);
  }
  char v[32];
  if (n) {
    snprintf(v, sizeof v, "%d", n);
    setenv("LISTEN_FDS", v, 1);
    snprintf(v, sizeof v, "%d", (int)getpid()); /* systemd checks it is ours */
    setenv("LISTEN_PID", v, 1);
    setenv("LISTEN_FDNAMES", names, 1);
  }
  if (notify_path)
    setenv("NOTIFY_SOCKET", notify_path, 1);
  else
    unsetenv("NOTIFY_SOCKET");
  int lf = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (lf >= 0) dup2(lf, 2), dup2(lf, 1);
  execv(argv[0], argv);
  _exit(127);
}
