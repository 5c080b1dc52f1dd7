/* fdstore_standin.h: a stand-in for systemd's file-descriptor store, for
 * what restarts gkcd as systemd would without systemd (e2e_fdstore,
 * bench/gpu/bench_restart).
 *
 * It listens on a NOTIFY_SOCKET of its own (a datagram socket, as
 * systemd's), keeps every descriptor sent with FDSTORE=1 under its FDNAME
 * and drops the ones FDSTOREREMOVE=1 names; fs_spawn starts the next gkcd
 * with a set of descriptors at 3.. and LISTEN_FDS, LISTEN_FDNAMES and
 * LISTEN_PID (set in the child after fork, so it is gkcd's own pid).
 * Errors are returned, never fatal: the callers are a test and a bench.
 */
#ifndef GKC_FDSTORE_STANDIN_H
#define GKC_FDSTORE_STANDIN_H

#include <sys/types.h>

enum { FS_MAXFD = 64 };

/* Named descriptors: what the store holds, or what a start passes. */
typedef struct {
  int n;
  int fd[FS_MAXFD];
  char name[FS_MAXFD][64];
} fs_set;

/* Keeps fd under name (replacing, and closing, one of the same name);
 * -1 (fd closed) when the set is full. */
int fs_set_put(fs_set *s, int fd, const char *name);
/* The index of name, or -1. */
int fs_set_find(const fs_set *s, const char *name);
/* Closes entry i and takes it out. */
void fs_set_remove(fs_set *s, int i);
/* Closes everything. */
void fs_set_clear(fs_set *s);
/* to: the same open files under new descriptors (close-on-exec). */
void fs_set_copy(fs_set *to, const fs_set *from);

typedef struct {
  int fd;             /* the notify socket, bound at path */
  char path[108];
  fs_set store;       /* what gkcd stored */
  int removed;        /* FDSTOREREMOVE messages seen */
} fs_notify;

/* Binds the notify socket at path; 0 or -1 (errno). */
int fs_notify_open(fs_notify *N, const char *path);
/* Reads every datagram waiting, as systemd would; 0, or -1 on a socket error. */
int fs_notify_drain(fs_notify *N);
void fs_notify_close(fs_notify *N);

/* Starts argv[0] with argv, the descriptors of pass (NULL: none) as systemd
 * hands them over, NOTIFY_SOCKET=notify_path (NULL: unset) and stdout and
 * stderr to log_path; the child dies with the caller.  Its pid, or -1. */
pid_t fs_spawn(const fs_set *pass, const char *notify_path, const char *log_path,
               char *const argv[]);

#endif
