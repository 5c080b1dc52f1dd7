/* svcutil.c: what the e2e_service_* tests share (svcutil.h). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"
#include "svcutil.h"
#include "test.h"

void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) TEST_FAIL("cannot write %s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
}

void make_tmpdir(char *dir, size_t n) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, n, "%s/gkc-svc-XXXXXX", tmp);
  if (!mkdtemp(dir)) TEST_FAIL("mkdtemp: %s", strerror(errno));
}

void remove_tmpdir(const char *dir) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) {}
}

int path_exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

int is_socket_file(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int wait_exit(pid_t pid, int ms) {
  for (int i = 0; i <= ms / 10; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    rr_sleep_ms(10);
  }
  return -1;
}

const char *describe_status(int st, char *buf, size_t n) {
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

void stop_daemon_(const char *file, int line, fixture *f) {
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
    rr_check_at(file, line, ok, "gkcd after SIGTERM: %s%s; its log:\n%s",
                describe_status(st, why, sizeof why), st == -1 ? " after 10 s (killed)" : "",
                ok ? "" : rr_slurp(f->log));
  }
  fixture_stop(f, SIGTERM); /* pid is 0: only removes the directory */
}

double status_on(rr_conn *c, const char *path) {
  double v;
  pb_status_on(c, &path, 1, &v);
  return v;
}

void svc_init(void) {
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
}

int svc_finish(const char *name, double t0) {
  rr_print_totals(name, t0);
  if (rr_failed) return 1;
  printf("%s: all passed\n", name);
  return 0;
}
