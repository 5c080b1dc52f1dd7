/* e2e_lengths.c: every array-length mismatch of every method, against a real
 * gkcd.  Each error must be invalid_argument, name the wrong argument first
 * ("argument 'col_idx' ..."), and give both lengths: what was sent and what
 * the other arguments require.
 *
 * Arrays come by value (bin), in a shared-memory region and as resident
 * handles.  Dimensions and data are drawn afresh each run (GKC_TEST_SEED
 * replays), and each set of arrays is first sent with the right lengths and
 * its result compared with a float64 reference, so that the length is the
 * only thing wrong in each failing call.  GKC_TEST_VERBOSE=1 prints every
 * message.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fixture.h"
#include "gkc.h"
#include "rawrpc.h"
#include "test.h"

static fixture d;
static gkc_conn *gc;

static int rnd(int lo, int hi) { return lo + (int)(test_rand_u64(&rr_rng) % (uint64_t)(hi - lo + 1)); }

/* n appears in msg as a whole number, not inside a longer one. */
static int has_number(const char *msg, uint64_t n) {
  char want[24];
  int len = snprintf(want, sizeof want, "%llu", (unsigned long long)n);
  for (const char *p = strstr(msg, want); p; p = strstr(p + 1, want)) {
    int before = p > msg && p[-1] >= '0' && p[-1] <= '9';
    int after = p[len] >= '0' && p[len] <= '9';
    if (!before && !after) return 1;
  }
  return 0;
}

/* code is the error's name ("invalid_argument"), msg its message: the first
 * argument it names must be arg, and it must hold both numbers. */
#define CHECK_LEN(code, msg, arg, sent, need) check_len_(__LINE__, code, msg, arg, sent, need)
static void check_len_(int line, const char *code, const char *msg, const char *arg,
                       uint64_t sent, uint64_t need) {
  char quoted[40];
  snprintf(quoted, sizeof quoted, "argument '%s'", arg);
  const char *first = strstr(msg, "argument '");
  char why[800] = "";
  if (strcmp(code, "invalid_argument") != 0)
    snprintf(why, sizeof why, "got %s (%s), expected invalid_argument", code, msg);
  else if (!first || strncmp(first, quoted, strlen(quoted)) != 0)
    snprintf(why, sizeof why, "\"%s\" does not name %s first", msg, quoted);
  else if (!has_number(msg, sent) || !has_number(msg, need))
    snprintf(why, sizeof why, "\"%s\" lacks %llu (sent) or %llu (required)", msg,
             (unsigned long long)sent, (unsigned long long)need);
  rr_check_at(__FILE__, line, !why[0], "%s", why);
  if (rr_env_flag("GKC_TEST_VERBOSE")) fprintf(stderr, "  [%s] %s\n", rr_ctx, msg);
}

/* A libgkc call's outcome, for CHECK_LEN. */
#define LIB_LEN(rc, arg, sent, need) \
  check_len_(__LINE__, (rc) ? gkc_errname(rc) : "success", gkc_errmsg(gc), arg, sent, need)

static uint32_t upload(const void *p, size_t bytes, gkc_dtype dt) {
  uint32_t h;
  int rc = gkc_upload(gc, gkc_ref_mem(p, bytes), dt, 0, &h);
  if (rc) TEST_FAIL("upload of %zu bytes: %s", bytes, gkc_errmsg(gc));
  return h;
}

/* 1 to 3 elements, never all of n. */
static int delta(int n) { return rnd(1, n > 3 ? 3 : n - 1); }

/* ------------------------------------------------------------------------ */

static void test_sgemm(void) {
  int m = rnd(2, 9), n = rnd(2, 9), k = rnd(2, 9), mk = m * k, kn = k * n, mn = m * n;
  float *a = rr_rand_floats(mk + 8), *b = rr_rand_floats(kn + 8), *c = rr_rand_floats(mn + 8);
  float *out = malloc((size_t)mn * 4);
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = m, s.n = n, s.k = k, s.alpha = 0.75f;
  s.a = gkc_ref_mem(a, (size_t)mk * 4), s.b = gkc_ref_mem(b, (size_t)kn * 4);
  gkc_out o = gkc_out_mem(out, (size_t)mn * 4);

  rr_ctx = "sgemm: right lengths";
  char why[200] = "";
  int rc = gkc_sgemm_ref(gc, &s, &o, NULL);
  CHECK(rc == 0 && rr_sgemm_entries_ok(out, a, b, m, n, k, 0.75, mn, why, sizeof why),
        "%s %s", rc ? gkc_errmsg(gc) : "", why);

  int da = delta(mk), db = delta(kn), dc = delta(mn);
  rr_ctx = "sgemm: a short";
  s.a.bytes = (size_t)(mk - da) * 4;
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "a", mk - da, mk);
  rr_ctx = "sgemm: a long";
  s.a.bytes = (size_t)(mk + da) * 4;
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "a", mk + da, mk);
  s.a.bytes = (size_t)mk * 4;
  rr_ctx = "sgemm: b short";
  s.b.bytes = (size_t)(kn - db) * 4;
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "b", kn - db, kn);
  s.b.bytes = (size_t)kn * 4;
  rr_ctx = "sgemm: c long (beta != 0)";
  s.beta = 0.5f, s.c = gkc_ref_mem(c, (size_t)(mn + dc) * 4);
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "c", mn + dc, mn);
  rr_ctx = "sgemm: c short (beta == 0: still checked)";
  s.beta = 0.0f, s.c = gkc_ref_mem(c, (size_t)(mn - dc) * 4);
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "c", mn - dc, mn);
  s.c = (gkc_ref){0};

  /* In a region: a at 0, b after it, then 8 spare floats. */
  gkc_region *reg;
  size_t rbytes = (size_t)(mk + kn + 8) * 4;
  if (gkc_region_create(gc, rbytes, &reg)) TEST_FAIL("region: %s", gkc_errmsg(gc));
  memcpy(gkc_region_floats(reg), a, (size_t)mk * 4);
  memcpy(gkc_region_floats(reg) + mk, b, (size_t)kn * 4);
  s.a = gkc_ref_region(reg, 0, (size_t)mk * 4);
  s.b = gkc_ref_region(reg, (uint64_t)mk * 4, (size_t)kn * 4);
  rr_ctx = "sgemm: a and b in a region, right lengths";
  rc = gkc_sgemm_ref(gc, &s, &o, NULL);
  CHECK(rc == 0 && rr_sgemm_entries_ok(out, a, b, m, n, k, 0.75, mn, why, sizeof why),
        "%s %s", rc ? gkc_errmsg(gc) : "", why);
  rr_ctx = "sgemm: b's region span long";
  s.b.bytes = (size_t)(kn + db) * 4;
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "b", kn + db, kn);
  rr_ctx = "sgemm: b's region span past the region's end";
  s.b.bytes = (size_t)(kn + 100) * 4;
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "b", (uint64_t)(mk + kn + 100) * 4, rbytes);
  s.b.bytes = (size_t)kn * 4;
  rr_ctx = "sgemm: out region too small for c";
  gkc_out ro = gkc_out_region(reg, rbytes - 4);
  LIB_LEN(gkc_sgemm_ref(gc, &s, &ro, NULL), "out", (uint64_t)mn * 4, rbytes);

  /* As handles. */
  rr_ctx = "sgemm: a as a short handle";
  uint32_t ha = upload(a, (size_t)(mk - da) * 4, GKC_F32);
  s.a = gkc_ref_handle(ha, 0);
  LIB_LEN(gkc_sgemm_ref(gc, &s, &o, NULL), "a", mk - da, mk);
  rr_ctx = "sgemm: out handle of the wrong length";
  s.a = gkc_ref_mem(a, (size_t)mk * 4);
  uint32_t hc = upload(c, (size_t)(mn + dc) * 4, GKC_F32);
  gkc_out ho = gkc_out_handle(hc);
  LIB_LEN(gkc_sgemm_ref(gc, &s, &ho, NULL), "out", (uint64_t)(mn + dc) * 4, (uint64_t)mn * 4);

  gkc_release(gc, ha);
  gkc_release(gc, hc);
  gkc_region_release(gc, reg);
  free(a), free(b), free(c), free(out);
}

static void test_reduce_upload(void) {
  int n = rnd(3, 500);
  float *x = rr_rand_floats(n);
  double ref = 0;
  for (int i = 0; i < n; i++) ref += x[i];
  double v = NAN;
  rr_ctx = "reduce: right length";
  int rc = gkc_reduce_ref(gc, gkc_ref_mem(x, (size_t)n * 4), GKC_SUM, &v, NULL, NULL, NULL);
  CHECK(rc == 0 && fabs(v - ref) <= 1e-5 * n, "sum %g, reference %g (%s)", v, ref, gkc_errmsg(gc));
  int odd = rnd(1, 3);
  rr_ctx = "reduce: x not a whole number of float32";
  rc = gkc_reduce_ref(gc, gkc_ref_mem(x, (size_t)n * 4 - odd), GKC_SUM, &v, NULL, NULL, NULL);
  LIB_LEN(rc, "x", (uint64_t)n * 4 - odd, 4);
  rr_ctx = "reduce: x empty";
  rc = gkc_reduce_ref(gc, gkc_ref_mem(x, 0), GKC_SUM, &v, NULL, NULL, NULL);
  LIB_LEN(rc, "x", 0, 1);

  uint32_t h;
  rr_ctx = "upload: data not a whole number of int32";
  rc = gkc_upload(gc, gkc_ref_mem(x, (size_t)n * 4 - odd), GKC_I32, 0, &h);
  LIB_LEN(rc, "data", (uint64_t)n * 4 - odd, 4);
  rr_ctx = "upload: data empty";
  rc = gkc_upload(gc, gkc_ref_mem(x, 0), GKC_F32, 0, &h);
  LIB_LEN(rc, "data", 0, 1);
  free(x);
}

static void test_dot_axpby(void) {
  int n = rnd(4, 300), dn = delta(n);
  float *x = rr_rand_floats(n + 3), *y = rr_rand_floats(n + 3), *out = malloc((size_t)n * 4);
  double ref = 0, v = NAN;
  for (int i = 0; i < n; i++) ref += (double)x[i] * y[i];
  size_t nb = (size_t)n * 4;
  rr_ctx = "dot: right lengths";
  int rc = gkc_dot(gc, gkc_ref_mem(x, nb), gkc_ref_mem(y, nb), &v, NULL);
  CHECK(rc == 0 && fabs(v - ref) <= 1e-5 * n, "dot %g, reference %g (%s)", v, ref, gkc_errmsg(gc));
  rr_ctx = "dot: y short";
  rc = gkc_dot(gc, gkc_ref_mem(x, nb), gkc_ref_mem(y, nb - 4 * dn), &v, NULL);
  LIB_LEN(rc, "y", n - dn, n);
  rr_ctx = "dot: y a longer handle";
  uint32_t hx = upload(x, nb, GKC_F32), hy = upload(y, nb + 4 * dn, GKC_F32);
  rc = gkc_dot(gc, gkc_ref_handle(hx, 0), gkc_ref_handle(hy, 0), &v, NULL);
  LIB_LEN(rc, "y", n + dn, n);
  rr_ctx = "dot: x not a whole number of float32";
  rc = gkc_dot(gc, gkc_ref_mem(x, nb - 2), gkc_ref_mem(y, nb), &v, NULL);
  LIB_LEN(rc, "x", nb - 2, 4);

  gkc_out o = gkc_out_mem(out, nb);
  rr_ctx = "axpby: right lengths";
  rc = gkc_axpby(gc, 2.0f, gkc_ref_mem(x, nb), -0.5f, gkc_ref_mem(y, nb), &o, NULL);
  int ok = rc == 0;
  for (int i = 0; ok && i < n; i++)
    ok = fabs(out[i] - (2.0 * x[i] - 0.5 * y[i])) <= 1e-6 * (2 * fabs(x[i]) + fabs(y[i])) + 1e-7;
  CHECK(ok, "axpby wrong or failed (%s)", gkc_errmsg(gc));
  rr_ctx = "axpby: y long";
  rc = gkc_axpby(gc, 2.0f, gkc_ref_mem(x, nb), -0.5f, gkc_ref_mem(y, nb + 4 * dn), &o, NULL);
  LIB_LEN(rc, "y", n + dn, n);
  rr_ctx = "axpby: out handle of the wrong length";
  gkc_out ho = gkc_out_handle(hy);
  rc = gkc_axpby(gc, 2.0f, gkc_ref_mem(x, nb), -0.5f, gkc_ref_mem(y, nb), &ho, NULL);
  LIB_LEN(rc, "out", nb + 4 * dn, nb);
  gkc_release(gc, hx);
  gkc_release(gc, hy);
  free(x), free(y), free(out);
}

/* A random rows x cols CSR matrix with at least 4 nonzeros, with spare
 * room after each array for the calls that send them too long. */
typedef struct {
  int32_t rows, cols, nnz;
  int32_t *rp, *ci;
  float *v;
} csr;

static void random_csr(csr *A) {
  A->rows = rnd(4, 40), A->cols = rnd(2, 40);
  A->rp = malloc(((size_t)A->rows + 2) * 4); /* one spare: "row_ptr long" sends it */
  A->ci = calloc((size_t)A->rows * A->cols + 4, 4);
  A->rp[0] = 0;
  for (int r = 0; r < A->rows; r++) {
    int len = rnd(1, A->cols), at = A->rp[r];
    for (int j = 0; j < len; j++) A->ci[at + j] = (int32_t)((j * A->cols) / len);
    A->rp[r + 1] = at + len;
  }
  A->nnz = A->rp[A->rows];
  A->rp[A->rows + 1] = A->nnz;
  A->v = rr_rand_floats((size_t)A->nnz + 8);
}

static int spmv_ok(const csr *A, const float *x, const float *y) {
  for (int r = 0; r < A->rows; r++) {
    double ref = 0, mag = 0;
    for (int j = A->rp[r]; j < A->rp[r + 1]; j++) {
      ref += (double)A->v[j] * x[A->ci[j]];
      mag += fabs((double)A->v[j] * x[A->ci[j]]);
    }
    if (!(fabs(y[r] - ref) <= 1e-5 * mag + 1e-7)) return 0;
  }
  return 1;
}

static void test_spmv(void) {
  csr A;
  random_csr(&A);
  int rows = A.rows, cols = A.cols, nnz = A.nnz, dz = delta(nnz);
  float *x = rr_rand_floats((size_t)cols + 8), *y = rr_rand_floats((size_t)rows + 8);
  float *out = malloc((size_t)rows * 4);
  gkc_spmv_args s = GKC_SPMV_ARGS_INIT;
  s.rows = rows, s.cols = cols;
  s.row_ptr = gkc_ref_mem(A.rp, ((size_t)rows + 1) * 4);
  s.col_idx = gkc_ref_mem(A.ci, (size_t)nnz * 4);
  s.values = gkc_ref_mem(A.v, (size_t)nnz * 4);
  s.x = gkc_ref_mem(x, (size_t)cols * 4);
  gkc_out o = gkc_out_mem(out, (size_t)rows * 4);
  rr_ctx = "spmv: right lengths";
  int rc = gkc_spmv_ref(gc, &s, &o, NULL);
  CHECK(rc == 0 && spmv_ok(&A, x, out), "spmv wrong or failed (%s)", gkc_errmsg(gc));

  rr_ctx = "spmv: row_ptr short";
  s.row_ptr.bytes = (size_t)rows * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "row_ptr", rows, rows + 1);
  s.row_ptr.bytes = ((size_t)rows + 1) * 4;
  rr_ctx = "spmv: col_idx shorter than nnz";
  s.col_idx.bytes = (size_t)(nnz - dz) * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "col_idx", nnz - dz, nnz);
  rr_ctx = "spmv: col_idx longer than nnz";
  s.col_idx.bytes = (size_t)(nnz + dz) * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "col_idx", nnz + dz, nnz);
  rr_ctx = "spmv: col_idx not a whole number of int32";
  s.col_idx.bytes = (size_t)nnz * 4 - 2;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "col_idx", (uint64_t)nnz * 4 - 2, 4);
  s.col_idx.bytes = (size_t)nnz * 4;
  rr_ctx = "spmv: values shorter than nnz";
  s.values.bytes = (size_t)(nnz - dz) * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "values", nnz - dz, nnz);
  rr_ctx = "spmv: values longer than nnz";
  s.values.bytes = (size_t)(nnz + dz) * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "values", nnz + dz, nnz);
  rr_ctx = "spmv: row_ptr[rows] disagrees with col_idx and values";
  s.col_idx.bytes = s.values.bytes = (size_t)(nnz - dz) * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "row_ptr", nnz, nnz - dz);
  s.col_idx.bytes = s.values.bytes = (size_t)nnz * 4;
  rr_ctx = "spmv: x long";
  int dx = rnd(1, 3), dy = delta(rows);
  s.x.bytes = (size_t)(cols + dx) * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "x", cols + dx, cols);
  s.x.bytes = (size_t)cols * 4;
  rr_ctx = "spmv: y short (beta != 0)";
  s.beta = 1.0f, s.y = gkc_ref_mem(y, (size_t)(rows - dy) * 4);
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "y", rows - dy, rows);
  s.beta = 0.0f, s.y = (gkc_ref){0};

  rr_ctx = "spmv: values as a short handle";
  uint32_t hv = upload(A.v, (size_t)(nnz - dz) * 4, GKC_F32);
  s.values = gkc_ref_handle(hv, 0);
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "values", nnz - dz, nnz);
  s.values = gkc_ref_mem(A.v, (size_t)nnz * 4);
  rr_ctx = "spmv: out handle of the wrong length";
  uint32_t hy = upload(y, (size_t)(rows + dx) * 4, GKC_F32);
  gkc_out ho = gkc_out_handle(hy);
  LIB_LEN(gkc_spmv_ref(gc, &s, &ho, NULL), "out", (uint64_t)(rows + dx) * 4, (uint64_t)rows * 4);

  gkc_region *reg;
  size_t rbytes = ((size_t)cols + 4) * 4;
  if (gkc_region_create(gc, rbytes, &reg)) TEST_FAIL("region: %s", gkc_errmsg(gc));
  memcpy(gkc_region_floats(reg), x, (size_t)cols * 4);
  rr_ctx = "spmv: x in a region, right length";
  s.x = gkc_ref_region(reg, 0, (size_t)cols * 4);
  rc = gkc_spmv_ref(gc, &s, &o, NULL);
  CHECK(rc == 0 && spmv_ok(&A, x, out), "spmv wrong or failed (%s)", gkc_errmsg(gc));
  rr_ctx = "spmv: x's region span short";
  s.x = gkc_ref_region(reg, 4, (size_t)(cols - 1) * 4);
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "x", cols - 1, cols);
  rr_ctx = "spmv: x's region span past the region's end";
  s.x = gkc_ref_region(reg, 32, (size_t)cols * 4);
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "x", 32 + (uint64_t)cols * 4, rbytes);

  gkc_region_release(gc, reg);
  gkc_release(gc, hv);
  gkc_release(gc, hy);
  free(A.rp), free(A.ci), free(A.v), free(x), free(y), free(out);
}

/* csr_upload, by hand (libgkc derives the lengths from nnz itself). */
static void test_csr_upload(void) {
  csr A;
  random_csr(&A);
  int rows = A.rows, cols = A.cols, nnz = A.nnz, dz = delta(nnz);
  size_t rpb = ((size_t)rows + 1) * 4, nzb = (size_t)nnz * 4;
  rr_conn c;
  rr_reply r;
  rr_open(&c, &d);
  uint32_t id = 100;
#define CSR_CALL(rpn, cin, vn)                                                             \
  rr_call(&c, ++id, "csr_upload", ARGS(AI("rows", rows), AI("cols", cols),                \
                                        AB("row_ptr", A.rp, rpn), AB("col_idx", A.ci, cin), \
                                        AB("values", A.v, vn)), &r, 30000)
  rr_ctx = "csr_upload: right lengths, then spmv on it";
  CSR_CALL(rpb, nzb, nzb);
  CHECK(rr_reply_ok(&r, id), "%s", rr_reply_desc(&r));
  rr_reply_free(&r);
  uint32_t mat;
  gkc_csr g = {rows, cols, nnz, A.rp, A.ci, A.v};
  if (gkc_csr_upload(gc, &g, 0, &mat, NULL)) TEST_FAIL("csr_upload: %s", gkc_errmsg(gc));
  float *x = rr_rand_floats((size_t)cols + 8), *out = malloc((size_t)rows * 4);
  gkc_spmv_args s = GKC_SPMV_ARGS_INIT;
  s.use_matrix = 1, s.matrix = mat, s.x = gkc_ref_mem(x, (size_t)cols * 4);
  gkc_out o = gkc_out_mem(out, (size_t)rows * 4);
  int rc = gkc_spmv_ref(gc, &s, &o, NULL);
  CHECK(rc == 0 && spmv_ok(&A, x, out), "spmv on the matrix wrong or failed (%s)", gkc_errmsg(gc));
  rr_ctx = "spmv: x long on a resident matrix";
  s.x.bytes = (size_t)(cols + dz) * 4;
  LIB_LEN(gkc_spmv_ref(gc, &s, &o, NULL), "x", cols + dz, cols);
  gkc_release_matrix(gc, mat);

  rr_ctx = "csr_upload: row_ptr long";
  CSR_CALL(rpb + 4, nzb, nzb);
  CHECK_LEN(r.code, r.msg, "row_ptr", rows + 2, rows + 1);
  rr_reply_free(&r);
  rr_ctx = "csr_upload: col_idx short";
  CSR_CALL(rpb, nzb - 4 * dz, nzb);
  CHECK_LEN(r.code, r.msg, "col_idx", nnz - dz, nnz);
  rr_reply_free(&r);
  rr_ctx = "csr_upload: values short";
  CSR_CALL(rpb, nzb, nzb - 4 * dz);
  CHECK_LEN(r.code, r.msg, "values", nnz - dz, nnz);
  rr_reply_free(&r);
  rr_ctx = "csr_upload: row_ptr[rows] disagrees with col_idx and values";
  CSR_CALL(rpb, nzb + 4 * dz, nzb + 4 * dz);
  CHECK_LEN(r.code, r.msg, "row_ptr", nnz, nnz + dz);
  rr_reply_free(&r);
#undef CSR_CALL
  rr_close(&c);
  free(A.rp), free(A.ci), free(A.v), free(x), free(out);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  rr_rng = test_seed();
  double t0 = rr_now_s();
  const char *args[] = {"--threads", "2", NULL};
  fixture_start(&d, args, NULL);
  if (gkc_connect(&gc, d.sock)) TEST_FAIL("connect: %s", gkc_errmsg(gc));

  SECTION(test_sgemm());
  SECTION(test_reduce_upload());
  SECTION(test_dot_axpby());
  SECTION(test_spmv());
  SECTION(test_csr_upload());

  gkc_close(gc);
  int st = fixture_stop(&d, SIGTERM);
  rr_ctx = "gkcd exit";
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exit status %#x", st);
  rr_print_totals("e2e_lengths", t0);
  return rr_failed ? 1 : 0;
}
