/* cli_info.c: the ping and status commands. */
#include <inttypes.h>
#include <stdlib.h>

#include "cli.h"

/* Parses a command that takes only the common options. */
static int parse_plain(cli_globals *g, int argc, char **argv) {
  static const struct option opts[] = {CLI_COMMON_OPTIONS, {0, 0, 0, 0}};
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
    if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
  return cli_no_operands(g, argc, argv);
}

/* --- ping ------------------------------------------------------------------ */

static void ping_usage(FILE *f) {
  fprintf(f, "Usage: gkc ping [OPTIONS]\n"
             "Asks gkcd for its version, protocol and backend, and times the round trip.\n"
             CLI_COMMON_HELP);
}

static int ping_run(cli_globals *g, int argc, char **argv) {
  int rc = parse_plain(g, argc, argv);
  if (rc >= 0) return rc;
  gkc_conn *c;
  if ((rc = cli_connect(g, &c)) != CLI_OK) return rc;
  gkc_ping_info info;
  double t0 = cli_now_us();
  int err = gkc_ping(c, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(c, err);
    gkc_close(c);
    return rc;
  }
  gkc_close(c);
  char path[128];
  gkc_socket_path(path, sizeof path, g->socket); /* cli_connect checked it fits */
  cli_out o;
  cli_out_begin(&o, g->json);
  cli_out_str(&o, "socket", "socket", path);
  cli_out_str(&o, "version", "version", info.version);
  cli_out_int(&o, "protocol", "protocol", info.protocol);
  cli_out_str(&o, "backend", "backend", info.backend);
  cli_out_us(&o, "round_trip_us", "round trip", rtt);
  cli_out_end(&o);
  if (info.protocol != GKC_PROTOCOL)
    fprintf(stderr, "gkc: warning: gkcd speaks protocol %d, this gkc protocol %d\n", info.protocol,
            GKC_PROTOCOL);
  return CLI_OK;
}

const cli_cmd cli_ping_cmd = {"ping", "check that gkcd answers; show its version and backend",
                              ping_usage, ping_run};

/* --- status ---------------------------------------------------------------- */

static void status_usage(FILE *f) {
  fprintf(f, "Usage: gkc status [OPTIONS]\n"
             "Shows gkcd's backend, uptime, load, devices and per-method counters.\n"
             "With --json, prints every field gkcd reports, as gkcd sent it.\n"
             CLI_COMMON_HELP);
}

static const char *fmt_uptime(double s, char *buf, size_t len) {
  if (s < 60) {
    snprintf(buf, len, "%.1f s", s);
    return buf;
  }
  uint64_t t = (uint64_t)s;
  uint64_t d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
  if (d)
    snprintf(buf, len, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", d, h, m);
  else if (h)
    snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", h, m, sec);
  else
    snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", m, sec);
  return buf;
}

static void print_status(const gkc_status_info *s) {
  char b1[32], b2[32];
  printf("%-15s %s\n", "backend:", s->backend);
  printf("%-15s %s\n", "uptime:", fmt_uptime(s->uptime_s, b1, sizeof b1));
  printf("%-15s %" PRIu64 "\n", "in flight:", s->in_flight);
  printf("%-15s %" PRIu64 "\n", "connections:", s->connections);
  for (int i = 0; i < s->n_devices; i++) {
    char label[32];
    snprintf(label, sizeof label, "device %d:", i);
    printf("%-15s %s, memory %s free of %s, %" PRIu64 " served, %" PRIu64 " queued, %" PRIu64
           " running%s%s%s\n", label, s->devices[i].name,
           cli_fmt_bytes(s->devices[i].memory_free, b1, sizeof b1),
           cli_fmt_bytes(s->devices[i].memory_total, b2, sizeof b2), s->devices[i].served,
           s->devices[i].queued, s->devices[i].running, s->devices[i].lost ? ", LOST (" : "",
           s->devices[i].lost ? s->devices[i].lost_reason : "", s->devices[i].lost ? ")" : "");
  }
  printf("%-15s %12s %12s\n", "method", "requests", "errors");
  for (int i = 0; i < s->n_methods; i++)
    printf("  %-13s %12" PRIu64 " %12" PRIu64 "\n", s->methods[i].name, s->methods[i].requests,
           s->methods[i].errors);
}

static int status_run(cli_globals *g, int argc, char **argv) {
  int rc = parse_plain(g, argc, argv);
  if (rc >= 0) return rc;
  gkc_conn *c;
  if ((rc = cli_connect(g, &c)) != CLI_OK) return rc;
  int err;
  if (g->json) {
    char *json = NULL;
    if ((err = gkc_status_json(c, &json)) == 0) printf("%s\n", json);
    free(json);
  } else {
    gkc_status_info *s = calloc(1, sizeof *s); /* ~3 KiB; keep it off the stack anyway */
    if (!s) {
      gkc_close(c);
      fprintf(stderr, "gkc: out of memory\n");
      return CLI_FAIL;
    }
    if ((err = gkc_status(c, s)) == 0) print_status(s);
    free(s);
  }
  rc = err ? cli_call_failed(c, err) : CLI_OK;
  gkc_close(c);
  return rc;
}

const cli_cmd cli_status_cmd = {"status", "show gkcd's backend, devices, load and counters",
                                status_usage, status_run};
