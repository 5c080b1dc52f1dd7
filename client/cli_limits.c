/* cli_limits.c: a call's sizes against gkcd's limits and this machine's
 * memory, before anything big is allocated or read. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* MemAvailable of /proc/meminfo in bytes, or 0 when unknown. */
static uint64_t mem_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  fclose(f);
  return kib > UINT64_MAX / 1024 ? 0 : (uint64_t)kib * 1024;
}

void cli_limits_get(const cli_globals *g, cli_limits *l) {
  memset(l, 0, sizeof *l);
  l->mem_available = mem_available();
  char path[128];
  gkc_conn *c = NULL;
  if (gkc_socket_path(path, sizeof path, g->socket) != 0 || gkc_connect(&c, path) != 0) {
    gkc_close(c); /* cli_connect says why, later */
    return;
  }
  if (g->no_shm) gkc_set_shm(c, GKC_SHM_OFF, 0); /* the command's calls reuse c */
  /* An older gkcd without a limit leaves it 0: not checked here. */
  if (gkc_status_limit(c, "max_request_bytes", &l->max_request_bytes)) l->max_request_bytes = 0;
  if (gkc_status_limit(c, "memory_budget", &l->memory_budget)) l->memory_budget = 0;
  l->conn = c;
}

int cli_limits_connect(const cli_globals *g, cli_limits *l, gkc_conn **out) {
  if (l->conn) {
    *out = l->conn;
    l->conn = NULL;
    return CLI_OK;
  }
  return cli_connect(g, out);
}

void cli_limits_close(cli_limits *l) {
  gkc_close(l->conn);
  l->conn = NULL;
}

/* "40000000000 bytes (37.3 GiB)" */
static const char *fmt_bytes(uint64_t n, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)n;
  int u = -1;
  while (v >= 1024 && u < 5) v /= 1024, u++;
  if (u < 0)
    snprintf(buf, len, "%" PRIu64 " bytes", n);
  else
    snprintf(buf, len, "%" PRIu64 " bytes (%.1f %s)", n, v, units[u]);
  return buf;
}

uint64_t cli_add_sat(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

uint64_t cli_mul_sat(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

int cli_plan_check(const cli_limits *l, const cli_plan *p) {
  char x[64], y[64];
  uint64_t max = l->max_request_bytes;
  if (max && p->request > max) {
    fprintf(stderr, "gkc: %s: the request would carry %s of %s, over gkcd's limit of %s "
            "(gkcd --max-request-bytes)\n", p->what, fmt_bytes(p->request, x, sizeof x),
            p->request_what, fmt_bytes(max, y, sizeof y));
    return CLI_FAIL;
  }
  if (max && p->result > max) {
    fprintf(stderr, "gkc: %s: the result %s would be %s, over gkcd's limit of %s "
            "(gkcd --max-request-bytes)\n", p->what, p->result_what,
            fmt_bytes(p->result, x, sizeof x), fmt_bytes(max, y, sizeof y));
    return CLI_FAIL;
  }
  uint64_t in_gkcd = cli_add_sat(p->request, p->result);
  if (l->memory_budget && in_gkcd > l->memory_budget) {
    fprintf(stderr, "gkc: %s: the request and its result would take %s in gkcd, over its "
            "memory budget of %s (gkcd --memory-budget)\n", p->what,
            fmt_bytes(in_gkcd, x, sizeof x), fmt_bytes(l->memory_budget, y, sizeof y));
    return CLI_FAIL;
  }
  if (l->mem_available && p->local > l->mem_available) {
    fprintf(stderr, "gkc: %s: needs about %s of memory here, but only %s is available "
            "(MemAvailable in /proc/meminfo)\n", p->what, fmt_bytes(p->local, x, sizeof x),
            fmt_bytes(l->mem_available, y, sizeof y));
    return CLI_FAIL;
  }
  return CLI_OK;
}

typedef struct {
  const cli_limits *l;
  const char *opt, *path;
  uint64_t request, local; /* of what is already loaded */
  const npy_array *out;    /* its f64, set by the reader before the check */
} npy_ctx;

static int check_npy(void *arg, int ndim, const int64_t *shape, int64_t count) {
  const npy_ctx *c = arg;
  char what[600], sh[96];
  snprintf(what, sizeof what, "%s %s of shape %s", c->opt, c->path,
           cli_shape_str(ndim, shape, sh, sizeof sh));
  int f64 = c->out->f64;
  uint64_t bytes = (uint64_t)count * (f64 ? 8 : 4); /* npy.c bounds count * 8 to int64 */
  cli_plan p = {what, cli_add_sat(c->request, bytes), f64 ? "float64 arrays" : "float32 arrays", 0, NULL,
                cli_add_sat(c->local, bytes)};
  return cli_plan_check(c->l, &p);
}

typedef int (*npy_reader)(const char *path, npy_array *out, npy_check_fn check, void *ctx,
                          char *err, size_t errlen);

/* read (float32 only, or any dtype) under the limits. */
static int load(npy_reader read, const cli_globals *g, const cli_limits *l, const char *opt,
                const char *path, uint64_t request, uint64_t local, npy_array *out) {
  char err[512];
  npy_ctx c = {l, opt, path, request, local, out};
  int rc = read(path, out, check_npy, &c, err, sizeof err);
  if (rc == 0) return CLI_OK;
  if (rc > 0) return rc; /* check_npy said which limit */
  return cli_usage_error(g, "%s: %s", opt, err);
}

int cli_load_npy_limited(const cli_globals *g, const cli_limits *l, const char *opt,
                         const char *path, uint64_t request, uint64_t local, npy_array *out) {
  return load(npy_read_checked, g, l, opt, path, request, local, out);
}

int cli_load_npy_any(const cli_globals *g, const cli_limits *l, const char *opt,
                     const char *path, uint64_t request, uint64_t local, npy_array *out) {
  return load(npy_read_any, g, l, opt, path, request, local, out);
}
