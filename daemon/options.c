/* options.c: the option table, and reading it from argv and gkcd.conf. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gkc.h"
#include "log.h"
#include "proto_socket.h"

typedef struct opt_def opt_def;
/* Parses val into the field at cfg + def->offset; 0, or -1 with the reason
 * (what was expected) in why. */
typedef int (*opt_parse)(const opt_def *def, const char *val, void *field, char *why, size_t n);

struct opt_def {
  const char *name; /* flag without "--"; the config key has '_' for '-' */
  opt_parse parse;
  size_t offset;
  double lo, hi;    /* range, for numbers and sizes */
  const char *arg;  /* placeholder in --help */
  const char *help; /* may hold "\n" for continuation lines */
};

/* --- value parsers ------------------------------------------------------- */

static int p_string(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  size_t cap = (size_t)d->hi;
  if (strlen(v) >= cap) {
    snprintf(why, n, "at most %zu characters", cap - 1);
    return -1;
  }
  memcpy(f, v, strlen(v) + 1);
  return 0;
}

static int p_mode(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  char *end;
  errno = 0;
  unsigned long m = strtoul(v, &end, 8);
  if (v[0] != '0' || errno || *end || end == v || m > 0777) {
    snprintf(why, n, "octal permissions such as 0660");
    return -1;
  }
  *(unsigned *)f = (unsigned)m;
  (void)d;
  return 0;
}

static int p_backend(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda")) {
    snprintf(why, n, "auto, cpu or cuda");
    return -1;
  }
  snprintf(f, 8, "%s", v);
  (void)d;
  return 0;
}

static int p_level(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  int l = log_parse_level(v);
  if (l < 0) {
    snprintf(why, n, "error, warn, info or debug");
    return -1;
  }
  *(int *)f = l;
  (void)d;
  return 0;
}

static int p_rings(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  int r = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : !strcmp(v, "auto") ? -1 : -2;
  if (r == -2) {
    snprintf(why, n, "on, off or auto");
    return -1;
  }
  *(int *)f = r;
  (void)d;
  return 0;
}

static int p_int(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < d->lo || x > d->hi) {
    snprintf(why, n, "an integer from %.0f to %.0f", d->lo, d->hi);
    return -1;
  }
  *(int *)f = (int)x;
  return 0;
}

/* A size: digits with an optional K, M or G (powers of 1024). */
static int p_size(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  unsigned long long mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (errno || end == v || *end || v[0] == '-' || x > UINT64_MAX / mul ||
      (double)(x * mul) < d->lo || (double)(x * mul) > d->hi) {
    snprintf(why, n, "a size from %.0f to %.0f bytes, with an optional K, M or G suffix", d->lo,
             d->hi);
    return -1;
  }
  *(size_t *)f = (size_t)(x * mul);
  return 0;
}

static int p_count(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  int x;
  if (p_int(d, v, &x, why, n)) return -1;
  *(size_t *)f = (size_t)x;
  return 0;
}

static int p_seconds(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !(x >= d->lo && x <= d->hi)) {
    snprintf(why, n, "seconds from %.0f to %.0f (0 turns it off)", d->lo, d->hi);
    return -1;
  }
  *(double *)f = x;
  return 0;
}

/* --devices 0,2: distinct GPU ordinals, at most GKCD_MAX_DEVICES. */
static int p_devices(const opt_def *d, const char *v, void *f, char *why, size_t n) {
  gkcd_config *cfg = (gkcd_config *)((char *)f - offsetof(gkcd_config, devices));
  int count = 0;
  const char *p = v;
  while (*p) {
    char *end;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (errno || end == p || x < 0 || x > 1023 || (*end && *end != ',') || count == GKCD_MAX_DEVICES)
      goto bad;
    for (int i = 0; i < count; i++)
      if (cfg->devices[i] == x) goto bad;
    cfg->devices[count++] = (int)x;
    p = *end ? end + 1 : end;
    if (*end && !*p) goto bad;
  }
  if (count == 0) goto bad;
  cfg->ndevices = count;
  (void)d;
  return 0;
bad:
  snprintf(why, n, "a comma-separated list of up to %d distinct GPU numbers, e.g. 0,2", GKCD_MAX_DEVICES);
  return -1;
}

/* --- the table ----------------------------------------------------------- */

#define F(field) offsetof(gkcd_config, field)
#define GiB (1024.0 * 1024 * 1024)

static const opt_def table[] = {
    {"config", p_string, F(config_path), 0, 256, "PATH",
     "config file of key = value lines (default " GKCD_DEFAULT_CONFIG ",\nif it exists)"},
    {"socket", p_string, F(socket_opt), 0, 108, "PATH",
     "socket to listen on (default: $GKC_SOCKET, else\n$XDG_RUNTIME_DIR/gkcd.sock, else " PROTO_SOCKET_DEFAULT
     ");\nignored when systemd passes a socket"},
    {"socket-mode", p_mode, F(socket_mode), 0, 0, "MODE", "octal permissions of the socket (default 0660)"},
    {"backend", p_backend, F(backend), 0, 0, "NAME",
     "auto, cpu or cuda (default auto: cuda when a GPU is usable)"},
    {"threads", p_int, F(threads), 1, 1024, "N", "requests computed at once (default: CPU count; on a GPU at most --streams)"},
    {"max-request-bytes", p_size, F(max_request_bytes), 1024, 4 * GiB - 1, "SIZE",
     "largest request or result accepted (default 1G)"},
    {"max-conn-pinned", p_size, F(max_conn_pinned), 4096, 1024 * GiB, "SIZE",
     "bytes of shared-memory regions one connection may\nregister (pinned for DMA on a GPU; default: an eighth\nof the RAM, between 64M and 8G)"},
    {"restore-max-bytes", p_size, F(restore_max_bytes), 0, 1024 * GiB, "SIZE",
     "shared resident objects saved to systemd's fd store on\nSIGTERM and restored at the next start, in bytes at\nmost (default 1G; 0: release them, as without systemd)"},
    {"max-queue", p_count, F(max_queue), 1, 1 << 20, "N",
     "requests waiting for a thread before clients get 'busy'\n(default 1024)"},
    {"streams", p_int, F(streams), 1, 64, "N", "CUDA streams: requests on the GPU at once (default 4)"},
    {"device-cache-bytes", p_size, F(device_cache_bytes), 0, 1024 * GiB, "SIZE",
     "idle GPU memory kept for reuse (default 2G)"},
    {"log-level", p_level, F(log_level), 0, 0, "LEVEL", "error, warn, info or debug (default info)"},
    {"allow-users", p_string, F(allow_users), 0, 512, "LIST",
     "comma-separated users (names or uids) that may connect,\nbesides root and gkcd's own user"},
    {"allow-groups", p_string, F(allow_groups), 0, 512, "LIST",
     "comma-separated groups that may connect (default: the\nsocket's group)"},
    {"max-connections", p_count, F(max_connections), 1, 1 << 20, "N",
     "open client connections at once (default 4096)"},
    {"max-conn-requests", p_count, F(max_conn_requests), 1, 1 << 20, "N",
     "requests in flight per connection before gkcd stops\nreading from it (default 64)"},
    {"max-conn-reply-bytes", p_size, F(max_conn_reply_bytes), 4096, 64 * GiB, "SIZE",
     "reply bytes queued for a slow reader before gkcd stops\nreading from it (default 256M)"},
    {"memory-budget", p_size, F(memory_budget), 1 << 20, 1024 * GiB, "SIZE",
     "host memory all requests in flight may hold (default:\nhalf the RAM, at most 16G)"},
    {"budget-queue", p_count, F(budget_queue), 0, 1 << 20, "N",
     "requests waiting for memory budget before 'busy' (default 64)"},
    {"idle-timeout", p_seconds, F(idle_timeout_s), 0, 86400 * 7, "SECONDS",
     "close connections idle this long (default 300; 0: never)"},
    {"send-timeout", p_seconds, F(send_timeout_s), 0, 86400, "SECONDS",
     "close a connection whose unread replies make no progress\nthis long, freeing all it holds (default 60; 0: never)"},
    {"request-timeout", p_seconds, F(request_timeout_s), 0, 86400, "SECONDS",
     "close a connection that takes longer than this from a\nrequest's first byte to its last (default 30; 0: never)"},
    {"max-conn-per-user", p_count, F(max_conn_per_user), 0, 1 << 20, "N",
     "connections one user may hold (default: a quarter of\n--max-connections)"},
    {"queue-wait", p_seconds, F(queue_wait_s), 0, 86400, "SECONDS",
     "a request queued this long is answered 'busy'; a full\nqueue pauses reading instead (default 5; 0: never)"},
    {"latency-sms", p_int, F(latency_sms), 0, 1024, "N",
     "SMs of the GPU's latency lane (default 8; 0 turns lanes\noff); the CPU backend gives that lane one thread"},
    {"latency-us", p_seconds, F(latency_us), 1, 1e6, "USEC",
     "requests predicted to take less go to the latency lane\n(default 200)"},
    {"slice-us", p_seconds, F(slice_us), 1, 1e6, "USEC",
     "without green contexts, bulk kernels are cut into pieces\nof about this long (default 100)"},
    {"weights", p_string, F(weights_opt), 0, 512, "LIST",
     "fair-share weights by user, e.g. alice:2,bob:1 (default 1)"},
    {"spin-us", p_int, F(spin_us), 0, 100000, "USEC",
     "after a request, the worker and the event loop poll this\nlong for more work before they sleep, so back-to-back\nrequests skip thread wake-ups; the loop also polls until\nthis long past the predicted end of a running request\nthat is predicted to take at most 10 times it (default\n100 with 4 or more CPUs, else 0)"},
    {"rings", p_rings, F(rings), 0, 0, "on|off|auto",
     "offer clients shared-memory rings (ring_register): their\nframes skip the socket; auto: when --spin-us is above 0,\nthe loop then polls the rings instead of waiting for a\ndoorbell (default auto)"},
    {"devices", p_devices, F(devices), 0, 0, "LIST",
     "GPUs to serve from, by number as CUDA_VISIBLE_DEVICES leaves\nthem, e.g. 0,2 (default: every visible GPU)"},
    {"cpu-devices", p_int, F(cpu_devices), 1, GKCD_MAX_DEVICES, "N",
     "the CPU backend presents N virtual devices, each with its\nown threads and memory (default 1)"},
    {"cpu-device-memory", p_size, F(cpu_device_memory), 0, 1024 * GiB, "SIZE",
     "memory of each CPU virtual device (--cpu-devices above 1);\n0 is the host's memory over N (default 0)"},
    {"split-device", p_int, F(split_device), 1, 16, "N",
     "cut each GPU into N devices by SM partition (green\ncontexts), to exercise multi-device paths on one GPU\n(default 1)"},
    {"metrics-listen", p_string, F(metrics_listen), 0, 128, "ADDR:PORT",
     "serve Prometheus metrics at GET /metrics over HTTP there;\n':PORT' is 127.0.0.1 (default: off)"},
};
#define NOPT (int)(sizeof table / sizeof table[0])

static void defaults(gkcd_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  double half_ram = pages > 0 && psize > 0 ? (double)pages * (double)psize / 2 : 4 * GiB;
  cfg->socket_mode = 0660;
  snprintf(cfg->backend, sizeof cfg->backend, "auto");
  cfg->threads = ncpu > 0 ? (int)ncpu : 1;
  cfg->max_request_bytes = (size_t)1 << 30;
  cfg->restore_max_bytes = (size_t)1 << 30;
  double eighth = half_ram / 4;
  cfg->max_conn_pinned = eighth < 64.0 * (1 << 20) ? (size_t)64 << 20
                         : eighth > 8 * GiB      ? (size_t)8 << 30
                                                 : (size_t)eighth;
  cfg->max_queue = 1024;
  cfg->streams = 4;
  cfg->device_cache_bytes = (size_t)2 << 30;
  cfg->log_level = LOG_LVL_INFO;
  cfg->max_connections = 4096;
  cfg->max_conn_requests = 64;
  cfg->max_conn_reply_bytes = (size_t)256 << 20;
  cfg->memory_budget = (size_t)(half_ram < 16 * GiB ? half_ram : 16 * GiB);
  cfg->budget_queue = 64;
  cfg->idle_timeout_s = 300;
  cfg->send_timeout_s = 60;
  cfg->request_timeout_s = 30;
  cfg->queue_wait_s = 5;
  cfg->latency_sms = 8;
  cfg->latency_us = 200;
  cfg->slice_us = 100;
  cfg->cpu_devices = 1;
  cfg->split_device = 1;
  /* Polling pays where a CPU is free for it: with fewer than 4 the poller
   * takes the CPU from the event loop and the clients (on 2 CPUs it made a
   * local client's round trip 20 us slower while saving 5 us of wake-up). */
  cfg->spin_us = ncpu >= 4 ? 100 : 0;
  /* A ring beats the socket when the loop polls it (2-core machine,
   * 2026-11-29: 18 against 26 us with --spin-us 50); asleep, each request
   * still rings a doorbell both ways, and it was no faster. */
  cfg->rings = -1;
}

static void usage(void) {
  printf("Usage: gkcd [OPTIONS]\n"
         "GPU compute daemon: serves sgemm, reduce and spmv over a Unix socket\n"
         "(msgpack-rpc, see PROTOCOL.md), on a CUDA GPU or on the CPU.\n\n"
         "Options (each also a key in the config file, with '_' for '-'):\n");
  for (int i = 0; i < NOPT; i++) {
    char head[64];
    snprintf(head, sizeof head, "--%s %s", table[i].name, table[i].arg);
    printf("  %-25s", head);
    for (const char *p = table[i].help; *p;) {
      size_t len = strcspn(p, "\n");
      printf("%s%.*s\n", p == table[i].help ? " " : "                            ", (int)len, p);
      p += len + (p[len] == '\n');
    }
  }
  printf("  %-25s show this help and exit\n  %-25s show the version and exit\n",
         "-h, --help", "-V, --version");
}

static int apply(gkcd_config *cfg, const opt_def *d, const char *val, const char *where) {
  char why[160];
  if (d->parse(d, val, (char *)cfg + d->offset, why, sizeof why) == 0) return 0;
  fprintf(stderr, "gkcd: %s: invalid value '%s' for %s: expected %s\n", where, val, d->name, why);
  return -1;
}

/* One pass over argv.  only_config: look at --config/--help/--version only. */
static int parse_argv(gkcd_config *cfg, int argc, char **argv, int only_config) {
  struct option longopts[NOPT + 3];
  for (int i = 0; i < NOPT; i++)
    longopts[i] = (struct option){table[i].name, required_argument, NULL, 256 + i};
  longopts[NOPT] = (struct option){"help", no_argument, NULL, 'h'};
  longopts[NOPT + 1] = (struct option){"version", no_argument, NULL, 'V'};
  longopts[NOPT + 2] = (struct option){0, 0, 0, 0};
  optind = 1;
  opterr = !only_config; /* complain once, on the second pass */
  int o;
  while ((o = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
    if (o == 'h') {
      usage();
      return 0;
    }
    if (o == 'V') {
      printf("gkcd %s (protocol %d)\n", GKC_VERSION, GKC_PROTOCOL);
      return 0;
    }
    if (o < 256) {
      if (only_config) continue;
      fprintf(stderr, "Try 'gkcd --help'.\n");
      return 2;
    }
    const opt_def *d = &table[o - 256];
    if (only_config != (d->offset == F(config_path))) continue;
    char where[64];
    snprintf(where, sizeof where, "option --%s", d->name);
    if (apply(cfg, d, optarg, where)) return 2;
  }
  if (!only_config && optind < argc) {
    fprintf(stderr, "gkcd: unexpected argument '%s'\nTry 'gkcd --help'.\n", argv[optind]);
    return 2;
  }
  return -1;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

/* Reads key = value lines; '#' starts a comment. */
static int load_file(gkcd_config *cfg, const char *path, int must_exist) {
  FILE *f = fopen(path, "r");
  if (!f) {
    if (!must_exist && errno == ENOENT) return 0;
    fprintf(stderr, "gkcd: cannot read config file %s: %s\n", path, strerror(errno));
    return -1;
  }
  char line[1024];
  int lineno = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    lineno++;
    char where[300];
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    if (!strchr(line, '\n') && !feof(f)) {
      fprintf(stderr, "gkcd: %s: line longer than %zu characters\n", where, sizeof line - 2);
      rc = -1;
      break;
    }
    line[strcspn(line, "#")] = 0;
    char *s = trim(line);
    if (!*s) continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      fprintf(stderr, "gkcd: %s: expected 'key = value', got '%s'\n", where, s);
      rc = -1;
      break;
    }
    *eq = 0;
    char *key = trim(s), *val = trim(eq + 1);
    const opt_def *d = NULL;
    for (int i = 0; i < NOPT && !d; i++) {
      const char *a = table[i].name, *b = key;
      while (*a && (*a == *b || (*a == '-' && *b == '_'))) a++, b++;
      if (!*a && !*b) d = &table[i];
    }
    if (!d || d->offset == F(config_path)) {
      fprintf(stderr, "gkcd: %s: unknown key '%s'\n", where, key);
      rc = -1;
    } else {
      rc = apply(cfg, d, val, where);
    }
  }
  fclose(f);
  return rc;
}

int options_load(gkcd_config *cfg, int argc, char **argv) {
  defaults(cfg);
  int rc = parse_argv(cfg, argc, argv, 1);
  if (rc >= 0) return rc;
  int explicit_file = cfg->config_path[0] != 0;
  const char *path = explicit_file ? cfg->config_path : GKCD_DEFAULT_CONFIG;
  if (load_file(cfg, path, explicit_file) != 0) return 2;
  if (!explicit_file && access(path, R_OK) == 0) snprintf(cfg->config_path, sizeof cfg->config_path, "%s", path);
  if ((rc = parse_argv(cfg, argc, argv, 0)) >= 0) return rc;
  if (proto_socket_path(cfg->socket_path, sizeof cfg->socket_path,
                        cfg->socket_opt[0] ? cfg->socket_opt : NULL) != 0) {
    fprintf(stderr, "gkcd: socket path is longer than a Unix socket allows (107 bytes)\n");
    return 2;
  }
  return -1;
}

/* Splits a comma-separated list; each item is a name or a number. */
static int resolve_list(const char *list, int users, void *ids, int *n, const char *opt) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", list);
  *n = 0;
  for (char *save, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    if (*n == GKCD_MAX_ALLOWED) {
      fprintf(stderr, "gkcd: %s: at most %d entries\n", opt, GKCD_MAX_ALLOWED);
      return -1;
    }
    char *end;
    unsigned long id = strtoul(tok, &end, 10);
    if (*end) {
      if (users) {
        struct passwd *pw = getpwnam(tok);
        if (!pw) goto unknown;
        id = pw->pw_uid;
      } else {
        struct group *gr = getgrnam(tok);
        if (!gr) goto unknown;
        id = gr->gr_gid;
      }
    }
    if (users)
      ((uid_t *)ids)[(*n)++] = (uid_t)id;
    else
      ((gid_t *)ids)[(*n)++] = (gid_t)id;
    continue;
  unknown:
    fprintf(stderr, "gkcd: %s: no such %s '%s'\n", opt, users ? "user" : "group", tok);
    return -1;
  }
  return 0;
}

/* --weights alice:2,1001:0.5 */
static int resolve_weights(gkcd_config *cfg) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", cfg->weights_opt);
  cfg->n_weights = 0;
  for (char *save, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    char *colon = strrchr(tok, ':'), *end;
    if (!colon) {
      fprintf(stderr, "gkcd: weights: '%s' is not USER:WEIGHT\n", tok);
      return -1;
    }
    *colon = 0;
    errno = 0;
    double w = strtod(colon + 1, &end);
    if (errno || *end || end == colon + 1 || !(w >= 0.01 && w <= 100)) {
      fprintf(stderr, "gkcd: weights: '%s' for %s is not a number from 0.01 to 100\n", colon + 1, tok);
      return -1;
    }
    uid_t ids[1];
    int n;
    if (resolve_list(tok, 1, ids, &n, "weights") || n != 1) return -1;
    if (cfg->n_weights == GKCD_MAX_ALLOWED) {
      fprintf(stderr, "gkcd: weights: at most %d entries\n", GKCD_MAX_ALLOWED);
      return -1;
    }
    cfg->weight_uids[cfg->n_weights] = ids[0];
    cfg->weights[cfg->n_weights++] = w;
  }
  return 0;
}

int options_resolve_access(gkcd_config *cfg) {
  if (resolve_list(cfg->allow_users, 1, cfg->allow_uids, &cfg->n_allow_uids, "allow-users") ||
      resolve_list(cfg->allow_groups, 0, cfg->allow_gids, &cfg->n_allow_gids, "allow-groups") ||
      resolve_weights(cfg))
    return -1;
  if (cfg->max_conn_per_user == 0) {
    cfg->max_conn_per_user = cfg->max_connections / 4;
    if (cfg->max_conn_per_user == 0) cfg->max_conn_per_user = 1;
  }
  return 0;
}
