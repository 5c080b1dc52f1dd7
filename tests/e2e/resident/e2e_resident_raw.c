/* e2e_resident_raw.c: what libgkc would not send, sent raw to a real gkcd
 * (upload, sgemm and the rest on handles and regions, bad and good), and the
 * memory budget over resident data.
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
      pk_key(pk, "dtype"), proto_pack_cstr(pk, "f16");
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

int main(void) {
  rng = test_seed();
  fixture_start(&F, NULL, NULL);
  test_raw();
  res_stop(NULL);
  test_budget();
  fprintf(stderr, "e2e_resident_raw: all passed\n");
  return 0;
}
