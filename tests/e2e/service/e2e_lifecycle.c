/* e2e_lifecycle.c: start-up and shutdown of a real gkcd.
 *
 * SIGTERM while requests are in flight loses none; a stale socket file is
 * replaced; a live gkcd, or a file that is not a socket, makes a second
 * gkcd refuse to start; the command line answers --help, --version and
 * rejects bad flags with exit code 2; OpenMP's idle threads sleep
 * (OMP_WAIT_POLICY=passive, set by gkcd itself unless the caller chose a
 * policy). */
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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

/* Runs gkcd with args to completion (bounded), stderr to log; exit status. */
static int run_gkcd(const char *const *args, const char *log) {
  const char *argv[16] = {getenv("GKCD_BIN")};
  if (!argv[0]) TEST_FAIL("GKCD_BIN is not set (run through ctest)");
  int n = 1;
  for (; args[n - 1]; n++) argv[n] = args[n - 1];
  argv[n] = NULL;
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    dup2(fd, 1);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  for (int i = 0; i < 500; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    rr_sleep_ms(20);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  TEST_FAIL("gkcd did not exit within 10 s");
}

static uint64_t sgemm_requests(const fixture *f, uint64_t *in_flight) {
  gkc_conn *c;
  gkc_status_info st;
  ASSERT_EQ(gkc_connect(&c, f->sock), 0);
  ASSERT_EQ(gkc_status(c, &st), 0);
  gkc_close(c);
  *in_flight = st.in_flight;
  for (int i = 0; i < st.n_methods; i++)
    if (!strcmp(st.methods[i].name, "sgemm")) return st.methods[i].requests;
  return 0;
}

/* Reads the next reply on fd and checks it is one of the n sgemms, not seen
 * before, with C[0][0] and C[D-1][D-1] as the reference has them. */
static void check_sgemm_reply(int fd, unsigned char **buf, size_t *cap, size_t *have, int *answered, int n,
                              int d, double want00, double wantll, int i) {
  size_t len = test_recv_frame(fd, buf, cap, have);
  if (len == 0) TEST_FAIL("connection closed after %d of %d replies", i, n);
  msgpack_zone z;
  proto_response r;
  rr_decode(*buf, len, &z, &r);
  if (r.error) TEST_FAIL("msgid %u: %.*s", r.msgid, (int)r.message_len, r.message);
  ASSERT(r.msgid < (uint32_t)n && !answered[r.msgid]);
  answered[r.msgid] = 1;
  const msgpack_object *c = proto_map_get(r.result, "c");
  ASSERT(c && c->type == MSGPACK_OBJECT_BIN && c->via.bin.size == (uint32_t)(d * d * 4));
  float c00, cll;
  memcpy(&c00, c->via.bin.ptr, 4);
  memcpy(&cll, c->via.bin.ptr + 4 * ((size_t)d * d - 1), 4);
  ASSERT_NEAR(c00, want00, 1e-4);
  ASSERT_NEAR(cll, wantll, 1e-4);
  msgpack_zone_destroy(&z);
  memmove(*buf, *buf + len, *have - len);
  *have -= len;
}

/* Requests accepted before SIGTERM are all answered, correctly; then the
 * daemon exits 0 and its socket file is gone.  The signal must land while
 * work is in flight, but a machine that computes as fast as it reads (a slow
 * one under a sanitizer, say) may have answered everything by the time the
 * last request is read.  With fault injection built in, each sgemm waits
 * 50 ms on its worker first, as on a slow device; without it, the matrices
 * grow (work by D^3, bytes by D^2) until some work is left over. */
static void test_sigterm_in_flight(void) {
  enum { N = 24, DMAX = 1024 };
  fixture f;
  const char *const args[] = {"--threads", "1", NULL};
  const char *const slow[] = {"GKCD_FAULT=sgemm:delay=50", NULL};
  int fault = rr_env_flag("GKC_FAULT_INJECTION");
  fixture_start(&f, args, fault ? slow : NULL);
  int fd = fixture_connect(&f);
  unsigned char *buf = NULL;
  size_t cap = 0, have = 0;
  uint64_t rng = test_seed(), seen = 0, in_flight = 0;
  for (int D = fault ? 64 : 256;; D *= 2) {
    const int k = D;
    float *a = malloc((size_t)D * k * 4), *b = malloc((size_t)k * D * 4);
    ASSERT(a && b);
    for (size_t i = 0; i < (size_t)D * k; i++) a[i] = test_rand_f32(&rng), b[i] = test_rand_f32(&rng);
    double want00 = 0, wantll = 0; /* C[0][0] and C[D-1][D-1] of the reference */
    for (int p = 0; p < k; p++) {
      want00 += (double)a[p] * b[(size_t)p * D];
      wantll += (double)a[(size_t)(D - 1) * k + p] * b[(size_t)p * D + D - 1];
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (uint32_t id = 0; id < N; id++) {
      proto_pack_request_head(&pk, id, "sgemm");
      msgpack_pack_map(&pk, 5);
      rr_pack_int(&pk, "m", D);
      rr_pack_int(&pk, "n", D);
      rr_pack_int(&pk, "k", k);
      rr_pack_bin(&pk, "a", a, (size_t)D * k * 4);
      rr_pack_bin(&pk, "b", b, (size_t)k * D * 4);
    }
    test_send_all(fd, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    /* Wait until the daemon has read every request. */
    for (int i = 0; sgemm_requests(&f, &in_flight) < seen + N; i++) {
      if (i > 2000) TEST_FAIL("gkcd did not read the requests");
      rr_sleep_ms(5);
    }
    seen += N;
    fprintf(stderr, "%d^3: %llu of %d requests still in flight when gkcd had read them all\n", D,
            (unsigned long long)in_flight, N);
    int answered[N] = {0};
    if (in_flight > 0 || D >= DMAX) {
      ASSERT(in_flight > 0); /* the signal really lands on work in progress */
      ASSERT_EQ(kill(f.pid, SIGTERM), 0);
      for (int i = 0; i < N; i++) check_sgemm_reply(fd, &buf, &cap, &have, answered, N, D, want00, wantll, i);
      free(a), free(b);
      break;
    }
    /* Everything was answered already: collect the replies, try more work. */
    for (int i = 0; i < N; i++) check_sgemm_reply(fd, &buf, &cap, &have, answered, N, D, want00, wantll, i);
    free(a), free(b);
  }
  /* Nothing more comes: the daemon closes the connection once it is done. */
  ASSERT_EQ(test_recv_frame(fd, &buf, &cap, &have), 0);
  close(fd);
  struct stat st;
  ASSERT(stat(f.sock, &st) != 0 && errno == ENOENT);
  /* Its log on stderr whatever happens: an exit status that is not 0 here
   * has been seen once under ASan on a loaded machine, not reproduced. */
  setenv("GKC_TEST_SHOW_LOG", "1", 1);
  int status = fixture_stop(&f, SIGTERM);
  unsetenv("GKC_TEST_SHOW_LOG");
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fprintf(stderr, "gkcd: %s %d\n", WIFEXITED(status) ? "exit status" : "killed by signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  free(buf);
  printf("sigterm with %llu of %d requests in flight: all answered, exit 0\n",
         (unsigned long long)in_flight, N);
}

/* A socket file nobody listens on, as a crashed daemon leaves it. */
static void make_stale_socket(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", path);
  ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd);
  struct stat st;
  ASSERT(stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
}

static void test_start_conditions(void) {
  fixture f;
  fixture_start(&f, NULL, NULL); /* a live daemon at f.sock */
  char log[400], path[400];
  snprintf(log, sizeof log, "%s/second.log", f.dir);

  /* A second daemon on a live socket refuses, and leaves it alone. */
  const char *const second[] = {"--socket", f.sock, NULL};
  int st = run_gkcd(second, log);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  ASSERT_CONTAINS(rr_slurp(log), "already listening");
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  ASSERT_EQ(gkc_ping(c, NULL), 0);
  gkc_close(c);

  /* A regular file where the socket should be is not ours to remove. */
  snprintf(path, sizeof path, "%s/not-a-socket", f.dir);
  FILE *fp = fopen(path, "w");
  fputs("keep me\n", fp);
  fclose(fp);
  const char *const onfile[] = {"--socket", path, NULL};
  st = run_gkcd(onfile, log);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  ASSERT_CONTAINS(rr_slurp(log), "not a socket");
  ASSERT_CONTAINS(rr_slurp(path), "keep me");

  /* A stale socket is replaced, and the daemon serves there. */
  fixture g;
  snprintf(path, sizeof path, "%s/stale.sock", f.dir);
  make_stale_socket(path);
  const char *const onstale[] = {"--socket", path, NULL};
  fixture_start(&g, onstale, NULL);
  ASSERT_EQ(gkc_connect(&c, path), 0);
  ASSERT_EQ(gkc_ping(c, NULL), 0);
  gkc_close(c);
  st = fixture_stop(&g, SIGINT);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  struct stat sst;
  ASSERT(stat(path, &sst) != 0); /* removed on exit */

  st = fixture_stop(&f, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  printf("start-up: live socket refused, non-socket refused, stale socket replaced\n");
}

static void test_command_line(void) {
  char log[] = "/tmp/gkc-cli-XXXXXX";
  int fd = mkstemp(log);
  close(fd);
  const char *const help[] = {"--help", NULL};
  int st = run_gkcd(help, log);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ASSERT_CONTAINS(rr_slurp(log), "--max-request-bytes");
  const char *const version[] = {"--version", NULL};
  st = run_gkcd(version, log);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ASSERT_CONTAINS(rr_slurp(log), GKC_VERSION);
  const char *const bad[] = {"--threads", "zero", NULL};
  st = run_gkcd(bad, log);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  ASSERT_CONTAINS(rr_slurp(log), "--threads");
  const char *const unknown[] = {"--frobnicate", NULL};
  st = run_gkcd(unknown, log);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  const char *const mode[] = {"--socket-mode", "777", NULL};
  st = run_gkcd(mode, log);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  const char *const spins[][3] = {{"--spin-us", "-1", NULL}, {"--spin-us", "100001", NULL},
                                  {"--spin-us", "1e3", NULL}};
  for (int i = 0; i < 3; i++) {
    st = run_gkcd(spins[i], log);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    ASSERT_CONTAINS(rr_slurp(log), "--spin-us");
  }
  /* The hardening and scheduling options: out of range or malformed values
   * stop gkcd at start-up, naming the option. */
  const char *const badopts[][3] = {
      {"--send-timeout", "-1", NULL},       {"--request-timeout", "1e9", NULL},
      {"--max-conn-per-user", "x", NULL},   {"--queue-wait", "nan", NULL},
      {"--latency-sms", "2000", NULL},      {"--latency-us", "0", NULL},
      {"--slice-us", "-5", NULL},           {"--weights", "root", NULL},
      {"--weights", "root:1000", NULL},     {"--weights", "no-such-user-gkc:2", NULL}};
  for (size_t i = 0; i < sizeof badopts / sizeof badopts[0]; i++) {
    st = run_gkcd(badopts[i], log);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    ASSERT_CONTAINS(rr_slurp(log), badopts[i][0] + 2);
  }
  /* GKCD_FAULT is read only by fault-injection builds: there a malformed
   * delay is a start-up error too. */
  if (rr_env_flag("GKC_FAULT_INJECTION")) {
    const char *const bad_delays[] = {"sgemm:delay=0", "sgemm:delay=60001", "sgemm:delay=5x", "nope:delay=5"};
    const char *const none[] = {NULL};
    for (int i = 0; i < 4; i++) {
      setenv("GKCD_FAULT", bad_delays[i], 1);
      st = run_gkcd(none, log);
      ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
      ASSERT_CONTAINS(rr_slurp(log), "GKCD_FAULT");
    }
    unsetenv("GKCD_FAULT");
  }
  unlink(log);
  printf("command line: --help, --version, bad flags and bad GKCD_FAULT exit 2\n");
}

/* The value of name in the daemon's environment (/proc/PID/environ), into
 * out; 0 when it is absent. */
static int daemon_env(const fixture *f, const char *name, char *out, size_t cap) {
  char path[64], buf[65536];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)f->pid);
  int fd = open(path, O_RDONLY);
  ASSERT(fd >= 0);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  ASSERT(n > 0);
  buf[n] = 0;
  size_t len = strlen(name);
  for (char *p = buf; p < buf + n; p += strlen(p) + 1)
    if (!strncmp(p, name, len) && p[len] == '=') {
      snprintf(out, cap, "%s", p + len + 1);
      return 1;
    }
  return 0;
}

/* gkcd runs with OMP_WAIT_POLICY=passive (main.c, omp_wait_passive: it
 * executes itself again with it, keeping its process id, so the daemon
 * that answers is the one started), and keeps a policy the caller set. */
static void test_omp_wait_policy(void) {
  char v[64];
  if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
    fixture f;
    fixture_start(&f, NULL, NULL);
    ASSERT(daemon_env(&f, "OMP_WAIT_POLICY", v, sizeof v));
    ASSERT(!strcmp(v, "passive"));
    ASSERT_EQ(fixture_stop(&f, SIGTERM), 0);
  }
  const char *active[] = {"OMP_WAIT_POLICY=active", NULL};
  fixture f;
  fixture_start(&f, NULL, active);
  ASSERT(daemon_env(&f, "OMP_WAIT_POLICY", v, sizeof v));
  ASSERT(!strcmp(v, "active"));
  ASSERT_EQ(fixture_stop(&f, SIGTERM), 0);
  printf("OpenMP wait policy: passive unless the caller chose one\n");
}

int main(void) {
  test_command_line();
  test_omp_wait_policy();
  test_start_conditions();
  test_sigterm_in_flight();
  printf("e2e_lifecycle: all passed\n");
  return 0;
}
