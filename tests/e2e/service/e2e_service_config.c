/* e2e_service_config.c: the config file and who may connect, against real gkcd
 * processes:
 *
 *  3. the config file: values, flags overriding it, errors naming file:line;
 *  4. peer credentials (as root only): a uid that is not allowed is refused,
 *     --allow-users lets it in.
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
    double mrb = pb_status(&f, "limits.max_request_bytes"), th = pb_status(&f, "limits.threads");
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
    double before = pb_status(&f, "refused_connections");
    int r = ping_as(f.sock, NOBODY, NOBODY, &cpid);
    CHECK(r == PC_CLOSED, "uid 65534 on a daemon that does not allow it: %s", pc_name(r));
    double after = pb_status(&f, "refused_connections");
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
    double refused = pb_status(&f, "refused_connections");
    CHECK(refused == 1, "refused_connections = %g", refused);
    STOP_DAEMON(&f);
  }
}

int main(void) {
  svc_init();
  double t0 = rr_now_s();
  SECTION(test_config());
  SECTION(test_peer_credentials());
  return svc_finish("e2e_service_config", t0);
}
