/* resutil.h: what the e2e_resident_* tests share: the daemon they run
 * against, double-precision references, status and the daemon's mappings,
 * and raw requests for what libgkc would not send.
 *
 * Failures stop the test (test.h's TEST_FAIL), naming what was compared.
 */
#ifndef GKC_RESUTIL_H
#define GKC_RESUTIL_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fixture.h"
#include "gkc.h"
#include "test.h"

extern uint64_t rng; /* the test's seeded generator (test_seed) */
extern fixture F;    /* the daemon the test started */

float *rand_vec(size_t n); /* n floats uniform in [-1, 1), malloc'd */
gkc_conn *conn_open(void); /* to F; fails the test if it cannot */
void sleep_ms(int ms);
/* Closes c (unless NULL), then F must stop on SIGTERM with exit status 0. */
void res_stop(gkc_conn *c);

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

/* --- references computed here --- */

/* C = alpha A B + beta C0 (no transposes), checked against got. */
void check_gemm(const char *what, int m, int n, int k, float alpha, const float *a,
                const float *b, float beta, const float *c0, const float *got);

typedef struct {
  int32_t rows, cols;
  int32_t *row_ptr, *col_idx;
  float *values;
  int64_t nnz;
} test_csr;

test_csr rand_csr(int32_t rows, int32_t cols, double density);
void free_csr(test_csr *A);
gkc_csr as_gkc(const test_csr *A);
/* y = alpha A x + beta y0, checked against got. */
void check_spmv(const char *what, const test_csr *A, float alpha, const float *x, float beta,
                const float *y0, const float *got);

/* --- status and the daemon's mappings --- */

/* A top-level number of the status reply, or NAN when gkcd does not report it. */
double status_num(gkc_conn *c, const char *key);
/* A count under status's "resident" map ("arrays", "matrices", "regions",
 * "bytes"), or NAN when gkcd does not report it. */
double resident_num(gkc_conn *c, const char *key);
/* Mappings of our memfds ("gkc-region", "test-region") in the daemon. */
int daemon_region_maps(void);
/* Waits (up to 5 s) for fn() to reach want; returns the last value. */
double wait_for(double (*fn)(void *), void *arg, double want);
double maps_fn(void *arg); /* daemon_region_maps, for wait_for */
typedef struct {
  gkc_conn *c;
  const char *key;
} status_arg;
double status_fn(void *arg);   /* status_num, for wait_for */
double resident_fn(void *arg); /* resident_num, for wait_for */
/* Waits until status's resident.key is want; fails the test otherwise.
 * A no-op (with a note) when gkcd reports no "resident" map. */
void expect_resident(gkc_conn *c, const char *key, double want);
/* A memfd of size bytes, sealed with seals (0: none). */
int test_memfd(size_t bytes, int seals);

/* --- raw requests --- */

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
raw_reply raw_call(int fd, const char *method, raw_pack_fn fn, void *arg, int send_fd);
/* raw_call must fail with code, its message containing word (unless NULL). */
void raw_expect(int fd, const char *method, raw_pack_fn fn, void *arg, const char *code,
                const char *word);
void pk_key(msgpack_packer *pk, const char *k);
void pk_bin(msgpack_packer *pk, const char *k, const void *p, size_t n);
void noargs(msgpack_packer *pk, void *arg);   /* {} */
void reg_args(msgpack_packer *pk, void *arg); /* {bytes: *(size_t *)arg} */

#endif
