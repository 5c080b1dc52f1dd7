/* e2e_ring.c: the shared-memory ring (issue #28; PROTOCOL.md, "Rings")
 * against a real gkcd.
 *
 *  1. same results: libgkc over the ring and over the socket, for reduce,
 *     sgemm, dot, nrm2, axpby, spmv, upload/download and a region (its
 *     memfd goes on the socket while its request goes into the sq), each
 *     checked against a double-precision reference on fresh random inputs
 *     and the two transports against each other;
 *  2. big frames stream through rings smaller than they are (arena off);
 *  3. fallback: GKC_NO_RING=1 and gkc_set_ring(c, 0) keep the socket;
 *  4. pipelining by hand through 4 KiB rings (wrap-around): 400 requests
 *     written before any reply is read (the replies wait in gkcd's pending
 *     list while the cq is full), every reply matched and checked;
 *  5. hostile rings: an sq tail past the ring, a cq head past the tail, a
 *     frame that is not msgpack, garbage over the whole mapping: each
 *     connection is closed (the log says why), while another client keeps
 *     being served correctly throughout;
 *  6. teardown: closing the socket unmaps the ring in gkcd (its
 *     /proc/PID/maps), and the connection count falls back.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "proto_ring.h"
#include "proto_rpc.h"
#include "rawrpc.h"
#include "test.h"

static fixture f;
static uint64_t rng;
/* The CPU backend's kernels are deterministic: there the two transports
 * must agree bit for bit; a GPU's reductions may order their sums
 * differently from one run to the next (each still checked against the
 * reference). */
static int exact;

static float *rand_vec(size_t n) {
  float *v = malloc(n * sizeof *v + 1);
  ASSERT(v);
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

static double sum64(const float *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += x[i];
  return s;
}

static double abs64(const float *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += fabs(x[i]);
  return s;
}

static gkc_conn *open_conn(int ring) {
  gkc_conn *c;
  if (gkc_connect(&c, f.sock) != 0) TEST_FAIL("connect: %s", gkc_errmsg(c));
  ASSERT_EQ(gkc_set_ring(c, ring), 0);
  gkc_ping_info pi;
  if (gkc_ping(c, &pi) != 0) TEST_FAIL("ping: %s", gkc_errmsg(c));
  ASSERT_EQ(gkc_ring_active(c), ring);
  exact = !strcmp(pi.backend, "cpu");
  return c;
}

/* --- 1, 2, 3: libgkc ------------------------------------------------------------------ */

/* One reduce checked against its reference; returns the value. */
static double reduce_ok(gkc_conn *c, const float *x, size_t n) {
  double v;
  if (gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL) != 0) TEST_FAIL("reduce %zu: %s", n, gkc_errmsg(c));
  ASSERT_NEAR(v, sum64(x, n), 1e-5 * abs64(x, n) + 1e-30);
  return v;
}

static void same_results(void) {
  gkc_conn *cr = open_conn(1), *cs = open_conn(0);
  gkc_conn *both[2] = {cr, cs};
  /* reduce, small and past the arena's threshold (a region: its memfd on
   * the socket, its request in the sq) */
  size_t sizes[] = {16, 1000, 100000};
  for (int s = 0; s < 3; s++) {
    float *x = rand_vec(sizes[s]);
    double v[2];
    for (int t = 0; t < 2; t++) v[t] = reduce_ok(both[t], x, sizes[s]);
    ASSERT(!exact || v[0] == v[1]);
    free(x);
  }
  /* sgemm */
  int m = 37, n = 29, k = 41;
  float *a = rand_vec((size_t)m * k), *b = rand_vec((size_t)k * n);
  float *c2[2];
  for (int t = 0; t < 2; t++) {
    c2[t] = calloc((size_t)m * n, sizeof(float));
    if (gkc_sgemm(both[t], m, n, k, 1.5f, a, 0, b, 0, 0.f, c2[t], NULL, NULL) != 0)
      TEST_FAIL("sgemm: %s", gkc_errmsg(both[t]));
  }
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        acc += (double)a[i * k + p] * b[p * n + j];
        mag += fabs((double)a[i * k + p] * b[p * n + j]);
      }
      ASSERT_NEAR(c2[0][i * n + j], 1.5 * acc, 1e-5 * 1.5 * mag + 1e-30);
    }
  ASSERT(!exact || memcmp(c2[0], c2[1], (size_t)m * n * sizeof(float)) == 0);
  free(a), free(b), free(c2[0]), free(c2[1]);
  /* dot, nrm2, axpby */
  size_t nv = 5000;
  float *x = rand_vec(nv), *y = rand_vec(nv);
  double d[2], r[2];
  float *z[2];
  for (int t = 0; t < 2; t++) {
    ASSERT_EQ(gkc_dot(both[t], gkc_ref_mem(x, nv * 4), gkc_ref_mem(y, nv * 4), &d[t], NULL), 0);
    ASSERT_EQ(gkc_nrm2(both[t], gkc_ref_mem(x, nv * 4), &r[t], NULL), 0);
    z[t] = malloc(nv * 4);
    gkc_out o = gkc_out_mem(z[t], nv * 4);
    ASSERT_EQ(gkc_axpby(both[t], 2.f, gkc_ref_mem(x, nv * 4), -0.5f, gkc_ref_mem(y, nv * 4), &o, NULL), 0);
  }
  double dref = 0, dmag = 0, nref = 0;
  for (size_t i = 0; i < nv; i++) {
    dref += (double)x[i] * y[i];
    dmag += fabs((double)x[i] * y[i]);
    nref += (double)x[i] * x[i];
  }
  ASSERT_NEAR(d[0], dref, 1e-5 * dmag + 1e-30);
  ASSERT_NEAR(r[0], sqrt(nref), 1e-5 * sqrt(nref));
  ASSERT(!exact || (d[0] == d[1] && r[0] == r[1]));
  for (size_t i = 0; i < nv; i++)
    ASSERT_NEAR(z[0][i], 2.0 * x[i] - 0.5 * y[i], 1e-6 * (2 * fabs(x[i]) + 0.5 * fabs(y[i])));
  ASSERT(!exact || memcmp(z[0], z[1], nv * 4) == 0);
  free(z[0]), free(z[1]);
  /* spmv: a random sparse matrix, 200 x 150, about 8 per row */
  int rows = 200, cols = 150;
  int32_t *rp = malloc((rows + 1) * sizeof *rp), *ci = malloc(rows * 8 * sizeof *ci);
  float *val = rand_vec((size_t)rows * 8), *xs = rand_vec(cols);
  int nnz = 0;
  rp[0] = 0;
  for (int i = 0; i < rows; i++) {
    for (int j = 0; j < cols && nnz < (i + 1) * 8; j += 1 + (int)(test_rand_u64(&rng) % 30)) ci[nnz++] = j;
    rp[i + 1] = nnz;
  }
  gkc_csr A = {rows, cols, nnz, rp, ci, val};
  float *ys[2];
  for (int t = 0; t < 2; t++) {
    ys[t] = calloc(rows, sizeof(float));
    if (gkc_spmv(both[t], &A, 1.f, xs, 0.f, ys[t], NULL, NULL) != 0)
      TEST_FAIL("spmv: %s", gkc_errmsg(both[t]));
  }
  for (int i = 0; i < rows; i++) {
    double acc = 0, mag = 0;
    for (int p = rp[i]; p < rp[i + 1]; p++) {
      acc += (double)val[p] * xs[ci[p]];
      mag += fabs((double)val[p] * xs[ci[p]]);
    }
    ASSERT_NEAR(ys[0][i], acc, 1e-5 * mag + 1e-30);
  }
  ASSERT(!exact || memcmp(ys[0], ys[1], rows * sizeof(float)) == 0);
  free(rp), free(ci), free(val), free(xs), free(ys[0]), free(ys[1]);
  /* upload, then download and reduce of the handle */
  uint32_t h[2];
  float *back = malloc(nv * 4);
  for (int t = 0; t < 2; t++) {
    ASSERT_EQ(gkc_upload(both[t], gkc_ref_mem(x, nv * 4), GKC_F32, 0, &h[t]), 0);
    memset(back, 0, nv * 4);
    ASSERT_EQ(gkc_download(both[t], h[t], back, nv * 4), 0);
    ASSERT(memcmp(back, x, nv * 4) == 0);
    double v;
    ASSERT_EQ(gkc_reduce_ref(both[t], gkc_ref_handle(h[t], nv * 4), GKC_SUM, &v, NULL, NULL, NULL), 0);
    ASSERT_NEAR(v, sum64(x, nv), 1e-5 * abs64(x, nv));
    ASSERT_EQ(gkc_release(both[t], h[t]), 0);
  }
  /* a region of one's own: shm_register's memfd rides the socket */
  gkc_region *reg;
  ASSERT_EQ(gkc_region_create(cr, nv * 4, &reg), 0);
  memcpy(gkc_region_floats(reg), x, nv * 4);
  double v;
  ASSERT_EQ(gkc_reduce_ref(cr, gkc_ref_region(reg, 0, nv * 4), GKC_SUM, &v, NULL, NULL, NULL), 0);
  ASSERT_NEAR(v, sum64(x, nv), 1e-5 * abs64(x, nv));
  ASSERT_EQ(gkc_region_release(cr, reg), 0);
  ASSERT_EQ(gkc_ring_active(cr), 1);
  free(x), free(y), free(back);
  gkc_close(cr);
  gkc_close(cs);
}

/* Frames several times the rings' 256 KiB, inline (the arena off, the ring
 * asked for by open_conn). */
static void big_frames(void) {
  gkc_conn *c = open_conn(1);
  ASSERT_EQ(gkc_set_shm(c, GKC_SHM_OFF, 0), 0);
  size_t n = (size_t)3 << 18; /* 3 MiB of floats */
  float *x = rand_vec(n), *back = malloc(n * 4);
  uint32_t h;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, n * 4), GKC_F32, 0, &h), 0);
  ASSERT_EQ(gkc_download(c, h, back, n * 4), 0);
  ASSERT(memcmp(back, x, n * 4) == 0);
  reduce_ok(c, x, n);
  ASSERT_EQ(gkc_release(c, h), 0);
  ASSERT_EQ(gkc_ring_active(c), 1);
  free(x), free(back);
  gkc_close(c);
}

/* By default the ring goes with the arena: without it every array goes in
 * the frames, and big frames are faster on the socket (gkcd's reader
 * threads).  GKC_NO_SHM=1 or the arena off before the first call keep the
 * socket; the arena on again brings the ring at the next call;
 * gkc_set_ring(c, 1) asks for it anyway. */
static void ring_goes_with_the_arena(void) {
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = test_rand_f32(&rng);
  gkc_conn *c;
  setenv("GKC_NO_SHM", "1", 1);
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  reduce_ok(c, x, 16);
  ASSERT_EQ(gkc_shm_state(c, NULL), 0);
  ASSERT_EQ(gkc_ring_active(c), 0);
  gkc_close(c);
  unsetenv("GKC_NO_SHM");
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  ASSERT_EQ(gkc_set_shm(c, GKC_SHM_OFF, 0), 0);
  reduce_ok(c, x, 16);
  ASSERT_EQ(gkc_ring_active(c), 0);
  ASSERT_EQ(gkc_set_shm(c, 0, 0), 0); /* on, at the defaults */
  reduce_ok(c, x, 16);
  ASSERT_EQ(gkc_ring_active(c), 1);
  gkc_close(c);
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  ASSERT_EQ(gkc_set_shm(c, GKC_SHM_OFF, 0), 0);
  ASSERT_EQ(gkc_set_ring(c, 1), 0);
  reduce_ok(c, x, 16);
  ASSERT_EQ(gkc_ring_active(c), 1);
  gkc_close(c);
}

static void fallback(void) {
  setenv("GKC_NO_RING", "1", 1);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = test_rand_f32(&rng);
  reduce_ok(c, x, 16);
  ASSERT_EQ(gkc_ring_active(c), 0);
  gkc_close(c);
  unsetenv("GKC_NO_RING");
  c = open_conn(1);
  ASSERT_EQ(gkc_set_ring(c, 0), GKC_EINVALID_ARGUMENT); /* too late: in use */
  ASSERT_CONTAINS(gkc_errmsg(c), "first call");
  reduce_ok(c, x, 16);
  gkc_close(c);
  /* A gkcd that offers none (and says so): the calls stay on the socket. */
  fixture g;
  const char *const off[] = {"--rings", "off", NULL};
  fixture_start(&g, off, NULL);
  ASSERT_EQ(gkc_connect(&c, g.sock), 0);
  reduce_ok(c, x, 16);
  ASSERT_EQ(gkc_ring_active(c), 0);
  uint64_t offered = 1;
  ASSERT_EQ(gkc_status_limit(c, "rings", &offered), 0);
  ASSERT_EQ(offered, 0);
  reduce_ok(c, x, 16);
  ASSERT_EQ(gkc_ring_active(c), 0);
  gkc_close(c);
  ASSERT_EQ(fixture_stop(&g, SIGTERM), 0);
}

/* --- a ring by hand --------------------------------------------------------------------- */

typedef struct {
  int fd;         /* the socket */
  void *map;
  size_t bytes;
  proto_ring r;   /* the client's side */
  rr_conn in;     /* cq bytes read, not yet taken (its fd unused: -1) */
} raw_ring;

/* Connects, makes a sealed memfd for rings of sq and cq bytes and registers
 * it; fails the test unless gkcd takes it. */
static void raw_open(raw_ring *rr, uint32_t sq, uint32_t cq) {
  memset(rr, 0, sizeof *rr);
  rr->fd = fixture_connect(&f);
  rr->in.fd = -1;
  rr->bytes = proto_ring_bytes(sq, cq);
  int mfd = memfd_create("gkc-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT(mfd >= 0);
  ASSERT_EQ(ftruncate(mfd, (off_t)rr->bytes), 0);
  ASSERT_EQ(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  rr->map = mmap(NULL, rr->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  ASSERT(rr->map != MAP_FAILED);
  proto_ring_init(&rr->r, rr->map, sq, cq, PROTO_RING_CLIENT, rr->fd);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 1, "ring_register", ARGS(AI("sq_bytes", sq), AI("cq_bytes", cq)));
  struct iovec iov = {fr.sb.data, fr.sb.size};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } cm;
  memset(&cm, 0, sizeof cm);
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                      .msg_controllen = sizeof cm.buf};
  struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
  h->cmsg_level = SOL_SOCKET, h->cmsg_type = SCM_RIGHTS, h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &mfd, sizeof(int));
  ASSERT_EQ(sendmsg(rr->fd, &mh, MSG_NOSIGNAL), (ssize_t)fr.sb.size);
  rr_frame_free(&fr);
  close(mfd);
  rr_conn sc = {rr->fd, NULL, 0, 0};
  rr_reply rep;
  rr_get_reply(&sc, &rep, 5000);
  if (!rr_reply_ok(&rep, 1)) TEST_FAIL("ring_register: %s", rr_reply_desc(&rep));
  ASSERT(sc.have == 0); /* nothing else comes on the socket but doorbells */
  rr_reply_free(&rep);
  free(sc.buf);
}

static void raw_close(raw_ring *rr) {
  if (rr->fd >= 0) close(rr->fd);
  munmap(rr->map, rr->bytes);
  free(rr->in.buf);
  rr->fd = -1;
}

/* Waits up to ms for flag's condition (PROTO_RING_WANT_*): 1; 0 on timeout;
 * -1 once gkcd closed the socket. */
static int raw_wait(raw_ring *rr, uint32_t flag, int ms) {
  double end = rr_now_s() + ms / 1e3;
  for (;;) {
    int r = proto_ring_want(&rr->r, flag);
    if (r != 0) {
      proto_ring_want(&rr->r, 0);
      return 1;
    }
    struct pollfd p = {rr->fd, POLLIN, 0};
    int left = (int)((end - rr_now_s()) * 1e3);
    if (left <= 0) return 0;
    if (poll(&p, 1, left > 50 ? 50 : left) > 0) {
      char b[256];
      ssize_t n = recv(rr->fd, b, sizeof b, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return -1;
    }
  }
}

/* Writes all of p into the sq, waiting for room. */
static void raw_send(raw_ring *rr, const void *p, size_t n) {
  while (n) {
    struct iovec iov = {(void *)p, n};
    ssize_t w = proto_ring_writev(&rr->r, &iov, 1);
    ASSERT(w >= 0);
    if (w == 0) {
      if (raw_wait(rr, PROTO_RING_WANT_ROOM, 10000) != 1) TEST_FAIL("no room in the sq for 10 s");
      continue;
    }
    p = (const char *)p + w;
    n -= (size_t)w;
  }
}

/* The next reply from the cq, decoded into rep (rr_reply_free frees it);
 * rep->got 0 when none came within ms or gkcd closed. */
static void raw_reply(raw_ring *rr, rr_reply *rep, int ms) {
  static const proto_limits lim = {(size_t)1 << 30, 1u << 20, 32};
  rr_conn *in = &rr->in;
  memset(rep, 0, sizeof *rep);
  for (;;) {
    proto_frame_info info;
    ssize_t len = in->have ? proto_frame_scan(in->buf, in->have, &lim, &info) : 0;
    ASSERT(len >= 0);
    if (len > 0) { /* whole in the buffer: rr_get_reply takes it without reading */
      rr_get_reply(in, rep, 0);
      return;
    }
    if (in->cap - in->have < 65536) {
      in->cap = in->cap * 2 + 65536;
      in->buf = realloc(in->buf, in->cap);
      ASSERT(in->buf);
    }
    ssize_t n = proto_ring_read(&rr->r, in->buf + in->have, in->cap - in->have);
    ASSERT(n >= 0);
    if (n > 0) {
      in->have += (size_t)n;
      continue;
    }
    if (raw_wait(rr, PROTO_RING_WANT_DATA, ms) != 1) return;
  }
}

/* Rings gkcd's doorbell unconditionally (a client may always). */
static void raw_bell(raw_ring *rr) {
  char b = 0;
  (void)send(rr->fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* 1 once gkcd has closed rr's socket (within ms). */
static int raw_closed_by_gkcd(raw_ring *rr, int ms) {
  double end = rr_now_s() + ms / 1e3;
  while (rr_now_s() < end) {
    struct pollfd p = {rr->fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      char b[4096];
      ssize_t n = recv(rr->fd, b, sizeof b, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
    }
  }
  return 0;
}

/* --- 4: pipelining ------------------------------------------------------------------- */

enum { PIPE_N = 400, PIPE_LEN = 24 };

static void pipelined(void) {
  raw_ring rr;
  raw_open(&rr, 4096, 4096);
  static float xs[PIPE_N][PIPE_LEN];
  rr_frame fr;
  rr_frame_init(&fr);
  for (int i = 0; i < PIPE_N; i++) {
    for (int j = 0; j < PIPE_LEN; j++) xs[i][j] = test_rand_f32(&rng);
    rr_pack_request(&fr, 1000 + (uint32_t)i, "reduce", ARGS(AB("x", xs[i], sizeof xs[i])));
  }
  /* About 60 KB of requests through a 4 KiB sq, no reply read until all
   * went: the replies (about 30 KB) wait in gkcd's pending list. */
  ASSERT(fr.sb.size > 10 * 4096);
  raw_send(&rr, fr.sb.data, fr.sb.size);
  rr_frame_free(&fr);
  int seen[PIPE_N] = {0};
  for (int i = 0; i < PIPE_N; i++) {
    rr_reply rep;
    raw_reply(&rr, &rep, 10000);
    if (!rep.got || !rep.valid || rep.is_error) TEST_FAIL("reply %d: %s", i, rr_reply_desc(&rep));
    int k = (int)rep.msgid - 1000;
    ASSERT(k >= 0 && k < PIPE_N && !seen[k]);
    seen[k] = 1;
    const msgpack_object *v = NULL;
    for (uint32_t e = 0; e < rep.result->via.map.size; e++)
      if (rep.result->via.map.ptr[e].key.via.str.size == 5 &&
          !memcmp(rep.result->via.map.ptr[e].key.via.str.ptr, "value", 5))
        v = &rep.result->via.map.ptr[e].val;
    ASSERT(v);
    ASSERT_NEAR(rr_num(v), sum64(xs[k], PIPE_LEN), 1e-5 * abs64(xs[k], PIPE_LEN) + 1e-30);
    rr_reply_free(&rep);
  }
  raw_close(&rr);
}

/* --- 5: hostile rings -------------------------------------------------------------- */

static volatile int bystander_stop;
static int bystander_calls, bystander_bad;

/* Another client, on its own ring, served all along. */
static void *bystander(void *arg) {
  (void)arg;
  uint64_t st = 12345;
  gkc_conn *c;
  if (gkc_connect(&c, f.sock) != 0) {
    bystander_bad++;
    return NULL;
  }
  while (!bystander_stop) {
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = test_rand_f32(&st);
    double v;
    if (gkc_reduce(c, x, 64, GKC_SUM, &v, NULL, NULL) != 0 || !gkc_ring_active(c) ||
        !(fabs(v - sum64(x, 64)) <= 1e-5 * abs64(x, 64) + 1e-30))
      bystander_bad++;
    bystander_calls++;
  }
  gkc_close(c);
  return NULL;
}

static void ping_through(raw_ring *rr, uint32_t msgid) {
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, msgid, "ping", NULL, 0);
  raw_send(rr, fr.sb.data, fr.sb.size);
  rr_frame_free(&fr);
  rr_reply rep;
  raw_reply(rr, &rep, 5000);
  if (!rr_reply_ok(&rep, msgid)) TEST_FAIL("ping %u: %s", msgid, rr_reply_desc(&rep));
  rr_reply_free(&rep);
}

static int log_count(const char *needle) {
  int n = 0;
  for (const char *p = rr_slurp(f.log); (p = strstr(p, needle)); p++) n++;
  return n;
}

static void hostile(void) {
  pthread_t th;
  bystander_stop = 0;
  ASSERT_EQ(pthread_create(&th, NULL, bystander, NULL), 0);
  int oob0 = log_count("out of bounds");
  uint32_t *w;

  /* an sq tail past the ring */
  raw_ring a;
  raw_open(&a, 4096, 4096);
  ping_through(&a, 7);
  w = (uint32_t *)a.map;
  __atomic_store_n(&w[PROTO_RING_OFF_SQ_TAIL / 4], a.r.mine_out_tail + 4096 + 1, __ATOMIC_RELEASE);
  raw_bell(&a);
  ASSERT(raw_closed_by_gkcd(&a, 5000));
  raw_close(&a);

  /* a cq head past what gkcd wrote: found at its next reply */
  raw_open(&a, 4096, 4096);
  ping_through(&a, 8);
  w = (uint32_t *)a.map;
  __atomic_store_n(&w[PROTO_RING_OFF_CQ_HEAD / 4], 0x80000000u, __ATOMIC_RELEASE);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 9, "ping", NULL, 0);
  raw_send(&a, fr.sb.data, fr.sb.size);
  rr_frame_free(&fr);
  raw_bell(&a);
  ASSERT(raw_closed_by_gkcd(&a, 5000));
  raw_close(&a);

  /* a frame that is not msgpack: answered (parse_error), then closed */
  raw_open(&a, 4096, 4096);
  static const unsigned char junk[] = {0x94, 0x00, 0x05, 0xc1, 0xc1, 0xc1};
  raw_send(&a, junk, sizeof junk);
  rr_reply rep;
  raw_reply(&a, &rep, 5000);
  ASSERT(rep.got && rep.is_error && !strcmp(rep.code, "parse_error"));
  rr_reply_free(&rep);
  ASSERT(raw_closed_by_gkcd(&a, 5000));
  raw_close(&a);

  /* a frame that claims more than it has, then garbage over everything,
   * again and again: whatever gkcd makes of it, only this connection may
   * suffer, and never a read past the ring */
  uint64_t st = rng;
  for (int round = 0; round < 20; round++) {
    raw_open(&a, 4096, 4096);
    unsigned char *m = a.map;
    for (int k = 0; k < 50; k++) {
      size_t at = test_rand_u64(&st) % a.bytes;
      size_t len = 1 + test_rand_u64(&st) % 512;
      if (at + len > a.bytes) len = a.bytes - at;
      for (size_t i = 0; i < len; i++) m[at + i] = (unsigned char)test_rand_u64(&st);
      raw_bell(&a);
    }
    rr_sleep_ms(5);
    raw_close(&a);
  }

  bystander_stop = 1;
  pthread_join(th, NULL);
  ASSERT(bystander_calls > 0);
  ASSERT_EQ(bystander_bad, 0);
  ASSERT(log_count("out of bounds") >= oob0 + 2);
  /* gkcd itself is fine */
  gkc_conn *c = open_conn(1);
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = test_rand_f32(&rng);
  reduce_ok(c, x, 16);
  gkc_close(c);
}

/* --- 6: teardown -------------------------------------------------------------------- */

static int ring_maps(void) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)f.pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return -1;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, fp))
    if (strstr(line, "memfd:gkc-ring")) n++;
  fclose(fp);
  return n;
}

static uint64_t connections(void) {
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  ASSERT_EQ(gkc_set_ring(c, 0), 0);
  gkc_status_info st;
  ASSERT_EQ(gkc_status(c, &st), 0);
  gkc_close(c);
  return st.connections - 1; /* not counting this one */
}

static int settles(int (*probe)(void), int want, int ms) {
  double end = rr_now_s() + ms / 1e3;
  int v;
  while ((v = probe()) != want && rr_now_s() < end) rr_sleep_ms(20);
  return v;
}

static uint64_t conns_want;
static int conns_probe(void) { return connections() == conns_want ? 1 : 0; }

static void teardown(void) {
  int base = settles(ring_maps, ring_maps(), 0);
  if (base < 0) TEST_SKIP("no /proc/PID/maps");
  conns_want = 0;
  ASSERT_EQ(settles(conns_probe, 1, 5000), 1);
  base = ring_maps();
  raw_ring a, b;
  raw_open(&a, 4096, 4096);
  raw_open(&b, 8192, 4096);
  ping_through(&a, 3);
  ASSERT_EQ(ring_maps(), base + 2);
  conns_want = 2;
  ASSERT_EQ(conns_probe(), 1);
  raw_close(&a);
  ASSERT_EQ(settles(ring_maps, base + 1, 5000), base + 1);
  gkc_conn *c = open_conn(1);
  ASSERT_EQ(ring_maps(), base + 2);
  gkc_close(c);
  raw_close(&b);
  ASSERT_EQ(settles(ring_maps, base, 5000), base);
  conns_want = 0;
  ASSERT_EQ(settles(conns_probe, 1, 5000), 1);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  rng = test_seed();
  unsetenv("GKC_NO_RING");
  /* On: whatever --spin-us this machine's CPU count gives (auto offers
   * rings only when gkcd polls). */
  const char *const on[] = {"--rings", "on", NULL};
  fixture_start(&f, on, NULL);
  same_results();
  fprintf(stderr, "same results over ring and socket: ok\n");
  big_frames();
  fprintf(stderr, "big frames through small rings: ok\n");
  ring_goes_with_the_arena();
  fprintf(stderr, "the ring goes with the arena: ok\n");
  fallback();
  fprintf(stderr, "fallback: ok\n");
  pipelined();
  fprintf(stderr, "pipelined: ok\n");
  hostile();
  fprintf(stderr, "hostile rings: ok\n");
  teardown();
  fprintf(stderr, "teardown: ok\n");
  int rc = fixture_stop(&f, SIGTERM);
  ASSERT_EQ(rc, 0);
  printf("e2e_ring: ok\n");
  return 0;
}
