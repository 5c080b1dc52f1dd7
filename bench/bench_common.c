/* bench_common.c: see bench_common.h. */
#include "bench_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gkc.h"

const char *bench_prog = "bench";

void bench_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", bench_prog);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

long bench_parse_long(const char *opt, const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    bench_die("invalid %s '%s': expected an integer in [%ld, %ld]", opt, s, lo, hi);
  return v;
}

uint64_t bench_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double bench_clock_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void bench_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int bench_gkcd_start(const char *const argv[], const char *sock, const char *log,
                     const cpu_set_t *cpus, volatile pid_t *pid, char *why, size_t whylen) {
  pid_t child = fork();
  if (child < 0) {
    snprintf(why, whylen, "fork: %s", strerror(errno));
    return -1;
  }
  if (child == 0) {
    if (log) {
      int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (fd >= 0) dup2(fd, 2);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (cpus) sched_setaffinity(0, sizeof *cpus, cpus);
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  *pid = child;
  for (int i = 0; i < 500; i++) {
    int status;
    if (waitpid(child, &status, WNOHANG) == child) {
      *pid = 0;
      snprintf(why, whylen, "gkcd exited during start-up (status %d)", status);
      return -1;
    }
    gkc_conn *c;
    int ok = gkc_connect(&c, sock) == 0 && gkc_ping(c, NULL) == 0;
    gkc_close(c);
    if (ok) return 0;
    sleep_ms(20);
  }
  snprintf(why, whylen, "gkcd did not answer within 10 s");
  return -1;
}

int bench_stop_child(volatile pid_t *pid, int wait_s) {
  int status = 0;
  if (*pid <= 0) return 0;
  kill(*pid, SIGTERM);
  for (int i = 0; i < wait_s * 50; i++) {
    if (waitpid(*pid, &status, WNOHANG) == *pid) goto gone;
    sleep_ms(20);
  }
  kill(*pid, SIGKILL);
  waitpid(*pid, &status, 0);
gone:
  *pid = 0;
  return status;
}
