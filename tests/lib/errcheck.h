/* errcheck.h: the checks shared by the e2e_errors_* tests (rawrpc.h has the
 * connection, replies and requests).
 *
 * Each check is counted (rawrpc.h's rr_checks) and a failure is printed with
 * the caller's file:line; checks do not stop the test.
 */
#ifndef GKC_ERRCHECK_H
#define GKC_ERRCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "fixture.h"
#include "rawrpc.h"

/* The reply is error want_code for want_msgid (-1: expect nil), with a
 * message containing needle and needle2 (either may be NULL). */
#define CHECK_ERROR(r, want_code, want_msgid, needle, needle2) \
  check_error_(__FILE__, __LINE__, r, want_code, want_msgid, needle, needle2)
void check_error_(const char *file, int line, const rr_reply *r, const char *code, int64_t msgid,
                  const char *needle, const char *needle2);

/* Sends one request and reads one reply (30 s); a failed send fails the test. */
void call(rr_conn *c, uint32_t msgid, const char *method, const rr_arg *args, size_t n,
          rr_reply *r);

void send_raw(rr_conn *c, const void *p, size_t n);
/* A string literal's bytes, without its terminating NUL. */
#define LIT(s) s, sizeof(s) - 1
#define send_lit(c, s) send_raw(c, LIT(s))

/* The connection still serves: a ping on it is answered. */
#define CHECK_OPEN(c) check_open_(__FILE__, __LINE__, c)
void check_open_(const char *file, int line, rr_conn *c);

/* The daemon closes the connection: nothing more arrives, then end-of-stream. */
#define CHECK_CLOSED(c) check_closed_(__FILE__, __LINE__, c)
void check_closed_(const char *file, int line, rr_conn *c);

/* A small sgemm on c that must succeed with the right numbers. */
#define CHECK_SMALL_SGEMM(c, id) check_small_sgemm_(__FILE__, __LINE__, c, id)
void check_small_sgemm_(const char *file, int line, rr_conn *c, uint32_t id);

/* status[key] from a fresh connection, or -1. */
long status_u64(const fixture *d, const char *key);
/* The sums over status's "clients" of their queued, running and served
 * jobs, all from one status reply (a fresh connection); 0, or -1 when
 * the reply had no clients array. */
int status_client_jobs(const fixture *d, long *queued, long *running, long *served);

/* Ignores SIGPIPE and seeds rr_rng (GKC_TEST_SEED replays). */
void errcheck_init(void);
/* errcheck_init, then starts the daemon a file's error checks share
 * (--threads 2). */
void errcheck_start(fixture *d);
/* After a file's errors on d: status counts at least min_bad bad_requests
 * (frames rejected before they reached a method; not checked when min_bad is
 * 0, for errors that methods return), a new connection still computes the
 * right numbers, and SIGTERM stops gkcd with exit status 0. */
void errcheck_after_errors(fixture *d, long min_bad);

#endif
