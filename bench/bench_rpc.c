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
 * `--help` for usage, bench/README.md for the method; bench/rpc/rpc.h lists
 * the parts.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "bench_common.h"
#include "rpc/rpc.h"

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
    if (!o->socket) servers_start_gkcd(o, pl);
    else snprintf(g_flags, sizeof g_flags, "(already running at %s)", sock);
    request_check(sock, tpls, ntpl, pi);
    sv[nsv++] = (server){"gkcd", sock, servers_peer_pid(sock)};
  }
  if (o->echo) {
    pid_t pid = servers_start_echo(pl);
    sv[nsv++] = (server){"echo", g_run.echo_sock, pid};
  }
  if (sched_setaffinity(0, sizeof pl->bench, &pl->bench) != 0)
    bench_die("sched_setaffinity: %s", strerror(errno));
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
      for (int i = 0; i < nsv; i++) measure_raw(o, pl->mode, &sv[i], &tpls[k], shapes[s]);
      if (s == 0 && o->gkcd) measure_libgkc(o, pl->mode, sv[0].sock, &tpls[k]);
    }
  }

  if (o->gkcd) servers_check_status(sv[0].sock);
  servers_stop();
}

int main(int argc, char **argv) {
  bench_prog = "bench_rpc";
  options o;
  options_parse(argc, argv, &o);
  output_machine_info();
  request_init_reduce_x();

  cpu_set_t all;
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof all, &all) != 0)
    bench_die("sched_getaffinity: %s", strerror(errno));
  placement pls[PIN_MODES];
  int npl = 0;
  for (int p = 0; p < o.npins; p++) {
    if (pin_plan(o.pins[p], &all, &pls[npl]) == 0) npl++;
    else fprintf(stderr, "bench_rpc: one CPU only: skipping --pin split\n");
  }
  if (npl == 0) bench_die("no placement left to measure");
  servers_init();

  request_tpl tpls[2];
  int ntpl = 0;
  if (o.methods & M_PING) request_init(&tpls[ntpl++], "ping");
  if (o.methods & M_REDUCE) request_init(&tpls[ntpl++], "reduce");
  gkc_ping_info pi = {.version = "", .backend = ""};
  for (int p = 0; p < npl; p++) run_placement(&o, &pls[p], tpls, ntpl, &pi);

  if (o.json) output_json(&o, pls, npl, &pi);
  else if (o.csv) output_csv(&pi);
  else output_table(&o, pls, npl, &pi);
  return 0;
}
