/* fault.c: see fault.h. */
#include "fault.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "proto_errors.h"
#include "proto_methods.h"

#ifdef GKC_FAULT_INJECTION
static int g_method = -1, g_code, g_delay_ms;

int fault_init(void) {
  const char *spec = getenv("GKCD_FAULT");
  if (!spec || !*spec) return 0;
  const char *colon = strchr(spec, ':');
  if (!colon) return -1;
  g_method = proto_method_lookup(spec, (size_t)(colon - spec));
  if (g_method < 0) return -1;
  if (!strncmp(colon + 1, "delay=", 6)) {
    char *end;
    long ms = strtol(colon + 7, &end, 10);
    if (end == colon + 7 || *end || ms < 1 || ms > 60000) return -1;
    g_delay_ms = (int)ms;
    log_warn("fault injection on: every %s request waits %d ms before it runs",
             proto_method_name(g_method), g_delay_ms);
    return 0;
  }
  g_code = proto_err_from_wire(colon + 1, strlen(colon + 1));
  if (g_code == GKC_EUNKNOWN_CODE) return -1;
  log_warn("fault injection on: every %s request fails with %s", proto_method_name(g_method),
           proto_err_wire(g_code));
  return 0;
}

int fault_inject(gkcd_job *job) {
  if (job->method != g_method) return 0;
  if (g_delay_ms) {
    struct timespec ts = {g_delay_ms / 1000, (long)(g_delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
    return 0;
  }
  job_fail(job, g_code, "injected fault (GKCD_FAULT)");
  return 1;
}
#else
int fault_init(void) { return 0; }
int fault_inject(gkcd_job *job) { (void)job; return 0; }
#endif
