/* cli_vec.c: gkc dot and gkc axpby, the two vector operations of gkcd's
 * BLAS-1 methods, on two float32 arrays of one length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
  int axpby;              /* which command */
  const char *x_path, *y_path, *out_path;
  int64_t random_n;       /* 0: read --x and --y */
  float alpha, beta;      /* axpby */
  int check, seeded;
  int device;             /* --device, or GKC_DEVICE_AUTO */
  uint64_t seed;
  npy_array x, y;         /* owned; from the files or random (then 1-D) */
} vec_job;

static void usage_dot(FILE *f) {
  fprintf(f,
          "Usage: gkc dot --x X.npy --y Y.npy [OPTIONS]\n"
          "   or: gkc dot --random N [OPTIONS]\n"
          "The dot product x . y of two float32 arrays of the same length, summed in\n"
          "double precision on gkcd.\n\n"
          "Options:\n"
          "  --x X.npy, --y Y.npy  the arrays, of any shapes (read flattened)\n"
          "  --random N       N random values each (uniform in [-1, 1]) instead\n"
          "  --seed N         seed of the random data (default: from the clock)\n"
          "  --device N       run on gkcd's device N (gkc status lists them)\n"
          "  --check          compare with a double-precision result computed here;\n"
          "                   fail (exit 1) when the error relative to sum |x*y| is\n"
          "                   over 1e-4\n"
          CLI_COMMON_HELP
          "\nPrints the value, n, the algo, kernel and round-trip times and GB/s.\n");
}

static void usage_axpby(FILE *f) {
  fprintf(f,
          "Usage: gkc axpby --x X.npy --y Y.npy [--alpha A] [--beta B] [--out OUT.npy]\n"
          "   or: gkc axpby --random N [OPTIONS]\n"
          "Computes alpha*x + beta*y on gkcd for two float32 arrays of the same length.\n\n"
          "Options:\n"
          "  --x X.npy, --y Y.npy  the arrays, of any shapes (read flattened); the\n"
          "                   result has y's shape\n"
          "  --alpha A        (default 1)\n"
          "  --beta B         (default 1)\n"
          "  --out OUT.npy    write the result there\n"
          "  --random N       N random values each (uniform in [-1, 1]) instead\n"
          "  --seed N         seed of the random data (default: from the clock)\n"
          "  --device N       run on gkcd's device N (gkc status lists them)\n"
          "  --check          compare with a double-precision result computed here;\n"
          "                   fail (exit 1) when an element's error relative to\n"
          "                   |alpha*x| + |beta*y| is over 1e-4\n"
          CLI_COMMON_HELP
          "\nPrints n, the algo, kernel and round-trip times, GB/s and the first values.\n");
}

static int parse(cli_globals *g, vec_job *s, int argc, char **argv) {
  enum { O_X = CLI_O_FIRST, O_Y, O_OUT, O_RANDOM, O_SEED, O_ALPHA, O_BETA, O_CHECK, O_DEVICE };
  static const struct option dot_opts[] = {
      CLI_COMMON_OPTIONS,
      {"x", required_argument, 0, O_X},           {"y", required_argument, 0, O_Y},
      {"random", required_argument, 0, O_RANDOM}, {"seed", required_argument, 0, O_SEED},
      {"check", no_argument, 0, O_CHECK},         {"device", required_argument, 0, O_DEVICE},
      {0, 0, 0, 0}};
  static const struct option axpby_opts[] = {
      CLI_COMMON_OPTIONS,
      {"x", required_argument, 0, O_X},           {"y", required_argument, 0, O_Y},
      {"random", required_argument, 0, O_RANDOM}, {"seed", required_argument, 0, O_SEED},
      {"check", no_argument, 0, O_CHECK},         {"device", required_argument, 0, O_DEVICE},
      {"alpha", required_argument, 0, O_ALPHA},   {"beta", required_argument, 0, O_BETA},
      {"out", required_argument, 0, O_OUT},       {0, 0, 0, 0}};
  const struct option *opts = s->axpby ? axpby_opts : dot_opts;
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (o) {
      case O_X: s->x_path = optarg; break;
      case O_Y: s->y_path = optarg; break;
      case O_OUT: s->out_path = optarg; break;
      case O_RANDOM:
        if (cli_parse_dims(optarg, 1, INT64_MAX / 8, 0, &s->random_n))
          return cli_bad_value(g, "--random", optarg, "expected a positive integer N");
        break;
      case O_SEED: if ((rc = cli_opt_seed(g, optarg, &s->seed, &s->seeded))) return rc; break;
      case O_ALPHA: if ((rc = cli_opt_float(g, "--alpha", optarg, &s->alpha))) return rc; break;
      case O_BETA: if ((rc = cli_opt_float(g, "--beta", optarg, &s->beta))) return rc; break;
      case O_CHECK: s->check = 1; break;
      case O_DEVICE: if ((rc = cli_opt_device(g, optarg, &s->device))) return rc; break;
      default:
        if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  if (s->random_n && (s->x_path || s->y_path))
    return cli_usage_error(g, "--random and --x/--y cannot be combined: give one or the other");
  if (!s->random_n && (!s->x_path || !s->y_path))
    return cli_usage_error(g, "missing %s (or --random N for random data)",
                           !s->x_path && !s->y_path ? "--x X.npy and --y Y.npy"
                           : !s->x_path            ? "--x X.npy"
                                                   : "--y Y.npy");
  if (s->out_path && (rc = cli_check_writable(g, "--out", s->out_path))) return rc;
  return -1;
}

static int load(cli_globals *g, const cli_limits *l, vec_job *s) {
  const char *cmd = s->axpby ? "axpby" : "dot";
  if (s->x_path) {
    int rc = cli_load_npy_limited(g, l, "--x", s->x_path, 0, 0, &s->x);
    if (rc) return rc;
    uint64_t xb = 4 * (uint64_t)s->x.count;
    /* axpby holds its result beside x and y. */
    if ((rc = cli_load_npy_limited(g, l, "--y", s->y_path, xb, s->axpby ? 2 * xb : xb, &s->y)))
      return rc;
    char sx[96], sy[96];
    if (s->x.count != s->y.count)
      return cli_usage_error(g, "--x %s has %lld values (shape %s) and --y %s %lld (shape %s):"
                             " %s needs arrays of one length", s->x_path, (long long)s->x.count,
                             cli_shape_str(s->x.ndim, s->x.shape, sx, sizeof sx), s->y_path,
                             (long long)s->y.count,
                             cli_shape_str(s->y.ndim, s->y.shape, sy, sizeof sy), cmd);
    if (s->x.count == 0)
      return cli_usage_error(g, "--x %s and --y %s are empty: nothing to compute", s->x_path,
                             s->y_path);
    return CLI_OK;
  }
  char what[64];
  snprintf(what, sizeof what, "%s --random %lld", cmd, (long long)s->random_n);
  uint64_t bytes = cli_mul_sat((uint64_t)s->random_n, 4);
  cli_plan p = {what, cli_mul_sat(bytes, 2), "x and y", s->axpby ? bytes : 0, "the result",
                cli_mul_sat(bytes, s->axpby ? 3 : 2)};
  int rc = cli_plan_check(l, &p);
  if (rc) return rc;
  if (!s->seeded) s->seed = cli_default_seed();
  cli_rng r;
  cli_rng_init(&r, s->seed);
  npy_array *v[2] = {&s->x, &s->y};
  for (int i = 0; i < 2; i++) {
    v[i]->ndim = 1;
    v[i]->shape[0] = v[i]->count = s->random_n;
    if ((uint64_t)s->random_n > SIZE_MAX / 4 || !(v[i]->data = malloc((size_t)s->random_n * 4))) {
      fprintf(stderr, "gkc: cannot allocate %lld floats for %s\n", (long long)s->random_n,
              i ? "y" : "x");
      return CLI_FAIL;
    }
    cli_rng_fill(&r, v[i]->data, (size_t)s->random_n);
  }
  return CLI_OK;
}

/* dot: |value - exact| / sum |x*y|, in double. */
static double dot_error(const vec_job *s, double value) {
  const float *x = s->x.data, *y = s->y.data;
  double ref = 0, scale = 0;
  for (int64_t i = 0; i < s->x.count; i++) {
    double t = (double)x[i] * y[i];
    ref += t;
    scale += fabs(t);
  }
  double diff = fabs(value - ref);
  return scale > 0 ? diff / scale : diff;
}

/* axpby: the largest element error relative to |alpha x| + |beta y|
 * (cli_max_scaled_err); -1 when the reference cannot be allocated. */
static double axpby_error(const vec_job *s, const float *got) {
  size_t n = (size_t)s->x.count;
  double *ref = malloc(n * sizeof *ref), *scale = malloc(n * sizeof *scale);
  double err = -1;
  if (ref && scale) {
    for (size_t i = 0; i < n; i++) {
      double a = (double)s->alpha * s->x.data[i], b = (double)s->beta * s->y.data[i];
      ref[i] = a + b;
      scale[i] = fabs(a) + fabs(b);
    }
    err = cli_max_scaled_err(got, ref, scale, n);
  }
  free(ref);
  free(scale);
  return err;
}

static int run(cli_globals *g, int argc, char **argv, int axpby) {
  vec_job s = {.axpby = axpby, .alpha = 1.0f, .beta = 1.0f, .device = GKC_DEVICE_AUTO};
  gkc_conn *conn = NULL;
  float *res = NULL;
  cli_limits lim;
  int rc = parse(g, &s, argc, argv);
  if (rc >= 0) return rc;
  cli_limits_get(g, &lim);
  if ((rc = load(g, &lim, &s)) || (rc = cli_limits_connect(g, &lim, &conn))) goto done;
  size_t n = (size_t)s.x.count, bytes = n * 4;
  if (axpby && !(res = malloc(bytes))) {
    fprintf(stderr, "gkc: cannot allocate %zu floats for the result\n", n);
    rc = CLI_FAIL;
    goto done;
  }

  gkc_set_device(conn, s.device); /* checked in parse() */
  gkc_info info;
  double value = NAN;
  gkc_ref x = gkc_ref_mem(s.x.data, bytes), y = gkc_ref_mem(s.y.data, bytes);
  gkc_out out = gkc_out_mem(res, bytes);
  double t0 = cli_now_us();
  int err = axpby ? gkc_axpby(conn, s.alpha, x, s.beta, y, &out, &info)
                  : gkc_dot(conn, x, y, &value, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  /* dot reads two arrays; axpby reads two and writes one. */
  double moved = (axpby ? 12.0 : 8.0) * (double)n;
  cli_out o;
  cli_out_begin(&o, g->json);
  if (axpby) {
    cli_out_num(&o, "alpha", "alpha", s.alpha, "%g");
    cli_out_num(&o, "beta", "beta", s.beta, "%g");
  } else {
    cli_out_num(&o, "value", "value", value, "%.9g");
  }
  cli_out_int(&o, "n", "n", (int64_t)n);
  if (s.x_path) cli_out_shape(&o, "shape", "shape", s.y.ndim, s.y.shape);
  cli_out_str(&o, "algo", "algo", info.algo);
  cli_out_us(&o, "kernel_us", "kernel time", info.kernel_us);
  cli_out_times(&o, &info);
  cli_out_us(&o, "round_trip_us", "round trip", rtt);
  cli_out_num(&o, "gbps", "GB/s", info.kernel_us > 0 ? moved / info.kernel_us / 1e3 : NAN, "%.4g");
  if (axpby) {
    char first[160];
    size_t off = 0;
    for (size_t i = 0; i < n && i < 4 && off < sizeof first; i++)
      off += (size_t)snprintf(first + off, sizeof first - off, "%s%.6g", i ? " " : "", res[i]);
    if (n > 4 && off < sizeof first) snprintf(first + off, sizeof first - off, " ...");
    cli_out_str(&o, NULL, "result", first);
  }
  if (!s.x_path) cli_out_int(&o, "seed", "seed", (int64_t)s.seed);
  if (s.out_path) {
    if ((rc = cli_write_npy(s.out_path, s.y.ndim, s.y.shape, res)) == CLI_OK)
      cli_out_str(&o, "out", "written to", s.out_path);
  }
  if (s.check) {
    double e = axpby ? axpby_error(&s, res) : dot_error(&s, value);
    int crc = CLI_FAIL;
    if (e < 0) fprintf(stderr, "gkc: --check: cannot allocate the reference for %zu values\n", n);
    else crc = cli_report_check(&o, e);
    if (rc == CLI_OK) rc = crc;
  }
  cli_out_end(&o);
done:
  gkc_close(conn);
  cli_limits_close(&lim);
  npy_free(&s.x);
  npy_free(&s.y);
  free(res);
  return rc;
}

static int run_dot(cli_globals *g, int argc, char **argv) { return run(g, argc, argv, 0); }
static int run_axpby(cli_globals *g, int argc, char **argv) { return run(g, argc, argv, 1); }

const cli_cmd cli_dot_cmd = {"dot", "the dot product of two float32 arrays", usage_dot, run_dot};
const cli_cmd cli_axpby_cmd = {"axpby", "alpha*x + beta*y for two float32 arrays", usage_axpby,
                               run_axpby};
