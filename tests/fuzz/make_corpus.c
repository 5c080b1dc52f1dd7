/* make_corpus.c: writes the seed corpus of fuzz_request.
 *
 *   make_corpus DIR      (the fuzz_corpus target runs it on tests/fuzz/corpus)
 *
 * Valid requests of every method and most optional arguments, arrays by
 * value, by region and by handle and results sent to each kind of `out`
 * (naming the objects fuzz_request sets up, fuzz_objects.h), a few invalid
 * requests, and files holding several frames (pipelining), each packed with
 * msgpack-c the way libgkc packs them.  Every file stays well under 4 KB.
 */
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_objects.h"
#include "proto_rpc.h"

static const char *g_dir;
static msgpack_sbuffer sb;
static msgpack_packer pk;

static void begin(void) {
  msgpack_sbuffer_clear(&sb);
}

static void save(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(sb.data, 1, sb.size, f) != sb.size || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
  if (sb.size >= 4096) {
    fprintf(stderr, "make_corpus: %s is %zu bytes, keep seeds under 4 KB\n", name, sb.size);
    exit(1);
  }
}

static void raw(const void *p, size_t n) { msgpack_sbuffer_write(&sb, p, n); }

static void key(const char *k) { proto_pack_cstr(&pk, k); }

static void kv_int(const char *k, int64_t v) {
  key(k);
  msgpack_pack_int64(&pk, v);
}

static void kv_float(const char *k, double v) {
  key(k);
  msgpack_pack_double(&pk, v);
}

static void kv_bool(const char *k, int v) {
  key(k);
  if (v) msgpack_pack_true(&pk);
  else msgpack_pack_false(&pk);
}

static void kv_str(const char *k, const char *v) {
  key(k);
  proto_pack_cstr(&pk, v);
}

static void kv_f32(const char *k, size_t n, float base) {
  key(k);
  msgpack_pack_bin(&pk, n * 4);
  for (size_t i = 0; i < n; i++) {
    float v = base + (float)i * 0.5f;
    msgpack_pack_bin_body(&pk, &v, 4);
  }
}

static void kv_i32(const char *k, const int32_t *v, size_t n) {
  key(k);
  msgpack_pack_bin(&pk, n * 4);
  for (size_t i = 0; i < n; i++) msgpack_pack_bin_body(&pk, &v[i], 4);
}

/* {"region": r, "offset": o, "bytes": n} and {"handle": h} references. */
static void kv_region(const char *k, uint32_t region, uint64_t off, uint64_t bytes) {
  key(k);
  msgpack_pack_map(&pk, 3);
  kv_int("region", region);
  kv_int("offset", (int64_t)off);
  kv_int("bytes", (int64_t)bytes);
}

static void kv_handle(const char *k, uint32_t h) {
  key(k);
  msgpack_pack_map(&pk, 1);
  kv_int("handle", h);
}

/* out: {name: "handle"}, {name: {"handle": h}} or {name: {"region": r, "offset": o}}. */
static void out_new(const char *name) {
  key("out");
  msgpack_pack_map(&pk, 1);
  kv_str(name, "handle");
}

static void out_handle(const char *name, uint32_t h) {
  key("out");
  msgpack_pack_map(&pk, 1);
  kv_handle(name, h);
}

static void out_region(const char *name, uint32_t region, uint64_t off) {
  key("out");
  msgpack_pack_map(&pk, 1);
  key(name);
  msgpack_pack_map(&pk, 2);
  kv_int("region", region);
  kv_int("offset", (int64_t)off);
}

static void head(uint32_t id, const char *method, int nkeys) {
  proto_pack_request_head(&pk, id, method);
  msgpack_pack_map(&pk, nkeys);
}

static void noarg(uint32_t id, const char *method) {
  proto_pack_request_head(&pk, id, method);
  msgpack_pack_map(&pk, 0);
}

/* sgemm m x k times k x n, with the optional arguments in flags. */
enum { TRANS = 1, BETA = 2, ALGO = 4, TF32 = 8, C_ZERO_BETA = 16, CUDA_ALGO = 32 };
static void sgemm(uint32_t id, int m, int n, int k, int flags) {
  int nkeys = 5 + (flags & TRANS ? 2 : 0) + (flags & BETA ? 3 : 0) +
              (flags & (ALGO | CUDA_ALGO) ? 1 : 0) + (flags & TF32 ? 1 : 0) +
              (flags & C_ZERO_BETA ? 1 : 0);
  proto_pack_request_head(&pk, id, "sgemm");
  msgpack_pack_map(&pk, nkeys);
  kv_int("m", m);
  kv_int("n", n);
  kv_int("k", k);
  kv_f32("a", (size_t)m * k, 1.0f);
  kv_f32("b", (size_t)k * n, -1.0f);
  if (flags & TRANS) {
    kv_bool("trans_a", 1);
    kv_bool("trans_b", 0);
  }
  if (flags & BETA) {
    kv_float("alpha", 2.0);
    kv_float("beta", 0.5);
    kv_f32("c", (size_t)m * n, 3.0f);
  }
  if (flags & C_ZERO_BETA) kv_f32("c", (size_t)m * n, 3.0f);
  if (flags & ALGO) kv_str("algo", "openblas");
  if (flags & CUDA_ALGO) kv_str("algo", "regblock");
  if (flags & TF32) kv_str("precision", "tf32");
}

static void reduce(uint32_t id, const char *op, size_t n, const char *algo) {
  proto_pack_request_head(&pk, id, "reduce");
  msgpack_pack_map(&pk, 1 + (op ? 1 : 0) + (algo ? 1 : 0));
  kv_f32("x", n, -3.0f);
  if (op) kv_str("op", op);
  if (algo) kv_str("algo", algo);
}

/* A 4x5 CSR matrix with an empty row; bad != 0 breaks it in one way. */
static void spmv(uint32_t id, int with_beta, const char *algo, int bad) {
  int32_t row_ptr[5] = {0, 2, 2, 5, 6};
  int32_t col_idx[6] = {0, 4, 1, 2, 3, 4};
  if (bad == 1) col_idx[3] = 5;  /* outside [0, cols) */
  if (bad == 2) row_ptr[2] = 1;  /* decreases */
  if (bad == 3) row_ptr[4] = 5;  /* does not end at nnz */
  proto_pack_request_head(&pk, id, "spmv");
  msgpack_pack_map(&pk, 6 + (with_beta ? 3 : 0) + (algo ? 1 : 0));
  kv_int("rows", 4);
  kv_int("cols", 5);
  kv_i32("row_ptr", row_ptr, 5);
  kv_i32("col_idx", col_idx, 6);
  kv_f32("values", 6, 0.25f);
  kv_f32("x", 5, 1.0f);
  if (with_beta) {
    kv_float("alpha", -1.0);
    kv_float("beta", 2.0);
    kv_f32("y", 4, 7.0f);
  }
  if (algo) kv_str("algo", algo);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  g_dir = argv[1];
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);

  /* Valid requests. */
  begin(), noarg(1, "ping"), save("ping");
  begin(), noarg(2, "status"), save("status");
  begin(), sgemm(3, 2, 3, 4, 0), save("sgemm");
  begin(), sgemm(4, 3, 2, 2, TRANS), save("sgemm_trans");
  begin(), sgemm(5, 2, 2, 3, BETA), save("sgemm_alpha_beta_c");
  begin(), sgemm(6, 1, 1, 1, C_ZERO_BETA), save("sgemm_c_beta0");
  begin(), sgemm(7, 2, 2, 2, ALGO | TF32), save("sgemm_algo_tf32");
  begin(), sgemm(8, 4, 4, 4, TRANS | BETA | CUDA_ALGO), save("sgemm_cuda_algo");
  begin(), reduce(9, NULL, 5, NULL), save("reduce_default");
  begin(), reduce(10, "sum", 8, NULL), save("reduce_sum");
  begin(), reduce(11, "min", 3, "cpu_omp"), save("reduce_min");
  begin(), reduce(12, "max", 1, "shfl"), save("reduce_max");
  begin(), spmv(13, 0, NULL, 0), save("spmv");
  begin(), spmv(14, 1, "cpu_merge", 0), save("spmv_beta_y");
  begin(), spmv(15, 0, "balanced", 0), save("spmv_cuda_algo");

  /* Requests the daemon must refuse. */
  begin(), spmv(20, 0, NULL, 1), save("bad_spmv_col");
  begin(), spmv(21, 0, NULL, 2), save("bad_spmv_rowptr");
  begin(), spmv(22, 1, NULL, 3), save("bad_spmv_nnz");
  begin(), noarg(23, "nope"), save("bad_unknown_method");
  begin();
  proto_pack_request_head(&pk, 24, "sgemm");
  msgpack_pack_map(&pk, 4), kv_int("m", 2), kv_int("n", 2), kv_int("k", 2);
  kv_f32("a", 3, 0.0f); /* 12 bytes, 16 expected */
  save("bad_sgemm_size");
  begin();
  proto_pack_request_head(&pk, 25, "reduce");
  msgpack_pack_map(&pk, 2), kv_f32("x", 2, 0.0f), kv_float("alhpa", 1.0);
  save("bad_unknown_arg");
  begin();
  proto_pack_request_head(&pk, 26, "reduce");
  msgpack_pack_map(&pk, 2), kv_f32("x", 2, 0.0f), kv_f32("x", 2, 1.0f);
  save("bad_dup_key");
  begin();
  proto_pack_request_head(&pk, 27, "ping");
  msgpack_pack_array(&pk, 0); /* params must be one map */
  save("bad_params");
  begin(), msgpack_pack_map(&pk, 0), save("bad_not_array");
  begin(), raw("\x94\x00\x1c\xc1", 4), save("bad_c1");
  begin(), raw("\x94\x00\x1d\xc6\xff\xff\xff\xff", 8), save("bad_too_big");
  begin();
  for (int i = 0; i < 20; i++) msgpack_pack_array(&pk, 1);
  msgpack_pack_nil(&pk);
  save("bad_too_deep");

  /* Regions, handles and out. */
  begin(), head(40, "dot", 2), kv_f32("x", 3, 1.0f), kv_f32("y", 3, 2.0f), save("dot");
  begin(), head(41, "dot", 3), kv_handle("x", FZ_ARR_F32_16), kv_handle("y", FZ_ARR_SHARED);
  kv_str("algo", "openblas"), save("dot_handles");
  begin(), head(42, "axpby", 4), kv_f32("x", 4, 1.0f), kv_f32("y", 4, 2.0f);
  kv_float("alpha", 2.0), kv_float("beta", -1.0), save("axpby");
  begin(), head(43, "axpby", 3), kv_handle("x", FZ_ARR_F32_16), kv_handle("y", FZ_ARR_F32_16B);
  out_handle("y", FZ_ARR_F32_16B), save("axpby_in_place");
  begin(), head(44, "axpby", 3), kv_region("x", FZ_REGION_A, 256, 20), kv_f32("y", 5, 0.0f);
  out_region("y", FZ_REGION_B, 8), save("axpby_region_out");
  begin(), head(45, "sgemm", 6), kv_int("m", 2), kv_int("n", 2), kv_int("k", 2);
  kv_handle("a", FZ_ARR_F32_16), kv_region("b", FZ_REGION_A, 256, 16), out_new("c");
  save("sgemm_handle_region_outnew");
  begin(), head(46, "sgemm", 9), kv_int("m", 2), kv_int("n", 2), kv_int("k", 2);
  kv_f32("a", 4, 1.0f), kv_f32("b", 4, 1.0f), kv_float("beta", 1.0);
  kv_handle("c", FZ_ARR_F32_16), out_handle("c", FZ_ARR_F32_16B), kv_int("deadline_ms", 5000);
  save("sgemm_out_handle_deadline");
  begin(), head(47, "spmv", 5), kv_int("matrix", FZ_MATRIX), kv_handle("x", FZ_ARR_F32_20);
  kv_float("beta", 0.5), kv_handle("y", FZ_ARR_F32_16), out_handle("y", FZ_ARR_F32_16B);
  save("spmv_matrix");
  begin(), head(48, "spmv", 7), kv_int("rows", 4), kv_int("cols", 5);
  kv_region("row_ptr", FZ_REGION_A, FZ_RA_ROW_PTR, 20);
  kv_region("col_idx", FZ_REGION_A, FZ_RA_COL_IDX, 24);
  kv_region("values", FZ_REGION_A, FZ_RA_VALUES, 24), kv_region("x", FZ_REGION_A, FZ_RA_X, 20);
  out_region("y", FZ_REGION_B, 0), save("spmv_region");
  begin(), head(49, "spmv", 6), kv_int("rows", 4), kv_int("cols", 5);
  kv_region("row_ptr", FZ_REGION_A, FZ_RA_ROW_PTR, 20);
  kv_region("col_idx", FZ_REGION_A, FZ_RA_BAD_COL, 24);
  kv_region("values", FZ_REGION_A, FZ_RA_VALUES, 24), kv_region("x", FZ_REGION_A, FZ_RA_X, 20);
  save("bad_spmv_region_col");
  {
    int32_t rp[3] = {0, 1, 3}, ci[3] = {2, 0, 1};
    begin(), head(50, "csr_upload", 6), kv_int("rows", 2), kv_int("cols", 3);
    kv_i32("row_ptr", rp, 3), kv_i32("col_idx", ci, 3), kv_f32("values", 3, 1.0f);
    kv_bool("shared", 1), save("csr_upload");
    /* partitioned over every device (the harness's devices cannot: refused) */
    begin(), head(50, "csr_upload", 6), kv_int("rows", 2), kv_int("cols", 3);
    kv_i32("row_ptr", rp, 3), kv_i32("col_idx", ci, 3), kv_f32("values", 3, 1.0f);
    kv_str("devices", "all"), save("csr_upload_devices");
  }
  begin(), head(51, "csr_upload", 5), kv_int("rows", 4), kv_int("cols", 5);
  kv_region("row_ptr", FZ_REGION_A, FZ_RA_ROW_PTR, 20);
  kv_region("col_idx", FZ_REGION_A, FZ_RA_COL_IDX, 24);
  kv_region("values", FZ_REGION_A, FZ_RA_VALUES, 24), save("csr_upload_region");
  begin(), head(52, "upload", 2), kv_f32("data", 6, 1.0f), kv_str("dtype", "f32");
  save("upload_f32");
  begin(), head(53, "upload", 3), kv_handle("data", FZ_ARR_I32_20), kv_str("dtype", "i32");
  kv_bool("shared", 1), save("upload_i32_handle");
  begin(), head(54, "download", 1), kv_int("handle", FZ_ARR_F32_20), save("download");
  begin(), head(55, "download", 2), kv_int("handle", FZ_ARR_SHARED);
  out_region("data", FZ_REGION_B, 16), save("download_region");
  begin(), head(56, "shm_register", 1), kv_int("bytes", 4096), save("shm_register_no_fd");
  begin(), head(57, "download", 1), kv_int("handle", FZ_ARR_OTHER), save("bad_other_handle");
  begin(), head(58, "reduce", 1), kv_region("x", FZ_REGION_OTHER, 0, 16), save("bad_other_region");
  begin(), head(59, "reduce", 1), kv_region("x", FZ_REGION_B, 2, 8), save("bad_region_misaligned");
  begin(), head(60, "reduce", 1), kv_region("x", FZ_REGION_B, 32, 36), save("bad_region_bounds");
  begin(), head(61, "reduce", 1), kv_handle("x", FZ_ARR_I32_20), save("bad_handle_dtype");
  begin(), head(62, "sgemm", 8), kv_int("m", 2), kv_int("n", 2), kv_int("k", 2);
  kv_f32("a", 4, 1.0f), kv_f32("b", 4, 1.0f), kv_float("beta", 1.0);
  kv_handle("c", FZ_ARR_F32_16), out_handle("c", FZ_ARR_F32_16), save("bad_out_aliases_input");

  /* Release, then use: the second request must be refused. */
  begin(), head(70, "release", 1), kv_int("handle", FZ_ARR_F32_16);
  head(71, "reduce", 1), kv_handle("x", FZ_ARR_F32_16);
  head(72, "release", 1), kv_int("matrix", FZ_MATRIX);
  head(73, "spmv", 2), kv_int("matrix", FZ_MATRIX), kv_f32("x", 5, 1.0f);
  head(74, "shm_release", 1), kv_int("region", FZ_REGION_B);
  head(75, "download", 2), kv_int("handle", FZ_ARR_F32_20), out_region("data", FZ_REGION_B, 0);
  head(76, "shm_release", 1), kv_int("region", FZ_REGION_OTHER);
  save("pipe_release_then_use");

  /* Pipelining: several frames in one write. */
  begin(), noarg(30, "ping"), reduce(31, "max", 4, NULL), save("pipe_ping_reduce");
  begin(), sgemm(32, 1, 2, 1, 0), spmv(33, 1, NULL, 0), noarg(34, "status");
  raw("\x94\x00\x23\xa4sgem", 8); /* and the start of a fourth */
  save("pipe_three_and_partial");

  msgpack_sbuffer_destroy(&sb);
  return 0;
}
