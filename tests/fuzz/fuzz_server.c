/* fuzz_server.c: fuzz_request's fake server, its connections, backends and
 * objects (fuzz_harness.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "devices.h"
#include "fuzz_harness.h"
#include "gkc_errors.h"
#include "part.h"
#include "proto_methods.h"
#include "region.h"
#include "split.h"

const proto_limits LIM = {FUZZ_MAX_BYTES, PROTO_MAX_OBJECTS, PROTO_MAX_DEPTH};
const proto_limits CLIENT_LIM = {(size_t)1 << 40, 1u << 20, 64};

/* What devices.c would provide (it opens real backends): two devices, so
 * `device` 0 and 1 parse and anything else is refused. */
int devices_count(void) { return 2; }
uint64_t devices_live(const gkcd_devices *d) { (void)d; return 3; }
/* Backends without partition primitives: csr_upload `devices` is parsed,
 * then refused (part.c is not linked; no partitioned matrix is ever made). */
gkcd_backend *devices_backend(int i) {
  static gkcd_backend plain = {.name = "fuzz"};
  return i >= 0 && i < 2 ? &plain : NULL;
}
void part_free(gkcd_part *p) {
  if (p) __builtin_trap();
}
void part_pack(msgpack_packer *pk, const gkcd_part *p) {
  (void)pk, (void)p;
  __builtin_trap();
}
/* What the method rows name and only a worker runs: the harness runs no job. */
void part_run_upload(gkcd_job *job) { (void)job, __builtin_trap(); }
void part_run_spmv(gkcd_job *job) { (void)job, __builtin_trap(); }
void part_solve(gkcd_job *job) { (void)job, __builtin_trap(); }
void region_map(gkcd_backend *be, gkcd_job *job) { (void)be, (void)job, __builtin_trap(); }
/* ring_register's: no descriptor ever comes with a fuzzed request, so it is
 * refused before the connection is looked at, and never hands one a ring. */
int conn_take_fd(gkcd_conn *c) { (void)c; return -1; }
int conn_ring_start(gkcd_conn *c, proto_ring *ring, size_t map_bytes, size_t then) {
  (void)c, (void)ring, (void)map_bytes, (void)then;
  __builtin_trap();
}
int split_rule_rows(const gkcd_job *job) { (void)job, __builtin_trap(); }
int split_rule_reduce(const gkcd_job *job) { (void)job, __builtin_trap(); }
int split_rule_copies(const gkcd_job *job) { (void)job, __builtin_trap(); }

/* --- fake backends: algo lists, and memory that must never be freed ------ */

static void never_res_free(gkcd_backend *be, void *ptr, size_t cap) {
  (void)be, (void)ptr, (void)cap;
  fprintf(stderr, "fuzz_request: resident memory freed while the harness holds a reference\n");
  __builtin_trap();
}

static void never_unpin(gkcd_backend *be, void *ptr) {
  (void)be, (void)ptr;
  fprintf(stderr, "fuzz_request: region unmapped while the harness holds a reference\n");
  __builtin_trap();
}

static const char *const cpu_sgemm[] = {"openblas", NULL};
static const char *const cpu_reduce[] = {"cpu_omp", NULL};
static const char *const cpu_spmv[] = {"cpu_merge", NULL};
static const char *const cpu_blas1[] = {"openblas", NULL};
gkcd_backend cpu_be = {
    .name = "cpu",
    .algos = {[PROTO_M_SGEMM] = cpu_sgemm, [PROTO_M_REDUCE] = cpu_reduce,
              [PROTO_M_SPMV] = cpu_spmv, [PROTO_M_DOT] = cpu_blas1, [PROTO_M_AXPBY] = cpu_blas1},
    .res_free = never_res_free,
    .region_unpin = never_unpin,
};

static const char *const cuda_sgemm[] = {"naive", "smem", "regblock", "cublas", "cublas_tf32",
                                         NULL};
static const char *const cuda_reduce[] = {"smem", "shfl", "cub", NULL};
static const char *const cuda_spmv[] = {"scalar", "vector", "balanced", "cusparse", NULL};
static const char *const cuda_blas1[] = {"gkcu", NULL};
gkcd_backend cuda_be = {
    .name = "cuda",
    .algos = {[PROTO_M_SGEMM] = cuda_sgemm, [PROTO_M_REDUCE] = cuda_reduce,
              [PROTO_M_SPMV] = cuda_spmv, [PROTO_M_DOT] = cuda_blas1,
              [PROTO_M_AXPBY] = cuda_blas1},
    .res_free = never_res_free,
    .region_unpin = never_unpin,
};

int list_len(const char *const *l) {
  int n = 0;
  while (l && l[n]) n++;
  return n;
}

/* --- the fake server, its connection, and the objects it holds ----------- */

gkcd_residents g_res;
gkcd_devices g_devs;
static gkcd_budget g_budget;
res_owner g_conn, g_other;

fake_obj g_obj[FZ_NOBJ + 1];

static const int32_t M_ROW_PTR[5] = {0, 2, 2, 5, 6};
static const int32_t M_COL_IDX[6] = {0, 4, 1, 2, 3, 4};

void *xmalloc(size_t n) {
  void *p = malloc(n);
  CHECK(p);
  return p;
}

static void def_obj(uint32_t id, int kind, int dtype, res_owner *owner, size_t bytes) {
  fake_obj *o = &g_obj[id];
  o->id = id, o->kind = kind, o->dtype = dtype, o->owner = owner, o->bytes = bytes;
  o->mem = xmalloc(bytes);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    float v = (float)(i / 4) * 0.25f - 1.0f;
    memcpy((char *)o->mem + i, &v, 4);
  }
}

void setup_once(void) {
  def_obj(FZ_REGION_A, RES_REGION, 0, &g_conn, FZ_RA_BYTES);
  def_obj(FZ_REGION_B, RES_REGION, 0, &g_conn, FZ_RB_BYTES);
  def_obj(FZ_ARR_F32_16, RES_ARRAY, DT_F32, &g_conn, 16);
  def_obj(FZ_ARR_F32_20, RES_ARRAY, DT_F32, &g_conn, 20);
  def_obj(FZ_ARR_I32_20, RES_ARRAY, DT_I32, &g_conn, 20);
  def_obj(FZ_MATRIX, RES_MATRIX, DT_F32, &g_conn, 5 * 4 + 6 * 4 + 6 * 4);
  def_obj(FZ_ARR_SHARED, RES_ARRAY, DT_F32, NULL, 16);
  def_obj(FZ_ARR_OTHER, RES_ARRAY, DT_F32, &g_other, 16);
  def_obj(FZ_REGION_OTHER, RES_REGION, 0, &g_other, FZ_RA_BYTES);
  def_obj(FZ_ARR_F32_16B, RES_ARRAY, DT_F32, &g_conn, 16);
  /* The matrix, by value in region A (and one with a bad column). */
  char *ra = g_obj[FZ_REGION_A].mem;
  memcpy(ra + FZ_RA_ROW_PTR, M_ROW_PTR, sizeof M_ROW_PTR);
  memcpy(ra + FZ_RA_COL_IDX, M_COL_IDX, sizeof M_COL_IDX);
  int32_t bad[6];
  memcpy(bad, M_COL_IDX, sizeof bad);
  bad[3] = 5;
  memcpy(ra + FZ_RA_BAD_COL, bad, sizeof bad);
  /* The resident matrix: row_ptr, col_idx, values back to back. */
  char *m = g_obj[FZ_MATRIX].mem;
  memcpy(m, M_ROW_PTR, sizeof M_ROW_PTR);
  memcpy(m + sizeof M_ROW_PTR, M_COL_IDX, sizeof M_COL_IDX);
}

void server_begin(gkcd_backend *be) {
  memset(&g_devs, 0, sizeof g_devs);
  g_devs.n = 2;
  g_devs.dev[0].be = g_devs.dev[1].be = be;
  memset(&g_budget, 0, sizeof g_budget);
  g_budget.limit = 4 * FUZZ_MAX_BYTES;
  res_init(&g_res, &g_devs, &g_budget);
  /* The corpus names objects 1..FZ_NOBJ; gkcd itself counts ids from a
   * random point per instance (resident.c), the harness from 0. */
  g_res.next_id = 0;
  memset(&g_conn, 0, sizeof g_conn);
  memset(&g_other, 0, sizeof g_other);
  for (uint32_t id = 1; id <= FZ_NOBJ; id++) {
    fake_obj *o = &g_obj[id];
    gkcd_res *r = res_add(&g_res, o->kind, o->owner);
    CHECK(r && r->id == id);
    r->ptr = o->mem, r->bytes = o->bytes, r->cap = o->bytes, r->dtype = o->dtype;
    if (o->kind == RES_MATRIX) r->rows = 4, r->cols = 5, r->nnz = 6, r->max_row = 3;
    if (o->kind != RES_REGION) budget_take(&g_budget, BUDGET_RESIDENT, o->bytes);
    res_ref(r); /* the harness's own */
    o->res = r;
  }
}

void server_end(void) {
  for (uint32_t id = 1; id <= FZ_NOBJ; id++) {
    gkcd_res *r = g_obj[id].res;
    CHECK(r->refs == (r->released ? 1 : 2));
    free(r);
    g_obj[id].res = NULL;
  }
  memset(g_res.bucket, 0, sizeof g_res.bucket);
}

fake_obj *obj_holding(const void *p, size_t n) {
  const char *c = p;
  for (uint32_t id = 1; id <= FZ_NOBJ; id++) {
    const char *m = g_obj[id].mem;
    if (c >= m && c <= m + g_obj[id].bytes && n <= (size_t)(m + g_obj[id].bytes - c))
      return &g_obj[id];
  }
  return NULL;
}

int job_holds(const gkcd_job *job, const fake_obj *o) {
  for (int i = 0; i < job->nres; i++)
    if (job->res[i] == o->res) return 1;
  return 0;
}
