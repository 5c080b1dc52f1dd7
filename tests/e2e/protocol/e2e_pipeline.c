/* e2e_pipeline.c: 16 connections x 200 pipelined requests, every reply checked.
 *
 * Each connection sends all its requests (a mix of sgemm, reduce and spmv on
 * fresh random data) in one go, without waiting, then reads 200 replies,
 * which may arrive in any order: each must match a msgid sent, exactly once,
 * and carry the right numbers.  Frames are packed by hand with msgpack-c, as
 * a client written from PROTOCOL.md would. */
#include <msgpack.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "proto_rpc.h"
#include "rawrpc.h"
#include "test.h"

#define CONNS 16
#define PER_CONN 200

typedef struct {
  int kind;        /* 0 sgemm, 1 reduce, 2 spmv */
  double *want;    /* expected values */
  double *mag;     /* sum of |terms| per value, for the tolerance */
  size_t nwant;
  int seen;
} expect;

typedef struct {
  const fixture *f;
  int id;
  uint64_t seed;
  int checked;
} worker;

static void add_sgemm(msgpack_packer *pk, uint32_t id, uint64_t *rng, expect *e) {
  int m = 1 + (int)(test_rand_u64(rng) % 16), n = 1 + (int)(test_rand_u64(rng) % 16);
  int k = 1 + (int)(test_rand_u64(rng) % 16);
  float a[256], b[256];
  for (int i = 0; i < m * k; i++) a[i] = test_rand_f32(rng);
  for (int i = 0; i < k * n; i++) b[i] = test_rand_f32(rng);
  proto_pack_request_head(pk, id, "sgemm");
  msgpack_pack_map(pk, 5);
  rr_pack_int(pk, "m", m);
  rr_pack_int(pk, "n", n);
  rr_pack_int(pk, "k", k);
  rr_pack_bin(pk, "a", a, (size_t)m * k * 4);
  rr_pack_bin(pk, "b", b, (size_t)k * n * 4);
  e->kind = 0;
  e->nwant = (size_t)m * n;
  e->want = calloc(e->nwant, sizeof(double));
  e->mag = calloc(e->nwant, sizeof(double));
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int p = 0; p < k; p++) {
        double t = (double)a[i * k + p] * b[p * n + j];
        e->want[i * n + j] += t;
        e->mag[i * n + j] += fabs(t);
      }
}

static void add_reduce(msgpack_packer *pk, uint32_t id, uint64_t *rng, expect *e) {
  size_t n = 1 + test_rand_u64(rng) % 3000;
  float *x = malloc(n * 4);
  e->kind = 1;
  e->nwant = 1;
  e->want = calloc(1, sizeof(double));
  e->mag = calloc(1, sizeof(double));
  for (size_t i = 0; i < n; i++) {
    x[i] = test_rand_f32(rng);
    e->want[0] += x[i];
    e->mag[0] += fabs(x[i]);
  }
  proto_pack_request_head(pk, id, "reduce");
  msgpack_pack_map(pk, 1);
  rr_pack_bin(pk, "x", x, n * 4);
  free(x);
}

static void add_spmv(msgpack_packer *pk, uint32_t id, uint64_t *rng, expect *e) {
  int32_t rows = 1 + (int32_t)(test_rand_u64(rng) % 200), cols = 1 + (int32_t)(test_rand_u64(rng) % 200);
  int32_t rp[201] = {0}, ci[2000];
  float v[2000], x[200];
  for (int32_t r = 0; r < rows; r++) rp[r + 1] = rp[r] + (int32_t)(test_rand_u64(rng) % 10);
  int32_t nnz = rp[rows];
  for (int32_t j = 0; j < nnz; j++) {
    ci[j] = (int32_t)(test_rand_u64(rng) % (uint64_t)cols);
    v[j] = test_rand_f32(rng);
  }
  for (int32_t c = 0; c < cols; c++) x[c] = test_rand_f32(rng);
  e->kind = 2;
  e->nwant = (size_t)rows;
  e->want = calloc(e->nwant, sizeof(double));
  e->mag = calloc(e->nwant, sizeof(double));
  for (int32_t r = 0; r < rows; r++)
    for (int32_t j = rp[r]; j < rp[r + 1]; j++) {
      double t = (double)v[j] * x[ci[j]];
      e->want[r] += t;
      e->mag[r] += fabs(t);
    }
  proto_pack_request_head(pk, id, "spmv");
  msgpack_pack_map(pk, 6);
  rr_pack_int(pk, "rows", rows);
  rr_pack_int(pk, "cols", cols);
  rr_pack_bin(pk, "row_ptr", rp, ((size_t)rows + 1) * 4);
  rr_pack_bin(pk, "col_idx", ci, (size_t)nnz * 4);
  rr_pack_bin(pk, "values", v, (size_t)nnz * 4);
  rr_pack_bin(pk, "x", x, (size_t)cols * 4);
}

static void check_reply(const msgpack_object *root, uint32_t base, expect *ex, int conn) {
  proto_response r;
  if (proto_response_parse(root, &r) != 0) TEST_FAIL("conn %d: malformed reply", conn);
  if (r.error)
    TEST_FAIL("conn %d msgid %u: error %.*s: %.*s", conn, r.msgid, (int)r.code_len, r.code,
              (int)r.message_len, r.message);
  if (r.msgid < base || r.msgid >= base + PER_CONN)
    TEST_FAIL("conn %d: reply for msgid %u that this connection never sent", conn, r.msgid);
  expect *e = &ex[r.msgid - base];
  if (e->seen++) TEST_FAIL("conn %d: msgid %u answered twice", conn, r.msgid);
  if (e->kind == 1) {
    const msgpack_object *v = proto_map_get(r.result, "value");
    ASSERT(v && v->type == MSGPACK_OBJECT_FLOAT64);
    ASSERT_NEAR(v->via.f64, e->want[0], 1e-6 * e->mag[0]);
    return;
  }
  const msgpack_object *o = proto_map_get(r.result, e->kind == 0 ? "c" : "y");
  ASSERT(o && o->type == MSGPACK_OBJECT_BIN);
  ASSERT_EQ(o->via.bin.size, e->nwant * 4);
  for (size_t i = 0; i < e->nwant; i++) {
    float got;
    memcpy(&got, o->via.bin.ptr + 4 * i, 4);
    ASSERT_NEAR(got, e->want[i], 1e-5 * e->mag[i] + 1e-30);
  }
}

static void *run_conn(void *arg) {
  worker *w = arg;
  uint64_t rng = w->seed;
  uint32_t base = (uint32_t)w->id * 100000u;
  expect *ex = calloc(PER_CONN, sizeof *ex);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  for (int i = 0; i < PER_CONN; i++) {
    switch (test_rand_u64(&rng) % 3) {
      case 0: add_sgemm(&pk, base + (uint32_t)i, &rng, &ex[i]); break;
      case 1: add_reduce(&pk, base + (uint32_t)i, &rng, &ex[i]); break;
      default: add_spmv(&pk, base + (uint32_t)i, &rng, &ex[i]); break;
    }
  }
  int fd = fixture_connect(w->f);
  test_send_all(fd, sb.data, sb.size); /* all 200 at once: pipelined */
  unsigned char *buf = NULL;
  size_t cap = 0, have = 0;
  for (int i = 0; i < PER_CONN; i++) {
    size_t len = test_recv_frame(fd, &buf, &cap, &have);
    if (len == 0) TEST_FAIL("conn %d: closed after %d replies", w->id, i);
    msgpack_zone z;
    msgpack_zone_init(&z, 4096);
    msgpack_object root;
    size_t off = 0;
    ASSERT_EQ(msgpack_unpack((const char *)buf, len, &off, &z, &root), MSGPACK_UNPACK_SUCCESS);
    check_reply(&root, base, ex, w->id);
    msgpack_zone_destroy(&z);
    memmove(buf, buf + len, have - len);
    have -= len;
    w->checked++;
  }
  for (int i = 0; i < PER_CONN; i++) {
    if (ex[i].seen != 1) TEST_FAIL("conn %d: msgid %d never answered", w->id, i);
    free(ex[i].want), free(ex[i].mag);
  }
  close(fd);
  free(buf);
  free(ex);
  msgpack_sbuffer_destroy(&sb);
  return NULL;
}

int main(void) {
  uint64_t seed = test_seed();
  fixture f;
  /* All 3200 requests may be queued at once: the default queue (1024) would
   * rightly answer some of them "busy". */
  const char *const args[] = {"--max-queue", "4096", NULL};
  fixture_start(&f, args, NULL);
  pthread_t th[CONNS];
  worker w[CONNS];
  for (int i = 0; i < CONNS; i++) {
    w[i] = (worker){&f, i, seed + (uint64_t)i * 7919, 0};
    ASSERT_EQ(pthread_create(&th[i], NULL, run_conn, &w[i]), 0);
  }
  int total = 0;
  for (int i = 0; i < CONNS; i++) {
    pthread_join(th[i], NULL);
    total += w[i].checked;
  }
  ASSERT_EQ(total, CONNS * PER_CONN);
  int st = fixture_stop(&f, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  printf("e2e_pipeline: %d replies from %d connections checked\n", total, CONNS);
  return 0;
}
