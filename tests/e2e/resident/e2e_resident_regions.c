/* e2e_resident_regions.c: shared-memory regions against a real gkcd
 * (PROTOCOL.md, "Data that stays"): calls on region data, bad descriptors
 * and seals, and a region's lifetime in the daemon's mappings.
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

/* --- regions ---------------------------------------------------------------------------- */

static void test_regions(gkc_conn *c) {
  fprintf(stderr, "regions\n");
  const int m = 37, n = 29, k = 41;
  size_t ab = (size_t)m * k * 4, bb = (size_t)k * n * 4, cb = (size_t)m * n * 4;
  /* Offsets that are multiples of 4 but of nothing larger. */
  uint64_t oa = 12, ob = oa + ab + 4, oc = ob + bb + 4, oc2 = oc + cb + 4;
  size_t total = oc2 + cb + 4;
  gkc_region *r;
  ASSERT_EQ(gkc_region_create(c, total, &r), 0);
  ASSERT(gkc_region_bytes(r) == total);
  ASSERT(gkc_region_data(r) == (void *)gkc_region_floats(r));
  unsigned char *base = gkc_region_data(r);
  for (size_t i = 0; i < total; i++) ASSERT(base[i] == 0);
  float *a = (float *)(base + oa), *b = (float *)(base + ob), *cc = (float *)(base + oc);
  float *c2 = (float *)(base + oc2);
  for (size_t i = 0; i < ab / 4; i++) a[i] = test_rand_f32(&rng);
  for (size_t i = 0; i < bb / 4; i++) b[i] = test_rand_f32(&rng);
  for (size_t i = 0; i < cb / 4; i++) cc[i] = NAN; /* beta = 0: never read */

  /* Inputs and output in the region. */
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = m, s.n = n, s.k = k;
  s.a = gkc_ref_region(r, oa, ab);
  s.b = gkc_ref_region(r, ob, bb);
  gkc_out out = gkc_out_region(r, oc);
  gkc_info info;
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &out, &info), 0);
  ASSERT(out.bytes == cb);
  ASSERT(info.algo[0]);
  check_gemm("sgemm region -> region", m, n, k, 1.0f, a, b, 0.0f, NULL, cc);
  ASSERT(base[oc - 1] == 0 && base[oc + cb] == 0); /* nothing written around C */

  /* C from the region as input (beta != 0), result to a second place. */
  float *c0 = malloc(cb);
  memcpy(c0, cc, cb);
  s.alpha = -0.5f, s.beta = 0.25f;
  s.c = gkc_ref_region(r, oc, cb);
  out = gkc_out_region(r, oc2);
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &out, NULL), 0);
  check_gemm("sgemm region C input", m, n, k, -0.5f, a, b, 0.25f, c0, c2);
  /* Mixed: a from the region, b by value, result by value. */
  float *got = malloc(cb), *bcopy = malloc(bb);
  memcpy(bcopy, b, bb);
  s.alpha = 1.0f, s.beta = 0.0f;
  s.c = (gkc_ref){0};
  s.b = gkc_ref_mem(bcopy, bb);
  out = gkc_out_mem(got, cb);
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &out, NULL), 0);
  check_gemm("sgemm region + bin", m, n, k, 1.0f, a, bcopy, 0.0f, NULL, got);
  /* The old API gives the same numbers (same algo on the same inputs). */
  float *old = malloc(cb);
  ASSERT_EQ(gkc_sgemm(c, m, n, k, 1.0f, a, 0, b, 0, 0.0f, old, NULL, NULL), 0);
  ASSERT(memcmp(old, got, cb) == 0);

  /* reduce and dot on region data. */
  double v, want = 0;
  int64_t nn;
  for (size_t i = 0; i < ab / 4; i++) want += a[i];
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_region(r, oa, ab), GKC_SUM, &v, &nn, NULL, NULL), 0);
  ASSERT_EQ(nn, (int64_t)(ab / 4));
  ASSERT_NEAR(v, want, 1e-5 * ab);

  /* Bad references: each names the problem, and the daemon serves on. */
  s.b = gkc_ref_region(r, ob, bb);
  s.a = gkc_ref_region(r, oa + 2, ab);
  out = gkc_out_region(r, oc);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'a'", "offset");
  s.a = gkc_ref_region(r, total - ab + 4, ab);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'a'");
  s.a = gkc_ref_region(r, oa, ab - 4); /* wrong length for m*k */
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'a'");
  s.a = gkc_ref_region(r, oa, ab);
  out = gkc_out_region(r, total - cb + 4); /* does not fit */
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");
  out = gkc_out_region(r, oc + 1);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "out");
  gkc_ref nowhere = {.kind = GKC_REF_REGION, .region = 0x7ffffff0u, .offset = 0, .bytes = ab};
  s.a = nowhere;
  out = gkc_out_region(r, oc);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'a'");

  /* Release; then the id is unknown, as input and as output. */
  uint32_t id = gkc_region_id(r);
  int maps = daemon_region_maps();
  ASSERT(maps >= 1);
  ASSERT_EQ(gkc_region_release(c, r), 0);
  ASSERT_EQ(wait_for(maps_fn, NULL, maps - 1), maps - 1);
  gkc_region *r2;
  ASSERT_EQ(gkc_region_create(c, total, &r2), 0); /* a new one, to aim at */
  s.a = (gkc_ref){.kind = GKC_REF_REGION, .region = id, .offset = oa, .bytes = ab};
  s.b = gkc_ref_region(r2, ob, bb);
  out = gkc_out_region(r2, oc);
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "'a'");
  s.a = gkc_ref_region(r2, oa, ab);
  out = (gkc_out){.kind = GKC_OUT_REGION, .region = id, .offset = oc};
  EXPECT_ERR(c, gkc_sgemm_ref(c, &s, &out, NULL), GKC_EINVALID_ARGUMENT, "region");
  EXPECT_ERR(c, gkc_shm_release(c, id), GKC_EINVALID_ARGUMENT, "region");
  ASSERT_EQ(gkc_region_release(c, r2), 0);
  free(c0), free(got), free(bcopy), free(old);
}

static void test_bad_descriptors(gkc_conn *c) {
  fprintf(stderr, "bad descriptors\n");
  uint32_t id;
  int fd = test_memfd(4096, 0);
  EXPECT_ERR(c, gkc_shm_register(c, fd, 4096, &id), GKC_EINVALID_ARGUMENT, "seal");
  close(fd);
  fd = test_memfd(4096, F_SEAL_SHRINK); /* only half the seals */
  EXPECT_ERR(c, gkc_shm_register(c, fd, 4096, &id), GKC_EINVALID_ARGUMENT, "seal");
  close(fd);
  fd = test_memfd(8192, F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_ERR(c, gkc_shm_register(c, fd, 4096, &id), GKC_EINVALID_ARGUMENT, "8192", "4096");
  close(fd);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_ERR(c, gkc_shm_register(c, p[0], 4096, &id), GKC_EINVALID_ARGUMENT, "regular file");
  close(p[0]), close(p[1]);
  EXPECT_ERR(c, gkc_shm_register(c, -1, 4096, &id), GKC_EINVALID_ARGUMENT, "descriptor");
  /* Sealed and of the right size, made by hand: accepted, and usable. */
  fd = test_memfd(4096, F_SEAL_SHRINK | F_SEAL_GROW);
  float *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT(map != MAP_FAILED);
  for (int i = 0; i < 1024; i++) map[i] = (float)i;
  ASSERT_EQ(gkc_shm_register(c, fd, 4096, &id), 0);
  gkc_ref x = {.kind = GKC_REF_REGION, .region = id, .offset = 0, .bytes = 4096};
  double v;
  ASSERT_EQ(gkc_reduce_ref(c, x, GKC_SUM, &v, NULL, NULL, NULL), 0);
  ASSERT_NEAR(v, 1023.0 * 1024 / 2, 0);
  /* The daemon holds its own mapping: our close and munmap change nothing. */
  munmap(map, 4096);
  close(fd);
  ASSERT_EQ(gkc_reduce_ref(c, x, GKC_SUM, &v, NULL, NULL, NULL), 0);
  ASSERT_NEAR(v, 1023.0 * 1024 / 2, 0);
  ASSERT_EQ(gkc_shm_release(c, id), 0);

  /* Descriptors queue in arrival order; shm_register takes the oldest.  One
   * of the wrong size rides on a ping, then a good one on shm_register: that
   * takes the wrong one, and the next shm_register (with none) the good one. */
  int sock = fixture_connect(&F);
  int bad = test_memfd(8192, F_SEAL_SHRINK | F_SEAL_GROW);
  int good = test_memfd(4096, F_SEAL_SHRINK | F_SEAL_GROW);
  raw_reply rr = raw_call(sock, "ping", noargs, NULL, bad);
  ASSERT_EQ(rr.err, 0);
  size_t bytes = 4096;
  rr = raw_call(sock, "shm_register", reg_args, &bytes, good);
  ASSERT_EQ(rr.err, GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(rr.message, "8192");
  rr = raw_call(sock, "shm_register", reg_args, &bytes, -1);
  ASSERT_EQ(rr.err, 0);
  rr = raw_call(sock, "shm_register", reg_args, &bytes, -1); /* none left */
  ASSERT_EQ(rr.err, GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(rr.message, "descriptor");
  close(bad), close(good), close(sock);
  ASSERT_EQ(gkc_ping(c, NULL), 0);

  /* Each shm_register takes the oldest descriptor, also one refused for its
   * arguments: a descriptor left behind would be taken by the next request,
   * which would then map the wrong file. */
  {
    fd = test_memfd(4096, F_SEAL_SHRINK | F_SEAL_GROW);
    EXPECT_ERR(c, gkc_shm_register(c, fd, 0, &id), GKC_EINVALID_ARGUMENT, "bytes");
    close(fd);
    int rc = gkc_shm_register(c, -1, 4096, &id);
    if (rc != GKC_EINVALID_ARGUMENT)
      TEST_FAIL("a shm_register refused for 'bytes' left its descriptor queued: the next "
                "shm_register, sent without one, got %s (region %u) instead of invalid_argument",
                gkc_errname(rc), id);
    ASSERT_CONTAINS(gkc_errmsg(c), "descriptor");
  }
}

static void test_region_lifetime(void) {
  fprintf(stderr, "region lifetime\n");
  /* No region is left from the tests before (closes are asynchronous). */
  int before = (int)wait_for(maps_fn, NULL, 0);
  ASSERT_EQ(before, 0);
  gkc_conn *c = conn_open();
  gkc_region *r[3];
  gkc_conn *s = conn_open(); /* to read status */
  double regions = resident_num(s, "regions");
  for (int i = 0; i < 3; i++) ASSERT_EQ(gkc_region_create(c, 65536 * (i + 1), &r[i]), 0);
  ASSERT_EQ(wait_for(maps_fn, NULL, before + 3), before + 3);
  expect_resident(s, "regions", regions + 3);
  /* Another connection cannot use them. */
  gkc_conn *o = conn_open();
  gkc_ref x = gkc_ref_region(r[0], 0, 4096);
  double v;
  EXPECT_ERR(o, gkc_reduce_ref(o, x, GKC_SUM, &v, NULL, NULL, NULL), GKC_EINVALID_ARGUMENT, "'x'");
  EXPECT_ERR(o, gkc_shm_release(o, gkc_region_id(r[0])), GKC_EINVALID_ARGUMENT, "region");
  gkc_close(o);
  /* Closing the connection releases them on gkcd. */
  gkc_close(c);
  ASSERT_EQ(wait_for(maps_fn, NULL, before), before);
  expect_resident(s, "regions", regions);
  gkc_close(s);
  for (int i = 0; i < 3; i++) ASSERT_EQ(gkc_region_release(NULL, r[i]), 0); /* local side */

  /* At most 64 regions per connection; the 65th is refused, the rest work. */
  c = conn_open();
  gkc_region *many[65];
  int made = 0;
  for (; made < 65; made++)
    if (gkc_region_create(c, 4096, &many[made]) != 0) break;
  fprintf(stderr, "  regions on one connection: %d (%s)\n", made, gkc_errmsg(c));
  ASSERT_EQ(made, 64);
  ASSERT_CONTAINS(gkc_errmsg(c), "64");
  ASSERT_EQ(gkc_ping(c, NULL), 0);
  ASSERT_EQ(gkc_region_release(c, many[0]), 0);
  /* The next region is the one this process maps (not the refused one's). */
  ASSERT_EQ(gkc_region_create(c, 4096, &many[0]), 0);
  float *f = gkc_region_floats(many[0]);
  for (int i = 0; i < 1024; i++) f[i] = 1.0f;
  double sum;
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_region(many[0], 0, 4096), GKC_SUM, &sum, NULL, NULL, NULL),
            0);
  if (sum != 1024.0)
    TEST_FAIL("after the 65th region was refused, the next region is not the file this process "
              "maps (reduce: %g, want 1024): the refused request left its descriptor queued", sum);
  for (int i = 0; i < 64; i++) ASSERT_EQ(gkc_region_release(c, many[i]), 0);
  gkc_close(c);
  ASSERT_EQ(wait_for(maps_fn, NULL, before), before);
}

/* --max-conn-pinned bounds what one connection's regions add up to; a
 * refusal names the limit, other connections have their own, a release
 * makes room, and status and metrics show it. */
static void test_pinned_limit(void) {
  fprintf(stderr, "--max-conn-pinned\n");
  static const char *const args[] = {"--max-conn-pinned", "1M", NULL};
  fixture_start(&F, args, NULL);
  gkc_conn *c = conn_open(), *o = conn_open();
  ASSERT_EQ(status_num(c, "max_conn_pinned"), 1048576.0);
  gkc_region *a, *b, *d;
  ASSERT_EQ(gkc_region_create(c, 600 << 10, &a), 0);
  expect_resident(c, "region_bytes", 600 << 10);
  EXPECT_ERR(c, gkc_region_create(c, 600 << 10, &b), GKC_EOUT_OF_MEMORY,
             "limit of 1048576 (--max-conn-pinned)");
  ASSERT_EQ(gkc_ping(c, NULL), 0); /* the connection goes on */
  ASSERT_EQ(gkc_region_create(o, 600 << 10, &d), 0); /* another connection's own limit */
  expect_resident(c, "region_bytes", 1200 << 10);
  ASSERT_EQ(gkc_region_release(c, a), 0);
  ASSERT_EQ(gkc_region_create(c, 1 << 20, &b), 0); /* the release made room: exactly the limit */
  char *text;
  ASSERT_EQ(gkc_metrics(c, &text), 0);
  ASSERT_CONTAINS(text, "gkcd_max_conn_pinned_bytes 1048576");
  ASSERT_CONTAINS(text, "gkcd_region_bytes");
  free(text);
  ASSERT_EQ(gkc_region_release(c, b), 0);
  ASSERT_EQ(gkc_region_release(o, d), 0);
  expect_resident(c, "region_bytes", 0);
  gkc_close(o);
  res_stop(c);
}

int main(void) {
  rng = test_seed();
  fixture_start(&F, NULL, NULL);
  gkc_conn *c = conn_open();
  test_regions(c);
  test_bad_descriptors(c);
  test_region_lifetime();
  res_stop(c);
  test_pinned_limit();
  fprintf(stderr, "e2e_resident_regions: all passed\n");
  return 0;
}
