/* e2e_resident_handles.c: resident arrays against a real gkcd (PROTOCOL.md,
 * "Data that stays"): handles, their errors and release, and sharing them.
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

/* --- resident arrays ----------------------------------------------------------------------- */

static void test_handles(gkc_conn *c) {
  fprintf(stderr, "handles\n");
  const int m = 23, n = 31, k = 19;
  size_t ab = (size_t)m * k * 4, bb = (size_t)k * n * 4, cb = (size_t)m * n * 4;
  float *a = rand_vec(ab / 4), *b = rand_vec(bb / 4), *got = malloc(cb);
  uint32_t ha, hb, hi;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(a, ab), GKC_F32, 0, &ha), 0);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(b, bb), GKC_F32, 0, &hb), 0);
  ASSERT(ha != hb);
  /* Round trips are exact, for f32 and i32. */
  float *back = malloc(ab);
  ASSERT_EQ(gkc_download(c, ha, back, ab), 0);
  ASSERT(memcmp(back, a, ab) == 0);
  int32_t iv[1000], ib[1000];
  for (int i = 0; i < 1000; i++) iv[i] = (int32_t)test_rand_u64(&rng);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(iv, sizeof iv), GKC_I32, 0, &hi), 0);
  ASSERT_EQ(gkc_download(c, hi, ib, sizeof ib), 0);
  ASSERT(memcmp(iv, ib, sizeof iv) == 0);
  EXPECT_ERR(c, gkc_download(c, ha, back, ab - 4), GKC_EINVALID_ARGUMENT, "bytes");

  /* As inputs, result by value. */
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = m, s.n = n, s.k = k;
  s.a = gkc_ref_handle(ha, ab);
  s.b = gkc_ref_handle(hb, bb);
  gkc_out out = gkc_out_mem(got, cb);
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &out, NULL), 0);
  check_gemm("sgemm handles", m, n, k, 1.0f, a, b, 0.0f, NULL, got);
  /* Into a new handle, then over it. */
  out = gkc_out_new_handle();
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &out, NULL), 0);
  ASSERT(out.bytes == cb);
  uint32_t hc = out.handle;
  ASSERT(hc != ha && hc != hb && hc != hi);
  ASSERT_EQ(gkc_download(c, hc, got, cb), 0);
  check_gemm("sgemm -> new handle", m, n, k, 1.0f, a, b, 0.0f, NULL, got);
  float *c0 = malloc(cb);
  memcpy(c0, got, cb);
  s.alpha = 2.0f, s.beta = -1.0f;
  s.c = gkc_ref_handle(hc, cb); /* reads C from hc ... */
  out = gkc_out_new_handle();   /* ... into another new one */
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &out, NULL), 0);
  uint32_t hc2 = out.handle;
  ASSERT_EQ(gkc_download(c, hc2, got, cb), 0);
  check_gemm("sgemm C from a handle", m, n, k, 2.0f, a, b, -1.0f, c0, got);
  s.c = (gkc_ref){0}, s.beta = 0.0f, s.alpha = 3.0f;
  out = gkc_out_handle(hc); /* overwrite hc */
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &out, NULL), 0);
  ASSERT_EQ(out.handle, hc);
  ASSERT_EQ(gkc_download(c, hc, got, cb), 0);
  check_gemm("sgemm -> existing handle", m, n, k, 3.0f, a, b, 0.0f, NULL, got);

  /* An output may not be one of the inputs (only axpby's y may). */
  s.alpha = 1.0f, s.beta = 1.0f;
  s.c = gkc_ref_handle(hc, cb);
  out = gkc_out_handle(hc);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");
  s.c = (gkc_ref){0}, s.beta = 0.0f;
  /* Wrong dtype, wrong length: as input and as output. */
  s.a = gkc_ref_handle(hi, 0);
  out = gkc_out_mem(got, cb);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'a'");
  s.a = gkc_ref_handle(hb, 0); /* k*n floats, not m*k */
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'a'");
  s.a = gkc_ref_handle(ha, ab);
  out = gkc_out_handle(hb);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");
  out = gkc_out_handle(hi);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");

  /* upload from a region and from a handle; download into a region. */
  gkc_region *r;
  ASSERT_EQ(gkc_region_create(c, 2 * ab + 8, &r), 0);
  memcpy((char *)gkc_region_data(r) + 4, a, ab);
  uint32_t hr, hh;
  ASSERT_EQ(gkc_upload(c, gkc_ref_region(r, 4, ab), GKC_F32, 0, &hr), 0);
  ASSERT_EQ(gkc_download(c, hr, back, ab), 0);
  if (memcmp(back, a, ab) != 0) TEST_FAIL("upload from a region: the resident copy differs");
  size_t got_bytes = 0;
  ASSERT_EQ(gkc_download_region(c, hr, r, ab + 8, &got_bytes), 0);
  ASSERT(got_bytes == ab);
  if (memcmp((char *)gkc_region_data(r) + ab + 8, a, ab) != 0)
    TEST_FAIL("download into a region: the bytes there differ from the array");
  ASSERT_EQ(gkc_upload(c, gkc_ref_handle(hr, ab), GKC_F32, 0, &hh), 0);
  {
    ASSERT_EQ(gkc_download(c, hh, back, ab), 0);
    if (memcmp(back, a, ab) != 0)
      TEST_FAIL("upload from a handle: the new array differs from its source");
  }
  EXPECT_ERR(c, gkc_download_region(c, hh, r, ab + 12, &got_bytes), GKC_EINVALID_ARGUMENT,
             "out");
  ASSERT_EQ(gkc_region_release(c, r), 0);

  /* Released: gone as input, as output, for download and for release. */
  ASSERT_EQ(gkc_release(c, hh), 0);
  EXPECT_ERR(c, gkc_download(c, hh, got, ab), GKC_EINVALID_ARGUMENT, "handle");
  EXPECT_ERR(c, gkc_release(c, hh), GKC_EINVALID_ARGUMENT, "handle");
  ASSERT_EQ(gkc_release(c, hb), 0);
  out = gkc_out_mem(got, cb);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'b'");
  s.b = gkc_ref_mem(b, bb);
  out = gkc_out_handle(hb);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");
  ASSERT_EQ(gkc_release(c, ha), 0);
  ASSERT_EQ(gkc_release(c, hi), 0);
  ASSERT_EQ(gkc_release(c, hc), 0);
  ASSERT_EQ(gkc_release(c, hc2), 0);
  ASSERT_EQ(gkc_release(c, hr), 0);
  free(a), free(b), free(got), free(back), free(c0);
}

static void test_sharing(gkc_conn *c) {
  fprintf(stderr, "sharing and ownership\n");
  gkc_conn *o = conn_open();
  const size_t n = 1000, nb = n * 4;
  float *v = rand_vec(n), *got = malloc(nb);
  uint32_t hs, hp;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(v, nb), GKC_F32, 1, &hs), 0);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(v, nb), GKC_F32, 0, &hp), 0);
  /* The shared one works from another connection ... */
  ASSERT_EQ(gkc_download(o, hs, got, nb), 0);
  ASSERT(memcmp(got, v, nb) == 0);
  double d, want = 0;
  for (size_t i = 0; i < n; i++) want += (double)v[i] * v[i];
  ASSERT_EQ(gkc_dot(o, gkc_ref_handle(hs, nb), gkc_ref_mem(v, nb), &d, NULL), 0);
  ASSERT_NEAR(d, want, 1e-5 * want);
  /* ... the private one does not exist there. */
  EXPECT_ERR(o, gkc_download(o, hp, got, nb), GKC_EINVALID_ARGUMENT, "handle");
  EXPECT_ERR(o, gkc_dot(o, gkc_ref_handle(hp, nb), gkc_ref_mem(v, nb), &d, NULL),
             GKC_EINVALID_ARGUMENT, "'x'");
  gkc_out out = gkc_out_handle(hp);
  EXPECT_ERR(o, gkc_axpby(o, 1.0f, gkc_ref_handle(hs, nb), 0.0f, gkc_ref_mem(v, nb), &out, NULL),
             GKC_EINVALID_ARGUMENT, "out");
  EXPECT_ERR(o, gkc_release(o, hp), GKC_EINVALID_ARGUMENT, "handle");
  ASSERT_EQ(gkc_download(c, hp, got, nb), 0); /* still there for its owner */

  /* Private data goes with its owner's connection; shared data stays.
   * status counts it: resident.arrays and .bytes, and budget_used (which
   * resident data counts against). */
  double arrays = resident_num(c, "arrays"), bytes = resident_num(c, "bytes");
  double budget = status_num(c, "budget_used");
  fprintf(stderr, "  status: resident.arrays %.0f, resident.bytes %.0f, budget_used %.0f\n",
          arrays, bytes, budget);
  gkc_conn *t = conn_open();
  const size_t big = 1 << 20;
  float *bv = rand_vec(big / 4);
  uint32_t tp, ts;
  ASSERT_EQ(gkc_upload(t, gkc_ref_mem(bv, big), GKC_F32, 0, &tp), 0);
  ASSERT_EQ(gkc_upload(t, gkc_ref_mem(v, nb), GKC_F32, 1, &ts), 0);
  expect_resident(c, "arrays", arrays + 2);
  expect_resident(c, "bytes", bytes + big + nb);
  if (isfinite(budget)) ASSERT(status_num(c, "budget_used") >= budget + big + nb);
  gkc_close(t);
  expect_resident(c, "arrays", arrays + 1);
  expect_resident(c, "bytes", bytes + nb);
  if (isfinite(budget)) {
    status_arg sa = {c, "budget_used"};
    double after = wait_for(status_fn, &sa, budget + nb);
    fprintf(stderr, "  budget_used after the owner left: %.0f\n", after);
    ASSERT(after >= budget + nb && after < budget + big);
  }
  /* Poll the private one away (the close is processed asynchronously). */
  int gone = 0;
  for (int i = 0; i < 250 && !gone; i++) {
    gone = gkc_download(c, tp, bv, big) == GKC_EINVALID_ARGUMENT;
    if (!gone) sleep_ms(20);
  }
  ASSERT(gone);
  ASSERT_CONTAINS(gkc_errmsg(c), "handle");
  ASSERT_EQ(gkc_download(c, ts, got, nb), 0);
  ASSERT(memcmp(got, v, nb) == 0);
  ASSERT_EQ(gkc_release(o, ts), 0); /* anyone may release a shared one */
  EXPECT_ERR(c, gkc_download(c, ts, got, nb), GKC_EINVALID_ARGUMENT, "handle");
  ASSERT_EQ(gkc_release(c, hs), 0);
  ASSERT_EQ(gkc_release(c, hp), 0);
  expect_resident(c, "arrays", arrays - 2);
  expect_resident(c, "bytes", bytes - 2 * nb);
  gkc_close(o);
  free(v), free(got), free(bv);
}

int main(void) {
  rng = test_seed();
  fixture_start(&F, NULL, NULL);
  gkc_conn *c = conn_open();
  test_handles(c);
  test_sharing(c);
  res_stop(c);
  fprintf(stderr, "e2e_resident_handles: all passed\n");
  return 0;
}
