/* cli_solve.c: gkc solve, A x = b by a Krylov method run inside gkcd (one
 * `solve` request after one csr_upload). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_csr.h"

/* gkcd's bound on max_iter (PROTOCOL.md, solve). */
#define MAX_ITER_LIMIT 100000000

typedef struct {
  const char *matrix, *b_path, *x0_path, *out_path;
  int method; /* gkc_solve_method */
  int precond; /* gkc_solve_precond */
  double rtol, atol;
  int64_t max_iter; /* 0: gkcd's default */
  int history;
  int fp32;         /* --precision fp32 */
  mtx_csr A;        /* owned */
  void *b, *x0, *x; /* owned, float or double (f64); x0 NULL when not given */
  int f64, dtype_given; /* the vectors' dtype: --dtype, else --b's (float32 without one) */
  double *hist;     /* owned, with --history */
  size_t hist_cap;
  uint64_t devices; /* --devices: A partitioned (gkc_csr_upload_partitioned), 0: not */
} solve_job;

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gkc solve --matrix A.mtx [OPTIONS]\n"
          "Solves A x = b on gkcd by a Krylov method, the whole iteration in one request\n"
          "(A is uploaded once, then `solve` runs until it converges or stops).\n\n"
          "Options:\n"
          "  --matrix A.mtx    A, a square Matrix Market coordinate file (.mtx or .mtx.gz)\n"
          "  --b B.npy         b, 1-D float32 or float64 of length n (default: b = A * ones,\n"
          "                    rounded to the dtype, so that x = ones is the answer and\n"
          "                    the error against it is printed); x has b's dtype, and a\n"
          "                    float64 x that converged meets rtol by ||b - A x|| itself\n"
          "  --x0 X0.npy       the starting guess, 1-D of length n and b's dtype (default:\n"
          "                    zero)\n"
          "  --dtype f32|f64   the vectors' dtype: converts --b and --x0 to it (default:\n"
          "                    --b's, else f32).  A's values are read as float32\n"
          "  --method NAME     cg (A symmetric positive definite; the default), pcg (CG\n"
          "                    with the Jacobi preconditioner; A's diagonal nonzero) or\n"
          "                    bicgstab (any nonsingular A)\n"
          "  --precond none|jacobi|amg|auto  the preconditioner of cg and bicgstab: none\n"
          "                    (the default), jacobi (diag(A)^-1), amg (smoothed-aggregation\n"
          "                    algebraic multigrid, one V-cycle; far fewer iterations\n"
          "                    on Laplacian-like A) or auto (gkcd picks amg for such A,\n"
          "                    else jacobi; the result says which ran).  pcg is cg with\n"
          "                    jacobi\n"
          "  --rtol T          stop when ||b - A x|| <= max(T * ||b||, atol) (default 1e-6)\n"
          "  --atol T          absolute tolerance (default 0)\n"
          "  --max-iter N      iterations at most, 1 to 10^8 (default: gkcd's, min(10 n, 10^8))\n"
          "  --precision P     fp64 (the default) or fp32: float32 vectors, dots and\n"
          "                    scalars in float64 (less memory traffic per iteration, more\n"
          "                    iterations at tight tolerances)\n"
          "  --history         also print the relative residual after each iteration, and\n"
          "                    a plot of its log10 against the iteration\n"
          "  -o, --out X.npy   write x to this .npy file\n"
          CLI_DEVICES_HELP
          "                    (cg and pcg only)\n"
          CLI_COMMON_HELP
          "\nPrints the matrix's size, the method, the iterations, whether it converged\n"
          "and why it stopped, gkcd's residual ||b - A x|| / ||b|| of the x\n"
          "returned (computed there in float64), the error against ones when b was not\n"
          "given, and the times (upload, solve round trip, in gkcd) and iterations/s.\n"
          "Exit status: 0 converged, 1 not converged (still printed) or a server or\n"
          "connection error, 2 a usage error (a non-square matrix, a b or x0 of the\n"
          "wrong length, a negative tolerance, ...).\n");
}

static int parse(cli_globals *g, solve_job *s, int argc, char **argv) {
  enum { O_MATRIX = CLI_O_FIRST, O_B, O_X0, O_METHOD, O_RTOL, O_ATOL, O_MAX_ITER, O_HISTORY,
         O_DEVICES, O_PRECISION, O_DTYPE, O_PRECOND };
  static const struct option opts[] = {
      CLI_COMMON_OPTIONS,
      {"matrix", required_argument, 0, O_MATRIX}, {"b", required_argument, 0, O_B},
      {"x0", required_argument, 0, O_X0},         {"method", required_argument, 0, O_METHOD},
      {"rtol", required_argument, 0, O_RTOL},     {"atol", required_argument, 0, O_ATOL},
      {"max-iter", required_argument, 0, O_MAX_ITER},
      {"history", no_argument, 0, O_HISTORY},     {"out", required_argument, 0, 'o'},
      {"devices", required_argument, 0, O_DEVICES},
      {"precision", required_argument, 0, O_PRECISION},
      {"dtype", required_argument, 0, O_DTYPE},
      {"precond", required_argument, 0, O_PRECOND},
      {0, 0, 0, 0}};
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
    switch (o) {
      case O_MATRIX: s->matrix = optarg; break;
      case O_B: s->b_path = optarg; break;
      case O_X0: s->x0_path = optarg; break;
      case O_DTYPE:
        if ((rc = cli_opt_dtype(g, optarg, &s->f64))) return rc;
        s->dtype_given = 1;
        break;
      case O_METHOD:
        if ((s->method = gkc_solve_method_parse(optarg)) < 0)
          return cli_bad_value(g, "--method", optarg, "expected cg, pcg or bicgstab");
        break;
      case O_PRECOND:
        if ((s->precond = gkc_solve_precond_parse(optarg)) < 0)
          return cli_bad_value(g, "--precond", optarg, "expected none, jacobi, amg or auto");
        break;
      case O_RTOL:
        if (cli_parse_double(optarg, &s->rtol) || s->rtol < 0)
          return cli_bad_value(g, "--rtol", optarg, "expected a finite number >= 0");
        break;
      case O_ATOL:
        if (cli_parse_double(optarg, &s->atol) || s->atol < 0)
          return cli_bad_value(g, "--atol", optarg, "expected a finite number >= 0");
        break;
      case O_MAX_ITER:
        if (cli_parse_dims(optarg, 1, MAX_ITER_LIMIT, 0, &s->max_iter))
          return cli_bad_value(g, "--max-iter", optarg, "expected an integer from 1 to 100000000");
        break;
      case O_HISTORY: s->history = 1; break;
      case O_PRECISION:
        if (strcmp(optarg, "fp64") && strcmp(optarg, "fp32"))
          return cli_bad_value(g, "--precision", optarg, "expected fp64 or fp32");
        s->fp32 = !strcmp(optarg, "fp32");
        break;
      case O_DEVICES: if ((rc = cli_opt_devices(g, optarg, &s->devices))) return rc; break;
      case 'o': s->out_path = optarg; break;
      default:
        if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  if (!s->matrix) return cli_usage_error(g, "missing --matrix A.mtx (the square matrix A)");
  if (s->out_path && (rc = cli_check_writable(g, "--out", s->out_path))) return rc;
  return -1;
}

/* A 1-D vector of length n for option opt (then owned by *out), of the
 * job's dtype: the first file read sets it unless --dtype did; a later one
 * of another dtype is refused naming both (--dtype converts). */
static int load_vector(cli_globals *g, const cli_limits *l, solve_job *s, const char *opt,
                       const char *path, int64_t n, void **out) {
  npy_array v;
  int rc = cli_load_npy_any(g, l, opt, path, 0, 0, &v);
  if (rc) return rc;
  if (!s->dtype_given && out == &s->b) s->f64 = v.f64;
  if (!s->dtype_given && v.f64 != s->f64) {
    rc = cli_usage_error(g, "%s %s holds %s but --b %s: b and x0 have one dtype (--dtype f32"
                         " or f64 converts them)", opt, path, v.f64 ? "float64" : "float32",
                         s->f64 ? "float64" : "float32");
    npy_free(&v);
    return rc;
  }
  if ((rc = cli_npy_convert(&v, s->f64))) {
    npy_free(&v);
    return rc;
  }
  if (v.ndim != 1 || v.shape[0] != n) {
    char sh[96];
    rc = cli_usage_error(g, "shape mismatch: %s %s has shape %s, expected (%lld,): a 1-D array "
                         "of length n = %lld, A's rows", opt, path,
                         cli_shape_str(v.ndim, v.shape, sh, sizeof sh), (long long)n,
                         (long long)n);
    npy_free(&v);
    return rc;
  }
  *out = v.f64 ? (void *)v.data64 : (void *)v.data;
  return CLI_OK;
}

/* gkcd gets A (csr_upload, the largest request), then b and x0; it returns
 * x and, with --history, 8 bytes per iteration. */
static int check_plan(const cli_limits *l, const solve_job *s, int64_t n, int64_t nnz_lo,
                      int64_t nnz_hi, uint64_t reading) {
  uint64_t n4 = (uint64_t)n * (s->f64 ? 8 : 4); /* --dtype f64 known here; a float64 --b is checked as read */
  uint64_t in = cli_add_sat(n4 + 4, cli_mul_sat((uint64_t)nnz_lo, 8));
  uint64_t iters = s->max_iter ? (uint64_t)s->max_iter
                               : (uint64_t)(n < MAX_ITER_LIMIT / 10 ? 10 * n : MAX_ITER_LIMIT);
  uint64_t out = cli_add_sat(n4, s->history ? cli_mul_sat(iters, 8) : 0);
  uint64_t local = cli_add_sat(cli_add_sat(n4 + 4, cli_mul_sat((uint64_t)nnz_hi, 8)), reading);
  local = cli_add_sat(local, cli_add_sat(cli_mul_sat(n4, 4), cli_mul_sat(out, 2)));
  char what[600];
  snprintf(what, sizeof what, "solve --matrix %s (%lld x %lld, %lld entries%s)", s->matrix,
           (long long)n, (long long)n, (long long)nnz_lo, nnz_hi > nnz_lo ? ", symmetric" : "");
  cli_plan p = {what, in, "A (csr_upload)", out, s->history ? "x and the history" : "x", local};
  return cli_plan_check(l, &p);
}

static int load(cli_globals *g, const cli_limits *l, solve_job *s) {
  int64_t rows, cols, nnz;
  int sym, rc;
  if (cli_csr_peek(s->matrix, &rows, &cols, &nnz, &sym) == 0) {
    if (rows != cols)
      return cli_usage_error(g, "--matrix %s is %lld x %lld: solve needs a square matrix",
                             s->matrix, (long long)rows, (long long)cols);
    if ((rc = check_plan(l, s, rows, nnz, sym ? 2 * nnz : nnz, cli_mul_sat((uint64_t)nnz, 12))))
      return rc;
  }
  if ((rc = cli_csr_read(g, "--matrix", s->matrix, &s->A))) return rc;
  const mtx_csr *A = &s->A;
  if (A->rows != A->cols)
    return cli_usage_error(g, "--matrix %s is %d x %d: solve needs a square matrix", s->matrix,
                           A->rows, A->cols);
  if (A->nnz > INT32_MAX)
    return cli_usage_error(g, "--matrix %s: %lld entries, more than int32 indices can address",
                           s->matrix, (long long)A->nnz);
  size_t n = (size_t)A->rows;
  if (s->b_path) {
    if ((rc = load_vector(g, l, s, "--b", s->b_path, A->rows, &s->b))) return rc;
  } else { /* b = A * ones, in double, rounded once to the dtype */
    if (!(s->b = malloc(n * (s->f64 ? 8 : 4)))) goto oom;
    for (int32_t i = 0; i < A->rows; i++) {
      double acc = 0;
      for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++) acc += A->values[j];
      if (s->f64) ((double *)s->b)[i] = acc;
      else ((float *)s->b)[i] = (float)acc;
    }
  }
  if (s->x0_path && (rc = load_vector(g, l, s, "--x0", s->x0_path, A->rows, &s->x0))) return rc;
  if (!(s->x = malloc(n * (s->f64 ? 8 : 4)))) goto oom;
  if (s->history) {
    s->hist_cap = s->max_iter ? (size_t)s->max_iter
                              : (n < MAX_ITER_LIMIT / 10 ? 10 * n : MAX_ITER_LIMIT);
    if (!(s->hist = malloc(s->hist_cap * sizeof *s->hist))) goto oom;
  }
  return CLI_OK;
oom:
  fprintf(stderr, "gkc: out of memory for the vectors of a %d x %d solve\n", A->rows, A->cols);
  return CLI_FAIL;
}

/* The history as a table (every entry up to 100, else about 50 evenly
 * spaced ones and the last), then log10 of it plotted against the iteration. */
static void print_history(const double *h, size_t n) {
  if (n == 0) {
    printf("history:        (no iterations)\n");
    return;
  }
  size_t step = n <= 100 ? 1 : (n + 49) / 50;
  printf("history:        iteration  ||r|| / ||b||\n");
  for (size_t k = 0; k < n; k += step) printf("                %9zu  %.3e\n", k + 1, h[k]);
  if ((n - 1) % step) printf("                %9zu  %.3e\n", n, h[n - 1]);
  enum { W = 60, H = 12 };
  double lo = INFINITY, hi = -INFINITY;
  for (size_t k = 0; k < n; k++)
    if (h[k] > 0 && isfinite(h[k])) lo = fmin(lo, log10(h[k])), hi = fmax(hi, log10(h[k]));
  if (!(lo <= hi)) return; /* nothing plottable (all zero or NaN) */
  lo = floor(lo), hi = ceil(hi);
  if (hi == lo) hi = lo + 1;
  char grid[H][W + 1];
  memset(grid, ' ', sizeof grid);
  size_t cols = n < W ? n : W;
  for (size_t x = 0; x < cols; x++) {
    /* The column's last iteration: the curve ends at the last value. */
    size_t k = cols == 1 ? n - 1 : (size_t)((double)x * (double)(n - 1) / (double)(cols - 1) + 0.5);
    if (!(h[k] > 0) || !isfinite(h[k])) continue;
    int y = (int)lround((hi - log10(h[k])) / (hi - lo) * (H - 1));
    grid[y][x] = '*';
  }
  printf("\nlog10(||r|| / ||b||) against the iteration:\n");
  for (int y = 0; y < H; y++) {
    double v = hi - (hi - lo) * y / (H - 1);
    if (v == 0) v = 0; /* not "-0.0" */
    grid[y][cols] = 0;
    if (y == 0 || y == H - 1 || y == (H - 1) / 2)
      printf("%7.1f |%s\n", v, grid[y]);
    else
      printf("        |%s\n", grid[y]);
  }
  printf("        +");
  for (size_t x = 0; x < cols; x++) putchar('-');
  if (cols > 1)
    printf("\n         1%*zu\n", (int)cols - 1, n);
  else
    printf("\n         1\n");
}

static void print_json_history(const double *h, size_t n) {
  /* cli_out has scalars only: the array is written in place, as the last field. */
  fputs(", \"history\": [", stdout);
  for (size_t k = 0; k < n; k++) {
    if (isfinite(h[k]))
      printf("%s%.10g", k ? ", " : "", h[k]);
    else
      printf("%snull", k ? ", " : "");
  }
  fputs("]", stdout);
}

static int run(cli_globals *g, int argc, char **argv) {
  solve_job s = {.rtol = 1e-6};
  gkc_conn *conn = NULL;
  cli_limits lim;
  uint32_t mat = 0;
  int have_mat = 0;
  int rc = parse(g, &s, argc, argv);
  if (rc >= 0) return rc;
  cli_limits_get(g, &lim);
  if ((rc = load(g, &lim, &s)) || (rc = cli_limits_connect(g, &lim, &conn))) goto done;

  int32_t n = s.A.rows;
  size_t nb = (size_t)n * (s.f64 ? 8 : 4);
  gkc_dtype dt = s.f64 ? GKC_F64 : GKC_F32;
  gkc_csr A = {s.A.rows, s.A.cols, s.A.nnz, s.A.row_ptr, s.A.col_idx, s.A.values};
  char up_algo[32];
  double t0 = cli_now_us();
  int err = s.devices ? gkc_csr_upload_partitioned(conn, &A, s.devices, 0, &mat)
                      : gkc_csr_upload(conn, &A, 0, &mat, up_algo);
  double upload_us = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  have_mat = 1;
  gkc_solve_args a = GKC_SOLVE_ARGS_INIT;
  a.matrix = mat;
  a.b = gkc_ref_as(gkc_ref_mem(s.b, nb), dt);
  if (s.x0) a.x0 = gkc_ref_as(gkc_ref_mem(s.x0, nb), dt);
  a.method = (gkc_solve_method)s.method;
  a.precond = (gkc_solve_precond)s.precond;
  a.rtol = s.rtol, a.atol = s.atol, a.max_iter = s.max_iter;
  a.history = s.hist, a.history_cap = s.hist_cap;
  a.fp32 = s.fp32;
  gkc_out out = gkc_out_mem(s.x, nb);
  gkc_solve_result res;
  gkc_info info;
  t0 = cli_now_us();
  err = gkc_solve(conn, &a, &out, &res, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }

  cli_out o;
  cli_out_begin(&o, g->json);
  cli_out_str(&o, "matrix", "matrix", s.matrix);
  cli_out_int(&o, "n", "n", n);
  cli_out_int(&o, "nnz", "nnz", s.A.nnz);
  cli_out_str(&o, "b", "b", s.b_path ? s.b_path : "A * ones");
  cli_out_str(&o, "dtype", "dtype", s.f64 ? "float64" : "float32");
  cli_out_str(&o, "method", "method", res.method);
  cli_out_str(&o, "precond", "precond", res.precond);
  if (res.levels > 0) {
    cli_out_int(&o, "levels", "AMG levels", res.levels);
    cli_out_us(&o, "amg_setup_us", "AMG setup", res.amg_setup_us);
    cli_out_bool(&o, "amg_reused", "AMG hierarchy reused", res.amg_reused);
  }
  cli_out_num(&o, "rtol", "rtol", s.rtol, "%g");
  if (s.atol > 0) cli_out_num(&o, "atol", "atol", s.atol, "%g");
  cli_out_int(&o, "iterations", "iterations", res.iterations);
  cli_out_bool(&o, "converged", "converged", res.converged);
  cli_out_str(&o, "reason", "reason", res.reason);
  cli_out_num(&o, "residual", "residual", res.residual, "%.3e");
  if (!s.b_path) { /* the answer is ones: ||x - 1|| / ||1|| */
    double ee = 0;
    for (int32_t i = 0; i < n; i++) {
      double xi = s.f64 ? ((double *)s.x)[i] : ((float *)s.x)[i];
      ee += (xi - 1) * (xi - 1);
    }
    cli_out_num(&o, "error_vs_ones", "error vs ones", sqrt(ee / n), "%.3e");
  }
  cli_out_str(&o, "algo", "algo", info.algo);
  cli_out_us(&o, "upload_us", "upload", upload_us);
  cli_out_us(&o, "round_trip_us", "solve time", rtt);
  cli_out_times(&o, &info);
  cli_out_num(&o, "iterations_per_s", "iterations/s",
              res.iterations > 0 ? (double)res.iterations / (rtt / 1e6) : 0, "%.1f");
  if (s.out_path && (rc = s.f64 ? cli_write_npy_f64(s.out_path, 1, (int64_t[]){n}, s.x)
                                 : cli_write_npy(s.out_path, 1, (int64_t[]){n}, s.x)) == CLI_OK)
    cli_out_str(&o, "out", "wrote", s.out_path);
  if (s.history) {
    size_t hn = res.history_len < s.hist_cap ? res.history_len : s.hist_cap;
    if (g->json)
      print_json_history(s.hist, hn);
    else
      print_history(s.hist, hn);
  }
  cli_out_end(&o);
  if (!rc && !res.converged) {
    fprintf(stderr, "gkc: solve did not converge: it stopped (%s) after %lld iterations at "
            "residual %.3e, rtol %g\n", res.reason, (long long)res.iterations, res.residual,
            s.rtol);
    rc = CLI_FAIL;
  }
done:
  if (have_mat) gkc_release_matrix(conn, mat);
  gkc_close(conn);
  cli_limits_close(&lim);
  mtx_free(&s.A);
  free(s.b), free(s.x0), free(s.x), free(s.hist);
  return rc;
}

const cli_cmd cli_solve_cmd = {"solve", "solve A x = b by cg, pcg or bicgstab (precond none, jacobi, amg, auto), inside gkcd",
                               usage, run};
