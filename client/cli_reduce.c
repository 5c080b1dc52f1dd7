/* cli_reduce.c: gkc reduce, the sum, min or max of a float32 array. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const op_names[] = {"sum", "min", "max"}; /* indexed by gkc_reduce_op */

typedef struct {
  const char *x_path, *algo;
  int64_t random_n; /* 0: read --x */
  gkc_reduce_op op;
  int check, seeded;
  int device; /* --device, or GKC_DEVICE_AUTO */
  uint64_t seed;
  npy_array x; /* owned; from the file or random (then 1-D) */
} reduce_job;

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gkc reduce --x X.npy [OPTIONS]\n"
          "   or: gkc reduce --random N [OPTIONS]\n"
          "Reduces a float32 array to its sum, min or max on gkcd.\n\n"
          "Options:\n"
          "  --x X.npy        the array, of any shape (read flattened)\n"
          "  --random N       reduce N random values (uniform in [-1, 1]) instead\n"
          "  --seed N         seed of the random data (default: from the clock)\n"
          "  --op OP          sum, min or max (default sum)\n"
          "  --algo NAME      implementation to run (default auto: gkcd chooses)\n"
          "  --device N       run on gkcd's device N (gkc status lists them), never\n"
          "                   split across several\n"
          "  --check          compare with a double-precision result computed here;\n"
          "                   fail (exit 1) when the relative error is over 1e-4\n"
          "                   (for sum, relative to the sum of |x|)\n"
          CLI_COMMON_HELP
          "\nPrints the value, n, the algo, kernel and round-trip times and GB/s.\n");
}

static int parse(cli_globals *g, reduce_job *s, int argc, char **argv) {
  enum { O_X = CLI_O_FIRST, O_RANDOM, O_SEED, O_OP, O_ALGO, O_CHECK, O_DEVICE };
  static const struct option opts[] = {
      CLI_COMMON_OPTIONS,
      {"x", required_argument, 0, O_X},       {"random", required_argument, 0, O_RANDOM},
      {"seed", required_argument, 0, O_SEED}, {"op", required_argument, 0, O_OP},
      {"algo", required_argument, 0, O_ALGO}, {"check", no_argument, 0, O_CHECK},
      {"device", required_argument, 0, O_DEVICE},
      {0, 0, 0, 0}};
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (o) {
      case O_X: s->x_path = optarg; break;
      case O_RANDOM:
        if (cli_parse_dims(optarg, 1, INT64_MAX / 8, 0, &s->random_n))
          return cli_bad_value(g, "--random", optarg, "expected a positive integer N");
        break;
      case O_SEED: if ((rc = cli_opt_seed(g, optarg, &s->seed, &s->seeded))) return rc; break;
      case O_OP: {
        int found = -1;
        for (int i = 0; i < 3; i++)
          if (strcmp(optarg, op_names[i]) == 0) found = i;
        if (found < 0) return cli_bad_value(g, "--op", optarg, "expected sum, min or max");
        s->op = (gkc_reduce_op)found;
        break;
      }
      case O_ALGO: s->algo = optarg; break;
      case O_CHECK: s->check = 1; break;
      case O_DEVICE: if ((rc = cli_opt_device(g, optarg, &s->device))) return rc; break;
      default:
        if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  if (s->random_n && s->x_path)
    return cli_usage_error(g, "--random and --x cannot be combined: give one of them");
  if (!s->random_n && !s->x_path)
    return cli_usage_error(g, "missing --x X.npy (or --random N for random data)");
  return -1;
}

static int load(cli_globals *g, const cli_limits *l, reduce_job *s) {
  if (s->x_path) {
    int rc = cli_load_npy_limited(g, l, "--x", s->x_path, 0, 0, &s->x);
    if (rc) return rc;
    char sh[96];
    if (s->x.count == 0)
      return cli_usage_error(g, "--x %s: the array is empty (shape %s): nothing to reduce",
                             s->x_path, cli_shape_str(s->x.ndim, s->x.shape, sh, sizeof sh));
    return CLI_OK;
  }
  char what[64];
  snprintf(what, sizeof what, "reduce --random %lld", (long long)s->random_n);
  uint64_t bytes = cli_mul_sat((uint64_t)s->random_n, 4);
  cli_plan p = {what, bytes, "x", 0, NULL, bytes};
  int rc = cli_plan_check(l, &p);
  if (rc) return rc;
  if (!s->seeded) s->seed = cli_default_seed();
  cli_rng r;
  cli_rng_init(&r, s->seed);
  s->x.ndim = 1;
  s->x.shape[0] = s->x.count = s->random_n;
  if ((uint64_t)s->random_n > SIZE_MAX / 4 || !(s->x.data = malloc((size_t)s->random_n * 4))) {
    fprintf(stderr, "gkc: cannot allocate %lld floats for x\n", (long long)s->random_n);
    return CLI_FAIL;
  }
  cli_rng_fill(&r, s->x.data, (size_t)s->random_n);
  return CLI_OK;
}

/* |value - exact| relative to sum |x| (sum) or |exact| (min, max), in double. */
static double reference_error(const reduce_job *s, double value) {
  const float *x = s->x.data;
  double ref = s->op == GKC_SUM ? 0.0 : x[0], scale = 0;
  for (int64_t i = 0; i < s->x.count; i++) {
    switch (s->op) {
      case GKC_SUM: ref += x[i]; scale += fabs((double)x[i]); break;
      case GKC_MIN: if (x[i] < ref) ref = x[i]; break;
      case GKC_MAX: if (x[i] > ref) ref = x[i]; break;
    }
  }
  if (s->op != GKC_SUM) scale = fabs(ref);
  double diff = fabs(value - ref);
  return scale > 0 ? diff / scale : diff;
}

static int run(cli_globals *g, int argc, char **argv) {
  reduce_job s = {.op = GKC_SUM, .device = GKC_DEVICE_AUTO};
  gkc_conn *conn = NULL;
  cli_limits lim;
  int rc = parse(g, &s, argc, argv);
  if (rc >= 0) return rc;
  cli_limits_get(g, &lim);
  if ((rc = load(g, &lim, &s)) || (rc = cli_limits_connect(g, &lim, &conn))) goto done;

  gkc_set_device(conn, s.device); /* checked in parse() */
  gkc_info info;
  double value;
  double t0 = cli_now_us();
  int err = gkc_reduce(conn, s.x.data, (size_t)s.x.count, s.op, &value, s.algo, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  double bytes = 4.0 * (double)s.x.count;
  cli_out o;
  cli_out_begin(&o, g->json);
  cli_out_str(&o, "op", "op", op_names[s.op]);
  cli_out_num(&o, "value", "value", value, "%.9g");
  cli_out_int(&o, "n", "n", s.x.count);
  if (s.x_path) cli_out_shape(&o, "shape", "shape", s.x.ndim, s.x.shape);
  cli_out_str(&o, "algo", "algo", info.algo);
  cli_out_us(&o, "kernel_us", "kernel time", info.kernel_us);
  cli_out_times(&o, &info);
  cli_out_us(&o, "round_trip_us", "round trip", rtt);
  cli_out_num(&o, "gbps", "GB/s", info.kernel_us > 0 ? bytes / info.kernel_us / 1e3 : NAN,
              "%.4g");
  if (!s.x_path) cli_out_int(&o, "seed", "seed", (int64_t)s.seed);
  if (s.check) rc = cli_report_check(&o, reference_error(&s, value));
  cli_out_end(&o);
done:
  gkc_close(conn);
  cli_limits_close(&lim);
  npy_free(&s.x);
  return rc;
}

const cli_cmd cli_reduce_cmd = {"reduce", "reduce a float32 array to its sum, min or max", usage,
                                run};
