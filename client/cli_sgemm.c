/* cli_sgemm.c: gkc sgemm, C = alpha * op(A) * op(B) + beta * C. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
  const char *a_path, *b_path, *c_path, *out_path, *algo, *random, *precision;
  int device; /* --device, or GKC_DEVICE_AUTO */
  float alpha, beta;
  int trans_a, trans_b, check, seeded;
  uint64_t seed;
  int64_t m, n, k;
  float *a, *b, *c; /* owned; c holds m*n floats, the input C when beta != 0 */
  float *c0;        /* owned copy of the input C for --check, when beta != 0 */
} sgemm_job;

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gkc sgemm --a A.npy --b B.npy [OPTIONS]\n"
          "   or: gkc sgemm --random MxNxK [OPTIONS]\n"
          "Computes C = alpha * op(A) * op(B) + beta * C on gkcd, in float32.\n"
          "op(A) is m x k and op(B) is k x n; the arrays are 2-D float32 .npy files.\n\n"
          "Options:\n"
          "  --a A.npy        A, of shape (m, k), or (k, m) with --trans-a\n"
          "  --b B.npy        B, of shape (k, n), or (n, k) with --trans-b\n"
          "  --c C.npy        C, of shape (m, n); needed when --beta is not 0 (with\n"
          "                   --random, C is random too)\n"
          "  --alpha F        scale of op(A) * op(B) (default 1)\n"
          "  --beta F         scale of C (default 0)\n"
          "  --trans-a        use A^T: A is stored k x m\n"
          "  --trans-b        use B^T: B is stored n x k\n"
          "  --algo NAME      implementation to run (default auto: gkcd chooses)\n"
          "  --precision P    fp32 (default, exact) or tf32 (accept TF32 rounding, ~1e-3\n"
          "                   relative error, for tensor-core speed on a GPU)\n"
          "  --device N       run on gkcd's device N (gkc status lists them), never\n"
          "                   split across several\n"
          "  -o, --out C.npy  write the result to this .npy file\n"
          "  --random MxNxK   multiply random matrices instead (values uniform in\n"
          "                   [-1, 1]); a single N means NxNxN\n"
          "  --seed N         seed of the random data (default: from the clock)\n"
          "  --check          compare with a double-precision product computed here;\n"
          "                   fail (exit 1) when the max relative error is over 1e-4\n"
          "                   (8e-3 with --precision tf32)\n"
          CLI_COMMON_HELP
          "\nPrints the algo, kernel and round-trip times, GFLOP/s (2*m*n*k flops),\n"
          "the result's shape and its checksum (the sum of C).\n");
}

static int parse(cli_globals *g, sgemm_job *s, int argc, char **argv) {
  enum { O_A = CLI_O_FIRST, O_B, O_C, O_ALPHA, O_BETA, O_TA, O_TB, O_ALGO, O_RANDOM, O_SEED,
         O_CHECK, O_PRECISION, O_DEVICE };
  static const struct option opts[] = {
      CLI_COMMON_OPTIONS,
      {"a", required_argument, 0, O_A},          {"b", required_argument, 0, O_B},
      {"c", required_argument, 0, O_C},          {"alpha", required_argument, 0, O_ALPHA},
      {"beta", required_argument, 0, O_BETA},    {"trans-a", no_argument, 0, O_TA},
      {"trans-b", no_argument, 0, O_TB},         {"algo", required_argument, 0, O_ALGO},
      {"out", required_argument, 0, 'o'},        {"random", required_argument, 0, O_RANDOM},
      {"seed", required_argument, 0, O_SEED},    {"check", no_argument, 0, O_CHECK},
      {"precision", required_argument, 0, O_PRECISION},
      {"device", required_argument, 0, O_DEVICE},
      {0, 0, 0, 0}};
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
    switch (o) {
      case O_A: s->a_path = optarg; break;
      case O_B: s->b_path = optarg; break;
      case O_C: s->c_path = optarg; break;
      case O_ALPHA: if ((rc = cli_opt_float(g, "--alpha", optarg, &s->alpha))) return rc; break;
      case O_BETA: if ((rc = cli_opt_float(g, "--beta", optarg, &s->beta))) return rc; break;
      case O_TA: s->trans_a = 1; break;
      case O_TB: s->trans_b = 1; break;
      case O_ALGO: s->algo = optarg; break;
      case O_PRECISION:
        if (strcmp(optarg, "fp32") && strcmp(optarg, "tf32"))
          return cli_bad_value(g, "--precision", optarg, "expected fp32 or tf32");
        s->precision = optarg;
        break;
      case O_DEVICE: if ((rc = cli_opt_device(g, optarg, &s->device))) return rc; break;
      case 'o': s->out_path = optarg; break;
      case O_RANDOM: {
        int64_t d[3];
        if (cli_parse_dims(optarg, 3, INT32_MAX, 1, d))
          return cli_bad_value(g, "--random", optarg,
                               "expected MxNxK (or N), positive integers, e.g. 512x512x512");
        s->random = optarg;
        s->m = d[0], s->n = d[1], s->k = d[2];
        break;
      }
      case O_SEED: if ((rc = cli_opt_seed(g, optarg, &s->seed, &s->seeded))) return rc; break;
      case O_CHECK: s->check = 1; break;
      default:
        if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  if (s->random && (s->a_path || s->b_path || s->c_path))
    return cli_usage_error(g, "--random makes its own A, B and C: it cannot be combined with "
                              "--a, --b or --c");
  if (!s->random && !s->a_path)
    return cli_usage_error(g, "missing --a A.npy (or --random MxNxK for random data)");
  if (!s->random && !s->b_path) return cli_usage_error(g, "missing --b B.npy");
  if (!s->random && s->beta != 0.0f && !s->c_path)
    return cli_usage_error(g, "--beta %g needs --c C.npy (C is read when beta is not 0)",
                           (double)s->beta);
  if (s->out_path && (rc = cli_check_writable(g, "--out", s->out_path))) return rc;
  return -1;
}

/* The call's sizes, checked before A, B or C is made or read in full:
 * gkcd gets A, B (and C when beta != 0) and returns C; this process holds
 * A, B, C and the reply, plus for --check a copy of C and the reference. */
static int check_plan(const cli_limits *l, const sgemm_job *s) {
  uint64_t mk = cli_mul_sat((uint64_t)s->m, (uint64_t)s->k);
  uint64_t kn = cli_mul_sat((uint64_t)s->k, (uint64_t)s->n);
  uint64_t mn = cli_mul_sat((uint64_t)s->m, (uint64_t)s->n);
  uint64_t in = cli_mul_sat(cli_add_sat(mk, kn), 4), c = cli_mul_sat(mn, 4);
  uint64_t local = cli_add_sat(in, cli_mul_sat(c, 2));
  if (s->check) {
    local = cli_add_sat(local, cli_mul_sat(mn, 16)); /* reference and scale, in double */
    if (s->beta != 0.0f) local = cli_add_sat(local, c);
    if (s->trans_b) local = cli_add_sat(local, cli_mul_sat(kn, 4));
  }
  char what[128];
  snprintf(what, sizeof what, "sgemm %lldx%lldx%lld", (long long)s->m, (long long)s->n,
           (long long)s->k);
  cli_plan p = {what, s->beta != 0.0f ? cli_add_sat(in, c) : in,
                s->beta != 0.0f ? "A, B and C" : "A and B", c, "C", local};
  return cli_plan_check(l, &p);
}

static void *alloc_floats(int64_t count, const char *what) {
  void *p = NULL;
  if ((uint64_t)count <= SIZE_MAX / 4) p = malloc((size_t)count * 4);
  if (!p) fprintf(stderr, "gkc: cannot allocate %lld floats for %s\n", (long long)count, what);
  return p;
}

static int make_random(sgemm_job *s) {
  if (!s->seeded) s->seed = cli_default_seed();
  cli_rng r;
  cli_rng_init(&r, s->seed);
  if (!(s->a = alloc_floats(s->m * s->k, "A")) || !(s->b = alloc_floats(s->k * s->n, "B")) ||
      !(s->c = alloc_floats(s->m * s->n, "C")))
    return CLI_FAIL;
  cli_rng_fill(&r, s->a, (size_t)(s->m * s->k));
  cli_rng_fill(&r, s->b, (size_t)(s->k * s->n));
  if (s->beta != 0.0f) cli_rng_fill(&r, s->c, (size_t)(s->m * s->n));
  return CLI_OK;
}

/* Reads a 2-D array; fails for another rank, an empty axis or int32 overflow. */
static int load_matrix(cli_globals *g, const cli_limits *l, const char *opt, const char *path,
                       const char *want, uint64_t loaded, npy_array *arr) {
  int rc = cli_load_npy_limited(g, l, opt, path, loaded, loaded, arr);
  if (rc) return rc;
  char sh[96];
  if (arr->ndim != 2)
    return cli_usage_error(g, "%s %s: expected a 2-D array %s, got shape %s", opt, path, want,
                           cli_shape_str(arr->ndim, arr->shape, sh, sizeof sh));
  if (arr->count == 0 || arr->shape[0] > INT32_MAX || arr->shape[1] > INT32_MAX)
    return cli_usage_error(g, "%s %s: shape %s: each axis must hold 1 to %d elements", opt, path,
                           cli_shape_str(2, arr->shape, sh, sizeof sh), INT32_MAX);
  return CLI_OK;
}

static int load_files(cli_globals *g, const cli_limits *l, sgemm_job *s) {
  npy_array a = {0}, b = {0}, c = {0};
  char sa[96], sb[96], sc[96];
  int rc = load_matrix(g, l, "--a", s->a_path, s->trans_a ? "(k, m) (--trans-a)" : "(m, k)", 0,
                       &a);
  if (rc) goto done;
  s->m = a.shape[s->trans_a ? 1 : 0];
  s->k = a.shape[s->trans_a ? 0 : 1];
  rc = load_matrix(g, l, "--b", s->b_path, s->trans_b ? "(n, k) (--trans-b)" : "(k, n)",
                   (uint64_t)a.count * 4, &b);
  if (rc) goto done;
  int64_t kb = b.shape[s->trans_b ? 1 : 0];
  s->n = b.shape[s->trans_b ? 0 : 1];
  if (kb != s->k) {
    char want[64];
    snprintf(want, sizeof want, s->trans_b ? "(n, %lld) (--trans-b)" : "(%lld, n)",
             (long long)s->k);
    rc = cli_usage_error(g, "shape mismatch: --b %s has shape %s, but --a %s has shape %s%s, "
                         "so k = %lld: expected B of shape %s",
                         s->b_path, cli_shape_str(2, b.shape, sb, sizeof sb), s->a_path,
                         cli_shape_str(2, a.shape, sa, sizeof sa),
                         s->trans_a ? " (--trans-a)" : "", (long long)s->k, want);
    goto done;
  }
  if ((rc = check_plan(l, s))) goto done; /* before C is read or made */
  if (s->c_path) {
    if ((rc = load_matrix(g, l, "--c", s->c_path, "(m, n)", (uint64_t)(a.count + b.count) * 4,
                          &c)))
      goto done;
    if (c.shape[0] != s->m || c.shape[1] != s->n) {
      rc = cli_usage_error(g, "shape mismatch: --c %s has shape %s, expected (m, n) = (%lld, "
                           "%lld) from --a and --b",
                           s->c_path, cli_shape_str(2, c.shape, sc, sizeof sc),
                           (long long)s->m, (long long)s->n);
      goto done;
    }
    if (s->beta == 0.0f) fprintf(stderr, "gkc: note: --c is not read when --beta is 0\n");
  }
  s->a = a.data, a.data = NULL;
  s->b = b.data, b.data = NULL;
  if (c.data) {
    s->c = c.data, c.data = NULL;
  } else if (!(s->c = alloc_floats(s->m * s->n, "C"))) {
    rc = CLI_FAIL;
  }
done:
  npy_free(&a);
  npy_free(&b);
  npy_free(&c);
  return rc;
}

/* Largest scaled error of c against alpha * op(A) * op(B) + beta * c0, in double. */
static int reference_error(const sgemm_job *s, double *err) {
  int64_t m = s->m, n = s->n, k = s->k;
  double *ref = calloc((size_t)(m * n), sizeof *ref);
  double *scale = calloc((size_t)(m * n), sizeof *scale);
  float *bt = NULL; /* op(B) row-major, so the inner loop runs along memory */
  if (s->trans_b && (bt = malloc((size_t)(k * n) * sizeof *bt)))
    for (int64_t j = 0; j < n; j++)
      for (int64_t p = 0; p < k; p++) bt[p * n + j] = s->b[j * k + p];
  if (!ref || !scale || (s->trans_b && !bt)) {
    free(ref), free(scale), free(bt);
    fprintf(stderr, "gkc: --check: out of memory for the reference\n");
    return CLI_FAIL;
  }
  const float *opb = s->trans_b ? bt : s->b;
  if ((double)m * n * k > 2e10)
    fprintf(stderr, "gkc: --check: computing %.3g multiply-adds on this CPU, in double...\n",
            (double)m * n * k);
  for (int64_t i = 0; i < m; i++) {
    double *r = ref + i * n, *sc = scale + i * n;
    for (int64_t p = 0; p < k; p++) {
      double av = s->trans_a ? s->a[p * m + i] : s->a[i * k + p];
      const float *brow = opb + p * n;
      for (int64_t j = 0; j < n; j++) {
        double t = av * brow[j];
        r[j] += t;
        sc[j] += fabs(t);
      }
    }
    for (int64_t j = 0; j < n; j++) {
      r[j] *= s->alpha;
      sc[j] *= fabs((double)s->alpha);
      if (s->beta != 0.0f) {
        double t = (double)s->beta * s->c0[i * n + j];
        r[j] += t;
        sc[j] += fabs(t);
      }
    }
  }
  *err = cli_max_scaled_err(s->c, ref, scale, (size_t)(m * n));
  free(ref), free(scale), free(bt);
  return CLI_OK;
}

static void print_result(const cli_globals *g, const sgemm_job *s, const gkc_info *info,
                         double rtt_us, cli_out *o) {
  double flops = 2.0 * (double)s->m * (double)s->n * (double)s->k;
  double sum = 0;
  for (int64_t i = 0; i < s->m * s->n; i++) sum += s->c[i];
  char op[160];
  snprintf(op, sizeof op, "C = %g * A%s * B%s", (double)s->alpha, s->trans_a ? "^T" : "",
           s->trans_b ? "^T" : "");
  if (s->beta != 0.0f)
    snprintf(op + strlen(op), sizeof op - strlen(op), " + %g * C", (double)s->beta);
  char size[96];
  snprintf(size, sizeof size, "%lld x %lld x %lld (m x n x k)", (long long)s->m,
           (long long)s->n, (long long)s->k);
  int64_t shape[2] = {s->m, s->n};

  cli_out_begin(o, g->json);
  cli_out_str(o, NULL, "op", op);
  cli_out_str(o, NULL, "size", size);
  cli_out_int(o, "m", NULL, s->m);
  cli_out_int(o, "n", NULL, s->n);
  cli_out_int(o, "k", NULL, s->k);
  cli_out_num(o, "alpha", NULL, s->alpha, "%g");
  cli_out_num(o, "beta", NULL, s->beta, "%g");
  cli_out_bool(o, "trans_a", NULL, s->trans_a);
  cli_out_bool(o, "trans_b", NULL, s->trans_b);
  cli_out_str(o, "algo", "algo", info->algo);
  cli_out_us(o, "kernel_us", "kernel time", info->kernel_us);
  cli_out_times(o, info);
  cli_out_us(o, "round_trip_us", "round trip", rtt_us);
  cli_out_num(o, "gflops", "GFLOP/s", info->kernel_us > 0 ? flops / info->kernel_us / 1e3 : NAN,
              "%.4g");
  cli_out_num(o, "gflops_round_trip", "GFLOP/s (rt)", flops / rtt_us / 1e3, "%.4g");
  cli_out_shape(o, "shape", "result", 2, shape);
  cli_out_num(o, "checksum", "checksum", sum, "%.9g");
  if (s->random) cli_out_int(o, "seed", "seed", (int64_t)s->seed);
}

static int run(cli_globals *g, int argc, char **argv) {
  sgemm_job s = {.alpha = 1.0f, .device = GKC_DEVICE_AUTO};
  gkc_conn *conn = NULL;
  cli_limits lim;
  int rc = parse(g, &s, argc, argv);
  if (rc >= 0) return rc;
  cli_limits_get(g, &lim);
  if ((rc = s.random ? check_plan(&lim, &s) : 0) ||
      (rc = s.random ? make_random(&s) : load_files(g, &lim, &s)))
    goto done;
  if (s.check && s.beta != 0.0f) {
    if (!(s.c0 = alloc_floats(s.m * s.n, "a copy of C"))) {
      rc = CLI_FAIL;
      goto done;
    }
    memcpy(s.c0, s.c, (size_t)(s.m * s.n) * sizeof *s.c);
  }
  if ((rc = cli_limits_connect(g, &lim, &conn))) goto done;

  gkc_info info;
  if (s.precision) gkc_set_precision(conn, s.precision); /* checked in parse() */
  gkc_set_device(conn, s.device);                         /* likewise */
  double t0 = cli_now_us();
  int err = gkc_sgemm(conn, (int32_t)s.m, (int32_t)s.n, (int32_t)s.k, s.alpha, s.a, s.trans_a,
                      s.b, s.trans_b, s.beta, s.c, s.algo, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  cli_out o;
  print_result(g, &s, &info, rtt, &o);
  if (s.out_path) {
    int64_t shape[2] = {s.m, s.n};
    if ((rc = cli_write_npy(s.out_path, 2, shape, s.c)) == CLI_OK)
      cli_out_str(&o, "out", "wrote", s.out_path);
  }
  if (s.check) {
    double e;
    int crc = reference_error(&s, &e);
    /* TF32 keeps 10 bits of mantissa: allow ~8 units of its rounding. */
    if (crc == CLI_OK) crc = cli_report_check_tol(&o, e, s.precision && !strcmp(s.precision, "tf32")
                                                             ? 8e-3 : CLI_CHECK_TOL);
    if (!rc) rc = crc;
  }
  cli_out_end(&o);
done:
  gkc_close(conn);
  cli_limits_close(&lim);
  free(s.a), free(s.b), free(s.c), free(s.c0);
  return rc;
}

const cli_cmd cli_sgemm_cmd = {"sgemm", "multiply float32 matrices: C = alpha*op(A)*op(B) + beta*C",
                               usage, run};
