/* e2e_resident.c: shared-memory regions, resident arrays and matrices, dot
 * and axpby, against a real gkcd (PROTOCOL.md, "Data that stays").
 *
 * Results are compared with double-precision references computed here;
 * errors are checked for their code, for a message that names what is wrong,
 * and for the daemon serving on afterwards.  Where libgkc would refuse a bad
 * input itself, the request is sent raw.  The conjugate-gradient example
 * (examples/cg.c, included below) must reach its tolerance, on a generated
 * Laplacian and on bcsstk13 ($GKC_SHARED_MATRICES) when it is there; and
 * `gkc spmv --repeat` ($GKC_BIN) must agree with the call by value.
 *
 * GKC_TEST_BACKEND picks the daemon's backend (cpu by default).
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
#include "test.h"

#define GKC_CG_NO_MAIN
#include "../examples/cg.c"

static uint64_t rng;
static fixture F;


static float *rand_vec(size_t n) {
  float *v = malloc(n * sizeof *v + 4);
  ASSERT(v);
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

static gkc_conn *conn_open(void) {
  gkc_conn *c;
  if (gkc_connect(&c, F.sock) != 0) TEST_FAIL("connect: %s", gkc_errmsg(c));
  return c;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The call failed with code err and a message containing each of the
 * (lower-case) words; then the connection still serves. */
#define EXPECT_ERR(c, call, err, ...)                                                   \
  do {                                                                                  \
    int rc_ = (call);                                                                   \
    if (rc_ != (err))                                                                   \
      TEST_FAIL("%s: got %s (%s), want %s", #call, gkc_errname(rc_), gkc_errmsg(c),     \
                gkc_errname(err));                                                      \
    const char *words_[] = {__VA_ARGS__, NULL};                                         \
    for (int w_ = 0; words_[w_]; w_++) ASSERT_CONTAINS(gkc_errmsg(c), words_[w_]);      \
    fprintf(stderr, "  ok: %s -> %s: %s\n", #call, gkc_errname(rc_), gkc_errmsg(c));    \
    ASSERT_EQ(gkc_ping(c, NULL), 0);                                                    \
  } while (0)

/* --- references computed here ----------------------------------------------------------- */

/* C = alpha A B + beta C0 (no transposes), checked against got. */
static void check_gemm(const char *what, int m, int n, int k, float alpha, const float *a,
                       const float *b, float beta, const float *c0, const float *got) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double t = (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
        acc += t, mag += fabs(t);
      }
      double want = alpha * acc, tol = 1e-5 * fabs(alpha) * mag + 1e-30;
      if (beta != 0.0f) {
        want += beta * (double)c0[(size_t)i * n + j];
        tol += 1e-5 * fabs(beta * c0[(size_t)i * n + j]);
      }
      double g = got[(size_t)i * n + j];
      if (!(fabs(g - want) <= tol))
        TEST_FAIL("%s: C[%d,%d] = %.9g, want %.9g", what, i, j, g, want);
    }
}

typedef struct {
  int32_t rows, cols;
  int32_t *row_ptr, *col_idx;
  float *values;
  int64_t nnz;
} test_csr;

static test_csr rand_csr(int32_t rows, int32_t cols, double density) {
  test_csr A = {rows, cols, NULL, NULL, NULL, 0};
  A.row_ptr = malloc(((size_t)rows + 1) * 4);
  size_t cap = (size_t)(rows * (double)cols * density * 1.5) + 16;
  A.col_idx = malloc(cap * 4);
  A.values = malloc(cap * 4);
  ASSERT(A.row_ptr && A.col_idx && A.values);
  A.row_ptr[0] = 0;
  for (int32_t i = 0; i < rows; i++) {
    for (int32_t j = 0; j < cols && (size_t)A.nnz < cap; j++)
      if ((double)(test_rand_u64(&rng) >> 11) / 9007199254740992.0 < density) {
        A.col_idx[A.nnz] = j;
        A.values[A.nnz++] = test_rand_f32(&rng);
      }
    A.row_ptr[i + 1] = (int32_t)A.nnz;
  }
  return A;
}

static void free_csr(test_csr *A) { free(A->row_ptr), free(A->col_idx), free(A->values); }

static gkc_csr as_gkc(const test_csr *A) {
  gkc_csr g = {A->rows, A->cols, A->nnz, A->row_ptr, A->col_idx, A->values};
  return g;
}

static void check_spmv(const char *what, const test_csr *A, float alpha, const float *x,
                       float beta, const float *y0, const float *got) {
  for (int32_t i = 0; i < A->rows; i++) {
    double acc = 0, mag = 0;
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++) {
      double t = (double)A->values[j] * x[A->col_idx[j]];
      acc += t, mag += fabs(t);
    }
    double want = alpha * acc, tol = 1e-5 * fabs(alpha) * mag + 1e-30;
    if (beta != 0.0f) want += beta * (double)y0[i], tol += 1e-5 * fabs(beta * y0[i]);
    if (!(fabs(got[i] - want) <= tol))
      TEST_FAIL("%s: y[%d] = %.9g, want %.9g", what, i, got[i], want);
  }
}

/* --- status and the daemon's mappings ------------------------------------------------------ */

/* A top-level number of the status reply, or NAN when gkcd does not report it. */
static double status_num(gkc_conn *c, const char *key) {
  char *json;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(json, pat);
  double v = p ? strtod(p + strlen(pat), NULL) : NAN;
  free(json);
  return v;
}

/* A count under status's "resident" map ("arrays", "matrices", "regions",
 * "bytes"), or NAN when gkcd does not report it. */
static double resident_num(gkc_conn *c, const char *key) {
  char *json;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  double v = NAN;
  char *m = strstr(json, "\"resident\": {");
  if (m) {
    char *end = strchr(m, '}'), pat[80];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    char *p = strstr(m, pat);
    if (p && end && p < end) v = strtod(p + strlen(pat), NULL);
  }
  free(json);
  return v;
}

/* Mappings of our memfds ("gkc-region", "test-region") in the daemon. */
static int daemon_region_maps(void) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)F.pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "memfd:gkc-region") || strstr(line, "memfd:test-region")) n++;
  fclose(f);
  return n;
}

/* Waits (up to 5 s) for fn() to reach want; returns the last value. */
static double wait_for(double (*fn)(void *), void *arg, double want) {
  double v = fn(arg);
  for (int i = 0; i < 250 && v != want; i++) {
    sleep_ms(20);
    v = fn(arg);
  }
  return v;
}

static double maps_fn(void *arg) {
  (void)arg;
  return daemon_region_maps();
}

typedef struct {
  gkc_conn *c;
  const char *key;
} status_arg;

static double status_fn(void *arg) {
  status_arg *s = arg;
  return status_num(s->c, s->key);
}

static double resident_fn(void *arg) {
  status_arg *s = arg;
  return resident_num(s->c, s->key);
}

/* Waits until status's resident.key is want; fails the test otherwise.
 * A no-op (with a note) when gkcd reports no "resident" map. */
static void expect_resident(gkc_conn *c, const char *key, double want) {
  if (!isfinite(resident_num(c, key))) {
    fprintf(stderr, "  (status has no resident.%s)\n", key);
    return;
  }
  status_arg sa = {c, key};
  double got = wait_for(resident_fn, &sa, want);
  if (got != want) TEST_FAIL("status resident.%s = %.0f, want %.0f", key, got, want);
}

/* --- raw requests ------------------------------------------------------------------------ */

typedef struct {
  int err;          /* 0 or a gkc_error */
  char code[40];
  char message[300];
  uint64_t id;      /* a "handle" or "region" in the result, when there is one */
} raw_reply;

typedef void (*raw_pack_fn)(msgpack_packer *pk, void *arg);

/* Sends [0, msgid, method, [map packed by fn]] on fd (with send_fd as
 * SCM_RIGHTS when >= 0) and reads its reply, failing the test when none
 * comes within 10 s. */
static raw_reply raw_call(int fd, const char *method, raw_pack_fn fn, void *arg, int send_fd) {
  static uint32_t msgid = 1000;
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_request_head(&pk, ++msgid, method);
  fn(&pk, arg);
  if (send_fd >= 0) {
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {sb.data, 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    h->cmsg_level = SOL_SOCKET, h->cmsg_type = SCM_RIGHTS, h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &send_fd, sizeof(int));
    if (sendmsg(fd, &mh, MSG_NOSIGNAL) != 1) TEST_FAIL("sendmsg: %s", strerror(errno));
    test_send_all(fd, sb.data + 1, sb.size - 1);
  } else {
    test_send_all(fd, sb.data, sb.size);
  }
  msgpack_sbuffer_destroy(&sb);
  struct pollfd pfd = {fd, POLLIN, 0};
  if (poll(&pfd, 1, 10000) != 1) TEST_FAIL("%s: no reply within 10 s", method);
  unsigned char *buf = NULL;
  size_t cap = 0, have = 0;
  size_t len = test_recv_frame(fd, &buf, &cap, &have);
  if (len == 0) TEST_FAIL("%s: gkcd closed the connection", method);
  msgpack_zone zone;
  msgpack_zone_init(&zone, 4096);
  msgpack_object root;
  size_t off = 0;
  proto_response resp;
  raw_reply r = {0};
  if (msgpack_unpack((const char *)buf, len, &off, &zone, &root) != MSGPACK_UNPACK_SUCCESS ||
      proto_response_parse(&root, &resp) != 0)
    TEST_FAIL("%s: malformed reply", method);
  ASSERT_EQ(resp.msgid, msgid);
  ASSERT_EQ(have, len); /* one request, one reply */
  r.err = resp.error;
  if (resp.error) {
    snprintf(r.code, sizeof r.code, "%.*s", (int)resp.code_len, resp.code);
    snprintf(r.message, sizeof r.message, "%.*s", (int)resp.message_len, resp.message);
    fprintf(stderr, "  ok: raw %s -> %s: %s\n", method, r.code, r.message);
  } else {
    const msgpack_object *h = proto_map_get(resp.result, "handle");
    if (!h) h = proto_map_get(resp.result, "region");
    if (!h) h = proto_map_get(resp.result, "matrix");
    if (h && h->type == MSGPACK_OBJECT_POSITIVE_INTEGER) r.id = h->via.u64;
  }
  msgpack_zone_destroy(&zone);
  free(buf);
  return r;
}

static void raw_expect(int fd, const char *method, raw_pack_fn fn, void *arg, const char *code,
                       const char *word) {
  raw_reply r = raw_call(fd, method, fn, arg, -1);
  if (!r.err) TEST_FAIL("raw %s succeeded; want %s", method, code);
  ASSERT_STR_EQ(r.code, code);
  if (word) ASSERT_CONTAINS(r.message, word);
}

static void pk_key(msgpack_packer *pk, const char *k) { proto_pack_cstr(pk, k); }

static void pk_bin(msgpack_packer *pk, const char *k, const void *p, size_t n) {
  pk_key(pk, k);
  msgpack_pack_bin(pk, n);
  msgpack_pack_bin_body(pk, p, n);
}

static void noargs(msgpack_packer *pk, void *arg) {
  (void)arg;
  msgpack_pack_map(pk, 0);
}

static void reg_args(msgpack_packer *pk, void *arg) {
  msgpack_pack_map(pk, 1);
  pk_key(pk, "bytes"), msgpack_pack_uint64(pk, *(size_t *)arg);
}

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

/* A memfd of size bytes, sealed with seals (0: none). */
static int test_memfd(size_t bytes, int seals) {
  int fd = memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT(fd >= 0);
  ASSERT_EQ(ftruncate(fd, (off_t)bytes), 0);
  if (seals) ASSERT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
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

/* --- raw requests: what libgkc would not send -------------------------------------------- */

typedef struct {
  int variant;
  uint32_t region;
  uint64_t handle;
} raw_arg;

static void sgemm_raw(msgpack_packer *pk, void *arg) {
  raw_arg *r = arg;
  float a[4] = {1, 2, 3, 4};
  msgpack_pack_map(pk, 6);
  pk_key(pk, "m"), msgpack_pack_int(pk, 2);
  pk_key(pk, "n"), msgpack_pack_int(pk, 2);
  pk_key(pk, "k"), msgpack_pack_int(pk, 2);
  pk_bin(pk, "b", a, sizeof a);
  switch (r->variant) {
    case 0: /* out names a key sgemm does not have */
      pk_bin(pk, "a", a, sizeof a);
      pk_key(pk, "out"), msgpack_pack_map(pk, 1), pk_key(pk, "y"), proto_pack_cstr(pk, "handle");
      break;
    case 1: /* out as a string other than "handle" */
      pk_bin(pk, "a", a, sizeof a);
      pk_key(pk, "out"), msgpack_pack_map(pk, 1), pk_key(pk, "c"), proto_pack_cstr(pk, "new");
      break;
    case 2: /* a region reference without bytes */
      pk_key(pk, "a"), msgpack_pack_map(pk, 2);
      pk_key(pk, "region"), msgpack_pack_uint32(pk, r->region);
      pk_key(pk, "offset"), msgpack_pack_uint32(pk, 0);
      pk_key(pk, "out"), msgpack_pack_map(pk, 0);
      break;
    case 3: /* a handle that is a string */
      pk_key(pk, "a"), msgpack_pack_map(pk, 1);
      pk_key(pk, "handle"), proto_pack_cstr(pk, "1");
      pk_key(pk, "out"), msgpack_pack_map(pk, 0);
      break;
    case 4: /* a reference map with both forms */
      pk_key(pk, "a"), msgpack_pack_map(pk, 4);
      pk_key(pk, "region"), msgpack_pack_uint32(pk, r->region);
      pk_key(pk, "offset"), msgpack_pack_uint32(pk, 0);
      pk_key(pk, "bytes"), msgpack_pack_uint32(pk, 16);
      pk_key(pk, "handle"), msgpack_pack_uint64(pk, r->handle);
      pk_key(pk, "out"), msgpack_pack_map(pk, 0);
      break;
    case 5: /* a negative offset */
      pk_key(pk, "a"), msgpack_pack_map(pk, 3);
      pk_key(pk, "region"), msgpack_pack_uint32(pk, r->region);
      pk_key(pk, "offset"), msgpack_pack_int(pk, -4);
      pk_key(pk, "bytes"), msgpack_pack_uint32(pk, 16);
      pk_key(pk, "out"), msgpack_pack_map(pk, 0);
      break;
    default: /* out not a map */
      pk_bin(pk, "a", a, sizeof a);
      pk_key(pk, "out"), proto_pack_cstr(pk, "handle");
  }
}

static void upload_raw(msgpack_packer *pk, void *arg) {
  raw_arg *r = arg;
  float a[4] = {1, 2, 3, 4};
  switch (r->variant) {
    case 0: /* unknown dtype */
      msgpack_pack_map(pk, 2);
      pk_bin(pk, "data", a, sizeof a);
      pk_key(pk, "dtype"), proto_pack_cstr(pk, "f64");
      break;
    case 1: /* a bin that is not whole elements */
      msgpack_pack_map(pk, 2);
      pk_bin(pk, "data", a, 6);
      pk_key(pk, "dtype"), proto_pack_cstr(pk, "f32");
      break;
    case 2: /* no dtype */
      msgpack_pack_map(pk, 1);
      pk_bin(pk, "data", a, sizeof a);
      break;
    case 3: /* shared not a boolean */
      msgpack_pack_map(pk, 3);
      pk_bin(pk, "data", a, sizeof a);
      pk_key(pk, "dtype"), proto_pack_cstr(pk, "f32");
      pk_key(pk, "shared"), msgpack_pack_int(pk, 1);
      break;
    default: /* an unknown argument */
      msgpack_pack_map(pk, 3);
      pk_bin(pk, "data", a, sizeof a);
      pk_key(pk, "dtype"), proto_pack_cstr(pk, "f32");
      pk_key(pk, "resident"), msgpack_pack_true(pk);
  }
}

static void misc_raw(msgpack_packer *pk, void *arg) {
  raw_arg *r = arg;
  float a[4] = {1, 2, 3, 4};
  int32_t rp[3] = {0, 1, 2}, ci[2] = {0, 1};
  switch (r->variant) {
    case 0: msgpack_pack_map(pk, 0); break; /* release {} */
    case 2: /* dot of empty vectors */
      msgpack_pack_map(pk, 2);
      pk_bin(pk, "x", a, 0);
      pk_bin(pk, "y", a, 0);
      break;
    case 3: /* spmv with a matrix and rows */
      msgpack_pack_map(pk, 3);
      pk_key(pk, "matrix"), msgpack_pack_uint64(pk, r->handle);
      pk_key(pk, "rows"), msgpack_pack_int(pk, 2);
      pk_bin(pk, "x", a, 8);
      break;
    case 4: /* csr_upload without values */
      msgpack_pack_map(pk, 4);
      pk_key(pk, "rows"), msgpack_pack_int(pk, 2);
      pk_key(pk, "cols"), msgpack_pack_int(pk, 2);
      pk_bin(pk, "row_ptr", rp, sizeof rp);
      pk_bin(pk, "col_idx", ci, sizeof ci);
      break;
    case 5: /* download into a new handle: not a form download has */
      msgpack_pack_map(pk, 2);
      pk_key(pk, "handle"), msgpack_pack_uint64(pk, r->handle);
      pk_key(pk, "out"), msgpack_pack_map(pk, 1), pk_key(pk, "data"), proto_pack_cstr(pk, "handle");
      break;
    case 6: /* release by the "matrix" key */
      msgpack_pack_map(pk, 1);
      pk_key(pk, "matrix"), msgpack_pack_uint64(pk, r->handle);
      break;
    default: /* csr_upload, then spmv, of a 2x2 identity: a good request */
      msgpack_pack_map(pk, 5);
      pk_key(pk, "rows"), msgpack_pack_int(pk, 2);
      pk_key(pk, "cols"), msgpack_pack_int(pk, 2);
      pk_bin(pk, "row_ptr", rp, sizeof rp);
      pk_bin(pk, "col_idx", ci, sizeof ci);
      pk_bin(pk, "values", a, 8);
  }
}

static void upload_ok(msgpack_packer *pk, void *arg) {
  size_t n = *(size_t *)arg;
  void *zero = calloc(1, n);
  msgpack_pack_map(pk, 2);
  pk_bin(pk, "data", zero, n);
  pk_key(pk, "dtype"), proto_pack_cstr(pk, "f32");
  free(zero);
}

static void test_raw(void) {
  fprintf(stderr, "raw requests\n");
  int fd = fixture_connect(&F);
  int mfd = test_memfd(4096, F_SEAL_SHRINK | F_SEAL_GROW);
  size_t bytes = 4096;
  raw_reply reg = raw_call(fd, "shm_register", reg_args, &bytes, mfd);
  close(mfd);
  ASSERT_EQ(reg.err, 0);
  size_t sixteen = 16;
  raw_reply up = raw_call(fd, "upload", upload_ok, &sixteen, -1);
  ASSERT_EQ(up.err, 0);
  raw_arg ra = {0, (uint32_t)reg.id, up.id};
  static const char *const sgemm_words[] = {"out", "out", "'a'", "'a'", "'a'", "'a'", "out"};
  for (int v = 0; v < 7; v++) {
    ra.variant = v;
    raw_expect(fd, "sgemm", sgemm_raw, &ra, "invalid_argument", sgemm_words[v]);
  }
  static const char *const upload_words[] = {"dtype", "data", "dtype", "shared", "resident"};
  for (int v = 0; v < 5; v++) {
    ra.variant = v;
    raw_expect(fd, "upload", upload_raw, &ra, "invalid_argument", upload_words[v]);
  }
  ra.variant = 0;
  raw_expect(fd, "release", misc_raw, &ra, "invalid_argument", NULL);
  ra.variant = 2;
  raw_expect(fd, "dot", misc_raw, &ra, "invalid_argument", "'x'");
  ra.variant = 4;
  raw_expect(fd, "csr_upload", misc_raw, &ra, "invalid_argument", "values");
  ra.variant = 5;
  raw_expect(fd, "download", misc_raw, &ra, "invalid_argument", "out");
  ra.variant = 7;
  raw_reply mat = raw_call(fd, "csr_upload", misc_raw, &ra, -1);
  ASSERT_EQ(mat.err, 0);
  ra.handle = mat.id;
  ra.variant = 3; /* "matrix" instead of rows, cols, ...: not with them */
  raw_expect(fd, "spmv", misc_raw, &ra, "invalid_argument", NULL);
  ra.variant = 6; /* release by the "matrix" key */
  ASSERT_EQ(raw_call(fd, "release", misc_raw, &ra, -1).err, 0);
  raw_expect(fd, "release", misc_raw, &ra, "invalid_argument", NULL);
  close(fd);
}

/* --- memory budget ----------------------------------------------------------------------- */

static void release_raw(msgpack_packer *pk, void *arg) {
  msgpack_pack_map(pk, 1);
  pk_key(pk, "handle"), msgpack_pack_uint64(pk, *(uint64_t *)arg);
}

/* Resident data counts against --memory-budget; an upload that does not
 * fit gets out_of_memory (and does not wait: only this client's own
 * releases could make room).  Raw, so that a daemon that makes it wait
 * fails the test after raw_call's timeout instead of hanging it. */
static void test_budget(void) {
  fprintf(stderr, "memory budget (an upload that waits fails after 10 s)\n");
  fixture B;
  const char *args[] = {"--memory-budget", "1M", NULL};
  fixture_start(&B, args, NULL);
  int fd = fixture_connect(&B);
  size_t chunk = 100 * 1024;
  uint64_t h[16];
  int made = 0;
  raw_reply r = {0};
  for (; made < 16; made++) {
    fprintf(stderr, "  upload %d of 100 KiB\n", made + 1);
    r = raw_call(fd, "upload", upload_ok, &chunk, -1);
    if (r.err) break;
    h[made] = r.id;
  }
  fprintf(stderr, "  %d uploads of 100 KiB fit in 1 MiB; then %s: %s\n", made, r.code, r.message);
  ASSERT(made >= 5 && made <= 10);
  ASSERT_STR_EQ(r.code, "out_of_memory");
  ASSERT_EQ(raw_call(fd, "release", release_raw, &h[0], -1).err, 0);
  r = raw_call(fd, "upload", upload_ok, &chunk, -1);
  ASSERT_EQ(r.err, 0);
  close(fd); /* frees them all: a new connection has the whole budget */
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, B.sock), 0);
  status_arg sa = {c, "budget_used"};
  ASSERT_EQ(wait_for(status_fn, &sa, 0), 0);
  gkc_close(c);
  int st = fixture_stop(&B, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* --- gkc spmv --repeat ------------------------------------------------------------------------ */

/* Runs the gkc CLI with args; returns its exit status, its stdout in out. */
static int run_gkc(const char *args, char *out, size_t outlen) {
  const char *bin = getenv("GKC_BIN");
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s --socket %s %s", bin, F.sock, args);
  FILE *p = popen(cmd, "r");
  ASSERT(p);
  size_t n = fread(out, 1, outlen - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_repeat(void) {
  fprintf(stderr, "gkc spmv --repeat\n");
  if (!getenv("GKC_BIN")) {
    fprintf(stderr, "  (GKC_BIN not set: skipped)\n");
    return;
  }
  char out[8192], args[1024], ypath[300];
  int rc = run_gkc("spmv --random 300x200 --density 0.05 --seed 7 --repeat 20 --check --json",
                   out, sizeof out);
  fprintf(stderr, "  %s", out);
  ASSERT_EQ(rc, 0);
  ASSERT_CONTAINS(out, "\"repeat\": 20");
  ASSERT_CONTAINS(out, "\"resident_round_trip_us_median\": ");
  ASSERT_CONTAINS(out, "\"resident_round_trip_us_p10\": ");
  ASSERT_CONTAINS(out, "\"resident_round_trip_us_p90\": ");
  ASSERT_CONTAINS(out, "\"resident_kernel_us_median\": ");
  ASSERT_CONTAINS(out, "\"csr_upload_us\": ");
  ASSERT_CONTAINS(out, "\"same_as_by_value\": true");
  ASSERT_CONTAINS(out, "\"check\": \"passed\"");
  /* With beta and an input y, which is uploaded once too. */
  snprintf(ypath, sizeof ypath, "%s/y.npy", F.dir);
  float y[300];
  for (int i = 0; i < 300; i++) y[i] = test_rand_f32(&rng);
  int64_t shape[1] = {300};
  char err[256];
  ASSERT_EQ(npy_write(ypath, 1, shape, y, err, sizeof err), 0);
  snprintf(args, sizeof args,
           "spmv --random 300x200 --seed 7 --alpha 2 --beta 0.5 --y %s --repeat 5 --check", ypath);
  rc = run_gkc(args, out, sizeof out);
  fprintf(stderr, "%s", out);
  ASSERT_EQ(rc, 0);
  ASSERT_CONTAINS(out, "resident rt:");
  ASSERT_CONTAINS(out, "same y:         yes");
  ASSERT_CONTAINS(out, "check:          passed");
  unlink(ypath);
  ASSERT_EQ(run_gkc("spmv --random 10 --repeat 0 2>/dev/null", out, sizeof out), 2);
}

/* --- the conjugate-gradient example ---------------------------------------------------------- */

/* Float32 CG with x stored in float32 cannot push ||b - A x|| / ||b|| much
 * below eps32 * ||A|| ||x|| / ||b|| (eps32 = 6e-8); with b = A x*, x* in
 * [-1, 1], that is ~1e-7 for these matrices, and the recurrence and the true
 * residual part near 1e-6.  1e-5 leaves a factor of ten. */
#define CG_TOL 1e-5

/* mode: CG_REQUESTS (one request per operation), CG_BATCH (one batch per
 * iteration) or CG_SOLVE (one solve); the residual is always the one
 * cg_solve recomputes here in double from the downloaded x. */
static void run_cg(gkc_conn *c, const char *what, mtx_csr *M, int scale, int mode) {
  gkc_csr A = {M->rows, M->cols, M->nnz, M->row_ptr, M->col_idx, M->values};
  float *xs = malloc((size_t)M->rows * 4), *b = malloc((size_t)M->rows * 4);
  float *x = malloc((size_t)M->rows * 4);
  double *dis = malloc((size_t)M->rows * sizeof *dis);
  ASSERT(xs && b && x && dis);
  cg_rhs(&A, 1, xs, b);
  if (scale) {
    char msg[256];
    if (cg_jacobi_scale(M, dis, msg, sizeof msg) != 0) TEST_FAIL("%s: %s", what, msg);
    for (int32_t i = 0; i < M->rows; i++) b[i] = (float)(b[i] * dis[i]);
  }
  static const char *const modes[] = {"requests", "batch", "solve"};
  cg_params p = {CG_TOL, 20000, mode};
  cg_stats st;
  int rc = cg_solve(c, &A, b, x, &p, &st);
  if (rc) TEST_FAIL("cg (%s) on %s: %s", modes[mode], what, st.msg);
  fprintf(stderr, "  cg (%s) %s: %d iterations, %d restarts, true residual %.3g, recurrence "
          "%.3g, %.0f it/s, %lld requests\n", modes[mode], what, st.iterations, st.replacements,
          st.true_residual, st.rec_residual, st.iters_per_s, (long long)st.requests);
  ASSERT(st.converged);
  ASSERT(st.true_residual < CG_TOL);
  ASSERT_NEAR(cg_residual(&A, b, x), st.true_residual, 0);
  if (mode == CG_SOLVE) ASSERT_EQ(st.requests, 1);
  if (mode == CG_BATCH) ASSERT(st.requests == st.iterations + st.checks + st.replacements);
  free(xs), free(b), free(x), free(dis);
}

static void test_cg(gkc_conn *c) {
  fprintf(stderr, "conjugate gradients\n");
  mtx_csr M;
  ASSERT_EQ(cg_laplacian(64, &M), 0);
  for (int mode = CG_REQUESTS; mode <= CG_SOLVE; mode++) run_cg(c, "64x64 Laplacian", &M, 0, mode);
  mtx_free(&M);
  const char *dir = getenv("GKC_SHARED_MATRICES");
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/bcsstk13.mtx", dir ? dir : "");
  if (!dir || access(path, R_OK) != 0) {
    fprintf(stderr, "  (no %s: bcsstk13 not run)\n", path);
    return;
  }
  for (int mode = CG_REQUESTS; mode <= CG_SOLVE; mode++) {
    if (mtx_read_csr(path, &M, err, sizeof err) != 0) TEST_FAIL("%s", err); /* scaled in place */
    run_cg(c, "bcsstk13 (Jacobi-scaled)", &M, 1, mode);
    mtx_free(&M);
  }
}

int main(void) {
  rng = test_seed();
  fixture_start(&F, NULL, NULL);
  gkc_conn *c = conn_open();
  test_regions(c);
  test_bad_descriptors(c);
  test_region_lifetime();
  test_handles(c);
  test_sharing(c);
  test_matrices(c);
  test_vectors(c);
  test_raw();
  test_cg(c);
  test_cli_repeat();
  gkc_close(c);
  int st = fixture_stop(&F, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  test_budget();
  fprintf(stderr, "e2e_resident: all passed\n");
  return 0;
}
