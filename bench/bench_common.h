/* bench_common.h: what the daemon benchmarks in bench/ (bench_rpc,
 * bench_async, bench_resident, bench_multi) share: a monotonic clock, a sort
 * order for doubles, a JSON string writer, dying with the program's name,
 * whole-number options, and a gkcd of the bench's own.  C11 + POSIX.
 *
 *   int main(...) { bench_prog = "bench_x"; ...
 *     long n = bench_parse_long("--count", optarg, 1, 1000);   dies if not
 *     uint64_t t0 = bench_clock_ns(); ...
 *
 * The GPU benchmarks (bench/gpu/) have their own bench_util.h.
 */
#ifndef GKC_BENCH_COMMON_H
#define GKC_BENCH_COMMON_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The program's name, the prefix of bench_die's messages; main sets it. */
extern const char *bench_prog;

/* Prints "PROG: message" and a newline to stderr and exits 1 (so that the
 * program's atexit handlers stop what it started). */
__attribute__((format(printf, 1, 2), noreturn)) void bench_die(const char *fmt, ...);

/* s as a decimal in [lo, hi], or dies naming the option:
 * "invalid OPT 'S': expected an integer in [LO, HI]". */
long bench_parse_long(const char *opt, const char *s, long lo, long hi);

/* Nanoseconds and seconds on CLOCK_MONOTONIC. */
uint64_t bench_clock_ns(void);
double bench_clock_s(void);

/* qsort's comparison for doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* s as a JSON string, quotes included: '"' and '\' escaped, control
 * characters as \u00XX. */
void bench_json_str(FILE *f, const char *s);

/* --- a gkcd of the bench's own ---------------------------------------------------------- */

/* Starts argv[0] (argv NULL-terminated) as a child, its stderr appended to
 * log (NULL: inherited), SIGINT and SIGTERM back at their defaults, pinned
 * to cpus before exec so that every thread it starts inherits them (NULL:
 * not pinned).  *pid holds the child from the fork on, so that a signal
 * handler may kill it while this waits.  Then waits up to 10 s for a ping
 * on sock to be answered: serving is proven by a ping, not by the socket
 * file appearing.
 * Returns 0 when it answers, or -1 with why set: when the child exited
 * during start-up (*pid is then 0), or did not answer (*pid still holds it,
 * for the caller to stop). */
int bench_gkcd_start(const char *const argv[], const char *sock, const char *log,
                     const cpu_set_t *cpus, volatile pid_t *pid, char *why, size_t whylen);

/* SIGTERM to *pid, then SIGKILL after wait_s; 0 in *pid after.  Returns the
 * waitpid status (0 when *pid was not running). */
int bench_stop_child(volatile pid_t *pid, int wait_s);

#endif
