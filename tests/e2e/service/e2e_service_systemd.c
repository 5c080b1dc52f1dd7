/* e2e_service_systemd.c: gkcd under systemd, against real gkcd processes:
 *
 *  1. socket activation (LISTEN_FDS): serves on the socket it was given,
 *     ignores --socket, leaves the socket file to systemd; two sockets are
 *     refused;
 *  2. sd_notify: READY=1, STATUS=, WATCHDOG=1 at half of WATCHDOG_USEC,
 *     STOPPING=1.
 *
 * Checks do not stop the test at the first failure: each is counted, a
 * failure is printed with its line, and the exit status is 0 only when all
 * passed.  Every daemon is stopped with SIGTERM and must exit 0 within 10 s
 * (a daemon that does not is killed, so the test stays bounded).  Set
 * GKC_TEST_SEED to replay the random data.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <msgpack.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>


#include "fixture.h"
#include "gkc.h"
#include "probe.h"
#include "proto_rpc.h"
#include "rawrpc.h"
#include "svcutil.h"
#include "test.h"

/* ------------------------------------------------------------------------ */
/* 1. socket activation                                                      */

/* A listening Unix stream socket at path, without CLOEXEC (it is handed on). */
static int listen_unix(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) TEST_FAIL("socket: %s", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", path);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) TEST_FAIL("bind %s: %s", path, strerror(errno));
  if (listen(fd, 64) != 0) TEST_FAIL("listen: %s", strerror(errno));
  return fd;
}

/* Starts gkcd as systemd would with socket activation: fds[i] becomes fd
 * 3 + i, LISTEN_FDS/LISTEN_PID (the child's own pid, set after fork) and
 * LISTEN_FDNAMES are set, every other descriptor is closed.  stdout and
 * stderr go to log. */
static pid_t spawn_activated(const int *fds, int nfds, const char *const *args, const char *log) {
  const char *bin = getenv("GKCD_BIN");
  if (!bin) TEST_FAIL("GKCD_BIN is not set (run through ctest)");
  const char *argv[32];
  int n = 0;
  argv[n++] = bin;
  for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) TEST_FAIL("fork: %s", strerror(errno));
  if (pid > 0) return pid;

  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* First move the sockets out of the way, then put everything in place. */
  int high[8];
  for (int i = 0; i < nfds; i++)
    if ((high[i] = fcntl(fds[i], F_DUPFD, 100 + i)) < 0) _exit(120);
  int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (lf < 0) _exit(121);
  int nul = open("/dev/null", O_RDONLY);
  if (nul < 0 || dup2(nul, 0) < 0 || dup2(lf, 1) < 0 || dup2(lf, 2) < 0) _exit(122);
  for (int i = 0; i < nfds; i++)
    if (dup2(high[i], 3 + i) < 0) _exit(123); /* dup2 clears FD_CLOEXEC */
  if (close_range(3 + (unsigned)nfds, ~0u, 0) != 0)
    for (int fd = 3 + nfds; fd < 4096; fd++) close(fd);
  char num[32], pidbuf[32];
  snprintf(num, sizeof num, "%d", nfds);
  snprintf(pidbuf, sizeof pidbuf, "%d", (int)getpid());
  setenv("LISTEN_FDS", num, 1);
  setenv("LISTEN_PID", pidbuf, 1);
  setenv("LISTEN_FDNAMES", nfds == 1 ? "gkcd.socket" : "gkcd.socket:other.socket", 1);
  execv(bin, (char *const *)argv);
  _exit(127);
}

static void test_socket_activation(void) {
  char dir[256], act[300], ignored[300], log[300];
  make_tmpdir(dir, sizeof dir);
  snprintf(act, sizeof act, "%s/activated.sock", dir);
  snprintf(ignored, sizeof ignored, "%s/ignored.sock", dir);
  snprintf(log, sizeof log, "%s/gkcd.log", dir);

  rr_ctx = "activation: one socket from LISTEN_FDS";
  {
    int lfd = listen_unix(act);
    const char *const args[] = {"--backend", "cpu", "--socket", ignored, NULL};
    pid_t pid = spawn_activated(&lfd, 1, args, log);
    close(lfd); /* gkcd holds it now; if it dies, clients get a reset */

    rr_conn c;
    CHECK(rr_open_path(&c, act) == 0, "connect %s: %s", act, strerror(errno));
    rr_reply r;
    rr_call(&c, 1, "ping", NULL, 0, &r, 15000);
    const msgpack_object *proto = rr_reply_ok(&r, 1) ? proto_map_get(r.result, "protocol") : NULL;
    const msgpack_object *be = rr_reply_ok(&r, 1) ? proto_map_get(r.result, "backend") : NULL;
    CHECK(proto && rr_num(proto) == 1 && be && be->type == MSGPACK_OBJECT_STR &&
              be->via.str.size == 3 && !memcmp(be->via.str.ptr, "cpu", 3),
          "ping on the activated socket: %s; log:\n%s", rr_reply_desc(&r), rr_slurp(log));
    rr_reply_free(&r);
    char why[200] = "";
    CHECK(pb_reduce_with(&c, 2, 5000, NULL, 10000, why, sizeof why), "raw reduce: %s", why);
    rr_close(&c);

    /* And through the library. */
    gkc_conn *gc;
    int rc = gkc_connect(&gc, act);
    double sum = NAN;
    float x[4] = {1.5f, 2.5f, -3.0f, 10.0f};
    if (rc == 0) rc = gkc_reduce(gc, x, 4, GKC_SUM, &sum, NULL, NULL);
    CHECK(rc == 0 && sum == 11.0, "gkc_reduce on the activated socket: rc %d (%s), sum %g", rc,
          gkc_errmsg(gc), sum);
    gkc_ping_info pi;
    CHECK(gkc_ping(gc, &pi) == 0 && pi.protocol == 1, "gkc_ping: %s", gkc_errmsg(gc));
    gkc_close(gc);

    CHECK(!path_exists(ignored), "gkcd created %s although systemd passed a socket", ignored);
    CHECK(strstr(rr_slurp(log), "from systemd") != NULL, "log does not say the socket came from systemd:\n%s",
          rr_slurp(log));
    CHECK(strstr(rr_slurp(log), act) != NULL, "log does not name %s:\n%s", act, rr_slurp(log));

    kill(pid, SIGTERM);
    int st = wait_exit(pid, 10000);
    char d[64];
    if (st == -1) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd after SIGTERM: %s; log:\n%s",
          describe_status(st, d, sizeof d), rr_slurp(log));
    CHECK(is_socket_file(act), "the activated socket file %s was removed (it is systemd's)", act);
    CHECK(!path_exists(ignored), "%s exists after exit", ignored);
    unlink(act);
  }

  rr_ctx = "activation: LISTEN_FDS=2";
  {
    char b[300];
    snprintf(b, sizeof b, "%s/second.sock", dir);
    int fds[2] = {listen_unix(act), listen_unix(b)};
    const char *const args[] = {"--backend", "cpu", "--socket", ignored, NULL};
    pid_t pid = spawn_activated(fds, 2, args, log);
    close(fds[0]);
    close(fds[1]);
    int st = wait_exit(pid, 10000);
    char d[64];
    if (st == -1) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "gkcd given two sockets: %s (want exit 1); log:\n%s",
          describe_status(st, d, sizeof d), rr_slurp(log));
    CHECK(strstr(rr_slurp(log), "2 sockets") != NULL, "log does not name the problem:\n%s", rr_slurp(log));
    CHECK(!path_exists(ignored), "gkcd created %s", ignored);
  }
  remove_tmpdir(dir);
}

/* ------------------------------------------------------------------------ */
/* 2. sd_notify                                                              */

typedef struct {
  int ready, status, watchdog, stopping;
  int order_ok;              /* READY=1 came before any WATCHDOG=1 */
  double first_watchdog_s;   /* after fixture_start returned */
  char status_text[256];
} notes;

/* Reads the datagrams waiting on fd (for up to ms) into n. */
static void read_notes(int fd, notes *n, int ms, double t_ready) {
  double end = rr_now_s() + ms / 1000.0;
  for (;;) {
    int left = (int)((end - rr_now_s()) * 1000);
    if (left < 0) left = 0;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) return;
    char buf[4096];
    ssize_t len = recv(fd, buf, sizeof buf - 1, 0);
    if (len <= 0) return;
    buf[len] = 0;
    /* One datagram may carry several newline-separated assignments. */
    for (char *save, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      if (!strcmp(line, "READY=1")) {
        n->ready++;
      } else if (!strncmp(line, "STATUS=", 7)) {
        n->status++;
        snprintf(n->status_text, sizeof n->status_text, "%s", line + 7);
      } else if (!strcmp(line, "WATCHDOG=1")) {
        if (!n->ready) n->order_ok = 0;
        if (!n->watchdog) n->first_watchdog_s = rr_now_s() - t_ready;
        n->watchdog++;
      } else if (!strcmp(line, "STOPPING=1")) {
        n->stopping++;
      }
    }
  }
}

static void test_notify(void) {
  rr_ctx = "sd_notify";
  char dir[256], path[300];
  make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/notify.sock", dir);
  int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", path);
  if (nfd < 0 || bind(nfd, (struct sockaddr *)&sa, sizeof sa) != 0)
    TEST_FAIL("notify socket %s: %s", path, strerror(errno));

  char e1[400];
  snprintf(e1, sizeof e1, "NOTIFY_SOCKET=%s", path);
  const char *const env[] = {e1, "WATCHDOG_USEC=200000", NULL};
  fixture f;
  fixture_start(&f, NULL, env);
  double t0 = rr_now_s();
  notes n = {0, 0, 0, 0, 1, -1, ""};
  /* The kernel queues only a few datagrams (net.unix.max_dgram_qlen), so
   * read continuously: until 2 watchdog pings are in, for at most 1 s. */
  while (rr_now_s() - t0 < 1.0 && (n.watchdog < 2 || !n.ready || !n.status))
    read_notes(nfd, &n, 50, t0);
  double dt = rr_now_s() - t0;
  CHECK(n.ready == 1, "READY=1 received %d times", n.ready);
  CHECK(n.status >= 1 && strstr(n.status_text, "serving"), "STATUS: %d lines, last \"%s\"", n.status,
        n.status_text);
  CHECK(n.watchdog >= 2, "%d WATCHDOG=1 in %.2f s with WATCHDOG_USEC=200000 (expected one per 100 ms)",
        n.watchdog, dt);
  CHECK(n.order_ok, "WATCHDOG=1 came before READY=1");
  CHECK(strstr(rr_slurp(f.log), "watchdog") != NULL, "log does not mention the watchdog");
  /* Still serving while notifying. */
  rr_conn c;
  rr_open(&c, &f);
  CHECK(rr_ping(&c, 5000, NULL, 0), "ping failed");
  rr_close(&c);

  /* SIGTERM: STOPPING=1.  Keep reading while it shuts down. */
  kill(f.pid, SIGTERM);
  int st = -1;
  for (double t1 = rr_now_s(); rr_now_s() - t1 < 10;) {
    read_notes(nfd, &n, 20, t0);
    int s;
    if (waitpid(f.pid, &s, WNOHANG) == f.pid) {
      st = s;
      break;
    }
  }
  read_notes(nfd, &n, 100, t0);
  char d[64];
  if (st == -1) kill(f.pid, SIGKILL), waitpid(f.pid, NULL, 0);
  f.pid = 0;
  CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd after SIGTERM: %s",
        describe_status(st, d, sizeof d));
  CHECK(n.stopping == 1, "STOPPING=1 received %d times", n.stopping);
  fprintf(stderr, "sd_notify: READY %d, STATUS %d, WATCHDOG %d (first %.0f ms after start-up), STOPPING %d\n",
          n.ready, n.status, n.watchdog, n.first_watchdog_s * 1000, n.stopping);
  fixture_stop(&f, SIGTERM);
  close(nfd);
  remove_tmpdir(dir);
}

int main(void) {
  svc_init();
  double t0 = rr_now_s();
  SECTION(test_socket_activation());
  SECTION(test_notify());
  return svc_finish("e2e_service_systemd", t0);
}
