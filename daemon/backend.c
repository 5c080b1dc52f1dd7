/* backend.c: what all backends share. */
#include "backend.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static atomic_int g_failed;

void backend_fatal(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_err("%s; shutting down to be restarted", msg);
  if (!atomic_exchange(&g_failed, 1))
    kill(getpid(), SIGTERM); /* the loop's signal handler starts an orderly drain */
}

int backend_failed(void) { return atomic_load(&g_failed); }

int backend_algo_lookup(const gkcd_backend *be, int method, const char *name, size_t len) {
  if (len == 4 && memcmp(name, "auto", 4) == 0) return GKCD_ALGO_AUTO;
  const char *const *list = be->algos[method];
  for (int i = 0; list && list[i]; i++)
    if (strlen(list[i]) == len && memcmp(list[i], name, len) == 0) return i;
  return -2;
}
