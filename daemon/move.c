/* move.c: see move.h. */
#include "move.h"

#include <stdio.h>
#include <time.h>

#include "backend.h"
#include "devices.h"
#include "gkc_errors.h"
#include "method.h"
#include "res_object.h"

#define MAX_SLOTS (6 + 10 * BATCH_MAX_STEPS)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The addresses of every pointer into resident memory the job's inputs may
 * hold (its row's operands, else its inputs); returns how many. */
static int slots(gkcd_job *job, const void **out[]) {
  const gkcd_method *row = job->row;
  if (row->operands) return row->operands(job, out, MAX_SLOTS);
  gkcd_span *in[MAX_SLOTS];
  int n = row->inputs ? row->inputs(job, in, MAX_SLOTS) : 0;
  for (int i = 0; i < n; i++) out[i] = &in[i]->ptr;
  return n;
}

/* Points every slot inside [from, from + bytes) at the same offset in to. */
static void retarget(const void **s[], int n, const void *from, size_t bytes, const void *to) {
  const char *lo = from, *hi = lo + bytes;
  for (int i = 0; i < n; i++) {
    const char *p = *s[i];
    if (p && p >= lo && p < hi) *s[i] = (const char *)to + (p - lo);
  }
}

int move_operands(gkcd_job *job) {
  int d = job->device;
  gkcd_backend *to = job->be;
  const void **s[MAX_SLOTS];
  int n = -1;
  for (int i = 0; i < job->nres; i++) {
    gkcd_res *r = job->res[i];
    if ((r->kind != RES_ARRAY && r->kind != RES_MATRIX) || r->device == d) continue;
    if (n < 0) n = slots(job, s);
    /* An array moves its bytes; a matrix its whole allocation, which holds
     * the backend's spmv plan past the three arrays (resident.h). */
    size_t span = r->kind == RES_ARRAY || r->cap < r->bytes ? r->bytes : r->cap;
    if (r->rep_mask & (1ull << d)) {
      retarget(s, n, r->ptr, span, r->copies[d].ptr);
      continue;
    }
    gkcd_backend *from = devices_backend(r->device);
    if (!from || atomic_load(&from->lost)) {
      job_fail(job, GKC_EDEVICE_LOST, "%s %u lived on device %d, which was lost",
               r->kind == RES_MATRIX ? "matrix" : "handle", r->id, r->device);
      return -1;
    }
    if (!to->peer_copy) { /* a backend without copies between its devices */
      job_fail(job, GKC_EINVALID_ARGUMENT, "%s %u lives on device %d and the %s backend cannot"
               " copy it to device %d: use operands on one device, or 'replicate'",
               r->kind == RES_MATRIX ? "matrix" : "handle", r->id, r->device, to->name, d);
      return -1;
    }
    if (job->nmoved == JOB_MAX_RES) {
      job_fail(job, GKC_EINTERNAL, "too many operands to move");
      return -1;
    }
    void *dst;
    size_t cap;
    char msg[200];
    double t0 = now_us();
    int rc = to->res_alloc(to, span, &dst, &cap, msg, sizeof msg);
    if (rc) {
      job_fail(job, rc, "moving %s %u from device %d to device %d: %s",
               r->kind == RES_MATRIX ? "matrix" : "handle", r->id, r->device, d, msg);
      return -1;
    }
    job->moved[job->nmoved] = dst, job->moved_cap[job->nmoved++] = cap;
    int peer = 0;
    rc = to->peer_copy(to, dst, from, r->ptr, span, &peer, msg, sizeof msg);
    if (rc) {
      job_fail(job, rc, "moving %s %u from device %d to device %d: %s",
               r->kind == RES_MATRIX ? "matrix" : "handle", r->id, r->device, d, msg);
      return -1;
    }
    job->peer_us += now_us() - t0;
    job->peer_bytes += (double)span;
    job->peer_direct = peer;
    retarget(s, n, r->ptr, span, dst);
  }
  return 0;
}

void move_free(gkcd_job *job) {
  gkcd_backend *be = devices_backend(job->device);
  for (int i = 0; i < job->nmoved; i++)
    if (be) be->res_free(be, job->moved[i], job->moved_cap[i]);
  job->nmoved = 0;
}
