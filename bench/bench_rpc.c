/* bench_rpc.c: what gkcd's request path costs, next to a floor.
 *
 * Times tiny requests (ping, and a reduce of 16 floats) end to end over the
 * Unix socket: the round-trip time of one connection sending one request at
 * a time, and requests/s for 1 and N connections (one thread each), either
 * sequential (one request in flight per connection) or pipelined (a window
 * of W in flight).  Each shape runs against gkcd and then, with the same
 * client code sending the same bytes, against a minimal echo server
 * (echo_server.c): the gap is what gkcd adds.
 *
 * The client is thin on purpose, so that it costs the same against both
 * servers: each request is encoded once with its msgid as a fixed 4-byte
 * field patched in place; replies are framed with proto_frame_scan and only
 * their header [1, msgid, nil, ...] is checked.  libgkc itself is timed once,
 * sequentially, to show what the client library adds.
 *
 * Where the processes run matters as much as what they do: on some machines
 * (VMs especially) a wake-up that crosses CPUs costs more than the request,
 * and the scheduler's choice flips from run to run.  So the bench pins
 * itself and the servers (--pin) and, by default, measures two placements.
 * `--help` for usage, bench/README.md for the method.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <msgpack.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_csv.h"
#include "gkc.h"
#include "proto_frame.h"
#include "proto_rpc.h"

pid_t echo_server_start(const char *path, const cpu_set_t *cpus); /* echo_server.c */

#define MAX_CONNS 1024
#define MAX_SHAPES 8
#define REDUCE_N 16
#define READ_CHUNK (64 * 1024)

/* --- small helpers ------------------------------------------------------------ */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t process_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of every thread of pid, from /proc/PID/task/TID/schedstat (its
 * first field is ns on a CPU).  -1 when unreadable (another user's daemon). */
static int64_t proc_cpu_ns(pid_t pid) {
  char path[300];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int64_t sum = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
    FILE *f = fopen(path, "r");
    unsigned long long ns;
    if (f && fscanf(f, "%llu", &ns) == 1) sum += (int64_t)ns;
    if (f) fclose(f);
  }
  closedir(d);
  return sum;
}

/* Busy (steal excluded) and stolen CPU time of the whole machine, in ns,
 * from the first line of /proc/stat; both 0 when unreadable. */
static void machine_cpu_ns(int64_t *busy, int64_t *steal) {
  unsigned long long v[8] = {0};
  *busy = *steal = 0;
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return;
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n != 8) return;
  double ns_per_tick = 1e9 / (double)sysconf(_SC_CLK_TCK);
  *busy = (int64_t)((double)(v[0] + v[1] + v[2] + v[5] + v[6]) * ns_per_tick);
  *steal = (int64_t)((double)v[7] * ns_per_tick);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* --- processes we start: stopped on every way out ----------------------------- */

static struct {
  char dir[256];
  char gkcd_sock[320], gkcd_log[320], echo_sock[320];
  volatile pid_t gkcd_pid, echo_pid;
  int keep_log; /* gkcd failed: leave its log for the user */
} g_run;

/* SIGTERM, then SIGKILL after wait_s; returns the waitpid status. */
static int stop_child(volatile pid_t *pid, int wait_s) {
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

static void cleanup(void) {
  stop_child(&g_run.gkcd_pid, 10);
  stop_child(&g_run.echo_pid, 2);
  if (!g_run.dir[0]) return;
  unlink(g_run.echo_sock);
  unlink(g_run.gkcd_sock);
  if (!g_run.keep_log) {
    unlink(g_run.gkcd_log);
    rmdir(g_run.dir);
  }
}

/* Interrupted: no child may outlive the bench, nor any file.  Only
 * async-signal-safe calls; SIGKILL because a clean stop is not needed. */
static void on_signal(int sig) {
  pid_t pids[2] = {g_run.gkcd_pid, g_run.echo_pid};
  for (int i = 0; i < 2; i++)
    if (pids[i] > 0 && kill(pids[i], SIGKILL) == 0) waitpid(pids[i], NULL, 0);
  if (g_run.dir[0]) {
    unlink(g_run.echo_sock);
    unlink(g_run.gkcd_sock);
    unlink(g_run.gkcd_log);
    rmdir(g_run.dir);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench_rpc: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1); /* cleanup() runs from atexit */
}

/* --- options ------------------------------------------------------------------ */

enum { M_PING = 1, M_REDUCE = 2 };
enum { PIN_SAME, PIN_SPLIT, PIN_NONE, PIN_MODES };
static const char *const pin_names[PIN_MODES] = {"same", "split", "none"};

typedef struct {
  const char *gkcd_bin; /* NULL: $GKCD_BIN */
  const char *socket;   /* an already running gkcd, instead of starting one */
  const char *backend;  /* gkcd --backend */
  int threads;          /* gkcd --threads; 0: the daemon's default */
  long rtt_count, rtt_warmup;
  long count;           /* requests per throughput run, over all connections */
  double duration;      /* cap on one throughput run, seconds */
  int repeat;           /* throughput runs per shape; the median is reported */
  int window;           /* requests in flight per pipelined connection; 0: none */
  int conns[MAX_SHAPES], nconns;
  int pins[PIN_MODES], npins;
  int methods;          /* M_* mask */
  int echo, gkcd;       /* which servers */
  int json, csv, quick;
} options;

static void usage(FILE *f) {
  fprintf(f,
"Usage: bench_rpc [OPTIONS]\n"
"Benchmarks gkcd's request path (ping, and reduce of 16 floats) against a raw\n"
"Unix-socket echo server: RTT p50/p99 on one sequential connection, and req/s\n"
"for 1 and 16 connections, sequential and pipelined.\n\n"
"Servers:\n"
"  --gkcd PATH       gkcd binary to start (default: $GKCD_BIN)\n"
"  --threads N       start gkcd with --threads N (default: gkcd's own default)\n"
"  --backend B       start gkcd with --backend B (default cpu)\n"
"  --socket PATH     measure the gkcd already listening on PATH instead (it is\n"
"                    not pinned, and its CPU time is read only if /proc allows)\n"
"  --no-echo         skip the echo-server floor\n"
"  --no-gkcd         measure only the echo server\n"
"Placement:\n"
"  --pin LIST        placements to measure, each a full pass (default same,split):\n"
"                    same   the bench and the server on one CPU: no wake-up\n"
"                           crosses CPUs, so this is the request path's own cost\n"
"                    split  the bench on the first half of the CPUs it may use,\n"
"                           the server on the rest\n"
"                    none   wherever the scheduler puts them (varies run to run)\n"
"What to run:\n"
"  --methods LIST    ping,reduce (default both)\n"
"  --rtt-count N     timed sequential requests for the RTT test (default 20000)\n"
"  --rtt-warmup N    untimed requests before them (default 2000)\n"
"  --conns LIST      connection counts for throughput (default 1,16)\n"
"  --window W        requests in flight per pipelined connection (default 32;\n"
"                    0 skips the pipelined runs; keep conns*W under gkcd's\n"
"                    --max-queue or it answers 'busy')\n"
"  --count N         requests per throughput run (default 50000)\n"
"  --duration S      but stop sending after S seconds (default 1.0)\n"
"  --repeat R        runs per throughput shape, median reported (default 3)\n"
"  --quick           smoke test of a few seconds: 2000 RTT requests, 5000 per\n"
"                    run, 0.2 s cap, 1 repeat (explicit options still win)\n"
"Output:\n"
"  --json            one JSON document on stdout instead of the tables\n"
"  --csv             CSV on stdout instead of the tables: a header row, then one\n"
"                    row per measurement (placement, server, method, shape)\n"
"  -h, --help        show this help\n"
"Progress goes to stderr.  Exit status 0 when every request succeeded.\n");
}

static long parse_long(const char *opt, const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    die("invalid %s '%s': expected an integer in [%ld, %ld]", opt, s, lo, hi);
  return v;
}

/* Calls each(word) for the comma-separated words of s. */
static void split_list(const char *opt, const char *s, void (*each)(options *, const char *),
                       options *o) {
  char buf[256];
  if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) die("%s: list too long", opt);
  for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) each(o, t);
}

static void add_method(options *o, const char *t) {
  if (!strcmp(t, "ping")) o->methods |= M_PING;
  else if (!strcmp(t, "reduce")) o->methods |= M_REDUCE;
  else die("invalid --methods word '%s': expected ping or reduce", t);
}

static void add_conns(options *o, const char *t) {
  if (o->nconns == MAX_SHAPES) die("--conns takes at most %d counts", MAX_SHAPES);
  o->conns[o->nconns++] = (int)parse_long("--conns", t, 1, MAX_CONNS);
}

static void add_pin(options *o, const char *t) {
  int p = 0;
  while (p < PIN_MODES && strcmp(t, pin_names[p])) p++;
  if (p == PIN_MODES) die("invalid --pin word '%s': expected same, split or none", t);
  if (o->npins == PIN_MODES) die("--pin takes at most %d placements", PIN_MODES);
  o->pins[o->npins++] = p;
}

static void parse_args(int argc, char **argv, options *o) {
  enum { O_GKCD = 256, O_THREADS, O_BACKEND, O_SOCKET, O_NOECHO, O_NOGKCD, O_PIN, O_METHODS,
         O_RTTC, O_RTTW, O_CONNS, O_WINDOW, O_COUNT, O_DUR, O_REPEAT, O_QUICK, O_JSON, O_CSV };
  static const struct option opts[] = {
      {"gkcd", required_argument, 0, O_GKCD},       {"threads", required_argument, 0, O_THREADS},
      {"backend", required_argument, 0, O_BACKEND}, {"socket", required_argument, 0, O_SOCKET},
      {"no-echo", no_argument, 0, O_NOECHO},        {"no-gkcd", no_argument, 0, O_NOGKCD},
      {"pin", required_argument, 0, O_PIN},         {"methods", required_argument, 0, O_METHODS},
      {"rtt-count", required_argument, 0, O_RTTC},  {"rtt-warmup", required_argument, 0, O_RTTW},
      {"conns", required_argument, 0, O_CONNS},     {"window", required_argument, 0, O_WINDOW},
      {"count", required_argument, 0, O_COUNT},     {"duration", required_argument, 0, O_DUR},
      {"repeat", required_argument, 0, O_REPEAT},   {"quick", no_argument, 0, O_QUICK},
      {"json", no_argument, 0, O_JSON},             {"csv", no_argument, 0, O_CSV},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  /* -1: not given, so that --quick may choose. */
  *o = (options){.backend = "cpu", .rtt_count = -1, .rtt_warmup = -1, .count = -1,
                 .duration = -1, .repeat = -1, .window = 32, .conns = {1, 16}, .nconns = 2,
                 .pins = {PIN_SAME, PIN_SPLIT}, .npins = 2, .methods = M_PING | M_REDUCE,
                 .echo = 1, .gkcd = 1};
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case O_GKCD: o->gkcd_bin = optarg; break;
      case O_THREADS: o->threads = (int)parse_long("--threads", optarg, 1, 1024); break;
      case O_BACKEND: o->backend = optarg; break;
      case O_SOCKET: o->socket = optarg; break;
      case O_NOECHO: o->echo = 0; break;
      case O_NOGKCD: o->gkcd = 0; break;
      case O_PIN: o->npins = 0; split_list("--pin", optarg, add_pin, o); break;
      case O_METHODS: o->methods = 0; split_list("--methods", optarg, add_method, o); break;
      case O_RTTC: o->rtt_count = parse_long("--rtt-count", optarg, 0, 100000000); break;
      case O_RTTW: o->rtt_warmup = parse_long("--rtt-warmup", optarg, 0, 100000000); break;
      case O_CONNS: o->nconns = 0; split_list("--conns", optarg, add_conns, o); break;
      case O_WINDOW: o->window = (int)parse_long("--window", optarg, 0, 4096); break;
      case O_COUNT: o->count = parse_long("--count", optarg, 1, 100000000); break;
      case O_DUR: {
        char *end;
        o->duration = strtod(optarg, &end);
        if (end == optarg || *end || !(o->duration > 0 && o->duration <= 3600))
          die("invalid --duration '%s': expected seconds in (0, 3600]", optarg);
        break;
      }
      case O_REPEAT: o->repeat = (int)parse_long("--repeat", optarg, 1, 100); break;
      case O_QUICK: o->quick = 1; break;
      case O_JSON: o->json = 1; break;
      case O_CSV: o->csv = 1; break;
      case 'h': usage(stdout); exit(0);
      default: fprintf(stderr, "Try 'bench_rpc --help'.\n"); exit(2);
    }
  }
  if (optind < argc) die("unexpected argument '%s' (try --help)", argv[optind]);
  if (o->window == 1) die("--window 1 is the sequential case; use 0 to skip pipelining");
  if (!o->methods || !o->nconns || !o->npins) die("an empty list selects nothing");
  if (o->rtt_count < 0) o->rtt_count = o->quick ? 2000 : 20000;
  if (o->rtt_warmup < 0) o->rtt_warmup = o->quick ? 200 : 2000;
  if (o->count < 0) o->count = o->quick ? 5000 : 50000;
  if (o->duration < 0) o->duration = o->quick ? 0.2 : 1.0;
  if (o->repeat < 0) o->repeat = o->quick ? 1 : 3;
  if (o->socket) o->gkcd = 1;
  if (!o->gkcd && !o->echo) die("--no-gkcd and --no-echo leave nothing to measure");
}

/* --- where things run ----------------------------------------------------------- */

typedef struct {
  int mode;
  cpu_set_t bench, server;
  char bench_list[128], server_list[128];
} placement;

static void cpu_list(const cpu_set_t *set, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (int c = 0; c < CPU_SETSIZE && len < n; c++)
    if (CPU_ISSET(c, set)) len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? "," : "", c);
}

/* From the CPUs this process may use (`all`): the first for both (same),
 * the first half for the bench and the rest for the server (split), or all
 * for both (none).  Returns -1 when split has fewer than 2 CPUs. */
static int plan_cpus(int mode, const cpu_set_t *all, placement *pl) {
  int n = CPU_COUNT(all);
  if (mode == PIN_SPLIT && n < 2) return -1;
  pl->mode = mode;
  CPU_ZERO(&pl->bench);
  CPU_ZERO(&pl->server);
  for (int c = 0, k = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, all)) continue;
    if (mode == PIN_NONE || (mode == PIN_SAME && k == 0))
      CPU_SET(c, &pl->bench), CPU_SET(c, &pl->server);
    else if (mode == PIN_SPLIT) CPU_SET(c, k < n / 2 ? &pl->bench : &pl->server);
    k++;
  }
  cpu_list(&pl->bench, pl->bench_list, sizeof pl->bench_list);
  cpu_list(&pl->server, pl->server_list, sizeof pl->server_list);
  return 0;
}

/* --- requests, encoded once ---------------------------------------------------- */

typedef struct {
  const char *method;
  unsigned char bytes[128];
  size_t len;
  size_t msgid_off; /* 4 big-endian bytes after a 0xce (uint32) tag */
  size_t reply_len; /* of gkcd's reply, seen during the check */
} request_tpl;

static float g_reduce_x[REDUCE_N];

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* [0, msgid, method, [params]] with msgid always uint32-coded, so every
 * request of a run has the same size and its msgid can be patched. */
static void tpl_init(request_tpl *t, const char *method) {
  size_t ml = strlen(method);
  memset(t, 0, sizeof *t);
  unsigned char *p = t->bytes;
  t->method = method;
  *p++ = 0x94;
  *p++ = 0x00;
  *p++ = 0xce;
  t->msgid_off = (size_t)(p - t->bytes);
  p += 4;
  *p++ = (unsigned char)(0xa0 | ml);
  memcpy(p, method, ml);
  p += ml;
  *p++ = 0x91;
  if (!strcmp(method, "reduce")) {
    *p++ = 0x81; /* {"x": bin of 64 bytes} */
    *p++ = 0xa1, *p++ = 'x';
    *p++ = 0xc4, *p++ = REDUCE_N * 4;
    for (int i = 0; i < REDUCE_N; i++) { /* little-endian float32 */
      uint32_t u;
      memcpy(&u, &g_reduce_x[i], 4);
      for (int b = 0; b < 4; b++) *p++ = (unsigned char)(u >> (8 * b));
    }
  } else {
    *p++ = 0x80; /* {} */
  }
  t->len = (size_t)(p - t->bytes);
}

/* Non-zero values: zeros could hide a reply that never read them. */
static void init_reduce_x(void) {
  uint64_t s = 0x5eed;
  for (int i = 0; i < REDUCE_N; i++) { /* splitmix64 */
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    g_reduce_x[i] = 0.25f + (float)((z >> 40) & 0xffff) / 65536.0f; /* [0.25, 1.25) */
  }
}

/* --- one connection's loop -------------------------------------------------------- */

static int raw_connect(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: %s", strerror(errno));
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    die("connect %s: %s", path, strerror(errno));
  return fd;
}

typedef struct {
  int fd;
  const request_tpl *tpl;
  int echo;             /* the reply is the request itself, not [1, msgid, nil, ...] */
  int window;           /* 1: sequential */
  uint64_t count;       /* requests to complete */
  double cap_s;         /* stop sending new ones after this long */
  uint32_t *lat;        /* count entries: round trips in ns */
  pthread_barrier_t *barrier;
  /* out */
  uint64_t done, t0, t1;
  char err[256];
} worker;

/* Checks one reply frame; returns its msgid, or -1 with w->err set. */
static int64_t check_reply(worker *w, const unsigned char *f, size_t len,
                           const proto_frame_info *info) {
  if (!info->msgid_known || len < 4 || f[0] != 0x94 || f[1] != (w->echo ? 0x00 : 0x01)) {
    snprintf(w->err, sizeof w->err, "reply is not [%d, msgid, ...]", w->echo ? 0 : 1);
    return -1;
  }
  if (w->echo) return info->msgid;
  size_t idl = f[2] < 0x80 ? 1 : f[2] == 0xcc ? 2 : f[2] == 0xcd ? 3 : f[2] == 0xce ? 5 : len;
  if (2 + idl < len && f[2 + idl] == 0xc0) return info->msgid; /* error: nil */
  /* A failure: decode it properly to say why. */
  msgpack_zone zone;
  msgpack_object root;
  proto_response resp;
  size_t off = 0;
  snprintf(w->err, sizeof w->err, "malformed reply");
  if (msgpack_zone_init(&zone, 1024)) {
    if (msgpack_unpack((const char *)f, len, &off, &zone, &root) == MSGPACK_UNPACK_SUCCESS &&
        proto_response_parse(&root, &resp) == 0 && resp.error)
      snprintf(w->err, sizeof w->err, "gkcd answered %.*s: %.*s", (int)resp.code_len, resp.code,
               (int)resp.message_len, resp.message);
    msgpack_zone_destroy(&zone);
  }
  return -1;
}

static int send_all(worker *w, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t s = send(w->fd, p, n, MSG_NOSIGNAL);
    if (s < 0 && errno == EINTR) continue;
    if (s < 0) {
      snprintf(w->err, sizeof w->err, "send: %s", strerror(errno));
      return -1;
    }
    p += s;
    n -= (size_t)s;
  }
  return 0;
}

/* Keeps min(window, what is left) requests in flight on one connection until
 * count have come back or cap_s has passed.  Slot s carries msgids s, s+W,
 * s+2W..., so a reply finds its slot whatever order replies come in.  The
 * requests queued while handling one read's replies go out in one send. */
static void *worker_main(void *arg) {
  worker *w = arg;
  const proto_limits lim = {1u << 20, PROTO_MAX_OBJECTS, PROTO_MAX_DEPTH};
  const size_t rl = w->tpl->len;
  const int W = w->window;
  uint64_t *sent_at = calloc((size_t)W, sizeof *sent_at);
  uint32_t *next_id = calloc((size_t)W, sizeof *next_id);
  int *pending = calloc((size_t)W, sizeof *pending);
  char *busy = calloc((size_t)W, 1);
  unsigned char *out = malloc((size_t)W * rl);
  size_t in_cap = READ_CHUNK + 4096, in_len = 0;
  unsigned char *in = malloc(in_cap);
  if (!sent_at || !next_id || !pending || !busy || !out || !in) {
    snprintf(w->err, sizeof w->err, "out of memory");
    pthread_barrier_wait(w->barrier);
    goto out;
  }
  for (int s = 0; s < W; s++) next_id[s] = (uint32_t)s;

  uint64_t sent = 0, done = 0;
  int inflight = 0, npend = 0;
  pthread_barrier_wait(w->barrier);
  w->t0 = now_ns();
  const uint64_t deadline = w->t0 + (uint64_t)(w->cap_s * 1e9);
  for (int s = 0; s < W && sent < w->count; s++, sent++) pending[npend++] = s;
  for (;;) {
    if (npend > 0) {
      for (int i = 0; i < npend; i++) {
        memcpy(out + (size_t)i * rl, w->tpl->bytes, rl);
        put_be32(out + (size_t)i * rl + w->tpl->msgid_off, next_id[pending[i]]);
        busy[pending[i]] = 1;
      }
      uint64_t t = now_ns();
      for (int i = 0; i < npend; i++) sent_at[pending[i]] = t;
      if (send_all(w, out, (size_t)npend * rl)) goto out;
      inflight += npend;
      npend = 0;
    }
    if (inflight == 0) break;
    ssize_t n = recv(w->fd, in + in_len, in_cap - in_len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      snprintf(w->err, sizeof w->err, "recv: %s", n ? strerror(errno) : "server closed");
      goto out;
    }
    uint64_t t = now_ns();
    int more = t < deadline;
    in_len += (size_t)n;
    size_t pos = 0;
    for (;;) {
      proto_frame_info info;
      ssize_t r = proto_frame_scan(in + pos, in_len - pos, &lim, &info);
      if (r == PROTO_PARTIAL) break;
      if (r < 0) {
        snprintf(w->err, sizeof w->err, "reply is not msgpack (%zd)", r);
        goto out;
      }
      int64_t id = check_reply(w, in + pos, (size_t)r, &info);
      if (id < 0) goto out;
      int s = (int)((uint32_t)id % (uint32_t)W);
      if (!busy[s] || (uint32_t)id != next_id[s]) {
        snprintf(w->err, sizeof w->err, "reply with unexpected msgid %lld", (long long)id);
        goto out;
      }
      uint64_t d = t - sent_at[s];
      w->lat[done++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
      inflight--;
      busy[s] = 0;
      next_id[s] += (uint32_t)W;
      if (more && sent < w->count) pending[npend++] = s, sent++;
      pos += (size_t)r;
    }
    memmove(in, in + pos, in_len - pos);
    in_len -= pos;
    if (in_cap - in_len < 4096) {
      snprintf(w->err, sizeof w->err, "a reply larger than %zu bytes", in_cap - 4096);
      goto out;
    }
  }
  w->done = done;
out:
  w->t1 = now_ns();
  free(sent_at);
  free(next_id);
  free(pending);
  free(busy);
  free(out);
  free(in);
  return NULL;
}

/* --- runs and their statistics ----------------------------------------------------- */

typedef struct {
  uint64_t requests;
  double seconds, rps;
  double p50_us, p90_us, p99_us, p999_us, mean_us, max_us;
  double srv_cpu_us, cli_cpu_us; /* per request; -1 when unknown */
  /* CPU time of everything else on the machine (other users' jobs, the
   * kernel's own threads) and what the hypervisor stole, ns: a check that
   * the machine was quiet.  /proc/stat counts in 10 ms ticks, so only the
   * sum over many runs, or a run of a second, says much.  0 when unknown. */
  double other_ns, steal_ns;
} run_stats;

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Nearest rank: the smallest sample with at least p of them at or below it. */
static double pct_us(const uint32_t *sorted, uint64_t n, double p) {
  uint64_t k = (uint64_t)ceil(p * (double)n);
  return sorted[k ? k - 1 : 0] / 1e3;
}

static void latency_stats(uint32_t *lat, uint64_t n, run_stats *st) {
  if (n == 0) return;
  qsort(lat, n, sizeof *lat, cmp_u32);
  double sum = 0;
  for (uint64_t i = 0; i < n; i++) sum += lat[i];
  st->p50_us = pct_us(lat, n, 0.50);
  st->p90_us = pct_us(lat, n, 0.90);
  st->p99_us = pct_us(lat, n, 0.99);
  st->p999_us = pct_us(lat, n, 0.999);
  st->mean_us = sum / (double)n / 1e3;
  st->max_us = lat[n - 1] / 1e3;
}

/* One run over open connections fds[0..nconn): each gets a thread and
 * count/nconn requests (rounded up).  srv_pid, when > 0, is the server whose
 * CPU time is charged to the run.  Dies on any failed request. */
static void run_once(const int *fds, int nconn, const request_tpl *tpl, int echo, int window,
                     uint64_t count, double cap_s, pid_t srv_pid, run_stats *st) {
  uint64_t per = (count + (uint64_t)nconn - 1) / (uint64_t)nconn;
  worker *ws = calloc((size_t)nconn, sizeof *ws);
  pthread_t *th = calloc((size_t)nconn, sizeof *th);
  uint32_t *lat = malloc((size_t)(per * (uint64_t)nconn) * sizeof *lat);
  pthread_barrier_t bar;
  if (!ws || !th || !lat) die("out of memory for %llu samples", (unsigned long long)count);
  pthread_barrier_init(&bar, NULL, (unsigned)nconn);
  for (int i = 0; i < nconn; i++)
    ws[i] = (worker){.fd = fds[i], .tpl = tpl, .echo = echo, .window = window, .count = per,
                     .cap_s = cap_s, .lat = lat + (size_t)i * per, .barrier = &bar};
  int64_t srv0 = srv_pid > 0 ? proc_cpu_ns(srv_pid) : -1, busy0, steal0, busy1, steal1;
  machine_cpu_ns(&busy0, &steal0);
  uint64_t cli0 = process_cpu_ns();
  for (int i = 0; i < nconn; i++)
    if ((errno = pthread_create(&th[i], NULL, worker_main, &ws[i])))
      die("pthread_create: %s", strerror(errno));
  for (int i = 0; i < nconn; i++) pthread_join(th[i], NULL);
  uint64_t cli1 = process_cpu_ns();
  int64_t srv1 = srv0 >= 0 ? proc_cpu_ns(srv_pid) : -1;
  machine_cpu_ns(&busy1, &steal1);
  pthread_barrier_destroy(&bar);

  memset(st, 0, sizeof *st);
  uint64_t t0 = UINT64_MAX, t1 = 0, n = 0;
  for (int i = 0; i < nconn; i++) {
    if (ws[i].err[0])
      die("%s %s, connection %d of %d: %s", echo ? "echo" : "gkcd", tpl->method, i + 1, nconn,
          ws[i].err);
    if (ws[i].t0 < t0) t0 = ws[i].t0;
    if (ws[i].t1 > t1) t1 = ws[i].t1;
    /* Packs the samples together: a capped run fills only a prefix. */
    memmove(lat + n, ws[i].lat, ws[i].done * sizeof *lat);
    n += ws[i].done;
  }
  st->requests = n;
  st->seconds = (double)(t1 - t0) / 1e9;
  st->rps = n / st->seconds;
  latency_stats(lat, n, st);
  st->cli_cpu_us = (double)(cli1 - cli0) / 1e3 / (double)n;
  st->srv_cpu_us = srv0 >= 0 && srv1 >= srv0 ? (double)(srv1 - srv0) / 1e3 / (double)n : -1;
  if (busy1 > 0 && st->srv_cpu_us >= 0) {
    st->other_ns = (double)(busy1 - busy0) - (double)(cli1 - cli0) - (double)(srv1 - srv0);
    st->steal_ns = (double)(steal1 - steal0);
  }
  free(ws);
  free(th);
  free(lat);
}

/* --- the measurement plan ------------------------------------------------------------ */

typedef struct {
  const char *name; /* "gkcd" or "echo" */
  const char *sock;
  pid_t pid;        /* whose CPU time to read; 0 when unknown */
} server;

/* A shape: rtt is the RTT test (1 connection, sequential, rtt_count). */
typedef struct {
  int rtt, conns, window;
} shape;

typedef struct {
  int pin;
  const char *server; /* "gkcd", "echo", "libgkc" */
  const char *method;
  shape sh;
  size_t req_bytes, reply_bytes;
  run_stats st;       /* the median run */
  double rps_min, rps_max;
  int runs;
  /* libgkc reduce only, else -1: medians of the reply's server_us (gkcd's
   * own clock, from the request decoded to the reply packed: queue, worker
   * hand-off and kernel) and kernel_us. */
  double server_us_p50, kernel_us_p50;
} result;

static result g_res[512];
static int g_nres;
static double g_other_ns, g_steal_ns, g_wall_ns; /* summed over the timed runs */

static result *add_result(int pin, const char *server, const request_tpl *tpl, shape sh) {
  if (g_nres == (int)(sizeof g_res / sizeof g_res[0])) die("too many results");
  result *r = &g_res[g_nres++];
  *r = (result){.pin = pin, .server = server, .method = tpl->method, .sh = sh,
                .req_bytes = tpl->len, .server_us_p50 = -1, .kernel_us_p50 = -1};
  r->reply_bytes = !strcmp(server, "echo") ? tpl->len : tpl->reply_len;
  return r;
}

static const result *find_result(int pin, const char *server, const char *method, shape sh) {
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    if (r->pin == pin && !strcmp(r->server, server) && !strcmp(r->method, method) &&
        r->sh.rtt == sh.rtt && r->sh.conns == sh.conns && r->sh.window == sh.window)
      return r;
  }
  return NULL;
}

static int cmp_rps(const void *a, const void *b) {
  double x = ((const run_stats *)a)->rps, y = ((const run_stats *)b)->rps;
  return (x > y) - (x < y);
}

static const char *shape_name(shape sh, char *buf, size_t n) {
  if (sh.rtt) snprintf(buf, n, "RTT, 1 conn seq");
  else if (sh.window > 1) snprintf(buf, n, "%d conn pipelined x%d", sh.conns, sh.window);
  else snprintf(buf, n, "%d conn sequential", sh.conns);
  return buf;
}

/* A warm-up run on the same connections, then `repeat` timed runs (one for
 * the RTT test); the run with the median req/s is kept. */
static void measure(const options *o, int pin, const server *sv, const request_tpl *tpl,
                    shape sh) {
  int echo = !strcmp(sv->name, "echo");
  int runs = sh.rtt ? 1 : o->repeat;
  uint64_t count = (uint64_t)(sh.rtt ? o->rtt_count : o->count);
  uint64_t warm = sh.rtt ? (uint64_t)o->rtt_warmup : (uint64_t)o->count / 10;
  double cap = sh.rtt ? 3600 : o->duration;
  if (count == 0) return;
  int *fds = malloc((size_t)sh.conns * sizeof *fds);
  run_stats *st = calloc((size_t)runs, sizeof *st);
  if (!fds || !st) die("out of memory");
  for (int i = 0; i < sh.conns; i++) fds[i] = raw_connect(sv->sock);
  if (warm > 0) {
    run_stats ws;
    if (warm < (uint64_t)sh.conns) warm = (uint64_t)sh.conns;
    run_once(fds, sh.conns, tpl, echo, sh.window, warm, cap / 5, 0, &ws);
  }
  for (int i = 0; i < runs; i++) {
    run_once(fds, sh.conns, tpl, echo, sh.window, count, cap, sv->pid, &st[i]);
    g_other_ns += st[i].other_ns;
    g_steal_ns += st[i].steal_ns;
    g_wall_ns += st[i].seconds * 1e9;
    if (st[i].seconds >= 0.5 && st[i].other_ns > 0.1 * st[i].seconds * 1e9)
      fprintf(stderr, "bench_rpc: warning: other processes used %.0f%% of a CPU during this run\n",
              st[i].other_ns / st[i].seconds / 1e7);
  }
  for (int i = 0; i < sh.conns; i++) close(fds[i]);
  qsort(st, (size_t)runs, sizeof *st, cmp_rps);
  result *r = add_result(pin, sv->name, tpl, sh);
  r->st = st[(runs - 1) / 2];
  r->rps_min = st[0].rps;
  r->rps_max = st[runs - 1].rps;
  r->runs = runs;
  char name[48];
  fprintf(stderr, "  %-5s %-4s %-6s %-22s %9.0f req/s  p50 %7.1f us  p99 %7.1f us\n",
          pin_names[pin], sv->name, tpl->method, shape_name(sh, name, sizeof name), r->st.rps,
          r->st.p50_us, r->st.p99_us);
  free(fds);
  free(st);
}

/* Sequential calls through the client library: what it adds to the raw RTT. */
static void measure_libgkc(const options *o, int pin, const char *sock, const request_tpl *tpl) {
  if (o->rtt_count == 0) return;
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) die("libgkc: %s", gkc_errmsg(c));
  size_t n = (size_t)o->rtt_count;
  uint32_t *lat = malloc(n * sizeof *lat), *srv = malloc(n * sizeof *srv),
           *kern = malloc(n * sizeof *kern);
  if (!lat || !srv || !kern) die("out of memory");
  int is_ping = !strcmp(tpl->method, "ping");
  double v, total = 0;
  uint64_t cpu0 = 0;
  gkc_info info;
  for (long i = -o->rtt_warmup; i < o->rtt_count; i++) {
    if (i == 0) cpu0 = process_cpu_ns();
    uint64_t t = now_ns();
    int rc = is_ping ? gkc_ping(c, NULL)
                     : gkc_reduce(c, g_reduce_x, REDUCE_N, GKC_SUM, &v, NULL, &info);
    uint64_t d = now_ns() - t;
    if (rc) die("libgkc %s: %s", tpl->method, gkc_errmsg(c));
    if (i < 0) continue;
    lat[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    total += (double)d;
    if (!is_ping) { /* NAN (an older gkcd) turns into 0 */
      srv[i] = info.server_us > 0 ? (uint32_t)(info.server_us * 1e3) : 0;
      kern[i] = info.kernel_us > 0 ? (uint32_t)(info.kernel_us * 1e3) : 0;
    }
  }
  uint64_t cpu1 = process_cpu_ns();
  gkc_close(c);
  result *r = add_result(pin, "libgkc", tpl, (shape){1, 1, 1});
  r->runs = 1;
  r->st.requests = (uint64_t)o->rtt_count;
  r->st.seconds = total / 1e9;
  r->st.rps = r->rps_min = r->rps_max = o->rtt_count / r->st.seconds;
  latency_stats(lat, (uint64_t)o->rtt_count, &r->st);
  r->st.cli_cpu_us = (double)(cpu1 - cpu0) / 1e3 / (double)o->rtt_count;
  r->st.srv_cpu_us = -1;
  if (!is_ping) {
    qsort(srv, n, sizeof *srv, cmp_u32);
    qsort(kern, n, sizeof *kern, cmp_u32);
    r->server_us_p50 = pct_us(srv, n, 0.5);
    r->kernel_us_p50 = pct_us(kern, n, 0.5);
  }
  fprintf(stderr, "  %-5s %-4s %-6s %-22s %9.0f req/s  p50 %7.1f us  p99 %7.1f us\n",
          pin_names[pin], "lib", tpl->method, "RTT via libgkc", r->st.rps, r->st.p50_us,
          r->st.p99_us);
  free(lat);
  free(srv);
  free(kern);
}

/* --- the servers ---------------------------------------------------------------------- */

static char g_flags[400]; /* gkcd's command line as reported */

static void start_gkcd(const options *o, const placement *pl) {
  const char *bin = o->gkcd_bin ? o->gkcd_bin : getenv("GKCD_BIN");
  if (!bin) die("no gkcd binary: pass --gkcd PATH, set GKCD_BIN, or use --socket PATH");
  char threads[16];
  const char *argv[16];
  int n = 0;
  argv[n++] = bin;
  argv[n++] = "--socket";
  argv[n++] = g_run.gkcd_sock;
  argv[n++] = "--backend";
  argv[n++] = o->backend;
  if (o->threads > 0) {
    snprintf(threads, sizeof threads, "%d", o->threads);
    argv[n++] = "--threads";
    argv[n++] = threads;
  }
  argv[n] = NULL;
  size_t len = 0;
  for (int i = 1; i < n && len < sizeof g_flags; i++)
    len += (size_t)snprintf(g_flags + len, sizeof g_flags - len, "%s%s", i > 1 ? " " : "",
                            i == 2 ? "$TMP/gkcd.sock" : argv[i]);
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    int fd = open(g_run.gkcd_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) dup2(fd, 2);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    /* Before exec, so that every thread gkcd starts inherits it. */
    if (pl->mode != PIN_NONE) sched_setaffinity(0, sizeof pl->server, &pl->server);
    execv(bin, (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
    _exit(127);
  }
  g_run.gkcd_pid = pid;
  /* Serving is proven by a ping, not by the socket file appearing. */
  for (int i = 0; i < 500; i++) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      g_run.gkcd_pid = 0;
      g_run.keep_log = 1;
      die("gkcd exited during start-up (status %d); see %s", status, g_run.gkcd_log);
    }
    gkc_conn *c;
    int ok = gkc_connect(&c, g_run.gkcd_sock) == 0 && gkc_ping(c, NULL) == 0;
    gkc_close(c);
    if (ok) return;
    sleep_ms(20);
  }
  g_run.keep_log = 1;
  die("gkcd did not answer within 10 s; see %s", g_run.gkcd_log);
}

/* The daemon's pid from the socket itself, so that --socket works too. */
static pid_t peer_pid(const char *sock) {
  int fd = raw_connect(sock);
  struct ucred cr;
  socklen_t len = sizeof cr;
  pid_t pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 ? cr.pid : 0;
  close(fd);
  return pid;
}

/* One raw exchange per request, fully decoded: proves the hand-made bytes
 * say what we think before anything is timed, and records the reply size. */
static void check_requests(const char *sock, request_tpl *tpls, int ntpl, gkc_ping_info *pi) {
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0 || gkc_ping(c, pi) != 0)
    die("gkcd at %s: %s", sock, gkc_errmsg(c));
  if (pi->protocol != GKC_PROTOCOL)
    die("gkcd speaks protocol %d, not %d", pi->protocol, GKC_PROTOCOL);
  double want = 0, mag = 0, got;
  for (int i = 0; i < REDUCE_N; i++) want += g_reduce_x[i], mag += fabs(g_reduce_x[i]);
  if (gkc_reduce(c, g_reduce_x, REDUCE_N, GKC_SUM, &got, NULL, NULL) != 0)
    die("libgkc reduce: %s", gkc_errmsg(c));
  if (fabs(got - want) > 1e-5 * mag) die("libgkc reduce: %.9g, expected %.9g", got, want);
  gkc_close(c);

  int fd = raw_connect(sock);
  for (int k = 0; k < ntpl; k++) {
    request_tpl *t = &tpls[k];
    unsigned char req[128], buf[4096];
    memcpy(req, t->bytes, t->len);
    put_be32(req + t->msgid_off, 0xabcdef01u);
    if (send(fd, req, t->len, MSG_NOSIGNAL) != (ssize_t)t->len) die("send: %s", strerror(errno));
    size_t have = 0;
    const proto_limits lim = {sizeof buf, PROTO_MAX_OBJECTS, PROTO_MAX_DEPTH};
    proto_frame_info info;
    ssize_t r;
    while ((r = proto_frame_scan(buf, have, &lim, &info)) == PROTO_PARTIAL) {
      ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
      if (n <= 0) die("check %s: recv: %s", t->method, n ? strerror(errno) : "closed");
      have += (size_t)n;
    }
    if (r < 0) die("check %s: reply is not msgpack", t->method);
    msgpack_zone zone;
    msgpack_object root;
    proto_response resp;
    size_t off = 0;
    if (!msgpack_zone_init(&zone, 2048)) die("out of memory");
    if (msgpack_unpack((const char *)buf, (size_t)r, &off, &zone, &root) !=
            MSGPACK_UNPACK_SUCCESS ||
        proto_response_parse(&root, &resp) != 0 || resp.msgid != 0xabcdef01u)
      die("check %s: malformed reply", t->method);
    if (resp.error)
      die("check %s: %.*s: %.*s", t->method, (int)resp.code_len, resp.code,
          (int)resp.message_len, resp.message);
    if (!strcmp(t->method, "reduce")) {
      const msgpack_object *v = proto_map_get(resp.result, "value");
      const msgpack_object *nn = proto_map_get(resp.result, "n");
      if (!v || v->type != MSGPACK_OBJECT_FLOAT64 || fabs(v->via.f64 - want) > 1e-5 * mag ||
          !nn || nn->type != MSGPACK_OBJECT_POSITIVE_INTEGER || nn->via.u64 != REDUCE_N)
        die("check reduce: wrong result from the raw request");
    }
    /* Counted with a uint32-coded msgid like the request's; gkcd codes small
     * msgids shorter, so most timed replies are 2 to 4 bytes smaller. */
    t->reply_len = (size_t)r;
    msgpack_zone_destroy(&zone);
  }
  close(fd);
}

/* The daemon's own count: no request failed. */
static void check_status(const char *sock) {
  gkc_conn *c;
  gkc_status_info si;
  if (gkc_connect(&c, sock) != 0 || gkc_status(c, &si) != 0) die("status: %s", gkc_errmsg(c));
  gkc_close(c);
  for (int i = 0; i < si.n_methods; i++)
    if (si.methods[i].errors)
      die("gkcd counted %llu failed %s requests", (unsigned long long)si.methods[i].errors,
          si.methods[i].name);
}

/* --- output ----------------------------------------------------------------------------- */

static char g_date[64], g_cpu[128];

static void machine_info(void) {
  time_t t = time(NULL);
  strftime(g_date, sizeof g_date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  snprintf(g_cpu, sizeof g_cpu, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    char *p = strchr(line, ':');
    if (strncmp(line, "model name", 10) || !p) continue;
    p += 1 + strspn(p + 1, " \t");
    p[strcspn(p, "\n")] = 0;
    snprintf(g_cpu, sizeof g_cpu, "%s", p);
    break;
  }
  if (f) fclose(f);
}

/* A table cell: fmt applied to v, or "-" when there is no result. */
static char *cell(char *buf, const result *r, const char *fmt, double v) {
  if (r) snprintf(buf, 32, fmt, v);
  else snprintf(buf, 32, "-");
  return buf;
}

static char *cpu_cell(char *buf, const result *r) {
  if (!r) snprintf(buf, 32, "-");
  else if (r->st.srv_cpu_us < 0) snprintf(buf, 32, "? + %.2f", r->st.cli_cpu_us);
  else snprintf(buf, 32, "%.2f + %.2f", r->st.srv_cpu_us, r->st.cli_cpu_us);
  return buf;
}

static void print_table(const options *o, const placement *pls, int npl, const gkc_ping_info *pi) {
  printf("\n## bench_rpc, %s\n\n", g_date);
  printf("- machine: %ld CPUs, %s\n", sysconf(_SC_NPROCESSORS_ONLN), g_cpu);
  if (o->gkcd) printf("- gkcd %s, backend %s: `gkcd %s`\n", pi->version, pi->backend, g_flags);
  for (int p = 0; p < npl; p++)
    printf("- placement `%s`: bench on CPU %s, servers on CPU %s%s\n", pin_names[pls[p].mode],
           pls[p].bench_list, pls[p].server_list, o->socket ? " (gkcd itself not pinned)" : "");
  printf("- RTT: %ld requests after %ld warm-up, one in flight, one connection.\n"
         "- Throughput: %ld requests or %.2f s per run, whichever first, after a warm-up run;\n"
         "  the run with the median req/s of %d; its p50/p99 include queueing when pipelined.\n"
         "- CPU us/req: server process + bench process CPU time per request.\n",
         o->rtt_count, o->rtt_warmup, o->count, o->duration, o->repeat);
  if (g_wall_ns > 0)
    printf("- Quiet machine check: over all timed runs, other processes used %.1f%% of one CPU\n"
           "  and the hypervisor stole %.1f%% (from /proc/stat ticks: +-5%%).\n",
           100 * g_other_ns / g_wall_ns, 100 * g_steal_ns / g_wall_ns);
  printf("\n");
  printf("| pin | method | shape | gkcd p50 us | gkcd p99 us | gkcd req/s | echo p50 us |"
         " echo p99 us | echo req/s | gkcd/echo p50 | gkcd/echo req/s | gkcd CPU us/req |"
         " echo CPU us/req |\n");
  printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    if (strcmp(r->server, o->gkcd ? "gkcd" : "echo")) continue; /* one row per shape */
    const result *g = o->gkcd ? r : NULL, *e = find_result(r->pin, "echo", r->method, r->sh);
    const result *both = g && e ? g : NULL;
    char c[10][32], sh[48];
    printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
           pin_names[r->pin], r->method, shape_name(r->sh, sh, sizeof sh),
           cell(c[0], g, "%.1f", g ? g->st.p50_us : 0), cell(c[1], g, "%.1f", g ? g->st.p99_us : 0),
           cell(c[2], g, "%.0f", g ? g->st.rps : 0), cell(c[3], e, "%.1f", e ? e->st.p50_us : 0),
           cell(c[4], e, "%.1f", e ? e->st.p99_us : 0), cell(c[5], e, "%.0f", e ? e->st.rps : 0),
           cell(c[6], both, "%.2fx", both ? g->st.p50_us / e->st.p50_us : 0),
           cell(c[7], both, "%.2fx", both ? g->st.rps / e->st.rps : 0), cpu_cell(c[8], g),
           cpu_cell(c[9], e));
  }
  if (!o->gkcd) return;
  printf("\nThe same sequential RTT through libgkc (gkc_ping, gkc_reduce) instead of the raw"
         " client:\n\n");
  printf("| pin | method | raw p50 us | raw p99 us | libgkc p50 us | libgkc p99 us |"
         " bench CPU us/req raw | bench CPU us/req libgkc | reply server_us p50 |"
         " reply kernel_us p50 |\n");
  printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int i = 0; i < g_nres; i++) {
    const result *l = &g_res[i], *r;
    if (strcmp(l->server, "libgkc") || !(r = find_result(l->pin, "gkcd", l->method, l->sh)))
      continue;
    char su[32], ku[32];
    const result *has = l->server_us_p50 >= 0 ? l : NULL;
    printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %s | %s |\n", pin_names[l->pin],
           l->method, r->st.p50_us, r->st.p99_us, l->st.p50_us, l->st.p99_us, r->st.cli_cpu_us,
           l->st.cli_cpu_us, cell(su, has, "%.2f", l->server_us_p50),
           cell(ku, has, "%.2f", l->kernel_us_p50));
  }
  printf("\nRequest/reply bytes:");
  for (int i = 0; i < g_nres; i++)
    if (g_res[i].pin == g_res[0].pin && g_res[i].sh.rtt && strcmp(g_res[i].server, "libgkc"))
      printf(" %s %s %zu/%zu;", g_res[i].server, g_res[i].method, g_res[i].req_bytes,
             g_res[i].reply_bytes);
  printf(" (msgid coded as uint32).\n"
         "server_us: gkcd's own clock from the request decoded to the reply packed (queue,\n"
         "worker hand-off, kernel); kernel_us: the kernel alone.\n");
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

static void print_json(const options *o, const placement *pls, int npl, const gkc_ping_info *pi) {
  printf("{\"date\":");
  json_str(g_date);
  printf(",\"nproc\":%ld,\"cpu\":", sysconf(_SC_NPROCESSORS_ONLN));
  json_str(g_cpu);
  printf(",\"gkcd\":{\"measured\":%s,\"version\":", o->gkcd ? "true" : "false");
  json_str(pi->version);
  printf(",\"backend\":");
  json_str(pi->backend);
  printf(",\"flags\":");
  json_str(g_flags);
  printf(",\"external\":%s},\"placements\":[", o->socket ? "true" : "false");
  for (int p = 0; p < npl; p++)
    printf("%s{\"pin\":\"%s\",\"bench_cpus\":\"%s\",\"server_cpus\":\"%s\"}", p ? "," : "",
           pin_names[pls[p].mode], pls[p].bench_list, pls[p].server_list);
  printf("],\"quiet\":{\"other_cpu_pct\":%.2f,\"steal_pct\":%.2f}",
         g_wall_ns > 0 ? 100 * g_other_ns / g_wall_ns : 0,
         g_wall_ns > 0 ? 100 * g_steal_ns / g_wall_ns : 0);
  printf(",\"config\":{\"rtt_count\":%ld,\"rtt_warmup\":%ld,\"count\":%ld,\"duration_s\":%g,"
         "\"repeat\":%d,\"window\":%d},\"results\":[",
         o->rtt_count, o->rtt_warmup, o->count, o->duration, o->repeat, o->window);
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    printf("%s{\"pin\":\"%s\",\"server\":\"%s\",\"method\":\"%s\",\"test\":\"%s\",\"conns\":%d,"
           "\"window\":%d,\"request_bytes\":%zu,\"reply_bytes\":%zu,\"requests\":%llu,"
           "\"seconds\":%.6f,\"rps\":%.1f,\"rps_min\":%.1f,\"rps_max\":%.1f,\"runs\":%d,"
           "\"p50_us\":%.3f,\"p90_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"mean_us\":%.3f,"
           "\"max_us\":%.3f,\"other_cpu_ms\":%.1f,\"steal_ms\":%.1f,\"bench_cpu_us\":%.3f",
           i ? "," : "", pin_names[r->pin], r->server, r->method,
           r->sh.rtt ? "rtt" : "throughput", r->sh.conns, r->sh.window, r->req_bytes,
           r->reply_bytes, (unsigned long long)r->st.requests, r->st.seconds, r->st.rps,
           r->rps_min, r->rps_max, r->runs, r->st.p50_us, r->st.p90_us, r->st.p99_us,
           r->st.p999_us, r->st.mean_us, r->st.max_us, r->st.other_ns / 1e6, r->st.steal_ns / 1e6,
           r->st.cli_cpu_us);
    const double opt[3] = {r->st.srv_cpu_us, r->server_us_p50, r->kernel_us_p50};
    const char *names[3] = {"server_cpu_us", "reply_server_us_p50", "reply_kernel_us_p50"};
    for (int k = 0; k < 3; k++)
      if (opt[k] >= 0) printf(",\"%s\":%.3f", names[k], opt[k]);
      else printf(",\"%s\":null", names[k]);
    printf("}");
  }
  printf("]}\n");
}

/* The results as CSV: the fields of print_json's results, with the run's
 * gkcd version and backend on every row; an unmeasured value is empty. */
static void print_csv(const gkc_ping_info *pi) {
  bench_csv c = {stdout, 0};
  fputs("pin,server,method,test,conns,window,request_bytes,reply_bytes,requests,seconds,rps,"
        "rps_min,rps_max,runs,p50_us,p90_us,p99_us,p999_us,mean_us,max_us,other_cpu_ms,steal_ms,"
        "bench_cpu_us,server_cpu_us,reply_server_us_p50,reply_kernel_us_p50,gkcd_version,backend\n",
        stdout);
  for (int i = 0; i < g_nres; i++) {
    const result *r = &g_res[i];
    bench_csv_str(&c, pin_names[r->pin]);
    bench_csv_str(&c, r->server);
    bench_csv_str(&c, r->method);
    bench_csv_str(&c, r->sh.rtt ? "rtt" : "throughput");
    bench_csv_num(&c, "%d", r->sh.conns);
    bench_csv_num(&c, "%d", r->sh.window);
    bench_csv_num(&c, "%zu", r->req_bytes);
    bench_csv_num(&c, "%zu", r->reply_bytes);
    bench_csv_num(&c, "%llu", (unsigned long long)r->st.requests);
    bench_csv_num(&c, "%.6f", r->st.seconds);
    bench_csv_num(&c, "%.1f", r->st.rps);
    bench_csv_num(&c, "%.1f", r->rps_min);
    bench_csv_num(&c, "%.1f", r->rps_max);
    bench_csv_num(&c, "%d", r->runs);
    const double lat[6] = {r->st.p50_us, r->st.p90_us, r->st.p99_us, r->st.p999_us, r->st.mean_us, r->st.max_us};
    for (int k = 0; k < 6; k++) bench_csv_num(&c, "%.3f", lat[k]);
    bench_csv_num(&c, "%.1f", r->st.other_ns / 1e6);
    bench_csv_num(&c, "%.1f", r->st.steal_ns / 1e6);
    bench_csv_num(&c, "%.3f", r->st.cli_cpu_us);
    const double opt[3] = {r->st.srv_cpu_us, r->server_us_p50, r->kernel_us_p50};
    for (int k = 0; k < 3; k++)
      if (opt[k] >= 0) bench_csv_num(&c, "%.3f", opt[k]);
      else bench_csv_str(&c, "");
    bench_csv_str(&c, pi->version);
    bench_csv_str(&c, pi->backend);
    bench_csv_end(&c);
  }
  if (bench_csv_close(&c) != 0) exit(1);
}

/* --- main ---------------------------------------------------------------------------------- */

/* Everything for one placement: fresh servers pinned for it, then every
 * shape against gkcd and the echo server back to back, so that drift in the
 * machine touches both alike. */
static void run_placement(const options *o, const placement *pl, request_tpl *tpls, int ntpl,
                          gkc_ping_info *pi) {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &pl->bench) || CPU_ISSET(c, &pl->server)) CPU_SET(c, &all);
  sched_setaffinity(0, sizeof all, &all); /* the children choose their own */
  server sv[2];
  int nsv = 0;
  if (o->gkcd) {
    const char *sock = o->socket ? o->socket : g_run.gkcd_sock;
    if (!o->socket) start_gkcd(o, pl);
    else snprintf(g_flags, sizeof g_flags, "(already running at %s)", sock);
    check_requests(sock, tpls, ntpl, pi);
    sv[nsv++] = (server){"gkcd", sock, peer_pid(sock)};
  }
  if (o->echo) {
    pid_t pid = echo_server_start(g_run.echo_sock, pl->mode == PIN_NONE ? NULL : &pl->server);
    if (pid < 0) die("echo server on %s: %s", g_run.echo_sock, strerror(errno));
    g_run.echo_pid = pid;
    sv[nsv++] = (server){"echo", g_run.echo_sock, pid};
  }
  if (sched_setaffinity(0, sizeof pl->bench, &pl->bench) != 0)
    die("sched_setaffinity: %s", strerror(errno));
  fprintf(stderr, "bench_rpc: --pin %s: bench on CPU %s, servers on CPU %s\n",
          pin_names[pl->mode], pl->bench_list, pl->server_list);

  shape shapes[1 + 2 * MAX_SHAPES];
  int nsh = 0;
  shapes[nsh++] = (shape){1, 1, 1};
  for (int c = 0; c < o->nconns; c++) {
    shapes[nsh++] = (shape){0, o->conns[c], 1};
    if (o->window > 1) shapes[nsh++] = (shape){0, o->conns[c], o->window};
  }
  for (int k = 0; k < ntpl; k++) {
    for (int s = 0; s < nsh; s++) {
      for (int i = 0; i < nsv; i++) measure(o, pl->mode, &sv[i], &tpls[k], shapes[s]);
      if (s == 0 && o->gkcd) measure_libgkc(o, pl->mode, sv[0].sock, &tpls[k]);
    }
  }

  if (o->gkcd) check_status(sv[0].sock);
  if (g_run.gkcd_pid > 0) {
    int status = stop_child(&g_run.gkcd_pid, 10);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      g_run.keep_log = 1;
      die("gkcd did not exit cleanly on SIGTERM (status %d); see %s", status, g_run.gkcd_log);
    }
  }
  stop_child(&g_run.echo_pid, 2);
  unlink(g_run.echo_sock);
}

int main(int argc, char **argv) {
  options o;
  parse_args(argc, argv, &o);
  if (o.json && o.csv) die("--json and --csv: give one of them");
  machine_info();
  init_reduce_x();
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  atexit(cleanup);

  cpu_set_t all;
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof all, &all) != 0) die("sched_getaffinity: %s", strerror(errno));
  placement pls[PIN_MODES];
  int npl = 0;
  for (int p = 0; p < o.npins; p++) {
    if (plan_cpus(o.pins[p], &all, &pls[npl]) == 0) npl++;
    else fprintf(stderr, "bench_rpc: one CPU only: skipping --pin split\n");
  }
  if (npl == 0) die("no placement left to measure");

  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(g_run.dir, sizeof g_run.dir, "%s/gkc-bench-XXXXXX", tmp);
  if (!mkdtemp(g_run.dir)) die("mkdtemp in %s: %s", tmp, strerror(errno));
  snprintf(g_run.gkcd_sock, sizeof g_run.gkcd_sock, "%s/gkcd.sock", g_run.dir);
  snprintf(g_run.gkcd_log, sizeof g_run.gkcd_log, "%s/gkcd.log", g_run.dir);
  snprintf(g_run.echo_sock, sizeof g_run.echo_sock, "%s/echo.sock", g_run.dir);

  request_tpl tpls[2];
  int ntpl = 0;
  if (o.methods & M_PING) tpl_init(&tpls[ntpl++], "ping");
  if (o.methods & M_REDUCE) tpl_init(&tpls[ntpl++], "reduce");
  gkc_ping_info pi = {.version = "", .backend = ""};
  for (int p = 0; p < npl; p++) run_placement(&o, &pls[p], tpls, ntpl, &pi);

  if (o.json) print_json(&o, pls, npl, &pi);
  else if (o.csv) print_csv(&pi);
  else print_table(&o, pls, npl, &pi);
  return 0;
}
