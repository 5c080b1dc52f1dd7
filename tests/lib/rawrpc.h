/* rawrpc.h: msgpack-rpc to a gkcd by hand, for end-to-end tests that send
 * what libgkc never would, or must see exactly what comes back.
 *
 * Functions and types are prefixed rr_ ("raw rpc"); the macros are the
 * tests' vocabulary (CHECK, SECTION, ARGS(AI(..), ..), RF_*) and are not.
 *
 * Checks count instead of stopping the test: CHECK prints a failure with its
 * line and rr_ctx, and a test exits non-zero at the end when rr_failed > 0.
 *
 * An rr_conn is a socket with its own receive buffer.  rr_recv_frame and
 * rr_get_reply wait a bounded time and never fail the test: a reply that
 * does not come, or comes malformed, is described in the rr_reply for the
 * caller to check.  Set-up steps, where anything unexpected should stop the
 * test at once, use rr_fetch and rr_decode instead.
 */
#ifndef GKC_RAWRPC_H
#define GKC_RAWRPC_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "fixture.h"
#include "proto_rpc.h"

/* --- checks -------------------------------------------------------------- */

extern int rr_checks, rr_failed;
extern const char *rr_ctx; /* what is being tested, for failure lines */

#define CHECK(cond, ...)                                                                  \
  do {                                                                                    \
    rr_checks++;                                                                          \
    if (!(cond)) {                                                                        \
      rr_failed++;                                                                        \
      fprintf(stderr, "%s:%d: CHECK FAILED [%s]: %s: ", __FILE__, __LINE__, rr_ctx, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                       \
      fputc('\n', stderr);                                                                \
    }                                                                                     \
  } while (0)

/* One check, for helpers that report at their caller's file:line: counted,
 * and the message printed when !ok. */
void rr_check_at(const char *file, int line, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs one part of a test and prints its checks, failures and time. */
#define SECTION(call)                                                                \
  do {                                                                               \
    int f0_ = rr_failed, c0_ = rr_checks;                                            \
    double s0_ = rr_now_s();                                                         \
    call;                                                                            \
    fprintf(stderr, "%-28s %3d checks, %d failed, %.1f s\n", #call, rr_checks - c0_, \
            rr_failed - f0_, rr_now_s() - s0_);                                      \
  } while (0)

/* "name: N checks, N passed, N failed (T s)" on stdout, T counted from t0. */
void rr_print_totals(const char *name, double t0);

/* --- small things -------------------------------------------------------- */

double rr_now_s(void); /* CLOCK_MONOTONIC */
void rr_sleep_ms(int ms);
int rr_env_flag(const char *name); /* set, not empty and not "0" */
void rr_sort_doubles(double *v, size_t n); /* ascending */
/* Up to 256 KiB of a file as a string ("" if unreadable), in a static buffer
 * that the next call reuses. */
char *rr_slurp(const char *path);
/* The daemon's log on stderr: whole, or its first max_lines lines if > 0. */
void rr_dump_log(const fixture *f, int max_lines);

/* Test data: this thread's generator state (see test_rand_u64); seed it with
 * test_seed() in main and in each thread that draws. */
extern _Thread_local uint64_t rr_rng;
float *rr_rand_floats(size_t n); /* malloc'd, uniform in [-1, 1) */

/* --- a raw connection ---------------------------------------------------- */

typedef struct {
  int fd;
  unsigned char *buf; /* received, not yet taken: buf[0..have) */
  size_t cap, have;
} rr_conn;

void rr_open(rr_conn *c, const fixture *f); /* fails the test if it cannot */
int rr_open_path(rr_conn *c, const char *path); /* 0, or the errno */
void rr_close(rr_conn *c);
/* Sends everything, or as much as the peer takes before it closes: 0, or
 * the errno that stopped it (EPIPE, ECONNRESET). */
int rr_send_some(int fd, const void *p, size_t n);
/* rr_send_some from a thread of its own: pthread_create(&th, NULL,
 * rr_sender_main, &s); err holds its result once joined.  A shutdown of the
 * socket (the test giving up) ends a send still blocked. */
typedef struct {
  int fd;
  const void *p;
  size_t n;
  int err;
} rr_sender;
void *rr_sender_main(void *sender);

enum { RF_CLOSED = 0, RF_TIMEOUT = -1, RF_ERROR = -2, RF_MIDFRAME = -3, RF_BADFRAME = -4 };
const char *rr_rf_name(int rf);
/* Waits up to timeout_ms for one whole frame at the start of c->buf; its
 * length, or RF_CLOSED when the peer closed (EOF or ECONNRESET) with nothing
 * pending, RF_MIDFRAME when it closed inside a frame, RF_TIMEOUT, RF_ERROR,
 * RF_BADFRAME.  The socket is read at least once, even past the deadline. */
ssize_t rr_recv_frame(rr_conn *c, int timeout_ms);

/* --- replies ------------------------------------------------------------- */

typedef struct {
  int got;      /* a frame arrived (else rf says why not) */
  int rf;
  int valid;    /* it is a well-formed [1, msgid, error, result] */
  int msgid_nil;
  uint32_t msgid;
  int is_error;
  int notification; /* [2, "error", [{code, message}]]: code and msg filled, valid stays 0 */
  char code[48];
  char msg[640];
  const msgpack_object *result; /* on success; lives until rr_reply_free */
  void *frame;
  msgpack_unpacked up;
} rr_reply;

/* Takes the next frame off c into *r, which rr_reply_free releases. */
void rr_get_reply(rr_conn *c, rr_reply *r, int timeout_ms);
void rr_reply_free(rr_reply *r);
/* "success", "error CODE: MESSAGE", "no reply (timed out)"...; a buffer of
 * the calling thread's that the next call reuses. */
const char *rr_reply_desc(const rr_reply *r);
int rr_reply_ok(const rr_reply *r, uint32_t msgid);
int rr_reply_err(const rr_reply *r, uint32_t msgid, const char *code);

double rr_num(const msgpack_object *o); /* NAN when NULL or not a number */
/* result[key] if r succeeded and it is a bin of exactly `bytes`, else NULL. */
const msgpack_object *rr_result_bin(const rr_reply *r, const char *key, size_t bytes);
float rr_ld_f32(const void *p, size_t i); /* float i of an unaligned buffer */
/* `samples` entries of c = alpha * A * B (row-major, no transposes), picked
 * with rr_rng, against a float64 reference with a tolerance scaled by the
 * sum of magnitudes; 0 with the first wrong one in why. */
int rr_sgemm_entries_ok(const void *c, const float *a, const float *b, int m, int n, int k,
                        double alpha, int samples, char *why, size_t whylen);

/* --- requests ------------------------------------------------------------ */

/* One "key": value pair of an argument map. */
void rr_pack_int(msgpack_packer *pk, const char *key, int64_t v);
void rr_pack_f64(msgpack_packer *pk, const char *key, double v);
void rr_pack_bool(msgpack_packer *pk, const char *key, int v);
void rr_pack_str(msgpack_packer *pk, const char *key, const char *v);
void rr_pack_bin(msgpack_packer *pk, const char *key, const void *p, size_t n);

typedef struct {
  msgpack_sbuffer sb; /* what to send: sb.data[0..sb.size) */
  msgpack_packer pk;
} rr_frame;

void rr_frame_init(rr_frame *f);
void rr_frame_free(rr_frame *f);

/* Arguments as a list: ARGS(AI("m", 2), AB("a", p, 16)) expands to the
 * (args, n) pair that rr_pack_request and rr_call take. */
enum { A_INT, A_F64, A_F32, A_STR, A_BIN, A_BOOL };
typedef struct {
  const char *key;
  int t;
  int64_t i;
  double f;
  const void *p;
  size_t n;
} rr_arg;

#define AI(k, v) {k, A_INT, (v), 0, NULL, 0}
#define AF(k, v) {k, A_F64, 0, (v), NULL, 0}
#define AF32(k, v) {k, A_F32, 0, (v), NULL, 0}
#define AS(k, s) {k, A_STR, 0, 0, (s), 0}
#define AB(k, p, n) {k, A_BIN, 0, 0, (p), (n)}
#define ABOOL(k, v) {k, A_BOOL, (v), 0, NULL, 0}
#define ARGS(...) (const rr_arg[]){__VA_ARGS__}, sizeof((const rr_arg[]){__VA_ARGS__}) / sizeof(rr_arg)

/* Appends [0, msgid, method, [{args}]] to f (several make a pipelined batch). */
void rr_pack_request(rr_frame *f, uint32_t msgid, const char *method, const rr_arg *args,
                     size_t n);
/* Sends one request and reads one reply.  0, or the errno if the send
 * failed: then nothing is read and r says RF_CLOSED. */
int rr_call(rr_conn *c, uint32_t msgid, const char *method, const rr_arg *args, size_t n,
            rr_reply *r, int timeout_ms);
/* A ping on c is answered, protocol 1, within timeout_ms; if not, why (when
 * not NULL) says what happened instead. */
int rr_ping(rr_conn *c, int timeout_ms, char *why, size_t whylen);

/* --- set-up steps: any surprise fails the test ---------------------------- */

/* Decodes the frame buf[0..len) into *r, whose pointers lead into buf and
 * into z (initialised here; the caller destroys it). */
void rr_decode(const void *buf, size_t len, msgpack_zone *z, proto_response *r);

typedef struct {
  proto_response r; /* points into buf and zone */
  unsigned char *buf;
  msgpack_zone zone;
} rr_fetched;

/* Sends [0, msgid, method, [{}]] on a fresh connection to f and decodes the
 * answer (waiting without a bound) into *out, for rr_fetched_free. */
void rr_fetch(const fixture *f, uint32_t msgid, const char *method, rr_fetched *out);
void rr_fetched_free(rr_fetched *out);

#endif
