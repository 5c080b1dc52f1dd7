/* e2e_resident_matrices.c: resident matrices and spmv, dot and axpby, against
 * a real gkcd (PROTOCOL.md, "Data that stays").
 *
 * Results are compared with double-precision references (tests/lib/resutil.c);
 * errors are checked for their code, for a message that names what is wrong,
 * and for the daemon serving on afterwards.  GKC_TEST_BACKEND picks the
 * daemon's backend (cpu by default).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "mtx.h"
#include "npy.h"
#include "proto_rpc.h"
#include "resutil.h"
#include "test.h"

/* --- resident matrices and spmv ------------------------------------------------------------ */

static void test_matrices(gkc_conn *c) {
  fprintf(stderr, "csr_upload and spmv\n");
  test_csr A = rand_csr(500, 400, 0.02);
  gkc_csr g = as_gkc(&A);
  size_t xb = 400 * 4, yb = 500 * 4;
  float *x = rand_vec(400), *y0 = rand_vec(500);
  float *yv = malloc(yb), *ym = malloc(yb);
  uint32_t mat;
  char algo[32];
  double matrices = resident_num(c, "matrices");
  ASSERT_EQ(gkc_csr_upload(c, &g, 0, &mat, algo), 0);
  expect_resident(c, "matrices", matrices + 1);
  fprintf(stderr, "  matrix %u, algo %s\n", mat, algo);
  ASSERT(algo[0]);

  /* By value and by matrix: bit-identical. */
  ASSERT_EQ(gkc_spmv(c, &g, 1.5f, x, 0.0f, yv, NULL, NULL), 0);
  check_spmv("spmv by value", &A, 1.5f, x, 0.0f, NULL, yv);
  gkc_spmv_args s = GKC_SPMV_ARGS_INIT;
  s.use_matrix = 1, s.matrix = mat, s.alpha = 1.5f;
  s.x = gkc_ref_mem(x, xb);
  gkc_out out = gkc_out_mem(ym, yb);
  gkc_info info;
  ASSERT_EQ(gkc_spmv_ref(c, &s, &out, &info), 0);
  ASSERT(memcmp(yv, ym, yb) == 0);
  /* With beta and y. */
  memcpy(yv, y0, yb);
  ASSERT_EQ(gkc_spmv(c, &g, -1.0f, x, 0.5f, yv, NULL, NULL), 0);
  check_spmv("spmv by value, beta", &A, -1.0f, x, 0.5f, y0, yv);
  s.alpha = -1.0f, s.beta = 0.5f;
  s.y = gkc_ref_mem(y0, yb);
  out = gkc_out_mem(ym, yb);
  ASSERT_EQ(gkc_spmv_ref(c, &s, &out, NULL), 0);
  ASSERT(memcmp(yv, ym, yb) == 0);
  /* All resident: x and y handles, into a new handle, then over it. */
  uint32_t hx, hy;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, xb), GKC_F32, 0, &hx), 0);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(y0, yb), GKC_F32, 0, &hy), 0);
  s.x = gkc_ref_handle(hx, xb);
  s.y = gkc_ref_handle(hy, yb);
  out = gkc_out_new_handle();
  ASSERT_EQ(gkc_spmv_ref(c, &s, &out, NULL), 0);
  uint32_t hout = out.handle;
  ASSERT(out.bytes == yb);
  memset(ym, 0, yb);
  ASSERT_EQ(gkc_download(c, hout, ym, yb), 0);
  ASSERT(memcmp(yv, ym, yb) == 0);
  out = gkc_out_handle(hout);
  ASSERT_EQ(gkc_spmv_ref(c, &s, &out, NULL), 0);
  out = gkc_out_handle(hy); /* y is an input: not in place for spmv */
  EXPECT_ERR(c, gkc_spmv_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");
  out = gkc_out_handle(hx); /* the wrong length, and an input */
  EXPECT_ERR(c, gkc_spmv_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");
  s.x = gkc_ref_handle(hy, yb); /* 500 floats, not cols = 400 */
  out = gkc_out_mem(ym, yb);
  EXPECT_ERR(c, gkc_spmv_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'x'");
  s.x = gkc_ref_handle(hx, xb);

  /* A raw CSR given by region references gives the same y. */
  size_t rpb = (A.rows + 1) * 4, nzb = (size_t)A.nnz * 4;
  gkc_region *r;
  ASSERT_EQ(gkc_region_create(c, rpb + 2 * nzb + xb + yb + yb, &r), 0);
  char *base = gkc_region_data(r);
  memcpy(base, A.row_ptr, rpb);
  memcpy(base + rpb, A.col_idx, nzb);
  memcpy(base + rpb + nzb, A.values, nzb);
  memcpy(base + rpb + 2 * nzb, x, xb);
  memcpy(base + rpb + 2 * nzb + xb, y0, yb);
  gkc_spmv_args sr = GKC_SPMV_ARGS_INIT;
  sr.rows = A.rows, sr.cols = A.cols;
  sr.row_ptr = gkc_ref_region(r, 0, rpb);
  sr.col_idx = gkc_ref_region(r, rpb, nzb);
  sr.values = gkc_ref_region(r, rpb + nzb, nzb);
  sr.x = gkc_ref_region(r, rpb + 2 * nzb, xb);
  sr.y = gkc_ref_region(r, rpb + 2 * nzb + xb, yb);
  sr.alpha = -1.0f, sr.beta = 0.5f;
  out = gkc_out_region(r, rpb + 2 * nzb + xb + yb);
  ASSERT_EQ(gkc_spmv_ref(c, &sr, &out, NULL), 0);
  ASSERT(memcmp(yv, base + rpb + 2 * nzb + xb + yb, yb) == 0);
  ASSERT_EQ(gkc_region_release(c, r), 0);

  /* Kinds do not mix: a matrix is not an array, nor an array a matrix. */
  EXPECT_ERR(c, gkc_download(c, mat, ym, yb), GKC_EINVALID_ARGUMENT, "handle");
  s.matrix = hx;
  EXPECT_ERR(c, gkc_spmv_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "matrix");
  s.matrix = mat;
  s.x = (gkc_ref){.kind = GKC_REF_HANDLE, .handle = mat};
  EXPECT_ERR(c, gkc_spmv_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'x'");
  s.x = gkc_ref_handle(hx, xb);

  /* csr_upload validates as spmv does. */
  test_csr B = rand_csr(50, 40, 0.1);
  gkc_csr gb = as_gkc(&B);
  uint32_t bad;
  B.row_ptr[50] += 1; /* row_ptr[rows] != nnz */
  EXPECT_ERR(c, gkc_csr_upload(c, &gb, 0, &bad, NULL), GKC_EINVALID_ARGUMENT, "row_ptr");
  B.row_ptr[50] -= 1;
  B.col_idx[0] = 40;
  EXPECT_ERR(c, gkc_csr_upload(c, &gb, 0, &bad, NULL), GKC_EINVALID_ARGUMENT, "col_idx");
  B.col_idx[0] = 0;

  /* A shared matrix serves another connection; a private one does not. */
  gkc_conn *o = conn_open();
  uint32_t smat;
  ASSERT_EQ(gkc_csr_upload(c, &g, 1, &smat, NULL), 0);
  gkc_spmv_args so = GKC_SPMV_ARGS_INIT;
  so.use_matrix = 1, so.matrix = smat, so.alpha = -1.0f, so.beta = 0.5f;
  so.x = gkc_ref_mem(x, xb), so.y = gkc_ref_mem(y0, yb);
  out = gkc_out_mem(ym, yb);
  ASSERT_EQ(gkc_spmv_ref(o, &so, &out, NULL), 0);
  ASSERT(memcmp(yv, ym, yb) == 0);
  so.matrix = mat;
  EXPECT_ERR(o, gkc_spmv_ref(o, &so, &out, NULL), GKC_EINVALID_ARGUMENT, "matrix");
  ASSERT_EQ(gkc_release(o, smat), 0); /* by the generic call: tried as an array, then a matrix */
  gkc_close(o);

  /* Released matrices are gone. */
  EXPECT_ERR(c, gkc_release_matrix(c, hx), GKC_EINVALID_ARGUMENT, "matrix");
  ASSERT_EQ(gkc_release_matrix(c, mat), 0);
  expect_resident(c, "matrices", matrices);
  EXPECT_ERR(c, gkc_spmv_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "matrix");
  EXPECT_ERR(c, gkc_release_matrix(c, mat), GKC_EINVALID_ARGUMENT, "matrix");
  EXPECT_ERR(c, gkc_release(c, mat), GKC_EINVALID_ARGUMENT, "neither");
  ASSERT_EQ(gkc_release(c, hx), 0);
  ASSERT_EQ(gkc_release(c, hy), 0);
  ASSERT_EQ(gkc_release(c, hout), 0);
  free_csr(&A), free_csr(&B);
  free(x), free(y0), free(yv), free(ym);
}

/* --- dot and axpby --------------------------------------------------------------------- */

static void check_axpby(const char *what, size_t n, float alpha, const float *x, float beta,
                        const float *y, const float *got) {
  for (size_t i = 0; i < n; i++) {
    double want = (double)alpha * x[i] + (double)beta * y[i];
    double tol = 1e-6 * (fabs((double)alpha * x[i]) + fabs((double)beta * y[i])) + 1e-30;
    if (!(fabs(got[i] - want) <= tol))
      TEST_FAIL("%s: y'[%zu] = %.9g, want %.9g", what, i, got[i], want);
  }
}

static void test_vectors(gkc_conn *c) {
  fprintf(stderr, "dot and axpby\n");
  static const size_t sizes[] = {1, 7, 1000, 100003};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t n = sizes[si], nb = n * 4;
    float *x = rand_vec(n), *y = rand_vec(n), *got = malloc(nb);
    double want = 0, mag = 0, d;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * y[i], mag += fabs((double)x[i] * y[i]);
    gkc_info info;
    ASSERT_EQ(gkc_dot(c, gkc_ref_mem(x, nb), gkc_ref_mem(y, nb), &d, &info), 0);
    ASSERT_NEAR(d, want, 1e-5 * mag);
    ASSERT(info.algo[0]);
    uint32_t hx, hy;
    ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, nb), GKC_F32, 0, &hx), 0);
    ASSERT_EQ(gkc_upload(c, gkc_ref_mem(y, nb), GKC_F32, 0, &hy), 0);
    ASSERT_EQ(gkc_dot(c, gkc_ref_handle(hx, nb), gkc_ref_handle(hy, nb), &d, NULL), 0);
    ASSERT_NEAR(d, want, 1e-5 * mag);
    ASSERT_EQ(gkc_dot(c, gkc_ref_handle(hx, nb), gkc_ref_handle(hx, nb), &d, NULL), 0);

    /* axpby into memory, a new handle, a region, and in place. */
    gkc_out out = gkc_out_mem(got, nb);
    ASSERT_EQ(gkc_axpby(c, 0.75f, gkc_ref_mem(x, nb), -2.0f, gkc_ref_mem(y, nb), &out, &info), 0);
    check_axpby("axpby", n, 0.75f, x, -2.0f, y, got);
    out = gkc_out_new_handle();
    ASSERT_EQ(gkc_axpby(c, 0.75f, gkc_ref_handle(hx, nb), -2.0f, gkc_ref_handle(hy, nb), &out,
                        NULL), 0);
    uint32_t hn = out.handle;
    ASSERT_EQ(gkc_download(c, hn, got, nb), 0);
    check_axpby("axpby -> new handle", n, 0.75f, x, -2.0f, y, got);
    gkc_region *r;
    ASSERT_EQ(gkc_region_create(c, nb + 4, &r), 0);
    out = gkc_out_region(r, 4);
    ASSERT_EQ(gkc_axpby(c, 1.0f, gkc_ref_handle(hx, nb), 1.0f, gkc_ref_mem(y, nb), &out, NULL),
              0);
    check_axpby("axpby -> region", n, 1.0f, x, 1.0f, y, (float *)((char *)gkc_region_data(r) + 4));
    ASSERT_EQ(gkc_region_release(c, r), 0);
    out = gkc_out_handle(hy); /* in place: y = 3 x - 0.5 y */
    ASSERT_EQ(gkc_axpby(c, 3.0f, gkc_ref_handle(hx, nb), -0.5f, gkc_ref_handle(hy, nb), &out,
                        NULL), 0);
    ASSERT_EQ(out.handle, hy);
    ASSERT_EQ(gkc_download(c, hy, got, nb), 0);
    check_axpby("axpby in place", n, 3.0f, x, -0.5f, y, got);
    if (n > 1) {
      /* Out may be y, not x; lengths must agree; f32 only. */
      out = gkc_out_handle(hx);
      EXPECT_ERR(c, gkc_axpby(c, 1.0f, gkc_ref_handle(hx, nb), 1.0f, gkc_ref_handle(hy, nb),
                              &out, NULL), GKC_EINVALID_ARGUMENT, "out");
      EXPECT_ERR(c, gkc_dot(c, gkc_ref_mem(x, nb), gkc_ref_mem(y, nb - 4), &d, NULL),
                 GKC_EINVALID_ARGUMENT, "'y'");
      out = gkc_out_mem(got, nb);
      EXPECT_ERR(c, gkc_axpby(c, 1.0f, gkc_ref_mem(x, nb - 4), 1.0f, gkc_ref_mem(y, nb), &out,
                              NULL), GKC_EINVALID_ARGUMENT, "'");
      uint32_t hi;
      ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, nb), GKC_I32, 0, &hi), 0);
      EXPECT_ERR(c, gkc_dot(c, gkc_ref_handle(hi, nb), gkc_ref_mem(y, nb), &d, NULL),
                 GKC_EINVALID_ARGUMENT, "'x'");
      ASSERT_EQ(gkc_release(c, hi), 0);
    }
    ASSERT_EQ(gkc_release(c, hx), 0);
    ASSERT_EQ(gkc_release(c, hy), 0);
    ASSERT_EQ(gkc_release(c, hn), 0);
    free(x), free(y), free(got);
  }
}

int main(void) {
  rng = test_seed();
  fixture_start(&F, NULL, NULL);
  gkc_conn *c = conn_open();
  test_matrices(c);
  test_vectors(c);
  res_stop(c);
  fprintf(stderr, "e2e_resident_matrices: all passed\n");
  return 0;
}
