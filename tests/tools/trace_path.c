/* trace_path.c: which functions of gkcd one request runs through, in order.
 *
 * Linked into a gkcd built with -finstrument-functions (tests/tools/
 * trace_path.sh builds one): every instrumented function's entry and exit
 * is recorded, with its thread, while tracing is on.  SIGUSR1 turns it on,
 * SIGUSR2 off; at exit the events go to $GKCD_TRACE_OUT as lines of
 * "sequence thread offset e|x site", offsets from the executable's load
 * address, for addr2line to name; site is where the call came from (for
 * an entry; 0 for an exit), so that a thread's first traced call can be
 * told from a callback: a worker already waiting inside pool.c when
 * tracing began enters its next function from pool.c, not from the loop.  A measuring tool, never in a shipped build.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define TRACE_MAX (1 << 20)

typedef struct {
  uintptr_t fn, site;
  unsigned long thread;
  int exit; /* 0: entry, 1: exit */
} trace_entry;

static trace_entry g_trace[TRACE_MAX];
static atomic_uint g_next;
static volatile sig_atomic_t g_on;

void __cyg_profile_func_enter(void *fn, void *site) __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void *fn, void *site) __attribute__((no_instrument_function));

__attribute__((no_instrument_function)) static void record(void *fn, void *site, int exit) {
  if (!g_on) return;
  unsigned i = atomic_fetch_add(&g_next, 1);
  if (i < TRACE_MAX)
    g_trace[i] = (trace_entry){(uintptr_t)fn, exit ? 0 : (uintptr_t)site, (unsigned long)pthread_self(), exit};
}

void __cyg_profile_func_enter(void *fn, void *site) { record(fn, site, 0); }

void __cyg_profile_func_exit(void *fn, void *site) { record(fn, site, 1); }

__attribute__((no_instrument_function)) static void on_sig(int sig) { g_on = sig == SIGUSR1; }

__attribute__((no_instrument_function)) static void dump(void) {
  const char *path = getenv("GKCD_TRACE_OUT");
  if (!path) return;
  FILE *f = fopen(path, "w");
  if (!f) return;
  Dl_info info;
  uintptr_t base = dladdr((void *)dump, &info) ? (uintptr_t)info.dli_fbase : 0;
  unsigned n = atomic_load(&g_next);
  if (n > TRACE_MAX) n = TRACE_MAX;
  for (unsigned i = 0; i < n; i++) {
    uintptr_t site = g_trace[i].site;
    fprintf(f, "%u %lu %#lx %c %#lx\n", i, g_trace[i].thread, (unsigned long)(g_trace[i].fn - base),
            g_trace[i].exit ? 'x' : 'e', (unsigned long)(site > base ? site - base : 0));
  }
  fclose(f);
}

__attribute__((constructor, no_instrument_function)) static void trace_init(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_sig;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGUSR2, &sa, NULL);
  atexit(dump);
}
