/* fan.c: see fan.h. */
#include "fan.h"

static void *helper(void *p) {
  fan *f = ((fan_who *)p)->f;
  int j = ((fan_who *)p)->j;
  unsigned long seen = 0;
  pthread_mutex_lock(&f->mu);
  for (;;) {
    while (f->gen == seen && !f->quit) pthread_cond_wait(&f->go, &f->mu);
    if (f->quit) break;
    seen = f->gen;
    fan_fn fn = f->fn;
    void *arg = f->arg;
    pthread_mutex_unlock(&f->mu);
    fn(arg, j);
    pthread_mutex_lock(&f->mu);
    if (--f->pending == 0) pthread_cond_signal(&f->done);
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

void fan_start(fan *f, int k) {
  f->k = k;
  f->threads = 0;
  f->gen = 0;
  f->pending = 0;
  f->quit = 0;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->go, NULL);
  pthread_cond_init(&f->done, NULL);
  for (int j = 1; j < k; j++) {
    f->who[j] = (fan_who){f, j};
    if (pthread_create(&f->th[j], NULL, helper, &f->who[j]) != 0) break;
    f->threads++;
  }
  if (f->threads != k - 1) { /* all or none: a half-started fan runs sequentially */
    fan_stop(f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->go, NULL);
    pthread_cond_init(&f->done, NULL);
    f->quit = 0;
  }
}

void fan_run(fan *f, fan_fn fn, void *arg) {
  if (f->threads == 0) {
    for (int j = 0; j < f->k; j++) fn(arg, j);
    return;
  }
  pthread_mutex_lock(&f->mu);
  f->fn = fn;
  f->arg = arg;
  f->pending = f->threads;
  f->gen++;
  pthread_cond_broadcast(&f->go);
  pthread_mutex_unlock(&f->mu);
  fn(arg, 0);
  pthread_mutex_lock(&f->mu);
  while (f->pending > 0) pthread_cond_wait(&f->done, &f->mu);
  pthread_mutex_unlock(&f->mu);
}

void fan_stop(fan *f) {
  pthread_mutex_lock(&f->mu);
  f->quit = 1;
  pthread_cond_broadcast(&f->go);
  pthread_mutex_unlock(&f->mu);
  for (int j = 1; j <= f->threads; j++) pthread_join(f->th[j], NULL);
  f->threads = 0;
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->go);
  pthread_cond_destroy(&f->done);
}
