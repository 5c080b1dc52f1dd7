/* threads.c: see threads.h. */
#include "threads.h"

#include <signal.h>

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  sigset_t stop, old;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, &old); /* the new thread inherits this mask */
  int err = pthread_create(t, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return err;
}
