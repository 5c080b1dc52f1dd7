/* cli_top.c: gkc top, a live view of gkcd from its status reply.
 *
 * Every interval it asks for status on one kept connection and shows what
 * changed: requests per second (the per-method counters' delta), queue
 * depth, the lanes' queue-wait percentiles, each client's share of the work,
 * device memory.  Plain ANSI (home + clear) when stdout is a terminal; one
 * frame after another otherwise; --json prints one JSON object per line.
 *
 * The status map is read through the library's request core (gkc_internal.h)
 * with a take function of its own, because gkc_status_info carries only the
 * fields every client needs.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gkc_internal.h"
#include "gkc_reply.h"
#include "proto_rpc.h"

#define TOP_LANES 4
#define TOP_CLIENTS 16
#define TOP_DEVICES 8

typedef struct {
  char version[32], backend[16];
  double uptime_s;
  uint64_t requests, served, in_flight, queued, connections, budget_used, budget_limit;
  int nlanes, nclients, ndevices;
  struct {
    char name[16];
    uint64_t workers, queued, running, served;
    double p50_us, p99_us;
  } lanes[TOP_LANES];
  struct {
    uint64_t id, pid, uid, queued, running, served;
    double share;
  } clients[TOP_CLIENTS];
  struct {
    char name[64];
    uint64_t total, free;
  } devices[TOP_DEVICES];
} top_sample;

static uint64_t num(const msgpack_object *m, const char *key) {
  double v = gkc__get_num(m, key, 0);
  return v > 0 ? (uint64_t)v : 0;
}

static const msgpack_object *array(const msgpack_object *m, const char *key) {
  const msgpack_object *o = proto_map_get(m, key);
  return o && o->type == MSGPACK_OBJECT_ARRAY ? o : NULL;
}

/* The take function: reads the status map into the top_sample in req->out. */
static int take_sample(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)res;
  if (r->type != MSGPACK_OBJECT_MAP) return gkc__fail(c, GKC_EPROTOCOL, "status result is not a map");
  top_sample *s = (top_sample *)req->out;
  memset(s, 0, sizeof *s);
  gkc__get_str(r, "version", s->version, sizeof s->version);
  gkc__get_str(r, "backend", s->backend, sizeof s->backend);
  s->uptime_s = gkc__get_num(r, "uptime_s", 0);
  s->served = num(r, "served");
  s->in_flight = num(r, "in_flight");
  s->queued = num(r, "queued");
  s->connections = num(r, "connections");
  s->budget_used = num(r, "budget_used");
  const msgpack_object *lim = proto_map_get(r, "limits");
  if (lim && lim->type == MSGPACK_OBJECT_MAP) s->budget_limit = num(lim, "memory_budget");
  const msgpack_object *m = proto_map_get(r, "methods"), *a;
  if (m && m->type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < m->via.map.size; i++) s->requests += num(&m->via.map.ptr[i].val, "requests");
  if ((a = array(r, "lanes")))
    for (uint32_t i = 0; i < a->via.array.size && s->nlanes < TOP_LANES; i++) {
      const msgpack_object *e = &a->via.array.ptr[i];
      __typeof__(s->lanes[0]) *l = &s->lanes[s->nlanes++];
      gkc__get_str(e, "name", l->name, sizeof l->name);
      l->workers = num(e, "workers"), l->queued = num(e, "queued");
      l->running = num(e, "running"), l->served = num(e, "served");
      l->p50_us = gkc__get_num(e, "wait_p50_us", NAN), l->p99_us = gkc__get_num(e, "wait_p99_us", NAN);
    }
  if ((a = array(r, "clients")))
    for (uint32_t i = 0; i < a->via.array.size && s->nclients < TOP_CLIENTS; i++) {
      const msgpack_object *e = &a->via.array.ptr[i];
      __typeof__(s->clients[0]) *cl = &s->clients[s->nclients++];
      cl->id = num(e, "id"), cl->pid = num(e, "pid"), cl->uid = num(e, "uid");
      cl->queued = num(e, "queued"), cl->running = num(e, "running"), cl->served = num(e, "served");
      cl->share = gkc__get_num(e, "share", 0);
    }
  if ((a = array(r, "devices")))
    for (uint32_t i = 0; i < a->via.array.size && s->ndevices < TOP_DEVICES; i++) {
      const msgpack_object *e = &a->via.array.ptr[i];
      __typeof__(s->devices[0]) *d = &s->devices[s->ndevices++];
      gkc__get_str(e, "name", d->name, sizeof d->name);
      d->total = num(e, "memory_total"), d->free = num(e, "memory_free");
    }
  return 0;
}

static int sample(gkc_conn *c, top_sample *s) {
  gkc__req r;
  gkc_result res;
  gkc__req_init(&r);
  gkc__result_init(&res);
  gkc__prep_status(c, &r);
  r.take = take_sample;
  r.out = (gkc_out *)(void *)s; /* read back by take_sample only */
  int rc = gkc__run(c, &r, &res);
  free((char *)res.status_json);
  return rc;
}

static const char *us_or_dash(double us, char *buf, size_t len) {
  if (!isfinite(us)) return "-";
  return cli_fmt_us(us, buf, len);
}

static void print_text(const top_sample *s, double req_s, double served_s, int tty) {
  char b1[32], b2[32];
  if (tty) fputs("\033[H\033[2J", stdout);
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  printf("gkc top - %02d:%02d:%02d  gkcd %s (%s), up %.0f s, %" PRIu64 " connections\n", tm.tm_hour,
         tm.tm_min, tm.tm_sec, s->version, s->backend, s->uptime_s, s->connections);
  printf("requests/s %8.1f   served/s %8.1f   in flight %4" PRIu64 "   queued %4" PRIu64
         "   memory %s of %s\n\n",
         req_s, served_s, s->in_flight, s->queued, cli_fmt_bytes(s->budget_used, b1, sizeof b1),
         cli_fmt_bytes(s->budget_limit, b2, sizeof b2));
  printf("%-8s %7s %7s %7s %10s %11s %11s\n", "LANE", "WORKERS", "QUEUED", "RUNNING", "SERVED",
         "WAIT P50", "WAIT P99");
  for (int i = 0; i < s->nlanes; i++)
    printf("%-8s %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %10" PRIu64 " %11s %11s\n", s->lanes[i].name,
           s->lanes[i].workers, s->lanes[i].queued, s->lanes[i].running, s->lanes[i].served,
           us_or_dash(s->lanes[i].p50_us, b1, sizeof b1), us_or_dash(s->lanes[i].p99_us, b2, sizeof b2));
  printf("\n%-3s %-32s %12s %12s %6s\n", "DEV", "NAME", "MEM USED", "MEM TOTAL", "USED");
  for (int i = 0; i < s->ndevices; i++) {
    uint64_t t = s->devices[i].total, used = t > s->devices[i].free ? t - s->devices[i].free : 0;
    printf("%-3d %-32.32s %12s %12s %5.1f%%\n", i, s->devices[i].name, cli_fmt_bytes(used, b1, sizeof b1),
           cli_fmt_bytes(t, b2, sizeof b2), t ? 100.0 * (double)used / (double)t : 0.0);
  }
  printf("\n%-8s %8s %8s %7s %7s %10s %7s\n", "CLIENT", "PID", "UID", "QUEUED", "RUNNING", "SERVED",
         "SHARE");
  for (int i = 0; i < s->nclients; i++)
    printf("%-8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %7" PRIu64 " %7" PRIu64 " %10" PRIu64 " %6.1f%%\n",
           s->clients[i].id, s->clients[i].pid, s->clients[i].uid, s->clients[i].queued,
           s->clients[i].running, s->clients[i].served, 100 * s->clients[i].share);
  if (!tty) putchar('\n');
}

static void json_num(const char *key, double v, int comma) {
  if (isfinite(v)) printf("\"%s\": %.6g%s", key, v, comma ? ", " : "");
  else printf("\"%s\": null%s", key, comma ? ", " : "");
}

static void print_json(const top_sample *s, double req_s, double served_s) {
  printf("{\"time\": %.3f, \"uptime_s\": %.3f, ", (double)time(NULL), s->uptime_s);
  json_num("requests_per_s", req_s, 1);
  json_num("served_per_s", served_s, 1);
  printf("\"requests\": %" PRIu64 ", \"served\": %" PRIu64 ", \"in_flight\": %" PRIu64
         ", \"queued\": %" PRIu64 ", \"connections\": %" PRIu64 ", \"budget_used\": %" PRIu64
         ", \"memory_budget\": %" PRIu64 ", \"lanes\": [",
         s->requests, s->served, s->in_flight, s->queued, s->connections, s->budget_used,
         s->budget_limit);
  for (int i = 0; i < s->nlanes; i++) {
    printf("%s{\"name\": ", i ? ", " : "");
    cli_json_str(stdout, s->lanes[i].name);
    printf(", \"workers\": %" PRIu64 ", \"queued\": %" PRIu64 ", \"running\": %" PRIu64
           ", \"served\": %" PRIu64 ", ",
           s->lanes[i].workers, s->lanes[i].queued, s->lanes[i].running, s->lanes[i].served);
    json_num("wait_p50_us", s->lanes[i].p50_us, 1);
    json_num("wait_p99_us", s->lanes[i].p99_us, 0);
    putchar('}');
  }
  fputs("], \"devices\": [", stdout);
  for (int i = 0; i < s->ndevices; i++) {
    printf("%s{\"name\": ", i ? ", " : "");
    cli_json_str(stdout, s->devices[i].name);
    printf(", \"memory_total\": %" PRIu64 ", \"memory_free\": %" PRIu64 "}", s->devices[i].total,
           s->devices[i].free);
  }
  fputs("], \"clients\": [", stdout);
  for (int i = 0; i < s->nclients; i++)
    printf("%s{\"id\": %" PRIu64 ", \"pid\": %" PRIu64 ", \"uid\": %" PRIu64 ", \"queued\": %" PRIu64
           ", \"running\": %" PRIu64 ", \"served\": %" PRIu64 ", \"share\": %.6g}",
           i ? ", " : "", s->clients[i].id, s->clients[i].pid, s->clients[i].uid,
           s->clients[i].queued, s->clients[i].running, s->clients[i].served, s->clients[i].share);
  fputs("]}\n", stdout);
}

static void top_usage(FILE *f) {
  fprintf(f, "Usage: gkc top [OPTIONS]\n"
             "A live view of gkcd, refreshed every interval: requests per second, queue\n"
             "depth, the lanes' queue-wait percentiles (p50, p99), each client's share of\n"
             "the work, device memory.  Ctrl-C ends it.\n\n"
             "Options:\n"
             "  --interval SECONDS  time between refreshes (default 1; 0.1 to 3600)\n"
             "  --iterations N      stop after N refreshes (default: run until stopped)\n"
             "  --json              print one JSON object per refresh, one per line\n"
             "                      (requests_per_s is null on the first)\n"
             CLI_COMMON_HELP);
}

enum { O_INTERVAL = CLI_O_FIRST, O_ITERATIONS };

static int top_run(cli_globals *g, int argc, char **argv) {
  static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                       {"interval", required_argument, 0, O_INTERVAL},
                                       {"iterations", required_argument, 0, O_ITERATIONS},
                                       {0, 0, 0, 0}};
  double interval = 1.0;
  uint64_t iterations = 0;
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (o == O_INTERVAL) {
      if (cli_parse_double(optarg, &interval) || interval < 0.1 || interval > 3600)
        return cli_bad_value(g, "--interval", optarg, "seconds from 0.1 to 3600");
    } else if (o == O_ITERATIONS) {
      if (cli_parse_u64(optarg, &iterations) || iterations < 1)
        return cli_bad_value(g, "--iterations", optarg, "a count of 1 or more");
    } else if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) {
      return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  gkc_conn *c;
  if ((rc = cli_connect(g, &c)) != CLI_OK) return rc;
  top_sample *s = calloc(2, sizeof *s);
  if (!s) {
    gkc_close(c);
    fprintf(stderr, "gkc: out of memory\n");
    return CLI_FAIL;
  }
  int tty = !g->json && isatty(STDOUT_FILENO);
  double prev_t = 0;
  rc = CLI_OK;
  for (uint64_t n = 0; !iterations || n < iterations; n++) {
    top_sample *cur = &s[n % 2], *prev = &s[(n + 1) % 2];
    double t = cli_now_us();
    int err = sample(c, cur);
    if (err) {
      rc = cli_call_failed(c, err);
      break;
    }
    double dt = (t - prev_t) / 1e6, req_s = NAN, served_s = NAN;
    if (n > 0 && dt > 0) {
      /* top's own status call is one of the requests counted */
      uint64_t d = cur->requests > prev->requests ? cur->requests - prev->requests : 0;
      req_s = (double)(d ? d - 1 : 0) / dt;
      served_s = (double)(cur->served - prev->served) / dt;
    }
    prev_t = t;
    if (g->json) print_json(cur, req_s, served_s);
    else print_text(cur, isfinite(req_s) ? req_s : 0, isfinite(served_s) ? served_s : 0, tty);
    fflush(stdout);
    if (iterations && n + 1 == iterations) break;
    double left = interval * 1e6 - (cli_now_us() - t);
    if (left > 0) {
      struct timespec ts = {(time_t)(left / 1e6), (long)(fmod(left, 1e6) * 1e3)};
      nanosleep(&ts, NULL);
    }
  }
  free(s);
  gkc_close(c);
  return rc;
}

const cli_cmd cli_top_cmd = {"top", "a live view of gkcd's load, lanes, clients and memory",
                             top_usage, top_run};
