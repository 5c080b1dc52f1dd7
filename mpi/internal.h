/* internal.h: what the files of gkc-mpi share (not installed).
 *
 * Failure handling, the one rule: a rank whose gkcd call fails records the
 * error (ctx_fail) and from then on skips its gkcd calls but keeps taking
 * part in every MPI step, so no other rank waits for it forever.  The next
 * ctx_sync (every Allreduce goes through it) tells all ranks, which then
 * return the failed rank's message together.
 *
 * Implemented in: comm.c, dmat.c
 */
#ifndef GKCM_INTERNAL_H
#define GKCM_INTERNAL_H

#include "gkc_mpi.h"
#include "halo.h"

struct gkcm_ctx {
  MPI_Comm comm;
  int rank, size;
  gkc_conn *conn;
  char host[64];
  char socket[128];
  int err;            /* this rank's first failure since the last ctx_sync, or 0 */
  char errmsg[512];   /* its message; after ctx_sync, the agreed one */
};

struct gkcm_matrix {
  gkcm_ctx *ctx;
  halo_plan plan;
  int64_t *offsets;            /* size + 1: every rank's first row */
  uint32_t diag, offd, gather; /* resident matrices on gkcd (offd, gather: when used) */
  uint32_t scratch;            /* rows floats: the diag part while ghosts arrive */
  int have_diag, have_offd, have_gather, have_scratch;
  float *sendbuf, *recvbuf;    /* nsend and nghost floats */
  MPI_Request *reqs;           /* 2 per rank at most */
  int nneigh;
  char spmv_algo[32];
};

/* Where a solve's time and traffic go, accumulated by the calls below. */
typedef struct {
  double comm_s, local_s;
  int64_t requests, allreduces, halo_bytes;
} gkcm_clock;

/* Collective: out = alpha A x + beta y on gkcd (resident arrays of the
 * rank's rows; y only when has_y; out differs from x and y):
 *   1. s = G x            the entries others need (gather matrix), to here
 *   2. post the receives of the ghosts and the sends of s
 *   3. t = alpha A_diag x + beta y   while the messages travel
 *   4. wait
 *   5. out = alpha A_offd g + t      (g: the ghosts, sent with the request)
 * Without ghosts step 3 writes out and 5 is skipped.  With a batch method
 * on gkcd, step 1 can join the local work before it (CG's p update), and
 * step 5 the work after it (the p.q dot): see dcg.c.  Failures are recorded
 * (ctx_fail), never returned: the caller's next ctx_sync reports them. */
void dmat_spmv(gkcm_matrix *A, float alpha, uint32_t x, float beta, int has_y, uint32_t y,
               uint32_t out, gkcm_clock *clk);

/* Records a local failure (the first one wins) and returns err.  The
 * message gets the host and socket prefixed: "gkcd at S on H: ...". */
int ctx_fail(gkcm_ctx *ctx, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for a failed gkc call: "STEP: errname: gkc_errmsg". */
int ctx_fail_gkc(gkcm_ctx *ctx, int rc, const char *step);

/* Collective: vals[0..n) summed over the ranks (in place), n <= 8.  Returns
 * 0, or on every rank the lowest failed rank's error, with ctx->errmsg set
 * to its message, after which ctx->err is cleared for a next call. */
int ctx_sync(gkcm_ctx *ctx, double *vals, int n);

double ctx_now(void); /* MPI_Wtime */

#endif /* GKCM_INTERNAL_H */
