/* cli_spmv.c: gkc spmv, y = alpha * A * x + beta * y with A sparse (CSR). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_csr.h"

typedef struct {
  const char *matrix, *x_path, *y_path, *out_path, *algo;
  int64_t rand_dims[2]; /* rows, cols; 0: read --matrix */
  double density;
  int density_set;
  float alpha, beta;
  int check, seeded, used_rng;
  int64_t repeat; /* --repeat: 0 for one call sending the matrix */
  uint64_t devices; /* --devices: A partitioned (implies --repeat 1 at least), 0: not */
  uint64_t seed;
  mtx_csr A; /* owned */
  float *x;  /* owned, cols floats */
  float *y;  /* owned, rows floats: the input y when beta != 0, then the result */
  float *y0; /* owned copy of the input y for --check, when beta != 0 */
} spmv_job;

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gkc spmv --matrix A.mtx [OPTIONS]\n"
          "   or: gkc spmv --random ROWSxCOLS [OPTIONS]\n"
          "Computes y = alpha * A * x + beta * y on gkcd, A sparse, in float32.\n\n"
          "Options:\n"
          "  --matrix A.mtx    A, a Matrix Market coordinate file (.mtx or .mtx.gz)\n"
          "  --random RxC      a random R x C matrix instead (N means N x N)\n"
          "  --density F       with --random: fraction of entries present, in (0, 1]\n"
          "                    (default 0.01)\n"
          "  --x X.npy         x, 1-D float32 of length cols (default: random x)\n"
          "  --y Y.npy         y, 1-D float32 of length rows; needed when --beta is not 0\n"
          "  --alpha F         scale of A * x (default 1)\n"
          "  --beta F          scale of y (default 0)\n"
          "  --seed N          seed of the random data (default: from the clock)\n"
          "  --algo NAME       implementation to run (default auto: gkcd chooses)\n"
          "  -o, --out Y.npy   write the result y to this .npy file\n"
          "  --repeat N        keep A resident on gkcd (csr_upload once, and x, and y\n"
          "                    when --beta is not 0, uploaded once), run spmv N times\n"
          "                    on it, then compare the per-call times with one call\n"
          "                    that sends the whole matrix (made after them, warm)\n"
          "  --check           compare with a double-precision product computed here;\n"
          "                    fail (exit 1) when the max relative error is over 1e-4\n"
          "                    (with --repeat: the result of the last call)\n"
          CLI_DEVICES_HELP
          "                    (implies --repeat 1: the matrix must be resident)\n"
          CLI_COMMON_HELP
          "\nPrints rows, cols, nnz, the algo, kernel and round-trip times, GB/s (counting\n"
          "the least traffic: row_ptr, col_idx, values, x and y once) and the checksum\n"
          "(the sum of y).  With --repeat, those of the one call sending the matrix,\n"
          "then the upload times and, over the N calls on the resident matrix, the\n"
          "median, 10th and 90th percentiles of the round trip and of kernel_us, the\n"
          "median speed-up of the round trip, and whether the last result is\n"
          "bit-identical to the one sent by value; the checksum is the last call's.\n");
}

static int parse(cli_globals *g, spmv_job *s, int argc, char **argv) {
  enum { O_MATRIX = CLI_O_FIRST, O_RANDOM, O_DENSITY, O_X, O_Y, O_ALPHA, O_BETA, O_SEED, O_ALGO,
         O_CHECK, O_REPEAT, O_DEVICES };
  static const struct option opts[] = {
      CLI_COMMON_OPTIONS,
      {"matrix", required_argument, 0, O_MATRIX}, {"random", required_argument, 0, O_RANDOM},
      {"density", required_argument, 0, O_DENSITY}, {"x", required_argument, 0, O_X},
      {"y", required_argument, 0, O_Y},           {"alpha", required_argument, 0, O_ALPHA},
      {"beta", required_argument, 0, O_BETA},     {"seed", required_argument, 0, O_SEED},
      {"algo", required_argument, 0, O_ALGO},     {"out", required_argument, 0, 'o'},
      {"check", no_argument, 0, O_CHECK},         {"repeat", required_argument, 0, O_REPEAT},
      {"devices", required_argument, 0, O_DEVICES},
      {0, 0, 0, 0}};
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
    switch (o) {
      case O_MATRIX: s->matrix = optarg; break;
      case O_RANDOM:
        if (cli_parse_dims(optarg, 2, INT32_MAX - 1, 1, s->rand_dims))
          return cli_bad_value(g, "--random", optarg,
                               "expected ROWSxCOLS (or N), positive integers, e.g. 10000x10000");
        break;
      case O_DENSITY:
        if (cli_parse_double(optarg, &s->density) || !(s->density > 0) || s->density > 1)
          return cli_bad_value(g, "--density", optarg, "expected a number in (0, 1]");
        s->density_set = 1;
        break;
      case O_X: s->x_path = optarg; break;
      case O_Y: s->y_path = optarg; break;
      case O_ALPHA: if ((rc = cli_opt_float(g, "--alpha", optarg, &s->alpha))) return rc; break;
      case O_BETA: if ((rc = cli_opt_float(g, "--beta", optarg, &s->beta))) return rc; break;
      case O_SEED: if ((rc = cli_opt_seed(g, optarg, &s->seed, &s->seeded))) return rc; break;
      case O_ALGO: s->algo = optarg; break;
      case 'o': s->out_path = optarg; break;
      case O_CHECK: s->check = 1; break;
      case O_DEVICES: if ((rc = cli_opt_devices(g, optarg, &s->devices))) return rc; break;
      case O_REPEAT:
        if (cli_parse_dims(optarg, 1, 100000000, 0, &s->repeat))
          return cli_bad_value(g, "--repeat", optarg, "expected a positive integer N");
        break;
      default:
        if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  if (s->devices && s->repeat == 0) s->repeat = 1; /* a partitioned matrix is resident */
  int random = s->rand_dims[0] > 0;
  if (random && s->matrix)
    return cli_usage_error(g, "--random and --matrix cannot be combined: give one of them");
  if (!random && !s->matrix)
    return cli_usage_error(g, "missing --matrix A.mtx (or --random ROWSxCOLS for a random matrix)");
  if (s->density_set && !random)
    return cli_usage_error(g, "--density applies only to --random matrices");
  if (random) {
    double expect = (double)s->rand_dims[0] * (double)s->rand_dims[1] * s->density;
    if (expect > 0.9 * INT32_MAX)
      return cli_usage_error(g, "--random %lldx%lld --density %g would make about %.3g nonzeros, "
                             "more than int32 indices can address (2^31 - 1)",
                             (long long)s->rand_dims[0], (long long)s->rand_dims[1], s->density,
                             expect);
  }
  if (s->beta != 0.0f && !s->y_path)
    return cli_usage_error(g, "--beta %g needs --y Y.npy (y is read when beta is not 0)",
                           (double)s->beta);
  if (s->out_path && (rc = cli_check_writable(g, "--out", s->out_path))) return rc;
  return -1;
}

/* Reads a 1-D float32 vector of length want into *out (which it then owns). */
static int load_vector(cli_globals *g, const cli_limits *l, const char *opt, const char *path,
                       int64_t want, const char *what, float **out) {
  npy_array v;
  int rc = cli_load_npy_limited(g, l, opt, path, 0, 0, &v);
  if (rc) return rc;
  if (v.ndim != 1 || v.shape[0] != want) {
    char sh[96];
    rc = cli_usage_error(g, "shape mismatch: %s %s has shape %s, expected (%lld,): a 1-D array "
                         "of length %s = %lld", opt, path,
                         cli_shape_str(v.ndim, v.shape, sh, sizeof sh), (long long)want, what,
                         (long long)want);
    npy_free(&v);
    return rc;
  }
  *out = v.data; /* NULL only when want == 0, which rows and cols never are */
  return CLI_OK;
}

/* The call's sizes, checked before the matrix is read or made: gkcd gets
 * row_ptr, col_idx, values, x (and y when beta != 0) and returns y; this
 * process holds those, the reply, what --check and --repeat keep, and while
 * reading a file its entries as triplets.  nnz_lo is the fewest entries A
 * can have (what gkcd is sure to get), nnz_hi the most (a symmetric file
 * doubles). */
static int check_plan(const cli_limits *l, const spmv_job *s, int64_t rows, int64_t cols,
                      int64_t nnz_lo, int64_t nnz_hi, uint64_t reading) {
  uint64_t r4 = (uint64_t)rows * 4, c4 = (uint64_t)cols * 4;
  uint64_t in = cli_add_sat(cli_add_sat(r4 + 4, c4), cli_mul_sat((uint64_t)nnz_lo, 8));
  if (s->beta != 0.0f) in = cli_add_sat(in, r4);
  uint64_t local = cli_add_sat(cli_add_sat(r4 + 4, c4), cli_mul_sat((uint64_t)nnz_hi, 8));
  local = cli_add_sat(local, 2 * r4 + reading); /* y and the reply */
  if (s->check) local = cli_add_sat(local, r4 * 4 + (s->beta != 0.0f ? r4 : 0));
  if (s->repeat) local = cli_add_sat(local, r4 + (uint64_t)s->repeat * 16);
  char what[600];
  if (s->matrix)
    snprintf(what, sizeof what, "spmv --matrix %s (%lld x %lld, %lld entries%s)", s->matrix,
             (long long)rows, (long long)cols, (long long)nnz_lo,
             nnz_hi > nnz_lo ? ", symmetric" : "");
  else
    snprintf(what, sizeof what, "spmv --random %lldx%lld --density %g (about %lld nonzeros)",
             (long long)rows, (long long)cols, s->density, (long long)nnz_lo);
  cli_plan p = {what, in, s->beta != 0.0f ? "A, x and y" : "A and x", r4, "y", local};
  return cli_plan_check(l, &p);
}

static int load(cli_globals *g, const cli_limits *l, spmv_job *s) {
  int rc;
  cli_rng r;
  if (!s->seeded) s->seed = cli_default_seed();
  cli_rng_init(&r, s->seed);
  if (s->matrix) {
    int64_t rows, cols, nnz;
    int sym;
    /* An unreadable header is cli_csr_read's to report. */
    if (cli_csr_peek(s->matrix, &rows, &cols, &nnz, &sym) == 0 &&
        (rc = check_plan(l, s, rows, cols, nnz, sym ? 2 * nnz : nnz,
                         cli_mul_sat((uint64_t)nnz, 12))))
      return rc;
    if ((rc = cli_csr_read(g, "--matrix", s->matrix, &s->A))) return rc;
    if (s->A.nnz > INT32_MAX)
      return cli_usage_error(g, "--matrix %s: %lld entries, more than int32 indices can address",
                             s->matrix, (long long)s->A.nnz);
  } else {
    int64_t expect = (int64_t)((double)s->rand_dims[0] * (double)s->rand_dims[1] * s->density);
    if ((rc = check_plan(l, s, s->rand_dims[0], s->rand_dims[1], expect, expect, 0))) return rc;
    s->used_rng = 1;
    if ((rc = cli_csr_random((int32_t)s->rand_dims[0], (int32_t)s->rand_dims[1], s->density, &r,
                             &s->A)))
      return rc;
  }
  if (s->x_path) {
    if ((rc = load_vector(g, l, "--x", s->x_path, s->A.cols, "cols", &s->x))) return rc;
  } else {
    s->used_rng = 1;
    if (!(s->x = malloc((size_t)s->A.cols * sizeof *s->x))) goto oom;
    cli_rng_fill(&r, s->x, (size_t)s->A.cols);
  }
  if (s->y_path) {
    if ((rc = load_vector(g, l, "--y", s->y_path, s->A.rows, "rows", &s->y))) return rc;
    if (s->beta == 0.0f) fprintf(stderr, "gkc: note: --y is not read when --beta is 0\n");
  } else if (!(s->y = malloc((size_t)s->A.rows * sizeof *s->y))) {
    goto oom;
  }
  if (s->check && s->beta != 0.0f) {
    if (!(s->y0 = malloc((size_t)s->A.rows * sizeof *s->y0))) goto oom;
    memcpy(s->y0, s->y, (size_t)s->A.rows * sizeof *s->y0);
  }
  return CLI_OK;
oom:
  fprintf(stderr, "gkc: out of memory for x and y\n");
  return CLI_FAIL;
}

/* Largest scaled error of y against alpha * A * x + beta * y0, in double. */
static int reference_error(const spmv_job *s, double *err) {
  const mtx_csr *A = &s->A;
  double *ref = malloc((size_t)A->rows * sizeof *ref);
  double *scale = malloc((size_t)A->rows * sizeof *scale);
  if (!ref || !scale) {
    free(ref), free(scale);
    fprintf(stderr, "gkc: --check: out of memory for the reference\n");
    return CLI_FAIL;
  }
  for (int32_t i = 0; i < A->rows; i++) {
    double acc = 0, abs_acc = 0;
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++) {
      double t = (double)A->values[j] * s->x[A->col_idx[j]];
      acc += t;
      abs_acc += fabs(t);
    }
    ref[i] = s->alpha * acc;
    scale[i] = fabs((double)s->alpha) * abs_acc;
    if (s->beta != 0.0f) {
      double t = (double)s->beta * s->y0[i];
      ref[i] += t;
      scale[i] += fabs(t);
    }
  }
  *err = cli_max_scaled_err(s->y, ref, scale, (size_t)A->rows);
  free(ref), free(scale);
  return CLI_OK;
}

static void print_result(const cli_globals *g, const spmv_job *s, const gkc_info *info,
                         double rtt_us, cli_out *o) {
  const mtx_csr *A = &s->A;
  double bytes = 4.0 * ((double)A->rows + 1 + 2.0 * (double)A->nnz + A->cols + A->rows);
  double sum = 0;
  for (int32_t i = 0; i < A->rows; i++) sum += s->y[i];
  int64_t shape[1] = {A->rows};
  cli_out_begin(o, g->json);
  if (s->matrix)
    cli_out_str(o, "matrix", "matrix", s->matrix);
  else
    cli_out_num(o, "density", "density", s->density, "%g");
  cli_out_int(o, "rows", "rows", A->rows);
  cli_out_int(o, "cols", "cols", A->cols);
  cli_out_int(o, "nnz", "nnz", A->nnz);
  cli_out_num(o, "alpha", NULL, s->alpha, "%g");
  cli_out_num(o, "beta", NULL, s->beta, "%g");
  cli_out_str(o, "algo", "algo", info->algo);
  cli_out_us(o, "kernel_us", "kernel time", info->kernel_us);
  cli_out_times(o, info);
  cli_out_us(o, "round_trip_us", "round trip", rtt_us);
  cli_out_num(o, "gbps", "GB/s", info->kernel_us > 0 ? bytes / info->kernel_us / 1e3 : NAN,
              "%.4g");
  cli_out_num(o, "gbps_round_trip", "GB/s (rt)", bytes / rtt_us / 1e3, "%.4g");
  cli_out_int(o, "bytes", NULL, (int64_t)bytes);
  cli_out_shape(o, "shape", "result", 1, shape);
  cli_out_num(o, "checksum", "checksum", sum, "%.9g");
  if (s->used_rng) cli_out_int(o, "seed", "seed", (int64_t)s->seed);
}

/* --- --repeat: the matrix resident on gkcd ---------------------------------------------- */

typedef struct {
  double upload_us, x_upload_us; /* csr_upload; x (and y) uploads */
  char upload_algo[32];          /* what csr_upload says auto will run */
  gkc_info info;                 /* of the last call */
  double *rtt, *kernel;          /* repeat each */
  int identical;                 /* last y == the by-value y, bit for bit */
} resident_run;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile p (0..100) of n values, sorting v in place. */
static double percentile(double *v, int64_t n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int64_t i = (int64_t)ceil(p / 100.0 * (double)n) - 1;
  return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* Runs the --repeat calls; the last result lands in s->y.  rc: 0 or the
 * failed call's gkc_error. */
static int run_resident(gkc_conn *conn, spmv_job *s, resident_run *res) {
  gkc_csr A = {s->A.rows, s->A.cols, s->A.nnz, s->A.row_ptr, s->A.col_idx, s->A.values};
  uint32_t mat = 0, xh = 0, yh = 0;
  int have_mat = 0, have_x = 0, have_y = 0, err;
  double t0 = cli_now_us();
  if (s->devices) snprintf(res->upload_algo, sizeof res->upload_algo, "partitioned");
  if ((err = s->devices ? gkc_csr_upload_partitioned(conn, &A, s->devices, 0, &mat)
                        : gkc_csr_upload(conn, &A, 0, &mat, res->upload_algo)))
    goto done;
  have_mat = 1;
  res->upload_us = cli_now_us() - t0;
  t0 = cli_now_us();
  if ((err = gkc_upload(conn, gkc_ref_mem(s->x, (size_t)A.cols * 4), GKC_F32, 0, &xh))) goto done;
  have_x = 1;
  if (s->beta != 0.0f) {
    if ((err = gkc_upload(conn, gkc_ref_mem(s->y, (size_t)A.rows * 4), GKC_F32, 0, &yh)))
      goto done;
    have_y = 1;
  }
  res->x_upload_us = cli_now_us() - t0;
  gkc_spmv_args a = GKC_SPMV_ARGS_INIT;
  a.use_matrix = 1;
  a.matrix = mat;
  a.x = gkc_ref_handle(xh, (size_t)A.cols * 4);
  if (have_y) a.y = gkc_ref_handle(yh, (size_t)A.rows * 4);
  a.alpha = s->alpha, a.beta = s->beta;
  a.algo = s->algo;
  for (int64_t i = 0; i < s->repeat; i++) {
    gkc_out out = gkc_out_mem(s->y, (size_t)A.rows * 4);
    t0 = cli_now_us();
    err = gkc_spmv_ref(conn, &a, &out, &res->info);
    res->rtt[i] = cli_now_us() - t0;
    if (err) goto done;
    res->kernel[i] = res->info.kernel_us;
  }
done:;
  /* The connection's close would free them too; release to show the API. */
  char msg[512];
  snprintf(msg, sizeof msg, "%s", gkc_errmsg(conn));
  if (have_y) gkc_release(conn, yh);
  if (have_x) gkc_release(conn, xh);
  if (have_mat) gkc_release_matrix(conn, mat);
  if (err) fprintf(stderr, "gkc: %s: %s\n", gkc_errname(err), msg);
  return err;
}

static void print_stat(cli_out *o, const char *key, const char *label, double *v, int64_t n) {
  char k[64], buf[160], a[32], b[32], c[32];
  double p50 = percentile(v, n, 50), p10 = percentile(v, n, 10), p90 = percentile(v, n, 90);
  snprintf(buf, sizeof buf, "median %s, p10 %s, p90 %s", cli_fmt_us(p50, a, sizeof a),
           cli_fmt_us(p10, b, sizeof b), cli_fmt_us(p90, c, sizeof c));
  cli_out_str(o, NULL, label, buf);
  snprintf(k, sizeof k, "%s_median", key), cli_out_us(o, k, NULL, p50);
  snprintf(k, sizeof k, "%s_p10", key), cli_out_us(o, k, NULL, p10);
  snprintf(k, sizeof k, "%s_p90", key), cli_out_us(o, k, NULL, p90);
}

static void print_resident(const spmv_job *s, resident_run *res, double rtt_value, cli_out *o) {
  cli_out_int(o, "repeat", "repeat", s->repeat);
  cli_out_us(o, "csr_upload_us", "csr_upload", res->upload_us);
  cli_out_us(o, "x_upload_us", s->beta != 0.0f ? "x, y upload" : "x upload", res->x_upload_us);
  cli_out_str(o, "resident_algo", "resident algo", res->info.algo);
  print_stat(o, "resident_round_trip_us", "resident rt", res->rtt, s->repeat);
  int kernel_known = 1;
  for (int64_t i = 0; i < s->repeat; i++) kernel_known &= isfinite(res->kernel[i]);
  if (kernel_known) print_stat(o, "resident_kernel_us", "resident kern", res->kernel, s->repeat);
  double med = percentile(res->rtt, s->repeat, 50);
  cli_out_num(o, "speedup_round_trip", "rt speed-up", rtt_value / med, "%.3gx");
  cli_out_bool(o, "same_as_by_value", "same y", res->identical);
}

static int run(cli_globals *g, int argc, char **argv) {
  spmv_job s = {.alpha = 1.0f, .density = 0.01};
  resident_run res = {0};
  float *y_value = NULL; /* --repeat: the by-value call's result */
  gkc_conn *conn = NULL;
  cli_limits lim;
  int rc = parse(g, &s, argc, argv);
  if (rc >= 0) return rc;
  cli_limits_get(g, &lim);
  if ((rc = load(g, &lim, &s)) || (rc = cli_limits_connect(g, &lim, &conn))) goto done;

  gkc_csr A = {s.A.rows, s.A.cols, s.A.nnz, s.A.row_ptr, s.A.col_idx, s.A.values};
  gkc_info info;
  size_t ybytes = (size_t)s.A.rows * sizeof(float);
  if (s.repeat > 0) { /* the by-value call gets its own copy of the input y */
    if (!(y_value = malloc(ybytes)) || !(res.rtt = calloc((size_t)s.repeat, sizeof *res.rtt)) ||
        !(res.kernel = calloc((size_t)s.repeat, sizeof *res.kernel))) {
      fprintf(stderr, "gkc: out of memory for --repeat %lld\n", (long long)s.repeat);
      rc = CLI_FAIL;
      goto done;
    }
    memcpy(y_value, s.y, ybytes);
  }
  /* With --repeat the resident calls come first, so that the one call by
   * value finds gkcd warm (its first compute request starts threads). */
  if (s.repeat > 0 && run_resident(conn, &s, &res)) {
    rc = CLI_FAIL;
    goto done;
  }
  double t0 = cli_now_us();
  int err = gkc_spmv(conn, &A, s.alpha, s.x, s.beta, y_value ? y_value : s.y, s.algo, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  if (s.repeat > 0) res.identical = memcmp(y_value, s.y, ybytes) == 0;
  cli_out o;
  print_result(g, &s, &info, rtt, &o);
  if (s.repeat > 0) print_resident(&s, &res, rtt, &o);
  if (s.out_path) {
    int64_t shape[1] = {s.A.rows};
    if ((rc = cli_write_npy(s.out_path, 1, shape, s.y)) == CLI_OK)
      cli_out_str(&o, "out", "wrote", s.out_path);
  }
  if (s.check) {
    double e;
    int crc = reference_error(&s, &e);
    if (crc == CLI_OK) crc = cli_report_check(&o, e);
    if (!rc) rc = crc;
  }
  cli_out_end(&o);
done:
  gkc_close(conn);
  cli_limits_close(&lim);
  mtx_free(&s.A);
  free(s.x), free(s.y), free(s.y0);
  free(y_value), free(res.rtt), free(res.kernel);
  return rc;
}

const cli_cmd cli_spmv_cmd = {"spmv",
                              "multiply a sparse matrix by a vector: y = alpha*A*x + beta*y",
                              usage, run};
