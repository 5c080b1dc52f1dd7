/* fixture.h: start a real gkcd on a temporary socket for end-to-end tests.
 *
 * The gkcd binary comes from $GKCD_BIN (ctest sets it).  Each daemon gets its
 * own directory under $TMPDIR; fixture_stop removes it.
 */
#ifndef GKC_FIXTURE_H
#define GKC_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
  pid_t pid;
  char dir[256];
  char sock[300];
  char log[300]; /* the daemon's stderr */
} fixture;

/* When nonzero, the address-space limit (RLIMIT_AS, bytes) of the next
 * daemon started: lets a test provoke real allocation failures. */
extern size_t fixture_as_limit;
/* When nonzero, the descriptor limit (RLIMIT_NOFILE, soft and hard) of the
 * next daemon started: lets a test run it out of descriptors. */
extern unsigned fixture_nofile_limit;

/* Starts gkcd with the given extra arguments (a --socket among them replaces
 * the temporary one) (NULL-terminated, may be NULL)
 * and extra environment entries "K=V" (NULL-terminated, may be NULL), waits
 * until it answers a ping.  Fails the test if it does not come up. */
void fixture_start(fixture *f, const char *const *args, const char *const *env);
/* The same, but returns the exit status when gkcd exits during start-up
 * (the log stays in f->log until fixture_stop), or -1 once it serves. */
int fixture_try_start(fixture *f, const char *const *args, const char *const *env);
/* Sends sig and waits (bounded) for the process; returns its exit status as
 * from waitpid, then removes the directory. */
int fixture_stop(fixture *f, int sig);
/* A raw connected socket to the daemon. */
int fixture_connect(const fixture *f);
/* Resident set size of the daemon in KiB (from /proc). */
long fixture_rss_kib(const fixture *f);
/* Its address space (VmSize) in KiB: grows with a large malloc never touched. */
long fixture_vm_kib(const fixture *f);
/* Number of open file descriptors of the daemon. */
int fixture_nfds(const fixture *f);

/* Small deterministic-but-seeded PRNG for test data. */
uint64_t test_rand_u64(uint64_t *state);
float test_rand_f32(uint64_t *state); /* uniform in [-1, 1) */
/* A seed from the clock, printed to stderr so a failure can be replayed
 * with GKC_TEST_SEED=N. */
uint64_t test_seed(void);

/* Full send/recv on a blocking socket; fail the test on error. */
void test_send_all(int fd, const void *p, size_t n);
/* Reads one msgpack-rpc frame into *buf (malloc'd, grown as needed) and
 * returns its length, or 0 when the peer closed the connection first. */
size_t test_recv_frame(int fd, unsigned char **buf, size_t *cap, size_t *have);

#endif
