/* e2e_service.c: the daemon's service features, against real gkcd processes.
 *
 *  1. socket activation (LISTEN_FDS): serves on the socket it was given,
 *     ignores --socket, leaves the socket file to systemd; two sockets are
 *     refused;
 *  2. sd_notify: READY=1, STATUS=, WATCHDOG=1 at half of WATCHDOG_USEC,
 *     STOPPING=1;
 *  3. the config file: values, flags overriding it, errors naming file:line;
 *  4. peer credentials (as root only): a uid that is not allowed is refused,
 *     --allow-users lets it in;
 *  5. back-pressure: --max-conn-requests, and a client that never reads its
 *     replies (--max-conn-reply-bytes) neither blocks others nor makes the
 *     daemon buffer them all;
 *  6. the memory budget: too_large, waiting, busy, and the books balance;
 *  7. the idle timeout;
 *  8. deadline_ms;
 *  9. --max-connections.
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
#include "proto_rpc.h"
#include "rawrpc.h"
#include "test.h"

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) TEST_FAIL("cannot write %s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
}

/* A private temporary directory (for sockets and files the test makes). */
static void make_tmpdir(char *dir, size_t n) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, n, "%s/gkc-svc-XXXXXX", tmp);
  if (!mkdtemp(dir)) TEST_FAIL("mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(const char *dir) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) {}
}

static int path_exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static int is_socket_file(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* ------------------------------------------------------------------------ */
/* daemons                                                                   */

/* Waits up to ms for pid; its wait status, or -1 if it is still running. */
static int wait_exit(pid_t pid, int ms) {
  for (int i = 0; i <= ms / 10; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    rr_sleep_ms(10);
  }
  return -1;
}

static const char *describe_status(int st, char *buf, size_t n) {
  if (st == -1)
    snprintf(buf, n, "still running");
  else if (WIFEXITED(st))
    snprintf(buf, n, "exit %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st))
    snprintf(buf, n, "killed by signal %d", WTERMSIG(st));
  else
    snprintf(buf, n, "status %#x", st);
  return buf;
}

/* SIGTERM, then it must exit 0 within 10 s (else SIGKILL and a failed
 * check); then the fixture's directory is removed. */
#define STOP_DAEMON(f) stop_daemon_(__LINE__, f)
static void stop_daemon_(int line, fixture *f) {
  int st = -1;
  if (f->pid > 0) {
    kill(f->pid, SIGTERM);
    st = wait_exit(f->pid, 10000);
    if (st == -1) {
      kill(f->pid, SIGKILL);
      waitpid(f->pid, NULL, 0);
    }
    f->pid = 0;
    int ok = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    char why[64];
    rr_check_at(__FILE__, line, ok, "gkcd after SIGTERM: %s%s; its log:\n%s",
                describe_status(st, why, sizeof why), st == -1 ? " after 10 s (killed)" : "",
                ok ? "" : rr_slurp(f->log));
  }
  fixture_stop(f, SIGTERM); /* pid is 0: only removes the directory */
}

/* ------------------------------------------------------------------------ */
/* requests (rawrpc.h)                                                       */

/* A value in a map by dotted path ("limits.threads", "methods.sgemm.requests"). */
static double map_path(const msgpack_object *m, const char *path) {
  char key[64];
  while (m && m->type == MSGPACK_OBJECT_MAP) {
    size_t n = strcspn(path, ".");
    snprintf(key, sizeof key, "%.*s", (int)n, path);
    m = proto_map_get(m, key);
    if (!path[n]) return rr_num(m);
    path += n + 1;
  }
  return NAN;
}

/* "status" on c; the value at path, NAN when anything fails. */
static double status_on(rr_conn *c, const char *path) {
  rr_reply r;
  rr_call(c, 0x60000000u, "status", NULL, 0, &r, 10000);
  double v = rr_reply_ok(&r, 0x60000000u) ? map_path(r.result, path) : NAN;
  rr_reply_free(&r);
  return v;
}

/* The same on a fresh connection to f. */
static double status_val(const fixture *f, const char *path) {
  rr_conn c;
  if (rr_open_path(&c, f->sock)) return NAN;
  double v = status_on(&c, path);
  rr_close(&c);
  return v;
}

/* A reduce (sum) of n fresh random floats on c, checked against a double
 * reference; 1 when right.  extra: more arguments (deadline_ms), or NULL. */
static int good_reduce(rr_conn *c, uint32_t id, size_t n, const rr_arg *extra, int timeout_ms,
                       char *why, size_t whylen) {
  float *x = rr_rand_floats(n);
  double ref = 0, mag = 0;
  for (size_t i = 0; i < n; i++) ref += x[i], mag += fabs(x[i]);
  rr_reply r;
  if (extra)
    rr_call(c, id, "reduce", ARGS(AB("x", x, n * 4), *extra), &r, timeout_ms);
  else
    rr_call(c, id, "reduce", ARGS(AB("x", x, n * 4)), &r, timeout_ms);
  double got = rr_reply_ok(&r, id) ? rr_num(proto_map_get(r.result, "value")) : NAN;
  int ok = fabs(got - ref) <= 1e-5 * mag + 1e-6;
  if (!ok && why) {
    if (rr_reply_ok(&r, id))
      snprintf(why, whylen, "sum %.9g, reference %.9g", got, ref);
    else
      snprintf(why, whylen, "%s", rr_reply_desc(&r));
  }
  rr_reply_free(&r);
  free(x);
  return ok;
}

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
    CHECK(good_reduce(&c, 2, 5000, NULL, 10000, why, sizeof why), "raw reduce: %s", why);
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

/* ------------------------------------------------------------------------ */
/* 3. the config file                                                        */

/* gkcd with args must refuse to start: exit 2, and its stderr holds each of
 * the needles. */
#define CHECK_START_FAILS(args, n1, n2) check_start_fails_(__LINE__, args, n1, n2)
static void check_start_fails_(int line, const char *const *args, const char *n1, const char *n2) {
  fixture f;
  int st = fixture_try_start(&f, args, NULL);
  char *log = rr_slurp(f.log);
  char why[64];
  int ok = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && (!n1 || strstr(log, n1)) &&
           (!n2 || strstr(log, n2));
  rr_check_at(__FILE__, line, ok, "want exit 2 and \"%s\", \"%s\" in stderr; got %s, stderr:\n%s",
              n1 ? n1 : "", n2 ? n2 : "", st == -1 ? "a running daemon" : describe_status(st, why, sizeof why),
              log);
  if (st == -1)
    STOP_DAEMON(&f);
  else
    fixture_stop(&f, SIGTERM);
}

static void test_config(void) {
  char dir[256], conf[300], needle[400];
  make_tmpdir(dir, sizeof dir);
  snprintf(conf, sizeof conf, "%s/gkcd.conf", dir);

  rr_ctx = "config: values from the file";
  write_file(conf,
             "# gkcd settings for the test\n"
             "\n"
             "max_request_bytes = 64K   # small, to check it is applied\n"
             "  threads=1\n"
             "\t\n"
             "idle_timeout = 0\n"
             "# the end\n");
  {
    fixture f;
    const char *const args[] = {"--config", conf, NULL};
    fixture_start(&f, args, NULL);
    rr_conn c;
    rr_open(&c, &f);
    double mrb = status_on(&c, "limits.max_request_bytes"), th = status_on(&c, "limits.threads");
    double idle = status_on(&c, "limits.idle_timeout_s");
    CHECK(mrb == 65536, "limits.max_request_bytes = %.0f", mrb);
    CHECK(th == 1, "limits.threads = %.0f", th);
    CHECK(idle == 0, "limits.idle_timeout_s = %g", idle);
    /* The limit is really applied: an 80 KB request is too large. */
    float *x = rr_rand_floats(20000);
    rr_reply r;
    rr_call(&c, 5, "reduce", ARGS(AB("x", x, 80000)), &r, 10000);
    CHECK(rr_reply_err(&r, 5, "too_large") && strstr(r.msg, "65536"),
          "80 KB request under max_request_bytes = 64K: %s", rr_reply_desc(&r));
    rr_reply_free(&r);
    free(x);
    rr_close(&c);
    CHECK(strstr(rr_slurp(f.log), conf) != NULL, "log does not name the config file");
    STOP_DAEMON(&f);
  }

  rr_ctx = "config: a flag overrides the file";
  {
    fixture f;
    const char *const args[] = {"--max-request-bytes", "128K", "--config", conf, NULL};
    fixture_start(&f, args, NULL);
    double mrb = status_val(&f, "limits.max_request_bytes"), th = status_val(&f, "limits.threads");
    CHECK(mrb == 131072, "limits.max_request_bytes = %.0f with --max-request-bytes 128K", mrb);
    CHECK(th == 1, "limits.threads = %.0f (from the file)", th);
    STOP_DAEMON(&f);
  }

  const char *const args[] = {"--config", conf, NULL};
  rr_ctx = "config: unknown key";
  write_file(conf, "# comment\nthreads = 1\nfrobnicate = 7\nmax_queue = 5\n");
  snprintf(needle, sizeof needle, "%s:3:", conf);
  CHECK_START_FAILS(args, needle, "frobnicate");

  rr_ctx = "config: bad value";
  write_file(conf, "max_request_bytes = 1M\nthreads = lots\n");
  snprintf(needle, sizeof needle, "%s:2:", conf);
  CHECK_START_FAILS(args, needle, "lots");

  rr_ctx = "config: value out of range";
  write_file(conf, "\n\n\n\n\nthreads = 0\n");
  snprintf(needle, sizeof needle, "%s:6:", conf);
  CHECK_START_FAILS(args, needle, "threads");

  rr_ctx = "config: missing '='";
  write_file(conf, "\n# x\nthreads = 1\nmax_queue 5\n");
  snprintf(needle, sizeof needle, "%s:4:", conf);
  CHECK_START_FAILS(args, needle, "max_queue 5");

  rr_ctx = "config: 'config' is not a key of the file";
  write_file(conf, "config = /etc/passwd\n");
  snprintf(needle, sizeof needle, "%s:1:", conf);
  CHECK_START_FAILS(args, needle, "config");

  rr_ctx = "config: missing explicit file";
  char missing[300];
  snprintf(missing, sizeof missing, "%s/no-such.conf", dir);
  const char *const margs[] = {"--config", missing, NULL};
  CHECK_START_FAILS(margs, missing, NULL);

  remove_tmpdir(dir);
}

/* ------------------------------------------------------------------------ */
/* 4. peer credentials                                                       */

/* The child's exit codes (away from 1, which TEST_FAIL uses). */
enum { PC_ANSWERED = 10, PC_CLOSED, PC_TIMEOUT, PC_CONNECT, PC_SETID, PC_OTHER };

static const char *pc_name(int r) {
  static const char *names[] = {"ping answered", "closed without a reply", "no reply within 5 s",
                                "connect failed", "could not drop privileges", "an unexpected reply"};
  return r >= PC_ANSWERED && r <= PC_OTHER ? names[r - PC_ANSWERED] : "child failed";
}

/* A child that drops to uid/gid (no supplementary groups) connects to sock
 * and pings; what happened (PC_*), and the child's pid in *cpid. */
static int ping_as(const char *sock, uid_t uid, gid_t gid, pid_t *cpid) {
  pid_t pid = fork();
  if (pid < 0) TEST_FAIL("fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0 || getuid() != uid ||
        geteuid() != uid)
      _exit(PC_SETID);
    rr_conn c;
    int e = rr_open_path(&c, sock);
    if (e) {
      fprintf(stderr, "uid %d: connect %s: %s\n", (int)uid, sock, strerror(e));
      _exit(PC_CONNECT);
    }
    rr_frame f;
    rr_frame_init(&f);
    rr_pack_request(&f, 77, "ping", NULL, 0);
    rr_send_some(c.fd, f.sb.data, f.sb.size); /* may fail: the daemon may have closed already */
    rr_reply r;
    rr_get_reply(&c, &r, 5000);
    if (rr_reply_ok(&r, 77)) _exit(PC_ANSWERED);
    if (!r.got && r.rf == RF_CLOSED) _exit(PC_CLOSED);
    if (!r.got && r.rf == RF_TIMEOUT) _exit(PC_TIMEOUT);
    _exit(PC_OTHER);
  }
  *cpid = pid;
  int st = wait_exit(pid, 10000);
  if (st == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_peer_credentials(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "note: not running as root: skipping the peer-credential checks "
            "(they need to switch to another uid)\n");
    return;
  }
  const uid_t NOBODY = 65534;
  pid_t cpid;
  char needle[200];

  rr_ctx = "peer credentials: no allow lists";
  {
    fixture f;
    const char *const args[] = {"--socket-mode", "0666", NULL};
    fixture_start(&f, args, NULL);
    chmod(f.dir, 0711); /* let the other uid reach the socket file */
    struct stat st;
    CHECK(stat(f.sock, &st) == 0 && (st.st_mode & 0777) == 0666, "socket mode %o, want 0666",
          (unsigned)(st.st_mode & 0777));
    double before = status_val(&f, "refused_connections");
    int r = ping_as(f.sock, NOBODY, NOBODY, &cpid);
    CHECK(r == PC_CLOSED, "uid 65534 on a daemon that does not allow it: %s", pc_name(r));
    double after = status_val(&f, "refused_connections");
    CHECK(before == 0 && after == 1, "refused_connections %g before, %g after", before, after);
    snprintf(needle, sizeof needle, "refused connection from pid %d uid 65534", (int)cpid);
    CHECK(strstr(rr_slurp(f.log), needle) != NULL, "log lacks \"%s\":\n%s", needle, rr_slurp(f.log));
    /* root (the test) is still served */
    rr_conn c;
    rr_open(&c, &f);
    CHECK(rr_ping(&c, 5000, NULL, 0), "root's ping failed");
    rr_close(&c);
    STOP_DAEMON(&f);
  }

  rr_ctx = "peer credentials: --allow-users 65534";
  {
    fixture f;
    const char *const args[] = {"--socket-mode", "0666", "--allow-users", "65534", NULL};
    fixture_start(&f, args, NULL);
    chmod(f.dir, 0711);
    int r = ping_as(f.sock, NOBODY, NOBODY, &cpid);
    CHECK(r == PC_ANSWERED, "uid 65534 with --allow-users 65534: %s; log:\n%s", pc_name(r), rr_slurp(f.log));
    /* The list allows that user, not everyone. */
    r = ping_as(f.sock, 65533, 65533, &cpid);
    CHECK(r == PC_CLOSED, "uid 65533 with --allow-users 65534: %s", pc_name(r));
    double refused = status_val(&f, "refused_connections");
    CHECK(refused == 1, "refused_connections = %g", refused);
    STOP_DAEMON(&f);
  }
}

/* ------------------------------------------------------------------------ */
/* 5. back-pressure                                                          */

typedef struct {
  int fd;
  const void *p;
  size_t n;
  int err;
} sender;

static void *sender_main(void *vp) {
  sender *s = vp;
  s->err = rr_send_some(s->fd, s->p, s->n);
  return NULL;
}

static void test_max_conn_requests(void) {
  fixture f;
  const char *const args[] = {"--max-conn-requests", "2", "--threads", "2", NULL};
  fixture_start(&f, args, NULL);

  rr_ctx = "back-pressure: 100 pipelined requests, --max-conn-requests 2";
  {
    enum { NREQ = 100, NX = 256 };
    float *x = rr_rand_floats((size_t)NREQ * NX);
    double ref[NREQ], mag[NREQ];
    rr_frame fr;
    rr_frame_init(&fr);
    for (int i = 0; i < NREQ; i++) {
      ref[i] = mag[i] = 0;
      for (int j = 0; j < NX; j++) ref[i] += x[i * NX + j], mag[i] += fabs(x[i * NX + j]);
      rr_pack_request(&fr, 1000 + (uint32_t)i, "reduce", ARGS(AB("x", x + (size_t)i * NX, NX * 4)));
    }
    rr_conn c;
    rr_open(&c, &f);
    /* About 27 KB: the socket buffers take it all, then the replies come. */
    test_send_all(c.fd, fr.sb.data, fr.sb.size);
    int seen[NREQ] = {0}, good = 0, bad = 0;
    for (int i = 0; i < NREQ; i++) {
      rr_reply r;
      rr_get_reply(&c, &r, 10000);
      if (!r.valid || r.is_error || r.msgid < 1000 || r.msgid >= 1000 + NREQ) {
        if (bad++ < 3) fprintf(stderr, "reply %d: %s (msgid %u)\n", i, rr_reply_desc(&r), r.msgid);
        int stop = !r.got;
        rr_reply_free(&r);
        if (stop) break;
        continue;
      }
      int j = (int)(r.msgid - 1000);
      double v = rr_num(proto_map_get(r.result, "value"));
      if (!seen[j]++ && fabs(v - ref[j]) <= 1e-5 * mag[j]) good++;
      rr_reply_free(&r);
    }
    CHECK(good == NREQ && bad == 0, "%d of %d pipelined requests answered correctly, %d bad", good, NREQ, bad);
    CHECK(rr_ping(&c, 5000, NULL, 0), "connection unusable afterwards");
    rr_close(&c);
    rr_frame_free(&fr);
    free(x);
  }

  /* Compute-heavy requests, so that a connection's work in flight can be
   * watched: with the limit, no more than 2 are ever in flight. */
  rr_ctx = "back-pressure: in_flight never exceeds --max-conn-requests 2";
  {
    enum { NREQ = 12, D = 320 };
    float *a = rr_rand_floats(D * D), *b = rr_rand_floats(D * D);
    rr_frame fr;
    rr_frame_init(&fr);
    for (int i = 0; i < NREQ; i++)
      rr_pack_request(&fr, 2000 + (uint32_t)i, "sgemm",
                      ARGS(AI("m", D), AI("n", D), AI("k", D), AB("a", a, D * D * 4), AB("b", b, D * D * 4),
                           AF("alpha", 1.0 + i)));
    rr_conn c, side;
    rr_open(&c, &f);
    rr_open(&side, &f);
    sender s = {c.fd, fr.sb.data, fr.sb.size, 0};
    pthread_t th;
    pthread_create(&th, NULL, sender_main, &s);
    int got = 0, good = 0, samples = 0;
    double max_in_flight = 0;
    double t0 = rr_now_s();
    while (got < NREQ && rr_now_s() - t0 < 30) {
      rr_reply r;
      rr_get_reply(&c, &r, 2);
      if (r.got) {
        got++;
        const msgpack_object *cb = rr_result_bin(&r, "c", D * D * 4);
        char why[200] = "";
        if (cb && r.msgid >= 2000 && r.msgid < 2000 + NREQ &&
            rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, D, D, D, 1.0 + (r.msgid - 2000), 4, why, sizeof why))
          good++;
        else
          fprintf(stderr, "sgemm reply: %s %s\n", rr_reply_desc(&r), why);
      } else if (r.rf != RF_TIMEOUT) {
        fprintf(stderr, "sgemm replies: %s\n", rr_rf_name(r.rf));
        rr_reply_free(&r);
        break;
      }
      rr_reply_free(&r);
      double v = status_on(&side, "in_flight");
      samples++;
      if (v > max_in_flight) max_in_flight = v;
    }
    pthread_join(th, NULL);
    CHECK(good == NREQ, "%d of %d sgemm answered correctly", good, NREQ);
    CHECK(max_in_flight <= 2 && max_in_flight >= 1, "max in_flight seen %g (in %d samples)", max_in_flight,
          samples);
    fprintf(stderr, "max-conn-requests 2: max in_flight %g over %d samples\n", max_in_flight, samples);
    rr_close(&side);
    rr_close(&c);
    rr_frame_free(&fr);
    free(a), free(b);
  }
  STOP_DAEMON(&f);
}

static void test_slow_reader(void) {
  rr_ctx = "back-pressure: a client that never reads";
  fixture f;
  /* --max-conn-requests 8 keeps what the daemon legitimately holds small
   * next to what it must not hold; on its own it would not stop the
   * reading (these requests finish at once), only the reply limit does. */
  const char *const args[] = {"--max-conn-reply-bytes", "1M", "--max-conn-requests", "8", NULL};
  fixture_start(&f, args, NULL);
  enum { NREQ = 200, M = 256, N = 256 }; /* k = 1: each result 256 KiB, each request 2 KiB */
  rr_conn good;
  rr_open(&good, &f);
  uint32_t gid = 1;
  int good_ok = 0, good_n = 0;
  char why[200];
  for (int i = 0; i < 5; i++, good_n++) good_ok += good_reduce(&good, gid++, 1000, NULL, 5000, NULL, 0);
  long rss0 = fixture_rss_kib(&f);

  float *a = rr_rand_floats((size_t)NREQ * M), *b = rr_rand_floats((size_t)NREQ * N);
  rr_frame fr;
  rr_frame_init(&fr);
  for (int i = 0; i < NREQ; i++)
    rr_pack_request(&fr, (uint32_t)i, "sgemm",
                    ARGS(AI("m", M), AI("n", N), AI("k", 1), AB("a", a + (size_t)i * M, M * 4),
                         AB("b", b + (size_t)i * N, N * 4)));
  rr_conn slow;
  rr_open(&slow, &f);
  /* About 420 KB: more than the socket buffers hold once gkcd stops
   * reading, so a thread sends it. */
  sender s = {slow.fd, fr.sb.data, fr.sb.size, 0};
  pthread_t th;
  pthread_create(&th, NULL, sender_main, &s);

  /* For 1.5 s the other client keeps working, and gkcd's memory is watched. */
  long rss_max = rss0;
  double worst = 0, t0 = rr_now_s();
  while (rr_now_s() - t0 < 1.5) {
    double t1 = rr_now_s();
    int ok = good_reduce(&good, gid++, 1000, NULL, 5000, why, sizeof why);
    double dt = rr_now_s() - t1;
    if (dt > worst) worst = dt;
    if (!ok) fprintf(stderr, "good client, request %u: %s\n", gid - 1, why);
    good_ok += ok && dt < 2.0;
    good_n++;
    long rss = fixture_rss_kib(&f);
    if (rss > rss_max) rss_max = rss;
    rr_sleep_ms(10);
  }
  CHECK(good_ok == good_n, "other client: %d of %d requests answered correctly within 2 s (slowest %.3f s)",
        good_ok, good_n, worst);
  double taken = status_on(&good, "methods.sgemm.requests");
  CHECK(taken < NREQ, "gkcd read %g of the %d requests of a client that reads nothing", taken, NREQ);
  /* Bound: gkcd stops reading from the slow client once more than 1 MiB of
   * replies waits for it, but requests it has already taken still finish:
   * at most max-conn-requests (8) of them, 2 MiB, plus the 1 MiB, plus
   * buffered requests (~400 KB): about 4 MiB.  Holding every reply would
   * take 200 x 256 KiB = 50 MiB.  Measured: 3.1-3.6 MiB of growth (8 MiB
   * under ASan); the same run without --max-conn-reply-bytes grows by
   * 52 MiB (68 under ASan) and reads all 200.  16 MiB leaves room for
   * allocator overhead and ASan's quarantine and is still a third of 50. */
  long growth = rss_max - rss0, bound = 16 * 1024;
  fprintf(stderr, "slow reader: gkcd RSS %ld KiB before, max %ld KiB (growth %ld KiB, bound %ld KiB);"
          " %g of %d requests read; other client's slowest reply %.3f s\n",
          rss0, rss_max, growth, bound, taken, NREQ, worst);
  CHECK(growth < bound, "RSS grew by %ld KiB while a client did not read", growth);

  /* Now it reads: every reply arrives, right. */
  int seen[NREQ] = {0}, right = 0, in_order = 1, next = 0;
  for (int i = 0; i < NREQ; i++) {
    rr_reply r;
    rr_get_reply(&slow, &r, 20000);
    const msgpack_object *cb = rr_result_bin(&r, "c", (size_t)M * N * 4);
    if (!cb || r.msgid_nil || r.msgid >= NREQ) {
      fprintf(stderr, "slow reader, reply %d: %s\n", i, rr_reply_desc(&r));
      int stop = !r.got;
      rr_reply_free(&r);
      if (stop) break;
      continue;
    }
    uint32_t j = r.msgid;
    if ((int)j != next) in_order = 0;
    next = (int)j + 1;
    const float *aj = a + (size_t)j * M, *bj = b + (size_t)j * N;
    /* The checksum of C against the double reference (sum a)(sum b), and
     * every entry against a[i] * b[j]. */
    double sa = 0, sb = 0, ma = 0, mb = 0, sum = 0;
    for (int p = 0; p < M; p++) sa += aj[p], ma += fabs(aj[p]);
    for (int q = 0; q < N; q++) sb += bj[q], mb += fabs(bj[q]);
    int entries_ok = 1;
    for (int p = 0; p < M; p++)
      for (int q = 0; q < N; q++) {
        double v = rr_ld_f32(cb->via.bin.ptr, (size_t)p * N + q), want = (double)aj[p] * bj[q];
        sum += v;
        if (fabs(v - want) > 1e-6 * fabs(want) + 1e-30) entries_ok = 0;
      }
    if (!seen[j]++ && entries_ok && fabs(sum - sa * sb) <= 1e-5 * ma * mb)
      right++;
    else
      fprintf(stderr, "slow reader: msgid %u wrong (checksum %.9g, reference %.9g, entries %s, seen %d)\n",
              j, sum, sa * sb, entries_ok ? "ok" : "WRONG", seen[j]);
    rr_reply_free(&r);
  }
  pthread_join(th, NULL);
  CHECK(s.err == 0, "sending the slow client's requests: %s", strerror(s.err));
  CHECK(right == NREQ, "slow client: %d of %d replies right", right, NREQ);
  fprintf(stderr, "slow reader: %d replies, %s\n", right, in_order ? "in order" : "not in msgid order");
  CHECK(rr_ping(&slow, 5000, NULL, 0), "slow client's connection unusable afterwards");
  CHECK(rr_ping(&good, 5000, NULL, 0), "other client's connection unusable afterwards");
  rr_close(&slow);
  rr_close(&good);
  rr_frame_free(&fr);
  free(a), free(b);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 6. the memory budget                                                      */

enum { BD = 384 }; /* sgemm BD^3: 1.18 MB of request + 0.59 MB of result */

typedef struct {
  const fixture *f;
  int id, nreq;
  const float *a, *b;
  uint64_t seed;
  int ok, busy, bad;
} budget_client;

static void *budget_client_main(void *vp) {
  budget_client *w = vp;
  rr_rng = w->seed;
  rr_conn c;
  rr_open(&c, w->f);
  rr_frame fr;
  rr_frame_init(&fr);
  uint32_t base = (uint32_t)w->id * 100;
  for (int i = 0; i < w->nreq; i++)
    rr_pack_request(&fr, base + (uint32_t)i, "sgemm",
                    ARGS(AI("m", BD), AI("n", BD), AI("k", BD), AB("a", w->a, BD * BD * 4),
                         AB("b", w->b, BD * BD * 4), AF("alpha", 1.0 + w->id * 10 + i)));
  int e = rr_send_some(c.fd, fr.sb.data, fr.sb.size);
  rr_frame_free(&fr);
  if (e) w->bad++;
  for (int i = 0; i < w->nreq && !e; i++) {
    rr_reply r;
    rr_get_reply(&c, &r, 20000);
    char why[200] = "";
    const msgpack_object *cb = rr_result_bin(&r, "c", BD * BD * 4);
    if (r.valid && !r.msgid_nil && r.msgid >= base && r.msgid < base + (uint32_t)w->nreq && cb &&
        rr_sgemm_entries_ok(cb->via.bin.ptr, w->a, w->b, BD, BD, BD, 1.0 + w->id * 10 + (r.msgid - base), 8,
                            why, sizeof why)) {
      w->ok++;
    } else if (r.valid && r.is_error && !strcmp(r.code, "busy") && strstr(r.msg, "--queue-wait")) {
      w->busy++;
    } else {
      w->bad++;
      fprintf(stderr, "budget client %d, msgid %u: %s %s\n", w->id, r.msgid, rr_reply_desc(&r), why);
      if (!r.got) i = w->nreq;
    }
    rr_reply_free(&r);
  }
  rr_close(&c);
  return NULL;
}

static void test_memory_budget(void) {
  fixture f;
  /* --queue-wait 0: requests that wait for memory wait as long as it takes. */
  const char *const args[] = {"--memory-budget", "4M", "--budget-queue", "2", "--threads", "1",
                              "--queue-wait", "0", NULL};
  fixture_start(&f, args, NULL);
  rr_conn c;
  rr_open(&c, &f);

  rr_ctx = "memory budget: limits";
  CHECK(status_on(&c, "limits.memory_budget") == 4194304, "limits.memory_budget = %g",
        status_on(&c, "limits.memory_budget"));
  CHECK(status_on(&c, "limits.budget_queue") == 2, "limits.budget_queue = %g", status_on(&c, "limits.budget_queue"));

  rr_ctx = "memory budget: a request that can never fit";
  {
    /* 1024 x 1024 result: 4 MiB, plus the 8 KB request: over 4 MiB. */
    float *v = rr_rand_floats(1024);
    rr_reply r;
    double t0 = rr_now_s();
    rr_call(&c, 7, "sgemm", ARGS(AI("m", 1024), AI("n", 1024), AI("k", 1), AB("a", v, 4096), AB("b", v, 4096)), &r,
            10000);
    double dt = rr_now_s() - t0;
    CHECK(rr_reply_err(&r, 7, "too_large") && strstr(r.msg, "--memory-budget"),
          "sgemm needing 4 MiB + 8 KB: %s", rr_reply_desc(&r));
    CHECK(dt < 1.0, "too_large took %.3f s", dt);
    rr_reply_free(&r);
    CHECK(rr_ping(&c, 5000, NULL, 0), "connection closed after too_large");
    /* Just under: 1000 x 1000 (3.8 MiB) fits and is computed. */
    float *a = rr_rand_floats(1000), *b = rr_rand_floats(1000);
    rr_call(&c, 8, "sgemm", ARGS(AI("m", 1000), AI("n", 1000), AI("k", 1), AB("a", a, 4000), AB("b", b, 4000)), &r,
            10000);
    const msgpack_object *cb = rr_result_bin(&r, "c", 4000000);
    char why[200] = "";
    CHECK(cb && rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, 1000, 1000, 1, 1.0, 16, why, sizeof why),
          "sgemm needing 3.8 MiB under a 4 MiB budget: %s %s", rr_reply_desc(&r), why);
    rr_reply_free(&r);
    free(a), free(b), free(v);
  }

  rr_ctx = "memory budget: concurrent requests wait, and a full wait queue pauses reading";
  {
    enum { NCLIENT = 3, PER = 4 };
    float *a = rr_rand_floats(BD * BD), *b = rr_rand_floats(BD * BD);
    budget_client w[NCLIENT];
    pthread_t th[NCLIENT];
    for (int i = 0; i < NCLIENT; i++) {
      w[i] = (budget_client){&f, i + 1, PER, a, b, test_rand_u64(&rr_rng), 0, 0, 0};
      pthread_create(&th[i], NULL, budget_client_main, &w[i]);
    }
    /* Watch the budget from the side while they run. */
    double max_wait = 0, max_used = 0, t0 = rr_now_s();
    int samples = 0;
    for (;;) {
      double in_flight = status_on(&c, "in_flight");
      double used = status_on(&c, "budget_used"), waiting = status_on(&c, "budget_waiting");
      samples++;
      if (waiting > max_wait) max_wait = waiting;
      if (used > max_used) max_used = used;
      double served = status_on(&c, "methods.sgemm.requests");
      if ((served >= 2 + NCLIENT * PER && in_flight == 0) || rr_now_s() - t0 > 30 || isnan(in_flight)) break;
    }
    int ok = 0, busy = 0, bad = 0;
    for (int i = 0; i < NCLIENT; i++) {
      pthread_join(th[i], NULL);
      ok += w[i].ok, busy += w[i].busy, bad += w[i].bad;
    }
    /* The samples above can miss a queue that fills and drains between two
     * status calls; the peaks and totals cannot. */
    double peak_wait = status_on(&c, "budget_waiting_peak"), peak_used = status_on(&c, "budget_used_peak");
    double waited = status_on(&c, "budget_waited"), refused = status_on(&c, "budget_refused");
    fprintf(stderr, "memory budget: %d correct, %d busy, %d bad; sampled max budget_waiting %g, budget_used %g"
            " (%d samples); peaks %g waiting, %g used; %g waited, %g refused\n", ok, busy, bad, max_wait, max_used,
            samples, peak_wait, peak_used, waited, refused);
    CHECK(bad == 0 && busy == 0 && ok == NCLIENT * PER, "%d correct, %d busy, %d otherwise", ok, busy, bad);
    /* Two requests fit in the budget at once and a client pipelines four, so
     * some must have waited. */
    CHECK(waited > 0 && peak_wait > 0, "no request waited for budget (budget_waited %g, budget_waiting_peak %g)",
          waited, peak_wait);
    CHECK(max_wait <= 2 && peak_wait <= 2, "budget_waiting reached %g (peak %g) with --budget-queue 2", max_wait,
          peak_wait);
    CHECK(refused == 0, "budget_refused %g with --queue-wait 0", refused);
    CHECK(max_used <= 4194304 && peak_used <= 4194304 && peak_used >= 2 * BD * BD * 4,
          "budget_used reached %g (peak %g), want in [%d, 4 MiB]", max_used, peak_used, 2 * BD * BD * 4);
    double used = status_on(&c, "budget_used"), waiting = status_on(&c, "budget_waiting");
    double in_flight = status_on(&c, "in_flight");
    CHECK(used == 0 && waiting == 0 && in_flight == 0, "afterwards budget_used %g, budget_waiting %g, in_flight %g",
          used, waiting, in_flight);
    free(a), free(b);
  }
  CHECK(rr_ping(&c, 5000, NULL, 0), "side connection unusable");
  rr_close(&c);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 7. idle timeout                                                           */

static void test_idle_timeout(void) {
  rr_ctx = "idle timeout 0.4 s";
  fixture f;
  const char *const args[] = {"--idle-timeout", "0.4", NULL};
  fixture_start(&f, args, NULL);
  rr_conn idle, busy;
  double t0 = rr_now_s();
  rr_open(&idle, &f);
  rr_open(&busy, &f);
  double closed_at = -1;
  int pings = 0, pings_ok = 0, told = 0;
  double next_ping = rr_now_s();
  /* Ping for 1.6 s, and on (up to 2.5 s) until the idle one is closed, so
   * that the pinging connection is never idle itself. */
  while (rr_now_s() - t0 < 1.6 || (closed_at < 0 && rr_now_s() - t0 < 2.5)) {
    if (rr_now_s() >= next_ping) {
      pings++;
      pings_ok += rr_ping(&busy, 2000, NULL, 0);
      next_ping += 0.1;
    }
    if (closed_at < 0) {
      /* First the reason, as a notification, then the close. */
      ssize_t r = rr_recv_frame(&idle, 5);
      if (r == RF_CLOSED) {
        closed_at = rr_now_s() - t0;
      } else if (r > 0 && !told) {
        rr_reply n;
        rr_get_reply(&idle, &n, 0);
        told = n.notification && !strcmp(n.code, "timeout") && strstr(n.msg, "--idle-timeout");
        if (!told) closed_at = 1000;
        rr_reply_free(&n);
      } else if (r != RF_TIMEOUT) {
        closed_at = 1000; /* another frame, or an error: wrong either way */
      }
    } else {
      rr_sleep_ms(5);
    }
  }
  CHECK(closed_at >= 0.35 && closed_at <= 2.0, "idle connection closed after %.3f s (-1: not at all)", closed_at);
  CHECK(told, "the idle connection was not told why (a 'timeout' notification naming --idle-timeout)");
  CHECK(pings_ok == pings && pings >= 14, "pinging connection: %d of %d pings answered", pings_ok, pings);
  CHECK(rr_ping(&busy, 2000, NULL, 0), "the pinging connection was closed within %.1f s", rr_now_s() - t0);
  CHECK(strstr(rr_slurp(f.log), "idle for") != NULL, "log does not mention the idle close");
  fprintf(stderr, "idle timeout: idle connection closed after %.3f s; %d pings answered over %.1f s\n",
          closed_at, pings_ok, rr_now_s() - t0);
  rr_close(&idle);
  rr_close(&busy);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 8. deadline_ms                                                            */

static void test_deadline(void) {
  fixture f;
  const char *const args[] = {"--threads", "1", NULL};
  /* With fault injection built in, every sgemm holds the one worker 100 ms
   * first, whatever the machine's speed; without it, a big sgemm must. */
  const char *const slow[] = {"GKCD_FAULT=sgemm:delay=100", NULL};
  int fault = rr_env_flag("GKC_FAULT_INJECTION");
  fixture_start(&f, args, fault ? slow : NULL);
  rr_conn c;
  rr_open(&c, &f);
  char why[200] = "";

  rr_ctx = "deadline_ms: a request queued behind a slow one";
  {
    /* Without the injected delay, 1024 x 1024 x 4096: 8.6 GFLOP, tens of ms
     * on the CPU backend.  The reduce behind it on the one worker waits that
     * long, far past its 1 ms. */
    const int M = fault ? 64 : 1024, N = fault ? 64 : 1024, K = fault ? 64 : 4096;
    float *a = rr_rand_floats((size_t)M * K), *b = rr_rand_floats((size_t)K * N), *x = rr_rand_floats(1000);
    rr_frame fr;
    rr_frame_init(&fr);
    rr_pack_request(&fr, 1, "sgemm", ARGS(AI("m", M), AI("n", N), AI("k", K), AB("a", a, (size_t)M * K * 4),
                                          AB("b", b, (size_t)K * N * 4)));
    rr_pack_request(&fr, 2, "reduce", ARGS(AB("x", x, 4000), AI("deadline_ms", 1)));
    double t0 = rr_now_s();
    test_send_all(c.fd, fr.sb.data, fr.sb.size); /* one connection: the sgemm is queued first */
    rr_frame_free(&fr);
    rr_reply r1 = {0}, r2 = {0};
    double t_sgemm = -1;
    for (int i = 0; i < 2; i++) {
      rr_reply r;
      rr_get_reply(&c, &r, 5000);
      if (!r.got) r1.rf = r2.rf = r.rf; /* what became of the missing one */
      if (r.valid && !r.msgid_nil && r.msgid == 1 && !r1.got) {
        r1 = r;
        t_sgemm = rr_now_s() - t0;
      } else if (r.valid && !r.msgid_nil && r.msgid == 2 && !r2.got) {
        r2 = r;
      } else {
        fprintf(stderr, "deadline: unexpected %s (msgid %u)\n", rr_reply_desc(&r), r.msgid);
        int stop = !r.got;
        rr_reply_free(&r);
        if (stop) break;
      }
    }
    double wus = rr_reply_ok(&r1, 1) ? rr_num(proto_map_get(r1.result, "worker_us")) : NAN;
    const msgpack_object *cb = rr_result_bin(&r1, "c", (size_t)M * N * 4);
    CHECK(cb && rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, M, N, K, 1.0, 8, why, sizeof why),
          "the slow sgemm: %s %s", rr_reply_desc(&r1), why);
    /* The setup's premise: the reduce had to wait several times its 1 ms
     * deadline for the one worker. */
    CHECK(wus > 5000, "the slow sgemm held the worker only %.0f us (need > 5 ms)", wus);
    CHECK(rr_reply_err(&r2, 2, "deadline_exceeded") && strstr(r2.msg, "deadline"),
          "reduce with deadline_ms 1 behind a %.0f ms sgemm: %s", wus / 1000, rr_reply_desc(&r2));
    fprintf(stderr, "deadline: sgemm held the worker %.0f ms (reply after %.3f s); reduce behind it: %s\n",
            wus / 1000, t_sgemm, rr_reply_desc(&r2));
    rr_reply_free(&r1);
    rr_reply_free(&r2);
    free(a), free(b), free(x);
    CHECK(rr_ping(&c, 5000, NULL, 0), "connection unusable afterwards");
  }

  rr_ctx = "deadline_ms: generous deadlines";
  {
    rr_arg dl = AI("deadline_ms", 60000);
    CHECK(good_reduce(&c, 10, 3000, &dl, 10000, why, sizeof why), "reduce with deadline_ms 60000: %s", why);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1};
    rr_reply r;
    rr_call(&c, 11, "sgemm", ARGS(AI("m", 2), AI("n", 2), AI("k", 3), AB("a", a, 24), AB("b", b, 24),
                                  AI("deadline_ms", 60000)), &r, 10000);
    const msgpack_object *cb = rr_result_bin(&r, "c", 16);
    /* [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] = [[4,5],[10,11]] */
    CHECK(cb && rr_ld_f32(cb->via.bin.ptr, 0) == 4 && rr_ld_f32(cb->via.bin.ptr, 1) == 5 &&
              rr_ld_f32(cb->via.bin.ptr, 2) == 10 && rr_ld_f32(cb->via.bin.ptr, 3) == 11,
          "sgemm with deadline_ms 60000: %s", rr_reply_desc(&r));
    rr_reply_free(&r);
    int32_t rp[3] = {0, 1, 2}, ci[2] = {1, 0};
    float vals[2] = {2, 3}, xv[2] = {10, 100};
    rr_call(&c, 12, "spmv", ARGS(AI("rows", 2), AI("cols", 2), AB("row_ptr", rp, 12), AB("col_idx", ci, 8),
                                 AB("values", vals, 8), AB("x", xv, 8), AI("deadline_ms", 60000)), &r, 10000);
    cb = rr_result_bin(&r, "y", 8);
    CHECK(cb && rr_ld_f32(cb->via.bin.ptr, 0) == 200 && rr_ld_f32(cb->via.bin.ptr, 1) == 30,
          "spmv with deadline_ms 60000: %s", rr_reply_desc(&r));
    rr_reply_free(&r);
  }

  rr_ctx = "deadline_ms: invalid values";
  {
    float x[3] = {1, 2, 3};
    struct {
      const char *name;
      rr_arg a;
    } cases[] = {
        {"0", AI("deadline_ms", 0)},
        {"-5", AI("deadline_ms", -5)},
        {"a string", AS("deadline_ms", "100")},
        {"a float", AF("deadline_ms", 2.5)},
        {"over a day", AI("deadline_ms", 86400001)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      rr_reply r;
      uint32_t id = 20 + (uint32_t)i;
      rr_call(&c, id, "reduce", ARGS(AB("x", x, 12), cases[i].a), &r, 10000);
      CHECK(rr_reply_err(&r, id, "invalid_argument") && strstr(r.msg, "deadline_ms"), "deadline_ms %s: %s",
            cases[i].name, rr_reply_desc(&r));
      rr_reply_free(&r);
    }
    CHECK(rr_ping(&c, 5000, NULL, 0), "connection unusable afterwards");
  }
  /* Every request has been answered (or should have been): the books balance. */
  double in_flight = status_on(&c, "in_flight"), used = status_on(&c, "budget_used");
  CHECK(in_flight == 0, "in_flight = %g after every reply", in_flight);
  CHECK(used == 0, "budget_used = %g after every reply", used);
  rr_close(&c);
  rr_ctx = "deadline_ms";
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 9. max-connections                                                        */

static void test_max_connections(void) {
  rr_ctx = "max-connections 3";
  fixture f;
  const char *const args[] = {"--max-connections", "3", "--max-conn-per-user", "3", NULL};
  fixture_start(&f, args, NULL);
  /* fixture_start's own connection may still be closing: wait until none. */
  rr_conn c[5];
  rr_open(&c[0], &f);
  for (int i = 0; i < 200 && status_on(&c[0], "connections") > 1; i++) rr_sleep_ms(10);
  rr_open(&c[1], &f);
  rr_open(&c[2], &f);
  int pings = 0;
  for (int i = 0; i < 3; i++) pings += rr_ping(&c[i], 5000, NULL, 0);
  CHECK(pings == 3, "%d of 3 connections answered a ping", pings);
  double refused0 = status_on(&c[0], "refused_connections");

  rr_open(&c[3], &f);
  {
    rr_frame fr;
    rr_frame_init(&fr);
    rr_pack_request(&fr, 99, "ping", NULL, 0);
    rr_send_some(c[3].fd, fr.sb.data, fr.sb.size);
    rr_frame_free(&fr);
    rr_reply r;
    rr_get_reply(&c[3], &r, 5000);
    CHECK(r.notification && !strcmp(r.code, "too_many_connections") && strstr(r.msg, "--max-connections 3"),
          "4th connection: %s (want the too_many_connections notification naming the limit)", rr_reply_desc(&r));
    rr_reply_free(&r);
    rr_get_reply(&c[3], &r, 5000);
    CHECK(!r.got && r.rf == RF_CLOSED, "4th connection after the notification: %s (want closed)", rr_reply_desc(&r));
    rr_reply_free(&r);
  }
  double refused1 = status_on(&c[0], "refused_connections");
  CHECK(refused0 == 0 && refused1 >= 1, "refused_connections %g before, %g after", refused0, refused1);
  CHECK(strstr(rr_slurp(f.log), "max-connections") != NULL, "log does not name max-connections");
  for (int i = 0; i < 3; i++) pings += rr_ping(&c[i], 5000, NULL, 0);
  CHECK(pings == 6, "the 3 connections stopped working after the 4th was refused");

  /* Close one; once gkcd has seen that, a new connection works. */
  rr_close(&c[2]);
  double conns = -1;
  for (int i = 0; i < 200; i++) {
    conns = status_on(&c[0], "connections");
    if (conns <= 2) break;
    rr_sleep_ms(10);
  }
  CHECK(conns == 2, "connections = %g after closing one of 3", conns);
  rr_open(&c[4], &f);
  CHECK(rr_ping(&c[4], 5000, NULL, 0), "a new connection after one closed is not served");
  rr_close(&c[3]);
  rr_close(&c[4]);
  rr_close(&c[1]);
  rr_close(&c[0]);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 10. workers that poll for the next request                                */

/* Sends n sequential reduces on c, each checked; returns how many were right. */
static int sequential_sums(rr_conn *c, int n, double *queue_us_median) {
  enum { N = 257 };
  float x[N];
  double want = 0, *q = malloc((size_t)n * sizeof *q);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.0f, want += x[i];
  int good = 0;
  for (int i = 0; i < n; i++) {
    rr_reply r;
    uint32_t id = 1000 + (uint32_t)i;
    rr_call(c, id, "reduce", ARGS(AB("x", x, sizeof x)), &r, 10000);
    q[i] = rr_reply_ok(&r, id) ? rr_num(proto_map_get(r.result, "queue_us")) : NAN;
    if (rr_reply_ok(&r, id) && rr_num(proto_map_get(r.result, "value")) == want) good++;
    rr_reply_free(&r);
  }
  rr_sort_doubles(q, (size_t)n);
  *queue_us_median = q[n / 2];
  free(q);
  return good;
}

static void test_spin(void) {
  enum { NREQ = 200 };
  rr_ctx = "spin-us default";
  {
    fixture f;
    fixture_start(&f, NULL, NULL);
    rr_conn c;
    rr_open(&c, &f);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double spin_us = status_on(&c, "limits.spin_us");
    CHECK(spin_us == (ncpu >= 4 ? 100 : 0), "limits.spin_us = %g with %ld CPUs", spin_us, ncpu);
    rr_close(&c);
    STOP_DAEMON(&f);
  }
  const char *const spins[] = {"100", "0"};
  for (int k = 0; k < 2; k++) {
    rr_ctx = k == 0 ? "spin-us 100" : "spin-us 0";
    fixture f;
    const char *const args[] = {"--threads", "4", "--spin-us", spins[k], NULL};
    fixture_start(&f, args, NULL);
    rr_conn c;
    rr_open(&c, &f);
    double spin_us = status_on(&c, "limits.spin_us");
    CHECK(spin_us == atof(spins[k]), "limits.spin_us = %g", spin_us);
    double hits0 = status_on(&c, "spin_hits"), loop0 = status_on(&c, "loop_spin_hits"), q50 = NAN;
    int good = sequential_sums(&c, NREQ, &q50);
    double hits = status_on(&c, "spin_hits") - hits0, loop = status_on(&c, "loop_spin_hits") - loop0;
    fprintf(stderr, "%s: %d sequential reduces; %.0f taken by a polling worker, %.0f requests and completions"
            " found by the polling loop; median queue_us %.1f\n", rr_ctx, NREQ, hits, loop, q50);
    CHECK(good == NREQ, "%d of %d sums right", good, NREQ);
    /* With polling on, a client that sends as soon as it has its reply finds
     * the last worker and the loop still polling (100 us is far longer than
     * a local round trip) at least some of the time; with it off, never. */
    if (k == 0) {
      CHECK(hits >= 1, "no request of %d was taken by a polling worker", NREQ);
      CHECK(loop >= 1, "the loop found none of %d requests and completions while polling", 2 * NREQ);
    } else {
      CHECK(hits == 0 && loop == 0, "spin_hits grew by %g, loop_spin_hits by %g with --spin-us 0", hits, loop);
    }
    rr_close(&c);
    STOP_DAEMON(&f);
  }
}

/* ------------------------------------------------------------------------ */

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  /* Whatever runs the test must not leak its own service environment into
   * the daemons started here. */
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDNAMES");
  if (!getenv("GKCD_BIN")) TEST_FAIL("GKCD_BIN is not set (run through ctest)");
  rr_rng = test_seed();
  double t0 = rr_now_s();


  SECTION(test_socket_activation());
  SECTION(test_notify());
  SECTION(test_config());
  SECTION(test_peer_credentials());
  SECTION(test_max_conn_requests());
  SECTION(test_slow_reader());
  SECTION(test_memory_budget());
  SECTION(test_idle_timeout());
  SECTION(test_deadline());
  SECTION(test_max_connections());
  SECTION(test_spin());

  rr_print_totals("e2e_service", t0);
  if (rr_failed) return 1;
  printf("e2e_service: all passed\n");
  return 0;
}
