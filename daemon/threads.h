/* threads.h: starting a thread of gkcd's own.
 *
 * SIGINT and SIGTERM are the loop thread's alone: main.c blocks them before
 * any thread starts, and the loop thread unblocks them while it runs.  A
 * thread started later from the loop thread (a reader, the pinner) would
 * inherit them unblocked and could take a late SIGTERM in teardown, after
 * libuv has given it its default action back: gkcd would die of it instead
 * of exiting 0.  thread_start starts one with both blocked, whoever calls.
 *
 * Implemented in: threads.c
 */
#ifndef GKCD_THREADS_H
#define GKCD_THREADS_H

#include <pthread.h>

/* pthread_create(t, NULL, fn, arg) with SIGINT and SIGTERM blocked in the
 * new thread; the caller's mask is unchanged.  0, or pthread_create's error. */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
