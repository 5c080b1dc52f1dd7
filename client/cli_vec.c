/* cli_vec.c: gkc dot, gkc axpby and gkc nrm2, the vector operations of
 * gkcd's BLAS-1 methods: dot and axpby on two arrays of one length and one
 * dtype, nrm2 on one; float32, or float64 (.npy files of float64 are sent
 * as such, never narrowed; --dtype converts). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef enum { VEC_DOT, VEC_AXPBY, VEC_NRM2 } vec_mode;
static const char *const mode_names[] = {"dot", "axpby", "nrm2"}; /* by vec_mode */

/* nrm2 --check: the relative error allowed (the squares are summed in
 * double on both sides, so only summation order differs). */
#define NRM2_CHECK_TOL 1e-6

typedef struct {
  vec_mode mode;          /* which command */
  const char *x_path, *y_path, *out_path;
  int64_t random_n;       /* 0: read --x (and --y) */
  double alpha, beta;     /* axpby (kept in double for float64) */
  int f64, dtype_given;   /* --dtype, else the files' */
  int check, seeded;
  int device;             /* --device, or GKC_DEVICE_AUTO */
  uint64_t seed;
  npy_array x, y;         /* owned; from the files or random (then 1-D); nrm2: x only */
} vec_job;

static void usage_dot(FILE *f) {
  fprintf(f,
          "Usage: gkc dot --x X.npy --y Y.npy [OPTIONS]\n"
          "   or: gkc dot --random N [OPTIONS]\n"
          "The dot product x . y of two float32 (or two float64) arrays of the same\n"
          "length, summed in double precision on gkcd.\n\n"
          "Options:\n"
          "  --x X.npy, --y Y.npy  the arrays, of any shapes (read flattened)\n"
          "  --dtype f32|f64  convert the arrays to it (default: the files' own dtype,\n"
          "                   which must be one; f32 for --random)\n"
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
          "Computes alpha*x + beta*y on gkcd for two float32 (or two float64) arrays\n"
          "of the same length; the result has their dtype.\n\n"
          "Options:\n"
          "  --x X.npy, --y Y.npy  the arrays, of any shapes (read flattened); the\n"
          "                   result has y's shape\n"
          "  --dtype f32|f64  convert the arrays to it (default: the files' own dtype,\n"
          "                   which must be one; f32 for --random)\n"
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

static void usage_nrm2(FILE *f) {
  fprintf(f,
          "Usage: gkc nrm2 --x X.npy [OPTIONS]\n"
          "   or: gkc nrm2 --random N [OPTIONS]\n"
          "The Euclidean norm ||x||_2 of a float32 or float64 array, its squares summed\n"
          "in double precision on gkcd.\n\n"
          "Options:\n"
          "  --x X.npy        the array, of any shape (read flattened)\n"
          "  --dtype f32|f64  convert it to that (default: the file's; f32 for --random)\n"
          "  --random N       N random values (uniform in [-1, 1]) instead\n"
          "  --seed N         seed of the random data (default: from the clock)\n"
          "  --device N       run on gkcd's device N (gkc status lists them)\n"
          "  --check          compare with a double-precision norm computed here;\n"
          "                   fail (exit 1) when the relative error is over 1e-6\n"
          CLI_COMMON_HELP
          "\nPrints the value, n, the algo, kernel and round-trip times and GB/s.\n");
}

static int parse(cli_globals *g, vec_job *s, int argc, char **argv) {
  enum { O_X = CLI_O_FIRST, O_Y, O_OUT, O_RANDOM, O_SEED, O_ALPHA, O_BETA, O_CHECK, O_DEVICE,
         O_DTYPE };
  static const struct option dot_opts[] = {
      CLI_COMMON_OPTIONS,
      {"x", required_argument, 0, O_X},           {"y", required_argument, 0, O_Y},
      {"random", required_argument, 0, O_RANDOM}, {"seed", required_argument, 0, O_SEED},
      {"check", no_argument, 0, O_CHECK},         {"device", required_argument, 0, O_DEVICE},
      {"dtype", required_argument, 0, O_DTYPE},   {0, 0, 0, 0}};
  static const struct option axpby_opts[] = {
      CLI_COMMON_OPTIONS,
      {"x", required_argument, 0, O_X},           {"y", required_argument, 0, O_Y},
      {"random", required_argument, 0, O_RANDOM}, {"seed", required_argument, 0, O_SEED},
      {"check", no_argument, 0, O_CHECK},         {"device", required_argument, 0, O_DEVICE},
      {"alpha", required_argument, 0, O_ALPHA},   {"beta", required_argument, 0, O_BETA},
      {"out", required_argument, 0, O_OUT},       {"dtype", required_argument, 0, O_DTYPE},
      {0, 0, 0, 0}};
  static const struct option nrm2_opts[] = {
      CLI_COMMON_OPTIONS,
      {"x", required_argument, 0, O_X},           {"random", required_argument, 0, O_RANDOM},
      {"seed", required_argument, 0, O_SEED},     {"check", no_argument, 0, O_CHECK},
      {"device", required_argument, 0, O_DEVICE}, {"dtype", required_argument, 0, O_DTYPE},
      {0, 0, 0, 0}};
  const struct option *const by_mode[] = {dot_opts, axpby_opts, nrm2_opts};
  const struct option *opts = by_mode[s->mode];
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
      case O_ALPHA: if ((rc = cli_opt_double(g, "--alpha", optarg, &s->alpha))) return rc; break;
      case O_BETA: if ((rc = cli_opt_double(g, "--beta", optarg, &s->beta))) return rc; break;
      case O_DTYPE:
        if ((rc = cli_opt_dtype(g, optarg, &s->f64))) return rc;
        s->dtype_given = 1;
        break;
      case O_CHECK: s->check = 1; break;
      case O_DEVICE: if ((rc = cli_opt_device(g, optarg, &s->device))) return rc; break;
      default:
        if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  if (s->mode == VEC_NRM2) {
    if (s->random_n && s->x_path)
      return cli_usage_error(g, "--random and --x cannot be combined: give one or the other");
    if (!s->random_n && !s->x_path)
      return cli_usage_error(g, "missing --x X.npy (or --random N for random data)");
    return -1;
  }
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
  const char *cmd = mode_names[s->mode];
  int nvec = s->mode == VEC_NRM2 ? 1 : 2, axpby = s->mode == VEC_AXPBY;
  if (s->x_path) {
    int rc = cli_load_npy_any(g, l, "--x", s->x_path, 0, 0, &s->x);
    if (rc) return rc;
    if (nvec == 1) {
      if (s->x.count == 0)
        return cli_usage_error(g, "--x %s is empty: nothing to compute", s->x_path);
      if (!s->dtype_given) s->f64 = s->x.f64;
      return cli_npy_convert(&s->x, s->f64);
    }
    uint64_t xb = (s->x.f64 ? 8 : 4) * (uint64_t)s->x.count;
    /* axpby holds its result beside x and y. */
    if ((rc = cli_load_npy_any(g, l, "--y", s->y_path, xb, axpby ? 2 * xb : xb, &s->y)))
      return rc;
    if (!s->dtype_given && s->x.f64 != s->y.f64)
      return cli_usage_error(g, "--x %s holds %s and --y %s %s: %s needs arrays of one dtype"
                             " (--dtype f32 or f64 converts them)", s->x_path,
                             s->x.f64 ? "float64" : "float32", s->y_path,
                             s->y.f64 ? "float64" : "float32", cmd);
    if (!s->dtype_given) s->f64 = s->x.f64;
    if ((rc = cli_npy_convert(&s->x, s->f64)) || (rc = cli_npy_convert(&s->y, s->f64))) return rc;
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
  uint64_t bytes = cli_mul_sat((uint64_t)s->random_n, s->f64 ? 8 : 4);
  cli_plan p = {what, cli_mul_sat(bytes, (uint64_t)nvec), nvec == 1 ? "x" : "x and y",
                axpby ? bytes : 0, "the result", cli_mul_sat(bytes, (uint64_t)(nvec + axpby))};
  int rc = cli_plan_check(l, &p);
  if (rc) return rc;
  if (!s->seeded) s->seed = cli_default_seed();
  cli_rng r;
  cli_rng_init(&r, s->seed);
  npy_array *v[2] = {&s->x, &s->y};
  for (int i = 0; i < nvec; i++) {
    v[i]->ndim = 1;
    v[i]->shape[0] = v[i]->count = s->random_n;
    if ((uint64_t)s->random_n > SIZE_MAX / 4 || !(v[i]->data = malloc((size_t)s->random_n * 4))) {
      fprintf(stderr, "gkc: cannot allocate %lld floats for %s\n", (long long)s->random_n,
              i ? "y" : "x");
      return CLI_FAIL;
    }
    cli_rng_fill(&r, v[i]->data, (size_t)s->random_n);
    if (s->f64 && cli_npy_convert(v[i], 1)) return CLI_FAIL; /* float32 draws, in float64 */
  }
  return CLI_OK;
}

/* Element i of a float32 or float64 array, in double. */
static double at(const npy_array *a, int64_t i) { return a->f64 ? a->data64[i] : a->data[i]; }

/* dot: |value - exact| / sum |x*y|, in double. */
static double dot_error(const vec_job *s, double value) {
  double ref = 0, scale = 0;
  for (int64_t i = 0; i < s->x.count; i++) {
    double t = at(&s->x, i) * at(&s->y, i);
    ref += t;
    scale += fabs(t);
  }
  double diff = fabs(value - ref);
  return scale > 0 ? diff / scale : diff;
}

/* nrm2: |value - exact| / exact, the exact norm's squares summed in double
 * (each square of a float is exact in double). */
static double nrm2_error(const vec_job *s, double value) {
  double sq = 0;
  for (int64_t i = 0; i < s->x.count; i++) sq += at(&s->x, i) * at(&s->x, i);
  double ref = sqrt(sq), diff = fabs(value - ref);
  return ref > 0 ? diff / ref : diff;
}

/* axpby: the largest element error relative to |alpha x| + |beta y|
 * (cli_max_scaled_err); -1 when the reference cannot be allocated. */
static double axpby_error(const vec_job *s, const void *got) {
  size_t n = (size_t)s->x.count;
  double *ref = malloc(n * sizeof *ref), *scale = malloc(n * sizeof *scale);
  double err = -1;
  if (ref && scale) {
    for (size_t i = 0; i < n; i++) {
      double a = s->alpha * at(&s->x, (int64_t)i), b = s->beta * at(&s->y, (int64_t)i);
      ref[i] = a + b;
      scale[i] = fabs(a) + fabs(b);
    }
    if (s->f64) { /* the same measure on the float64 result */
      err = 0;
      for (size_t i = 0; i < n; i++) {
        double e = fabs(((const double *)got)[i] - ref[i]) / (scale[i] > 0 ? scale[i] : 1);
        if (e > err || isnan(e)) err = e;
      }
    } else {
      err = cli_max_scaled_err(got, ref, scale, n);
    }
  }
  free(ref);
  free(scale);
  return err;
}

static int run(cli_globals *g, int argc, char **argv, vec_mode mode) {
  vec_job s = {.mode = mode, .alpha = 1.0, .beta = 1.0, .device = GKC_DEVICE_AUTO};
  int axpby = mode == VEC_AXPBY;
  gkc_conn *conn = NULL;
  void *res = NULL;
  cli_limits lim;
  int rc = parse(g, &s, argc, argv);
  if (rc >= 0) return rc;
  cli_limits_get(g, &lim);
  if ((rc = load(g, &lim, &s)) || (rc = cli_limits_connect(g, &lim, &conn))) goto done;
  if (!s.f64 && axpby && (fabs(s.alpha) > FLT_MAX || fabs(s.beta) > FLT_MAX)) {
    rc = cli_usage_error(g, "--alpha %g, --beta %g: float32 arrays take float32 scalars", s.alpha,
                         s.beta);
    goto done;
  }
  size_t es = s.f64 ? 8 : 4, n = (size_t)s.x.count, bytes = n * es;
  if (axpby && !(res = malloc(bytes))) {
    fprintf(stderr, "gkc: cannot allocate %zu values for the result\n", n);
    rc = CLI_FAIL;
    goto done;
  }

  gkc_set_device(conn, s.device); /* checked in parse() */
  gkc_info info;
  double value = NAN;
  gkc_ref x = s.f64 ? gkc_ref_f64(s.x.data64, n) : gkc_ref_mem(s.x.data, bytes);
  gkc_ref y = s.f64 ? gkc_ref_f64(s.y.data64, n) : gkc_ref_mem(s.y.data, bytes);
  gkc_out out = gkc_out_mem(res, bytes);
  double t0 = cli_now_us();
  int err = axpby && s.f64   ? gkc_axpby_f64(conn, s.alpha, x, s.beta, y, &out, &info)
            : axpby          ? gkc_axpby(conn, (float)s.alpha, x, (float)s.beta, y, &out, &info)
            : mode == VEC_DOT ? gkc_dot(conn, x, y, &value, &info)
                              : gkc_nrm2(conn, x, &value, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  /* dot reads two arrays; axpby reads two and writes one; nrm2 reads one. */
  double moved = (axpby ? 3.0 : mode == VEC_DOT ? 2.0 : 1.0) * (double)es * (double)n;
  cli_out o;
  cli_out_begin(&o, g->json);
  if (axpby) {
    cli_out_num(&o, "alpha", "alpha", s.alpha, "%g");
    cli_out_num(&o, "beta", "beta", s.beta, "%g");
  } else {
    cli_out_num(&o, "value", "value", value, s.f64 ? "%.17g" : "%.9g");
  }
  cli_out_int(&o, "n", "n", (int64_t)n);
  cli_out_str(&o, "dtype", "dtype", s.f64 ? "float64" : "float32");
  const npy_array *shaped = mode == VEC_NRM2 ? &s.x : &s.y;
  if (s.x_path) cli_out_shape(&o, "shape", "shape", shaped->ndim, shaped->shape);
  cli_out_str(&o, "algo", "algo", info.algo);
  cli_out_us(&o, "kernel_us", "kernel time", info.kernel_us);
  cli_out_times(&o, &info);
  cli_out_us(&o, "round_trip_us", "round trip", rtt);
  cli_out_num(&o, "gbps", "GB/s", info.kernel_us > 0 ? moved / info.kernel_us / 1e3 : NAN, "%.4g");
  if (axpby) {
    char first[160];
    size_t off = 0;
    for (size_t i = 0; i < n && i < 4 && off < sizeof first; i++)
      off += (size_t)snprintf(first + off, sizeof first - off, "%s%.*g", i ? " " : "", s.f64 ? 15 : 6,
                              s.f64 ? ((double *)res)[i] : ((float *)res)[i]);
    if (n > 4 && off < sizeof first) snprintf(first + off, sizeof first - off, " ...");
    cli_out_str(&o, NULL, "result", first);
  }
  if (!s.x_path) cli_out_int(&o, "seed", "seed", (int64_t)s.seed);
  if (s.out_path) {
    if ((rc = s.f64 ? cli_write_npy_f64(s.out_path, s.y.ndim, s.y.shape, res)
                    : cli_write_npy(s.out_path, s.y.ndim, s.y.shape, res)) == CLI_OK)
      cli_out_str(&o, "out", "written to", s.out_path);
  }
  if (s.check) {
    double e = axpby ? axpby_error(&s, res) : mode == VEC_DOT ? dot_error(&s, value)
                                                               : nrm2_error(&s, value);
    int crc = CLI_FAIL;
    if (e < 0) fprintf(stderr, "gkc: --check: cannot allocate the reference for %zu values\n", n);
    else crc = cli_report_check_tol(&o, e, mode == VEC_NRM2 ? NRM2_CHECK_TOL : CLI_CHECK_TOL);
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

static int run_dot(cli_globals *g, int argc, char **argv) { return run(g, argc, argv, VEC_DOT); }
static int run_axpby(cli_globals *g, int argc, char **argv) {
  return run(g, argc, argv, VEC_AXPBY);
}
static int run_nrm2(cli_globals *g, int argc, char **argv) { return run(g, argc, argv, VEC_NRM2); }

const cli_cmd cli_dot_cmd = {"dot", "the dot product of two float32 or float64 arrays", usage_dot,
                             run_dot};
const cli_cmd cli_axpby_cmd = {"axpby", "alpha*x + beta*y for two float32 or float64 arrays",
                               usage_axpby, run_axpby};
const cli_cmd cli_nrm2_cmd = {"nrm2", "the Euclidean norm of a float32 or float64 array",
                              usage_nrm2, run_nrm2};
