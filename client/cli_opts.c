/* cli_opts.c: option handling shared by gkc's commands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_getopt_begin(void) {
  optind = 0; /* glibc: start over, also resetting its permutation state */
  opterr = 0; /* our own messages, which name the command */
}

int cli_usage_error(const cli_globals *g, const char *fmt, ...) {
  va_list ap;
  fputs("gkc: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (g->cmd)
    fprintf(stderr, "\nTry 'gkc %s --help'.\n", g->cmd->name);
  else
    fprintf(stderr, "\nTry 'gkc --help'.\n");
  return CLI_USAGE;
}

int cli_bad_value(const cli_globals *g, const char *opt, const char *val, const char *want) {
  return cli_usage_error(g, "invalid %s '%s': %s", opt, val, want);
}

int cli_opt_float(const cli_globals *g, const char *opt, const char *arg, float *out) {
  if (cli_parse_float(arg, out))
    return cli_bad_value(g, opt, arg, "expected a finite float32 number");
  return 0;
}

int cli_opt_double(const cli_globals *g, const char *opt, const char *arg, double *out) {
  char *end;
  errno = 0;
  double v = strtod(arg, &end);
  if (end == arg || *end || errno == ERANGE || !isfinite(v))
    return cli_bad_value(g, opt, arg, "expected a finite number");
  *out = v;
  return 0;
}

int cli_opt_dtype(const cli_globals *g, const char *arg, int *f64) {
  if (!strcmp(arg, "f32") || !strcmp(arg, "float32")) *f64 = 0;
  else if (!strcmp(arg, "f64") || !strcmp(arg, "float64")) *f64 = 1;
  else return cli_bad_value(g, "--dtype", arg, "expected f32 or f64 (float32, float64)");
  return 0;
}

int cli_opt_seed(const cli_globals *g, const char *arg, uint64_t *seed, int *seeded) {
  if (cli_parse_u64(arg, seed))
    return cli_bad_value(g, "--seed", arg, "expected a non-negative integer");
  *seeded = 1;
  return 0;
}

int cli_opt_devices(const cli_globals *g, const char *arg, uint64_t *mask) {
  if (!strcmp(arg, "all")) {
    *mask = GKC_DEVICES_ALL;
    return 0;
  }
  uint64_t m = 0;
  const char *p = arg;
  for (;;) {
    char *end;
    if (*p < '0' || *p > '9') break;
    unsigned long d = strtoul(p, &end, 10);
    if (d > 63 || (m & (1ull << d))) break;
    m |= 1ull << d;
    if (*end == 0) {
      *mask = m;
      return 0;
    }
    if (*end != ',') break;
    p = end + 1;
  }
  return cli_bad_value(g, "--devices", arg,
                       "expected all, or distinct device numbers 0..63 separated by commas");
}

int cli_opt_device(const cli_globals *g, const char *arg, int *device) {
  uint64_t v;
  if (cli_parse_u64(arg, &v) || v > 4096)
    return cli_bad_value(g, "--device", arg, "expected a device number (0, 1, ...; gkc status"
                         " lists them)");
  *device = (int)v;
  return 0;
}

/* The long name of the option whose value is val, for messages. */
static const char *long_name(const struct option *opts, int val) {
  for (const struct option *p = opts; p->name; p++)
    if (p->val == val && !p->flag) return p->name;
  return NULL;
}

/* An unknown long option, or an abbreviation that fits several. */
static int unknown_long(const cli_globals *g, const struct option *opts, const char *culprit) {
  const char *name = culprit + (strncmp(culprit, "--", 2) == 0 ? 2 : 0);
  size_t len = strcspn(name, "=");
  char fits[256] = "";
  int n = 0;
  for (const struct option *p = opts; p->name; p++) {
    if (strncmp(p->name, name, len) != 0) continue;
    size_t used = strlen(fits);
    snprintf(fits + used, sizeof fits - used, "%s--%s", n++ ? ", " : "", p->name);
  }
  if (n > 1)
    return cli_usage_error(g, "option '--%.*s' is ambiguous: could be %s", (int)len, name, fits);
  return cli_usage_error(g, "unknown option '%s'", culprit);
}

int cli_common_opt(cli_globals *g, const struct option *opts, int o, char **argv) {
  /* After an error getopt has stepped past the offending argument. */
  const char *culprit = optind > 0 ? argv[optind - 1] : "?";
  switch (o) {
    case CLI_O_SOCKET: g->socket = optarg; return -1;
    case CLI_O_JSON: g->json = 1; return -1;
    case CLI_O_NO_SHM: g->no_shm = 1; return -1;
    case 'h': g->cmd->usage(stdout); return CLI_OK;
    case ':':
      if (strncmp(culprit, "--", 2) == 0)
        return cli_usage_error(g, "option '%s' needs an argument", culprit);
      return cli_usage_error(g, "option '-%c' needs an argument", optopt);
    case '?':
      /* optopt: an unknown short option's character; a long option's value
       * when it was given an argument it does not take (--json=1); 0 for an
       * unknown or ambiguous long option. */
      if (optopt >= CLI_O_SOCKET || (optopt && strncmp(culprit, "--", 2) == 0)) {
        const char *name = long_name(opts, optopt);
        return cli_usage_error(g, "option '--%s' takes no argument", name ? name : "?");
      }
      if (optopt) return cli_usage_error(g, "unknown option '-%c'", optopt);
      return unknown_long(g, opts, culprit);
    default:
      return cli_usage_error(g, "option %d not handled (a bug in gkc)", o);
  }
}

int cli_no_operands(const cli_globals *g, int argc, char **argv) {
  if (optind < argc) return cli_usage_error(g, "unexpected argument '%s'", argv[optind]);
  return -1;
}

int cli_parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

int cli_parse_float(const char *s, float *out) {
  double v;
  if (cli_parse_double(s, &v) || fabs(v) > 3.4028234663852886e38) return -1;
  *out = (float)v;
  return 0;
}

int cli_parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  if (*s == '-' || *s == '+' || *s == ' ') return -1; /* strtoull would wrap "-1" */
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end) return -1;
  *out = v;
  return 0;
}

int cli_parse_dims(const char *s, int n, int64_t max, int allow_cube, int64_t *out) {
  const char *p = s;
  int i = 0;
  for (;;) {
    char *end;
    if (*p < '0' || *p > '9') return -1;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno || v < 1 || v > max || i == n) return -1;
    out[i++] = v;
    if (*end == '\0') break;
    if (*end != 'x' && *end != 'X') return -1;
    p = end + 1;
  }
  if (i == 1 && allow_cube) {
    for (; i < n; i++) out[i] = out[0];
  }
  return i == n ? 0 : -1;
}
