/* job.h: one compute request on its way from the wire to a backend and back.
 *
 * The event loop fills the arguments after validating them, the scheduler
 * hands the job to a worker thread, the backend computes and fills the
 * results, and job_finish() returns it to the loop, which sends the reply and
 * frees it.  Array arguments point into the request's own bytes (`frame`),
 * which the job owns: they may be unaligned, so backends copy or load them
 * with memcpy as their hardware needs.
 */
#ifndef GKCD_JOB_H
#define GKCD_JOB_H

#include <stddef.h>
#include <stdint.h>

typedef struct gkcd_conn gkcd_conn;
typedef struct gkcd_pool gkcd_pool;

typedef struct {
  const void *ptr; /* into the frame; may be unaligned; NULL when absent */
  size_t bytes;
} gkcd_span;

typedef struct gkcd_job gkcd_job;
struct gkcd_job {
  int method; /* proto_method */
  int algo;   /* index into the backend's algo list for this method */
  union {
    struct {
      int32_t m, n, k;
      int trans_a, trans_b;
      int tf32;          /* precision "tf32": the caller accepts TF32 rounding */
      float alpha, beta;
      gkcd_span a, b, c; /* c only when beta != 0 */
    } sgemm;
    struct {
      gkcd_span x;
      int64_t n;
      int op; /* CPU_SUM/MIN/MAX == GKC_SUM/MIN/MAX */
    } reduce;
    struct {
      int32_t rows, cols;
      int64_t nnz;
      float alpha, beta;
      gkcd_span row_ptr, col_idx, values, x, y; /* y only when beta != 0 */
      int32_t max_row; /* longest row, found while validating: guides "auto" */
    } spmv;
  } in;

  /* Results, written by the backend. */
  int err;            /* 0 or a negative gkc_error */
  char errmsg[256];
  void *out;          /* malloc'd result array (sgemm c, spmv y), freed after the reply */
  size_t out_bytes;
  double value;       /* reduce */
  double kernel_us;
  double h2d_us, d2h_us; /* host<->device copies, when the backend has them (else 0) */
  const char *algo_name; /* static string: the algo that ran */

  /* Daemon-private. */
  gkcd_conn *conn;
  gkcd_pool *pool;
  uint32_t msgid;
  void *frame;        /* owned request bytes */
  uint64_t t_start_ns;
  uint64_t deadline_ns; /* from deadline_ms: drop the job if it starts later; 0 = none */
  size_t cost;          /* bytes it holds against the memory budget */
  gkcd_job *next;
};

/* Sets job->err and a formatted message. */
void job_fail(gkcd_job *job, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Hands a finished job (results or err filled) back to the event loop.
 * Safe from any thread, including a CUDA host callback. */
void job_finish(gkcd_job *job);

/* Frees the job and everything it owns. */
void job_free(gkcd_job *job);

#endif
