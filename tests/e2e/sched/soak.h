/* soak.h: what e2e_soak.c (the load test: workers, replies, phases,
 * checks) and soak_requests.c (the request mix it sends) share: the sizes,
 * the deliberately invalid requests and what each must get back, and the
 * per-thread state. */
#ifndef GKC_SOAK_H
#define GKC_SOAK_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "fixture.h"
#include "proto_methods.h"
#include "test.h"

#define NCONN 64
#define DEFAULT_TOTAL 102400L
#define WARMUP_PER_CONN 40
#define REPLY_TIMEOUT_MS 60000
#define MAX_WINDOW 16
#define CLS_BAD PROTO_M_COUNT /* unknown_method / invalid_request: no method counter */
#define NCLS (PROTO_M_COUNT + 1)

/* Sizes: small enough that 100k requests take seconds on 2 cores. */
#define SG_MAX 24      /* sgemm m, n, k in [1, SG_MAX] */
#define RD_MAX 65536   /* reduce length in [1, RD_MAX] */
#define SP_MAX 128     /* spmv rows, cols in [1, SP_MAX] */
#define SP_ROW_NNZ 8   /* at most this many entries per row */

/* ------------------------------------------------------------------------ */
/* deliberately invalid requests                                             */

enum { INV_SG_SHORT_A, INV_SG_M0, INV_RD_OP, INV_RD_EMPTY, INV_SP_COL, INV_PING_ARG,
       INV_STATUS_ARG, INV_UNKNOWN_METHOD, INV_BARE_MAP, INV_COUNT };

typedef struct {
  int cls;             /* the method whose counters it touches, or CLS_BAD */
  const char *code;    /* the error code it must get */
  const char *needle;  /* what the message must name */
} soak_invalid;
extern const soak_invalid INV[INV_COUNT];

/* ------------------------------------------------------------------------ */
/* per-thread state                                                          */

typedef struct {
  int used;
  uint32_t msgid;
  int cls;        /* PROTO_M_* or CLS_BAD */
  int inv;        /* -1 when a success is expected, else an INV_* */
  int op;         /* reduce: 0 sum, 1 min, 2 max */
  size_t n;       /* reduce length */
  double t0;
  size_t nwant, wcap;
  double *want, *mag;
} slot;

typedef struct {
  double *v;
  size_t n, cap;
} lat_list;

typedef struct {
  /* set by main */
  const fixture *f;
  int id, window, churn;
  uint64_t rng;
  long quota;
  uint32_t id_base;
  long max_in_flight; /* bound on status in_flight: the sum of all windows */
  /* results */
  long sent_req[PROTO_M_COUNT], sent_err[PROTO_M_COUNT], sent_bad, sent_inv;
  long replies, sessions;
  uint64_t bytes_out, bytes_in;
  lat_list lat[NCLS];
  /* connection */
  int fd;
  unsigned char *buf;
  size_t cap, have;
  unsigned char *answered; /* by sequence number */
  slot slots[MAX_WINDOW];
  int inflight;
  uint64_t last_status_total;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_zone zone;
  float *scratch; /* RD_MAX floats */
} worker;

#define WFAIL(w, ...)                                                     \
  do {                                                                    \
    fprintf(stderr, "conn %d (session %ld): ", (w)->id, (w)->sessions);   \
    TEST_FAIL(__VA_ARGS__);                                               \
  } while (0)

static inline uint64_t rnd(worker *w, uint64_t n) { return test_rand_u64(&w->rng) % n; }

/* Packs request number seq (msgid w->id_base + seq) into w->sb, from the
 * mix of the file's comment in e2e_soak.c, and fills a free slot with what
 * its reply must be; counts it in w->sent_*. */
void add_request(worker *w, long seq);

#endif /* GKC_SOAK_H */
