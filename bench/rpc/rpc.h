/* rpc.h: the parts of bench_rpc (bench/bench_rpc.c: the method, the
 * measurement plan and main), one file each:
 *
 *   options.c   the command line
 *   pin.c       where the bench and the servers run
 *   cputime.c   what CPU time a process, and the whole machine, used
 *   request.c   the requests, encoded once, and a check of them against gkcd
 *   client.c    the raw client: one thread per connection, a window in flight
 *   stats.c     a run's statistics and the table of results
 *   measure.c   one shape measured: warm-up, repeats, the median run
 *   servers.c   gkcd and the echo server: started, pinned, stopped on every way out
 *   output.c    the Markdown tables, --json and --csv
 *
 * Every failure dies (bench_die): a bench with a failed request has nothing
 * to report, and the atexit handler stops the servers.
 */
#ifndef GKC_BENCH_RPC_H
#define GKC_BENCH_RPC_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gkc.h"

#define MAX_CONNS 1024
#define MAX_SHAPES 8
#define REDUCE_N 16

/* --- options.c ------------------------------------------------------------------------ */

enum { M_PING = 1, M_REDUCE = 2 };
enum { PIN_SAME, PIN_SPLIT, PIN_NONE, PIN_MODES };
extern const char *const pin_names[PIN_MODES];

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

/* Fills o from the command line; prints --help and exits 0, or dies on a
 * bad option naming it. */
void options_parse(int argc, char **argv, options *o);

/* --- pin.c ------------------------------------------------------------------------------ */

typedef struct {
  int mode;
  cpu_set_t bench, server;
  char bench_list[128], server_list[128];
} placement;

/* From the CPUs this process may use (`all`): the first for both (same),
 * the first half for the bench and the rest for the server (split), or all
 * for both (none).  Returns -1 when split has fewer than 2 CPUs. */
int pin_plan(int mode, const cpu_set_t *all, placement *pl);

/* --- cputime.c ------------------------------------------------------------------------------ */

/* CPU time of this process, ns. */
uint64_t cputime_self_ns(void);
/* CPU time of every thread of pid, ns; -1 when unreadable (another user's daemon). */
int64_t cputime_proc_ns(pid_t pid);
/* Busy (steal excluded) and stolen CPU time of the whole machine, ns; both
 * 0 when unreadable. */
void cputime_machine_ns(int64_t *busy, int64_t *steal);

/* --- request.c ------------------------------------------------------------------------------ */

typedef struct {
  const char *method;
  unsigned char bytes[128];
  size_t len;
  size_t msgid_off; /* 4 big-endian bytes after a 0xce (uint32) tag */
  size_t reply_len; /* of gkcd's reply, seen during the check */
} request_tpl;

/* The reduce's 16 floats, filled by request_init_reduce_x. */
extern float g_reduce_x[REDUCE_N];

void request_init_reduce_x(void);
/* [0, msgid, method, [params]] with msgid always uint32-coded, so every
 * request of a run has the same size and its msgid can be patched. */
void request_init(request_tpl *t, const char *method);
/* Writes v big-endian at p: a template's msgid. */
void request_put_be32(unsigned char *p, uint32_t v);
/* Pings gkcd at sock into pi, checks a libgkc reduce, then one raw exchange
 * per template, fully decoded: proves the hand-made bytes say what we
 * think before anything is timed, and records each reply's size. */
void request_check(const char *sock, request_tpl *tpls, int ntpl, gkc_ping_info *pi);

/* --- stats.c -------------------------------------------------------------------------------- */

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

/* Sorts the n round trips lat (ns) and fills st's latency fields. */
void stats_latency(uint32_t *lat, uint64_t n, run_stats *st);
/* Nearest rank of sorted ns, in us: the smallest sample with at least p of
 * them at or below it. */
double stats_pct_us(const uint32_t *sorted, uint64_t n, double p);
/* Sorts v[0..n) ascending. */
void stats_sort_u32(uint32_t *v, size_t n);

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

extern result g_res[512];
extern int g_nres;
extern double g_other_ns, g_steal_ns, g_wall_ns; /* summed over the timed runs */

result *stats_add_result(int pin, const char *server, const request_tpl *tpl, shape sh);
const result *stats_find_result(int pin, const char *server, const char *method, shape sh);
const char *stats_shape_name(shape sh, char *buf, size_t n);

/* --- client.c ------------------------------------------------------------------------------ */

/* A connected Unix stream socket to path. */
int client_connect(const char *path);

/* One run over open connections fds[0..nconn): each gets a thread and
 * count/nconn requests (rounded up), window in flight (1: sequential), no
 * new one sent after cap_s.  srv_pid, when > 0, is the server whose CPU
 * time is charged to the run.  Dies on any failed request. */
void client_run(const int *fds, int nconn, const request_tpl *tpl, int echo, int window,
                uint64_t count, double cap_s, pid_t srv_pid, run_stats *st);

/* --- servers.c ------------------------------------------------------------------------------ */

/* Processes we start: stopped on every way out. */
typedef struct {
  char dir[256];
  char gkcd_sock[320], gkcd_log[320], echo_sock[320];
  volatile pid_t gkcd_pid, echo_pid;
  int keep_log; /* gkcd failed: leave its log for the user */
} run_state;
extern run_state g_run;
extern char g_flags[400]; /* gkcd's command line as reported */

typedef struct {
  const char *name; /* "gkcd" or "echo" */
  const char *sock;
  pid_t pid;        /* whose CPU time to read; 0 when unknown */
} server;

/* A temporary directory for the sockets and gkcd's log; SIGINT/SIGTERM
 * handlers and an atexit handler that stop the servers and remove it. */
void servers_init(void);
/* Starts o's gkcd on g_run.gkcd_sock, pinned for pl; dies when it does not serve. */
void servers_start_gkcd(const options *o, const placement *pl);
/* The echo server on g_run.echo_sock, pinned for pl. */
pid_t servers_start_echo(const placement *pl);
/* Stops gkcd (dies when it does not exit cleanly) and the echo server. */
void servers_stop(void);
/* The daemon's pid from the socket itself, so that --socket works too. */
pid_t servers_peer_pid(const char *sock);
/* The daemon's own count: dies when a request failed. */
void servers_check_status(const char *sock);

/* --- measure.c ------------------------------------------------------------------------------ */

/* A warm-up run on the same connections, then `repeat` timed runs (one for
 * the RTT test); the run with the median req/s is kept as a result. */
void measure_raw(const options *o, int pin, const server *sv, const request_tpl *tpl, shape sh);
/* Sequential calls through the client library: what it adds to the raw RTT. */
void measure_libgkc(const options *o, int pin, const char *sock, const request_tpl *tpl);

/* --- output.c ------------------------------------------------------------------------------ */

/* The date and the CPU model, for the report. */
void output_machine_info(void);
void output_table(const options *o, const placement *pls, int npl, const gkc_ping_info *pi);
void output_json(const options *o, const placement *pls, int npl, const gkc_ping_info *pi);
void output_csv(const gkc_ping_info *pi);

#endif
