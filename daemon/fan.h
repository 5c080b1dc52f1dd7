/* fan.h: one step's work on every device at once.
 *
 * A partitioned solve (part_solve.c) drives its devices through synchronous
 * primitives; called one device after another, each device would sit idle
 * while the others work.  A fan keeps a thread per device besides the
 * caller's (started once per solve) and runs fn(arg, j) for every j in
 * 0..k-1 together, the caller taking j = 0, returning when all are done.
 * When its threads cannot be started it runs them one after another, which
 * gives the same results, only slower.
 */
#ifndef GKCD_FAN_H
#define GKCD_FAN_H

#include <pthread.h>

#include "config.h"

typedef void (*fan_fn)(void *arg, int j);

typedef struct fan fan;
typedef struct {
  fan *f;
  int j;
} fan_who; /* what helper j is told at its start */

struct fan {
  int k, threads;      /* devices; helper threads running (0: sequential) */
  pthread_t th[GKCD_MAX_DEVICES];
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  unsigned long gen;   /* bumped for each step */
  int pending;         /* helpers still working on this step */
  int quit;
  fan_fn fn;
  void *arg;
  fan_who who[GKCD_MAX_DEVICES];
};

/* Starts k - 1 helper threads (none when k is 1). */
void fan_start(fan *f, int k);
/* fn(arg, j) for j = 0..k-1, at once; returns once every one returned. */
void fan_run(fan *f, fan_fn fn, void *arg);
/* Stops and joins the helpers. */
void fan_stop(fan *f);

#endif
