/* soak_requests.c: the requests e2e_soak sends (soak.h): sgemm, reduce
 * and spmv of random small shapes with their float64 references, status,
 * ping, and the deliberately invalid ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto_rpc.h"
#include "rawrpc.h"
#include "soak.h"

const soak_invalid INV[INV_COUNT] = {
    [INV_SG_SHORT_A] = {PROTO_M_SGEMM, "invalid_argument", "'a'"},
    [INV_SG_M0] = {PROTO_M_SGEMM, "invalid_argument", "'m'"},
    [INV_RD_OP] = {PROTO_M_REDUCE, "invalid_argument", "'op'"},
    [INV_RD_EMPTY] = {PROTO_M_REDUCE, "invalid_argument", "'x'"},
    [INV_SP_COL] = {PROTO_M_SPMV, "invalid_argument", "col_idx"},
    [INV_PING_ARG] = {PROTO_M_PING, "invalid_argument", "ping"},
    [INV_STATUS_ARG] = {PROTO_M_STATUS, "invalid_argument", "status"},
    [INV_UNKNOWN_METHOD] = {CLS_BAD, "unknown_method", "frobnicate"},
    [INV_BARE_MAP] = {CLS_BAD, "invalid_request", "params"},
};

static void want_alloc(slot *s, size_t n) {
  if (n > s->wcap) {
    s->want = realloc(s->want, n * sizeof(double));
    s->mag = realloc(s->mag, n * sizeof(double));
    if (!s->want || !s->mag) TEST_FAIL("out of memory");
    s->wcap = n;
  }
  s->nwant = n;
  memset(s->want, 0, n * sizeof(double));
  memset(s->mag, 0, n * sizeof(double));
}

/* ------------------------------------------------------------------------ */
/* request builders                                                          */

static const double ALPHAS[] = {1.0, -0.5, 2.0, 0.25};
static const double BETAS[] = {0.0, 0.5, -1.0};

static void add_sgemm(worker *w, slot *s) {
  int m = 1 + (int)rnd(w, SG_MAX), n = 1 + (int)rnd(w, SG_MAX), k = 1 + (int)rnd(w, SG_MAX);
  int ta = (int)rnd(w, 2), tb = (int)rnd(w, 2);
  int send_t = (int)rnd(w, 2); /* send trans_a/trans_b even when false */
  double alpha = ALPHAS[rnd(w, 4)], beta = BETAS[rnd(w, 3)];
  int send_alpha = alpha != 1.0 || rnd(w, 2), with_c = beta != 0.0;
  int send_algo = (int)rnd(w, 4) == 0;
  float a[SG_MAX * SG_MAX], b[SG_MAX * SG_MAX], c[SG_MAX * SG_MAX];
  for (int i = 0; i < m * k; i++) a[i] = test_rand_f32(&w->rng);
  for (int i = 0; i < k * n; i++) b[i] = test_rand_f32(&w->rng);
  if (with_c)
    for (int i = 0; i < m * n; i++) c[i] = test_rand_f32(&w->rng);
  size_t nkeys = 5 + (size_t)send_alpha + 2u * (size_t)with_c + ((ta || tb || send_t) ? 2u : 0u) +
                 (size_t)send_algo;
  msgpack_packer *pk = &w->pk;
  proto_pack_request_head(pk, s->msgid, "sgemm");
  msgpack_pack_map(pk, nkeys);
  rr_pack_int(pk, "m", m), rr_pack_int(pk, "n", n), rr_pack_int(pk, "k", k);
  rr_pack_bin(pk, "a", a, (size_t)m * k * 4);
  rr_pack_bin(pk, "b", b, (size_t)k * n * 4);
  if (with_c) rr_pack_bin(pk, "c", c, (size_t)m * n * 4), rr_pack_f64(pk, "beta", beta);
  if (send_alpha) rr_pack_f64(pk, "alpha", alpha);
  if (ta || tb || send_t) rr_pack_bool(pk, "trans_a", ta), rr_pack_bool(pk, "trans_b", tb);
  if (send_algo) rr_pack_str(pk, "algo", "auto");
  s->cls = PROTO_M_SGEMM;
  want_alloc(s, (size_t)m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double av = ta ? a[p * m + i] : a[i * k + p];
        double bv = tb ? b[j * k + p] : b[p * n + j];
        acc += av * bv;
        mag += fabs(av * bv);
      }
      double cv = with_c ? c[i * n + j] : 0.0;
      s->want[i * n + j] = alpha * acc + beta * cv;
      s->mag[i * n + j] = fabs(alpha) * mag + fabs(beta * cv);
    }
}

static const size_t RD_EDGES[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                  127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 4095, 4096,
                                  4097, 65535, 65536};

static size_t reduce_len(worker *w) {
  uint64_t r = rnd(w, 100);
  if (r < 20) return RD_EDGES[rnd(w, sizeof RD_EDGES / sizeof RD_EDGES[0])];
  if (r < 60) return 1 + rnd(w, 64);
  if (r < 90) return 65 + rnd(w, 4096 - 64);
  if (r < 98) return 4097 + rnd(w, 16384 - 4096);
  return 16385 + rnd(w, RD_MAX - 16384);
}

static void add_reduce(worker *w, slot *s) {
  size_t n = reduce_len(w);
  int op = (int)rnd(w, 3);
  int send_op = op != 0 || rnd(w, 2), send_algo = rnd(w, 4) == 0;
  float *x = w->scratch;
  double sum = 0, mag = 0;
  float mn = INFINITY, mx = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    x[i] = test_rand_f32(&w->rng);
    sum += x[i];
    mag += fabs(x[i]);
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
  }
  msgpack_packer *pk = &w->pk;
  proto_pack_request_head(pk, s->msgid, "reduce");
  msgpack_pack_map(pk, 1 + (size_t)send_op + (size_t)send_algo);
  rr_pack_bin(pk, "x", x, n * 4);
  if (send_op) rr_pack_str(pk, "op", op == 0 ? "sum" : op == 1 ? "min" : "max");
  if (send_algo) rr_pack_str(pk, "algo", "auto");
  s->cls = PROTO_M_REDUCE;
  s->op = op;
  s->n = n;
  want_alloc(s, 1);
  s->want[0] = op == 0 ? sum : op == 1 ? (double)mn : (double)mx;
  s->mag[0] = op == 0 ? mag : 0.0; /* min and max are exact */
}

static void add_spmv(worker *w, slot *s) {
  int32_t rows = 1 + (int32_t)rnd(w, SP_MAX), cols = 1 + (int32_t)rnd(w, SP_MAX);
  int32_t rp[SP_MAX + 1], ci[SP_MAX * SP_ROW_NNZ];
  float v[SP_MAX * SP_ROW_NNZ], x[SP_MAX], y[SP_MAX];
  int dense_rows = rnd(w, 4) == 0; /* otherwise many rows are empty */
  rp[0] = 0;
  for (int32_t r = 0; r < rows; r++)
    rp[r + 1] = rp[r] + (int32_t)rnd(w, dense_rows ? SP_ROW_NNZ + 1 : 3);
  int32_t nnz = rp[rows];
  for (int32_t j = 0; j < nnz; j++) {
    ci[j] = (int32_t)rnd(w, (uint64_t)cols); /* unsorted, repeats allowed */
    v[j] = test_rand_f32(&w->rng);
  }
  for (int32_t c = 0; c < cols; c++) x[c] = test_rand_f32(&w->rng);
  double alpha = ALPHAS[rnd(w, 4)], beta = BETAS[rnd(w, 3)];
  int send_alpha = alpha != 1.0 || rnd(w, 2), with_y = beta != 0.0;
  if (with_y)
    for (int32_t r = 0; r < rows; r++) y[r] = test_rand_f32(&w->rng);
  msgpack_packer *pk = &w->pk;
  proto_pack_request_head(pk, s->msgid, "spmv");
  msgpack_pack_map(pk, 6 + (size_t)send_alpha + 2u * (size_t)with_y);
  rr_pack_int(pk, "rows", rows), rr_pack_int(pk, "cols", cols);
  rr_pack_bin(pk, "row_ptr", rp, ((size_t)rows + 1) * 4);
  rr_pack_bin(pk, "col_idx", ci, (size_t)nnz * 4);
  rr_pack_bin(pk, "values", v, (size_t)nnz * 4);
  rr_pack_bin(pk, "x", x, (size_t)cols * 4);
  if (send_alpha) rr_pack_f64(pk, "alpha", alpha);
  if (with_y) rr_pack_f64(pk, "beta", beta), rr_pack_bin(pk, "y", y, (size_t)rows * 4);
  s->cls = PROTO_M_SPMV;
  want_alloc(s, (size_t)rows);
  for (int32_t r = 0; r < rows; r++) {
    double acc = 0, mag = 0;
    for (int32_t j = rp[r]; j < rp[r + 1]; j++) {
      double t = (double)v[j] * x[ci[j]];
      acc += t;
      mag += fabs(t);
    }
    double yv = with_y ? y[r] : 0.0;
    s->want[r] = alpha * acc + beta * yv;
    s->mag[r] = fabs(alpha) * mag + fabs(beta * yv);
  }
}

static void add_invalid(worker *w, slot *s, int kind) {
  msgpack_packer *pk = &w->pk;
  static const float f4[4] = {1, 2, 3, 4};
  s->inv = kind;
  s->cls = INV[kind].cls;
  switch (kind) {
    case INV_SG_SHORT_A: /* a holds 3 floats where m*k = 4 */
    case INV_SG_M0:
      proto_pack_request_head(pk, s->msgid, "sgemm");
      msgpack_pack_map(pk, 5);
      rr_pack_int(pk, "m", kind == INV_SG_M0 ? 0 : 2), rr_pack_int(pk, "n", 2), rr_pack_int(pk, "k", 2);
      rr_pack_bin(pk, "a", f4, kind == INV_SG_SHORT_A ? 12 : 16);
      rr_pack_bin(pk, "b", f4, 16);
      break;
    case INV_RD_OP:
    case INV_RD_EMPTY:
      proto_pack_request_head(pk, s->msgid, "reduce");
      msgpack_pack_map(pk, kind == INV_RD_OP ? 2 : 1);
      rr_pack_bin(pk, "x", f4, kind == INV_RD_OP ? 12 : 0);
      if (kind == INV_RD_OP) rr_pack_str(pk, "op", "avg");
      break;
    case INV_SP_COL: { /* 2x3, one column index equal to cols */
      static const int32_t rp[3] = {0, 1, 2}, ci[2] = {0, 3};
      proto_pack_request_head(pk, s->msgid, "spmv");
      msgpack_pack_map(pk, 6);
      rr_pack_int(pk, "rows", 2), rr_pack_int(pk, "cols", 3);
      rr_pack_bin(pk, "row_ptr", rp, 12);
      rr_pack_bin(pk, "col_idx", ci, 8);
      rr_pack_bin(pk, "values", f4, 8);
      rr_pack_bin(pk, "x", f4, 12);
      break;
    }
    case INV_PING_ARG:
    case INV_STATUS_ARG:
      proto_pack_request_head(pk, s->msgid, kind == INV_PING_ARG ? "ping" : "status");
      msgpack_pack_map(pk, 1);
      rr_pack_int(pk, "verbose", 1);
      break;
    case INV_UNKNOWN_METHOD:
      proto_pack_request_head(pk, s->msgid, "frobnicate");
      msgpack_pack_map(pk, 0);
      break;
    default: /* [0, msgid, "reduce", {}]: params a bare map */
      msgpack_pack_array(pk, 4);
      msgpack_pack_uint8(pk, 0);
      msgpack_pack_uint32(pk, s->msgid);
      proto_pack_cstr(pk, "reduce");
      msgpack_pack_map(pk, 0);
      break;
  }
}

/* Packs request number seq into w->sb and fills a free slot. */
void add_request(worker *w, long seq) {
  slot *s = NULL;
  for (int i = 0; i < MAX_WINDOW && !s; i++)
    if (!w->slots[i].used) s = &w->slots[i];
  if (!s) WFAIL(w, "no free slot (window bookkeeping bug)");
  s->used = 1;
  s->msgid = w->id_base + (uint32_t)seq;
  s->inv = -1;
  s->nwant = 0;
  /* Out of 1000: 20 invalid (2%), 40 status, 100 ping, 290 sgemm,
   * 290 reduce, 260 spmv. */
  uint64_t r = rnd(w, 1000);
  if (r < 20) {
    add_invalid(w, s, (int)rnd(w, INV_COUNT));
    w->sent_inv++;
    if (s->cls == CLS_BAD) {
      w->sent_bad++;
    } else {
      w->sent_req[s->cls]++;
      w->sent_err[s->cls]++;
    }
  } else {
    if (r < 60) {
      proto_pack_request_head(&w->pk, s->msgid, "status");
      msgpack_pack_map(&w->pk, 0);
      s->cls = PROTO_M_STATUS;
    } else if (r < 160) {
      proto_pack_request_head(&w->pk, s->msgid, "ping");
      msgpack_pack_map(&w->pk, 0);
      s->cls = PROTO_M_PING;
    } else if (r < 450) {
      add_sgemm(w, s);
    } else if (r < 740) {
      add_reduce(w, s);
    } else {
      add_spmv(w, s);
    }
    w->sent_req[s->cls]++;
  }
  w->inflight++;
  s->t0 = rr_now_s();
}

