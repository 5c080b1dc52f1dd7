/* backend.c: what all backends share. */
#include "backend.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gkc_errors.h"
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

/* Why each device was lost, written once before its lost flag is set (so
 * whoever sees the flag may read the reason). */
static char g_lost_reason[GKCD_MAX_DEVICES][256];
static void (*g_lost_hook)(gkcd_backend *be, void *arg);
static void *g_lost_arg;

void backend_set_lost_hook(void (*hook)(gkcd_backend *be, void *arg), void *arg) {
  g_lost_hook = hook;
  g_lost_arg = arg;
}

const char *backend_lost_reason(const gkcd_backend *be) {
  if (be->device < 0 || be->device >= GKCD_MAX_DEVICES || !atomic_load(&be->lost)) return "";
  return g_lost_reason[be->device];
}

/* The first caller for a device records why and tells the daemon, which
 * takes the device out of service (devices.c); later calls add nothing.
 * Without a hook (a tool, a test) losing a device is fatal, as before. */
void backend_device_lost(gkcd_backend *be, const char *fmt, ...) {
  static atomic_flag claimed[GKCD_MAX_DEVICES];
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int d = be->device >= 0 && be->device < GKCD_MAX_DEVICES ? be->device : 0;
  if (atomic_flag_test_and_set(&claimed[d])) return;
  snprintf(g_lost_reason[d], sizeof g_lost_reason[d], "%s", msg);
  atomic_store(&be->lost, 1); /* after the reason: a reader of the flag sees it */
  log_err("device %d lost: %s", be->device, msg);
  if (g_lost_hook)
    g_lost_hook(be, g_lost_arg);
  else
    backend_fatal("device %d lost: %s", be->device, msg);
}

int backend_algo_lookup(const gkcd_backend *be, int method, const char *name, size_t len) {
  if (len == 4 && memcmp(name, "auto", 4) == 0) return GKCD_ALGO_AUTO;
  const char *const *list = be->algos[method];
  for (int i = 0; list && list[i]; i++)
    if (strlen(list[i]) == len && memcmp(list[i], name, len) == 0) return i;
  return -2;
}
