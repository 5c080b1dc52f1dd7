/* bench_ring.c: the shared-memory ring against the socket (issue #28).
 *
 * One 16-float reduce at a time, its round trip measured from the call to
 * the value in hand, p50 and p99 over --count requests per shape:
 *   echo            a bare Unix-socket echo server (echo_server.c) sent the
 *                   same request's bytes: the socket's floor
 *   libgkc socket   gkc_reduce on a connection kept on the socket
 *   libgkc ring     gkc_reduce through the ring (libgkc's default)
 * The shapes take turns in rounds of --round requests, so that drift in a
 * shared machine touches them alike.  Every reply's value is checked.
 *
 * Beside the latencies: gkcd's CPU time per request in each shape (from
 * /proc: what the loop's polling costs, --spin-us), the doorbells the
 * client rang, and gkcd's CPU use while a ring connection sits idle for
 * --idle seconds (issue #28: at most 1% of a core).
 *
 *   bench_ring --gkcd build/daemon/gkcd [--spin-us 50]   # its own gkcd
 *   bench_ring --socket PATH                             # one running (no CPU figures)
 *   bench_ring --echo PATH                               # only the echo server (bench_ring.py's)
 *
 * --json prints the rows machine-readable.  bench/bench_ring.py measures
 * the Python package the same way, beside a Python socket echo.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "gkc.h"

pid_t echo_server_start(const char *path, const cpu_set_t *cpus);

#define N_FLOATS 16
enum { S_ECHO, S_SOCK, S_RING, NSHAPES };
static const char *const shape_name[NSHAPES] = {"echo", "libgkc socket", "libgkc ring"};

static long count = 20000, round_n = 500, warm = 1000;
static double idle_s = 3;
static const char *spin_us = NULL;
static int json;
static volatile pid_t gkcd_pid, echo_pid;
static char dir[256], gkcd_sock[300], echo_sock[300];

static void cleanup(void) {
  bench_stop_child(&gkcd_pid, 5);
  if (echo_pid > 0) {
    kill(echo_pid, SIGTERM);
    echo_pid = 0;
  }
  if (echo_sock[0]) unlink(echo_sock);
  if (dir[0]) rmdir(dir);
}

static void on_signal(int sig) {
  (void)sig;
  exit(1);
}

/* gkcd's user + system CPU time in seconds (0 when unknown). */
static double cpu_s(pid_t pid) {
  if (pid <= 0) return 0;
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  unsigned long ut = 0, st = 0;
  /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return 0;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The request libgkc sends for a 16-float reduce, packed by hand for the
 * echo: [0, msgid, "reduce", [{"x": bin 64}]]. */
static size_t echo_frame(unsigned char *out, const float *x) {
  size_t n = 0;
  out[n++] = 0x94, out[n++] = 0x00, out[n++] = 0xce;
  memset(out + n, 0, 4), n += 4;
  out[n++] = 0xa6, memcpy(out + n, "reduce", 6), n += 6;
  out[n++] = 0x91, out[n++] = 0x81, out[n++] = 0xa1, out[n++] = 'x';
  out[n++] = 0xc4, out[n++] = N_FLOATS * 4;
  memcpy(out + n, x, N_FLOATS * 4), n += N_FLOATS * 4;
  return n;
}

static int echo_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) bench_die("socket path %s is too long", path);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    bench_die("connecting to the echo server at %s: %s", path, strerror(errno));
  return fd;
}

static void echo_once(int fd, const unsigned char *req, size_t len) {
  unsigned char back[256];
  if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) bench_die("echo: send: %s", strerror(errno));
  size_t got = 0;
  while (got < len) {
    ssize_t r = recv(fd, back + got, sizeof back - got, 0);
    if (r <= 0) bench_die("echo: recv: %s", r ? strerror(errno) : "closed");
    got += (size_t)r;
  }
  if (memcmp(back, req, len) != 0) bench_die("echo: the bytes came back changed");
}

typedef struct {
  double *lat;   /* microseconds */
  long n;
  double cpu_s;  /* gkcd's, while this shape ran */
} shape;

static int cmp(const void *a, const void *b) { return bench_cmp_double(a, b); }

static double pct(const shape *s, double q) {
  long i = (long)(q * (double)(s->n - 1) + 0.5);
  return s->lat[i];
}

int main(int argc, char **argv) {
  bench_prog = "bench_ring";
  const char *gkcd = NULL, *sock = NULL, *echo_only = NULL;
  static const struct option opts[] = {
      {"gkcd", required_argument, 0, 'g'},  {"socket", required_argument, 0, 's'},
      {"count", required_argument, 0, 'n'}, {"round", required_argument, 0, 'r'},
      {"spin-us", required_argument, 0, 'p'}, {"idle", required_argument, 0, 'i'},
      {"echo", required_argument, 0, 'e'},  {"json", no_argument, 0, 'j'},
      {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'g': gkcd = optarg; break;
      case 's': sock = optarg; break;
      case 'n': count = bench_parse_long("--count", optarg, 100, 100000000); break;
      case 'r': round_n = bench_parse_long("--round", optarg, 1, 1000000); break;
      case 'p': spin_us = optarg; (void)bench_parse_long("--spin-us", optarg, 0, 100000); break;
      case 'i': idle_s = (double)bench_parse_long("--idle", optarg, 0, 3600); break;
      case 'e': echo_only = optarg; break;
      case 'j': json = 1; break;
      default:
        fprintf(stderr, "usage: bench_ring (--gkcd PATH [--spin-us N] | --socket PATH | --echo PATH)"
                " [--count N] [--round N] [--idle S] [--json]\n");
        return o == 'h' ? 0 : 2;
    }
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);
  if (echo_only) { /* the echo server alone, until killed */
    pid_t p = echo_server_start(echo_only, NULL);
    if (p < 0) bench_die("echo server at %s: %s", echo_only, strerror(errno));
    printf("echo %d\n", (int)p);
    fflush(stdout);
    int st;
    waitpid(p, &st, 0);
    return 0;
  }
  if (!gkcd == !sock) bench_die("give --gkcd PATH (a gkcd of its own) or --socket PATH");
  atexit(cleanup);
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/bench-ring-XXXXXX", tmp);
  if (!mkdtemp(dir)) bench_die("mkdtemp: %s", strerror(errno));
  snprintf(echo_sock, sizeof echo_sock, "%s/echo.sock", dir);
  if ((echo_pid = echo_server_start(echo_sock, NULL)) < 0) bench_die("echo server: %s", strerror(errno));
  if (gkcd) {
    snprintf(gkcd_sock, sizeof gkcd_sock, "%s/gkcd.sock", dir);
    /* Rings on whatever --spin-us says: both transports are measured. */
    const char *av[8] = {gkcd, "--socket", gkcd_sock, "--rings", "on", NULL};
    if (spin_us) av[5] = "--spin-us", av[6] = spin_us, av[7] = NULL;
    char why[256], log[320];
    snprintf(log, sizeof log, "%s/gkcd.log", dir);
    if (bench_gkcd_start(av, gkcd_sock, log, NULL, &gkcd_pid, why, sizeof why) != 0)
      bench_die("gkcd: %s", why);
    unlink(log);
    sock = gkcd_sock;
  }
  float x[N_FLOATS];
  double want = 0;
  for (int i = 0; i < N_FLOATS; i++) x[i] = (float)(i + 1) / 8.0f, want += x[i];
  unsigned char req[128];
  size_t req_len = echo_frame(req, x);
  int efd = echo_connect(echo_sock);
  gkc_conn *cs, *cr;
  if (gkc_connect(&cs, sock) || gkc_set_ring(cs, 0)) bench_die("connect: %s", gkc_errmsg(cs));
  if (gkc_connect(&cr, sock)) bench_die("connect: %s", gkc_errmsg(cr));
  shape sh[NSHAPES];
  memset(sh, 0, sizeof sh);
  for (int s = 0; s < NSHAPES; s++)
    if (!(sh[s].lat = malloc((size_t)count * sizeof(double)))) bench_die("out of memory");
  /* warm-up, each */
  for (long i = 0; i < warm; i++) {
    double v;
    echo_once(efd, req, req_len);
    if (gkc_reduce(cs, x, N_FLOATS, GKC_SUM, &v, NULL, NULL) || gkc_reduce(cr, x, N_FLOATS, GKC_SUM, &v, NULL, NULL))
      bench_die("reduce: %s", gkc_errmsg(cs));
  }
  if (!gkc_ring_active(cr)) bench_die("gkcd took no ring (an older gkcd?): nothing to compare");
  for (long done = 0; done < count; done += round_n) {
    long k = count - done < round_n ? count - done : round_n;
    for (int s = 0; s < NSHAPES; s++) {
      double c0 = cpu_s(gkcd_pid);
      for (long i = 0; i < k; i++) {
        uint64_t t0 = bench_clock_ns();
        if (s == S_ECHO) {
          echo_once(efd, req, req_len);
        } else {
          gkc_conn *c = s == S_SOCK ? cs : cr;
          double v;
          if (gkc_reduce(c, x, N_FLOATS, GKC_SUM, &v, NULL, NULL)) bench_die("reduce: %s", gkc_errmsg(c));
          if (fabs(v - want) > 1e-5 * want) bench_die("reduce: %g, not %g", v, want);
        }
        sh[s].lat[sh[s].n++] = (double)(bench_clock_ns() - t0) / 1e3;
      }
      sh[s].cpu_s += cpu_s(gkcd_pid) - c0;
    }
  }
  /* gkcd idle with a ring connection open */
  double idle_pct = NAN;
  if (gkcd_pid > 0 && idle_s > 0) {
    double c0 = cpu_s(gkcd_pid), t0 = bench_clock_s();
    usleep((useconds_t)(idle_s * 1e6));
    idle_pct = 100 * (cpu_s(gkcd_pid) - c0) / (bench_clock_s() - t0);
  }
  for (int s = 0; s < NSHAPES; s++) qsort(sh[s].lat, (size_t)sh[s].n, sizeof(double), cmp);
  if (json) {
    printf("{\"bench\": \"bench_ring\", \"spin_us\": %s, \"count\": %ld, \"idle_cpu_pct\": %.3f, \"rows\": [",
           spin_us ? spin_us : "null", count, idle_pct);
    for (int s = 0; s < NSHAPES; s++)
      printf("%s{\"shape\": \"%s\", \"p50_us\": %.2f, \"p99_us\": %.2f, \"gkcd_cpu_us_per_req\": %.2f}",
             s ? ", " : "", shape_name[s], pct(&sh[s], 0.5), pct(&sh[s], 0.99),
             s == S_ECHO ? 0 : 1e6 * sh[s].cpu_s / (double)sh[s].n);
    printf("]}\n");
  } else {
    printf("16-float reduce, one at a time, %ld each (gkcd --spin-us %s)\n\n", count,
           spin_us ? spin_us : "default");
    printf("| shape | p50 us | p99 us | gkcd CPU us/request |\n|---|---|---|---|\n");
    for (int s = 0; s < NSHAPES; s++) {
      printf("| %s | %.1f | %.1f | ", shape_name[s], pct(&sh[s], 0.5), pct(&sh[s], 0.99));
      if (s == S_ECHO || gkcd_pid <= 0) printf("- |\n");
      else printf("%.1f |\n", 1e6 * sh[s].cpu_s / (double)sh[s].n);
    }
    printf("\nring / echo p50: %.2fx; ring / socket p50: %.2fx\n", pct(&sh[S_RING], 0.5) / pct(&sh[S_ECHO], 0.5),
           pct(&sh[S_RING], 0.5) / pct(&sh[S_SOCK], 0.5));
    if (!isnan(idle_pct)) printf("gkcd idle with a ring open, %.0f s: %.2f%% of a core\n", idle_s, idle_pct);
  }
  gkc_close(cs);
  gkc_close(cr);
  close(efd);
  for (int s = 0; s < NSHAPES; s++) free(sh[s].lat);
  return 0;
}
