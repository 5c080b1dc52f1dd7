/* probe.h: what the robustness tests (e2e_backpressure, e2e_timeouts,
 * e2e_hostile) ask of a running gkcd and watch it by.
 *
 * Functions are prefixed pb_ ("probe").  They build on rawrpc.h: status
 * values by dotted path, the daemon's RSS sampled from a thread of its own,
 * a checked request for "a well-behaved client", the pieces of a
 * shared-memory region (a sealed memfd, a request that carries it), the
 * requests of a client that asks for more than it reads, and a checked stop.
 */
#ifndef GKC_PROBE_H
#define GKC_PROBE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fixture.h"
#include "rawrpc.h"

/* --- status ---------------------------------------------------------------- */

/* A number in a map by dotted path ("memory.replies", "resident.regions");
 * NAN when a step is missing or not a number. */
double pb_path(const msgpack_object *m, const char *path);
/* "status" on c: the values at paths[0..n) into out (NAN when absent);
 * 0, or -1 when status itself failed (out all NAN). */
int pb_status_on(rr_conn *c, const char *const *paths, int n, double *out);
/* One value, on a fresh connection to f (NAN when that fails: a full
 * daemon refuses it). */
double pb_status(const fixture *f, const char *path);
/* Polls pb_status every 20 ms, up to ms, until the value equals want;
 * returns the last value seen. */
double pb_wait_status(const fixture *f, const char *path, double want, int ms);

/* --- the daemon's memory ---------------------------------------------------- */

/* Samples fixture_rss_kib every period_ms from a thread until pb_rss_stop;
 * max_kib is the highest sample. */
typedef struct {
  const fixture *f;
  int period_ms;
  int stop;
  long max_kib, samples;
  pthread_t th;
} pb_rss_watch;

void pb_rss_start(pb_rss_watch *w, const fixture *f, int period_ms);
long pb_rss_stop(pb_rss_watch *w); /* the highest sample, in KiB */

/* The environment entry that keeps a sanitized daemon's RSS meaningful:
 * ASAN_OPTIONS as the test got it plus a 16 MiB quarantine (ASan's default
 * 256 MiB would keep freed replies resident and hide what the test bounds).
 * NULL for a normal build.  Static storage. */
const char *pb_asan_env(void);

/* --- a well-behaved client ---------------------------------------------------- */

/* A reduce (sum) of n fresh random floats on c, against a float64 reference:
 * 1 when right.  Otherwise why says what came instead. */
int pb_reduce_ok(rr_conn *c, uint32_t id, size_t n, int timeout_ms, char *why, size_t whylen);
/* The same with one more argument in the request (deadline_ms, say), or
 * none when extra is NULL. */
int pb_reduce_with(rr_conn *c, uint32_t id, size_t n, const rr_arg *extra, int timeout_ms,
                   char *why, size_t whylen);
/* An m x n x k sgemm of fresh random data on c, 64 entries checked against
 * a float64 reference (rr_sgemm_entries_ok): 1 when right. */
int pb_sgemm_ok(rr_conn *c, uint32_t id, int m, int n, int k, int timeout_ms, char *why,
                size_t whylen);

/* --- shared memory ------------------------------------------------------------ */

/* A memfd of `bytes`, sealed against shrinking and growing as shm_register
 * wants; -1 on failure. */
int pb_memfd(size_t bytes);
/* Sends p[0..n) on sock with fd attached (SCM_RIGHTS); 0 or the errno. */
int pb_send_with_fd(int sock, const void *p, size_t n, int fd);

/* --- a client that asks for more than it takes ------------------------------------- */

/* Initializes fr with nreq sgemm requests, msgids id0, id0 + 1, ...:
 * request i is the outer product (k = 1) of a + i * a_step (m floats) and
 * b + i * b_step (n floats), so that m + n floats sent ask for an m x n
 * reply.  A step of 0 sends the same vectors every time. */
void pb_pack_outer_sgemms(rr_frame *fr, uint32_t id0, int nreq, int m, int n, const float *a,
                          size_t a_step, const float *b, size_t b_step);

/* --- the end of a test ----------------------------------------------------------- */

/* SIGTERM to f's gkcd (fixture_stop: 30 s, then SIGKILL and a failure);
 * one check, at the caller's line, that it exited 0, and its log's tail
 * when it did not. */
#define PB_STOP_DAEMON(f) pb_stop_daemon_(__FILE__, __LINE__, f)
void pb_stop_daemon_(const char *file, int line, fixture *f);

/* --- configuration ------------------------------------------------------------ */

/* The number in environment variable name, or dflt when unset or empty. */
double pb_env_num(const char *name, double dflt);

#endif
