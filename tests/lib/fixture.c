/* fixture.c: see fixture.h. */
#include "fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gkc.h"
#include "proto_frame.h"
#include "test.h"

size_t fixture_as_limit;
unsigned fixture_nofile_limit;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

void fixture_start(fixture *f, const char *const *args, const char *const *env) {
  int st = fixture_try_start(f, args, env);
  if (st != -1) TEST_FAIL("gkcd exited during start-up (status %d); see %s", st, f->log);
}

int fixture_try_start(fixture *f, const char *const *args, const char *const *env) {
  const char *bin = getenv("GKCD_BIN");
  if (!bin) TEST_FAIL("GKCD_BIN is not set (run through ctest)");
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(f->dir, sizeof f->dir, "%s/gkc-test-XXXXXX", tmp);
  if (!mkdtemp(f->dir)) TEST_FAIL("mkdtemp: %s", strerror(errno));
  snprintf(f->sock, sizeof f->sock, "%s/gkcd.sock", f->dir);
  snprintf(f->log, sizeof f->log, "%s/gkcd.log", f->dir);

  const char *argv[64];
  int n = 0;
  argv[n++] = bin;
  int own_socket = 0; /* the caller may choose the socket itself */
  for (int i = 0; args && args[i]; i++)
    if (!strcmp(args[i], "--socket") && args[i + 1]) {
      snprintf(f->sock, sizeof f->sock, "%s", args[i + 1]);
      own_socket = 1;
    }
  if (!own_socket) {
    argv[n++] = "--socket";
    argv[n++] = f->sock;
  }
  /* Tests run on the CPU backend unless they or GKC_TEST_BACKEND say otherwise,
   * so that a machine with a GPU runs the same checks as CI. */
  int own_backend = 0;
  for (int i = 0; args && args[i]; i++) own_backend |= !strcmp(args[i], "--backend");
  if (!own_backend) {
    argv[n++] = "--backend";
    argv[n++] = getenv("GKC_TEST_BACKEND") ? getenv("GKC_TEST_BACKEND") : "cpu";
  }
  for (int i = 0; args && args[i] && n < 62; i++) argv[n++] = args[i];
  argv[n] = NULL;

  f->pid = fork();
  if (f->pid < 0) TEST_FAIL("fork: %s", strerror(errno));
  if (f->pid == 0) {
    /* A test that fails exits at once: the daemon must not outlive it and
     * keep ctest's output pipe open. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (fixture_as_limit) {
      struct rlimit rl = {fixture_as_limit, fixture_as_limit};
      if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(126);
    }
    if (fixture_nofile_limit) {
      struct rlimit rl = {fixture_nofile_limit, fixture_nofile_limit};
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(126);
    }
    int fd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  /* Wait for a ping to succeed: binding alone does not prove it serves. */
  for (int i = 0; i < 500; i++) {
    int status;
    if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
      f->pid = 0;
      return status;
    }
    gkc_conn *c;
    if (gkc_connect(&c, f->sock) == 0 && gkc_ping(c, NULL) == 0) {
      gkc_close(c);
      return -1;
    }
    gkc_close(c);
    sleep_ms(20);
  }
  TEST_FAIL("gkcd did not answer within 10 s; see %s", f->log);
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[600];
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  closedir(d);
  rmdir(dir);
}

int fixture_stop(fixture *f, int sig) {
  int status = -1;
  if (f->pid > 0) {
    kill(f->pid, sig);
    for (int i = 0; i < 1500; i++) { /* 30 s */
      if (waitpid(f->pid, &status, WNOHANG) == f->pid) break;
      sleep_ms(20);
      if (i == 1499) {
        kill(f->pid, SIGKILL);
        waitpid(f->pid, &status, 0);
        TEST_FAIL("gkcd did not exit within 30 s of signal %d", sig);
      }
    }
    f->pid = 0;
  }
  if (getenv("GKC_TEST_SHOW_LOG")) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cat %s >&2", f->log);
    if (system(cmd)) {}
  }
  remove_dir(f->dir);
  return status;
}

int fixture_connect(const fixture *f) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) TEST_FAIL("socket: %s", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", f->sock);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    TEST_FAIL("connect %s: %s", f->sock, strerror(errno));
  return fd;
}

/* A "Field:   N kB" line of /proc/PID/status, in KiB; -1 if absent. */
static long proc_status_kib(pid_t pid, const char *field) {
  char p[64], line[256];
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  FILE *fp = fopen(p, "r");
  if (!fp) return -1;
  size_t n = strlen(field);
  long kib = -1;
  while (fgets(line, sizeof line, fp))
    if (strncmp(line, field, n) == 0) kib = strtol(line + n, NULL, 10);
  fclose(fp);
  return kib;
}

long fixture_rss_kib(const fixture *f) { return proc_status_kib(f->pid, "VmRSS:"); }

long fixture_vm_kib(const fixture *f) { return proc_status_kib(f->pid, "VmSize:"); }

int fixture_nfds(const fixture *f) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/fd", (int)f->pid);
  DIR *d = opendir(p);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

uint64_t test_rand_u64(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float test_rand_f32(uint64_t *s) {
  return (float)((double)(test_rand_u64(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

uint64_t test_seed(void) {
  const char *e = getenv("GKC_TEST_SEED");
  uint64_t seed;
  if (e) {
    seed = strtoull(e, NULL, 10);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
  }
  fprintf(stderr, "seed: GKC_TEST_SEED=%llu\n", (unsigned long long)seed);
  return seed;
}

void test_send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) TEST_FAIL("send: %s", strerror(errno));
    c += w;
    n -= (size_t)w;
  }
}

size_t test_recv_frame(int fd, unsigned char **buf, size_t *cap, size_t *have) {
  static const proto_limits lim = {(size_t)1 << 40, 1u << 20, 32};
  for (;;) {
    if (*have > 0) {
      proto_frame_info info;
      ssize_t r = proto_frame_scan(*buf, *have, &lim, &info);
      if (r < 0) TEST_FAIL("daemon sent a malformed frame (%zd)", r);
      if (r > 0) return (size_t)r;
    }
    if (*cap - *have < 65536) {
      *cap = *cap * 2 + 65536;
      *buf = realloc(*buf, *cap);
      if (!*buf) TEST_FAIL("out of memory");
    }
    ssize_t n = recv(fd, *buf + *have, *cap - *have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) TEST_FAIL("recv: %s", strerror(errno));
    if (n == 0) {
      if (*have) TEST_FAIL("connection closed inside a frame");
      return 0;
    }
    *have += (size_t)n;
  }
}
