/* backend_host.c: see backend_host.h. */
#include "backend_host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "job.h"

atomic_int host_finished;
atomic_int host_lost_calls[64];

void job_finish(gkcd_job *job) {
  (void)job;
  atomic_fetch_add(&host_finished, 1);
}

void backend_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: backend_fatal (no device loss here should be fatal): ");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

int backend_failed(void) { return 0; }

/* As the daemon's: marks the device lost, once. */
void backend_device_lost(gkcd_backend *be, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (atomic_exchange(&be->lost, 1)) return;
  if (be->device >= 0 && be->device < 64) atomic_fetch_add(&host_lost_calls[be->device], 1);
  printf("  device %d lost: %s\n", be->device, msg);
}

/* cuda_long.c's batch path is linked in, never run. */
int batch_step_begin(gkcd_job *job, int i, int stop, float *alpha, float *beta) {
  (void)job, (void)i, (void)stop, (void)alpha, (void)beta;
  fprintf(stderr, "FAIL: no batch runs here\n");
  exit(1);
}

const char *batch_op_name(int op) {
  (void)op;
  fprintf(stderr, "FAIL: no batch runs here\n");
  exit(1);
}

void batch_fail_scalar(gkcd_job *job, int i, int which, double value) {
  (void)job, (void)i, (void)which, (void)value;
  fprintf(stderr, "FAIL: no batch runs here\n");
  exit(1);
}
