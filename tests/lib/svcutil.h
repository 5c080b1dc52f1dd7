/* svcutil.h: what the e2e_service_* tests share: temporary files and
 * directories, daemons stopped with a checked exit, status values.
 */
#ifndef GKC_SVCUTIL_H
#define GKC_SVCUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "fixture.h"
#include "rawrpc.h"

void write_file(const char *path, const char *text); /* fails the test if it cannot */
/* A private temporary directory (for sockets and files the test makes). */
void make_tmpdir(char *dir, size_t n);
void remove_tmpdir(const char *dir);
int path_exists(const char *path);
int is_socket_file(const char *path);

/* Waits up to ms for pid; its wait status, or -1 if it is still running. */
int wait_exit(pid_t pid, int ms);
/* "exit 0", "killed by signal 9", "still running" (-1) into buf. */
const char *describe_status(int st, char *buf, size_t n);
/* SIGTERM, then it must exit 0 within 10 s (else SIGKILL and a failed
 * check at the caller's line); then the fixture's directory is removed. */
#define STOP_DAEMON(f) stop_daemon_(__FILE__, __LINE__, f)
void stop_daemon_(const char *file, int line, fixture *f);

/* "status" on c; the value at a dotted path ("limits.threads"), NAN when
 * anything fails (probe.h's pb_status does the same on a fresh connection). */
double status_on(rr_conn *c, const char *path);

/* The start of every e2e_service_* test: SIGPIPE ignored, the service
 * environment of whatever runs the test (NOTIFY_SOCKET, LISTEN_FDS...) kept
 * away from the daemons started here, $GKCD_BIN required, rr_rng seeded. */
void svc_init(void);
/* The end of every e2e_service_* test: prints the totals (rawrpc.h) and
 * returns the exit status, 0 only when every check passed. */
int svc_finish(const char *name, double t0);

#endif
