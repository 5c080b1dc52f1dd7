/* options.c: bench_rpc's command line. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "rpc.h"

const char *const pin_names[PIN_MODES] = {"same", "split", "none"};

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

/* Calls each(word) for the comma-separated words of s. */
static void split_list(const char *opt, const char *s, void (*each)(options *, const char *),
                       options *o) {
  char buf[256];
  if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) bench_die("%s: list too long", opt);
  for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) each(o, t);
}

static void add_method(options *o, const char *t) {
  if (!strcmp(t, "ping")) o->methods |= M_PING;
  else if (!strcmp(t, "reduce")) o->methods |= M_REDUCE;
  else bench_die("invalid --methods word '%s': expected ping or reduce", t);
}

static void add_conns(options *o, const char *t) {
  if (o->nconns == MAX_SHAPES) bench_die("--conns takes at most %d counts", MAX_SHAPES);
  o->conns[o->nconns++] = (int)bench_parse_long("--conns", t, 1, MAX_CONNS);
}

static void add_pin(options *o, const char *t) {
  int p = 0;
  while (p < PIN_MODES && strcmp(t, pin_names[p])) p++;
  if (p == PIN_MODES) bench_die("invalid --pin word '%s': expected same, split or none", t);
  if (o->npins == PIN_MODES) bench_die("--pin takes at most %d placements", PIN_MODES);
  o->pins[o->npins++] = p;
}

void options_parse(int argc, char **argv, options *o) {
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
      case O_THREADS: o->threads = (int)bench_parse_long("--threads", optarg, 1, 1024); break;
      case O_BACKEND: o->backend = optarg; break;
      case O_SOCKET: o->socket = optarg; break;
      case O_NOECHO: o->echo = 0; break;
      case O_NOGKCD: o->gkcd = 0; break;
      case O_PIN: o->npins = 0; split_list("--pin", optarg, add_pin, o); break;
      case O_METHODS: o->methods = 0; split_list("--methods", optarg, add_method, o); break;
      case O_RTTC: o->rtt_count = bench_parse_long("--rtt-count", optarg, 0, 100000000); break;
      case O_RTTW: o->rtt_warmup = bench_parse_long("--rtt-warmup", optarg, 0, 100000000); break;
      case O_CONNS: o->nconns = 0; split_list("--conns", optarg, add_conns, o); break;
      case O_WINDOW: o->window = (int)bench_parse_long("--window", optarg, 0, 4096); break;
      case O_COUNT: o->count = bench_parse_long("--count", optarg, 1, 100000000); break;
      case O_DUR: {
        char *end;
        o->duration = strtod(optarg, &end);
        if (end == optarg || *end || !(o->duration > 0 && o->duration <= 3600))
          bench_die("invalid --duration '%s': expected seconds in (0, 3600]", optarg);
        break;
      }
      case O_REPEAT: o->repeat = (int)bench_parse_long("--repeat", optarg, 1, 100); break;
      case O_QUICK: o->quick = 1; break;
      case O_JSON: o->json = 1; break;
      case O_CSV: o->csv = 1; break;
      case 'h': usage(stdout); exit(0);
      default: fprintf(stderr, "Try 'bench_rpc --help'.\n"); exit(2);
    }
  }
  if (optind < argc) bench_die("unexpected argument '%s' (try --help)", argv[optind]);
  if (o->window == 1) bench_die("--window 1 is the sequential case; use 0 to skip pipelining");
  if (!o->methods || !o->nconns || !o->npins) bench_die("an empty list selects nothing");
  if (o->rtt_count < 0) o->rtt_count = o->quick ? 2000 : 20000;
  if (o->rtt_warmup < 0) o->rtt_warmup = o->quick ? 200 : 2000;
  if (o->count < 0) o->count = o->quick ? 5000 : 50000;
  if (o->duration < 0) o->duration = o->quick ? 0.2 : 1.0;
  if (o->repeat < 0) o->repeat = o->quick ? 1 : 3;
  if (o->socket) o->gkcd = 1;
  if (!o->gkcd && !o->echo) bench_die("--no-gkcd and --no-echo leave nothing to measure");
  if (o->json && o->csv) bench_die("--json and --csv: give one of them");
}
