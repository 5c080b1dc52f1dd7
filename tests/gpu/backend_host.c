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

/* cuda_batch.c's batch path is linked in, never run. */
int batch_step_begin(gkcd_job *job, int i, int stop, float *alpha, float *beta) {
  (void)job, (void)i, (void)stop, (void)alpha, (void)beta;
  fprintf(stderr, "FAIL: no batch runs here\n");
  exit(1);
}

int batch_step_begin64(gkcd_job *job, int i, int stop, double *alpha, double *beta) {
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

/* --- the array methods' rows: their inputs in the daemon's order ----------------- */

static int put(gkcd_span *out[], int max, gkcd_span *a, gkcd_span *b, gkcd_span *c, gkcd_span *d,
               gkcd_span *e) {
  gkcd_span *all[] = {a, b, c, d, e};
  int n = 0;
  while (n < 5 && all[n]) n++;
  if (n > max) {
    fprintf(stderr, "FAIL: a row with %d inputs asked for at most %d\n", n, max);
    exit(1);
  }
  for (int i = 0; i < n; i++) out[i] = all[i];
  return n;
}

static int sgemm_inputs(gkcd_job *j, gkcd_span *out[], int max) {
  return put(out, max, &j->in.sgemm.a, &j->in.sgemm.b, &j->in.sgemm.c, NULL, NULL);
}
static int reduce_inputs(gkcd_job *j, gkcd_span *out[], int max) {
  return put(out, max, &j->in.reduce.x, NULL, NULL, NULL, NULL);
}
static int spmv_inputs(gkcd_job *j, gkcd_span *out[], int max) {
  return put(out, max, &j->in.spmv.row_ptr, &j->in.spmv.col_idx, &j->in.spmv.values, &j->in.spmv.x,
             &j->in.spmv.y);
}
static int vec_inputs(gkcd_job *j, gkcd_span *out[], int max) { /* dot, axpby */
  return put(out, max, &j->in.vec.x, &j->in.vec.y, NULL, NULL, NULL);
}
static int nrm2_inputs(gkcd_job *j, gkcd_span *out[], int max) { /* x alone, in in.vec */
  return put(out, max, &j->in.vec.x, NULL, NULL, NULL, NULL);
}
static int data_inputs(gkcd_job *j, gkcd_span *out[], int max) { /* download */
  return put(out, max, &j->in.upload.data, NULL, NULL, NULL, NULL);
}

#define ROW(m, in, sc) [PROTO_M_##m] = {.id = PROTO_M_##m, .where = METHOD_BACKEND, .makes = -1, \
                                        .inputs = in, .scalar = sc}
static const gkcd_method rows[PROTO_M_COUNT] = {
    ROW(SGEMM, sgemm_inputs, 0), ROW(REDUCE, reduce_inputs, 1), ROW(SPMV, spmv_inputs, 0),
    ROW(DOT, vec_inputs, 1),     ROW(AXPBY, vec_inputs, 0),     ROW(NRM2, nrm2_inputs, 1),
    ROW(DOWNLOAD, data_inputs, 0),
};
#undef ROW

const gkcd_method *host_row(int m) {
  return m >= 0 && m < PROTO_M_COUNT && rows[m].inputs ? &rows[m] : NULL;
}
