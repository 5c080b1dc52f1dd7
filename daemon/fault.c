/* fault.c: see fault.h. */
#include "fault.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "log.h"
#include "proto_errors.h"
#include "proto_methods.h"

#ifdef GKC_FAULT_INJECTION
static int g_method = -1, g_code, g_delay_ms;
static int g_lose_dev = -1;
static long g_lose_after;
static atomic_long g_dev_jobs;

/* "dev=N[:after=K]" */
static int parse_device_lost(const char *p) {
  char *end;
  if (strncmp(p, "dev=", 4)) return -1;
  long dev = strtol(p + 4, &end, 10);
  if (end == p + 4 || dev < 0 || dev >= GKCD_MAX_DEVICES) return -1;
  long after = 0;
  if (*end == ':') {
    if (strncmp(end + 1, "after=", 6)) return -1;
    const char *q = end + 7;
    after = strtol(q, &end, 10);
    if (end == q || after < 0 || after > 1000000000L) return -1;
  }
  if (*end) return -1;
  g_lose_dev = (int)dev;
  g_lose_after = after;
  log_warn("fault injection on: device %d is lost when its job %ld starts", g_lose_dev,
           g_lose_after + 1);
  return 0;
}

int fault_init(void) {
  const char *spec = getenv("GKCD_FAULT");
  if (!spec || !*spec) return 0;
  if (!strncmp(spec, "device_lost:", 12)) return parse_device_lost(spec + 12);
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

int fault_device(gkcd_job *job) { return fault_device_be(job->be); }
int fault_device_be(gkcd_backend *be) {
  if (g_lose_dev < 0 || be->device != g_lose_dev) return 0;
  if (atomic_fetch_add(&g_dev_jobs, 1) == g_lose_after)
    backend_device_lost(be, "injected fault (GKCD_FAULT=device_lost)");
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
int fault_device(gkcd_job *job) { (void)job; return 0; }
int fault_device_be(gkcd_backend *be) { (void)be; return 0; }
int fault_inject(gkcd_job *job) { (void)job; return 0; }
#endif
