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
  /* Resident on gkcd: diag (own columns), offd (ghost columns), down (the
   * halo download: G, one 1 per row picking the rows others need, stacked
   * over offd^T, whose product with x gives each ghost column's share of
   * x.(offd g) so that the ghost part of a dot is summed here), scratch
   * (rows floats: the own-column product while ghosts travel). */
  uint32_t diag, offd, down, scratch;
  int have_diag, have_offd, have_down, have_scratch;
  /* The halo's only traffic with gkcd, in one registered shared-memory
   * region when gkcd takes it (else malloc'd, and sent inline):
   * hbuf[0, nsend) the rows to send (MPI sends straight from here),
   * hbuf[nsend, nsend + nghost) offd^T x, gbuf[0, nghost) the ghosts
   * (MPI receives straight into here, gkcd reads them from here). */
  gkc_region *region;
  float *hbuf, *gbuf;
  uint64_t hoff, goff;         /* their byte offsets in region */
  MPI_Request *reqs;           /* 2 per rank at most */
  int nneigh;
  char spmv_algo[32];
};

/* Where a solve's time and traffic go, accumulated by the calls below.
 * local_s is the blocking calls to gkcd as this rank saw them; server_s
 * and kernel_s what gkcd reported for them (its timing fields), so that
 * local_s - server_s is the socket and the client library. */
typedef struct {
  double comm_s, local_s, host_s, server_s, kernel_s;
  int64_t requests, allreduces, halo_bytes, down_bytes, up_bytes;
} gkcm_clock;

/* One timed, counted request's bookkeeping (dmat.c and dcg.c). */
void clock_request(gkcm_clock *clk, double t0, const gkc_info *info);

/* The halo of x in three steps, each skipped after a failure (recorded by
 * ctx_fail, reported at the caller's next ctx_sync):
 *   dmat_halo_down: hbuf = [G; offd^T] x, one request: nsend + nghost floats
 *     come back (into the region);
 *   dmat_halo_exchange: the sends go from hbuf, the ghosts land in gbuf
 *     (MPI, blocking until both are done; every rank takes part);
 *   dmat_halo_up: out = alpha offd g + beta y on gkcd (g read from gbuf, y
 *     resident; out differs from y), one request.
 * dmat_ghost_dot is x.(offd g) from what down and exchange left here. */
void dmat_halo_down(gkcm_matrix *A, uint32_t x, gkcm_clock *clk);
void dmat_halo_exchange(gkcm_matrix *A, gkcm_clock *clk);
void dmat_halo_up(gkcm_matrix *A, float alpha, float beta, uint32_t y, uint32_t out,
                  gkcm_clock *clk);
double dmat_ghost_dot(const gkcm_matrix *A);

/* The same halo folded into batches (gkc_batch_regions), when it goes
 * through the region (dmat_fused: A->region, and more than one rank):
 *   dmat_step_down: the batch step hbuf = [G; offd^T] x, its out the
 *     region (down_bytes counted); 0 steps when this rank has no halo;
 *   dmat_step_up: the batch step out = offd g + y, g read from gbuf (the
 *     last exchange's ghosts), y resident, out differs from y; 0 steps
 *     without ghosts.
 * Each writes st[0] and g[0] and returns how many steps it wrote (0 or 1). */
int dmat_fused(const gkcm_matrix *A);
int dmat_step_down(gkcm_matrix *A, uint32_t x, gkc_step *st, gkc_step_region *g,
                   gkcm_clock *clk);
int dmat_step_up(gkcm_matrix *A, uint32_t y, uint32_t out, gkc_step *st, gkc_step_region *g);

/* Collective: out = alpha A x + beta y on gkcd (resident arrays of the
 * rank's rows; y only when has_y; out differs from x and y): the halo
 * download, the own-column spmv into scratch while the messages travel,
 * then the ghost columns added.  For set-up and true residuals; the CG
 * iterations of dcg.c fuse these steps with their vector work. */
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

/* ctx_sync in two halves, so that a request to gkcd can run while the sum
 * travels (MPI_Iallreduce): start takes this rank's failure flag as it is
 * then; a failure recorded after start is reported by the next sync. */
typedef struct {
  double buf[9];
  int n;
  MPI_Request req;
} ctx_isync;
void ctx_sync_start(gkcm_ctx *ctx, const double *vals, int n, ctx_isync *s);
int ctx_sync_finish(gkcm_ctx *ctx, double *vals, ctx_isync *s);

double ctx_now(void); /* MPI_Wtime */

#endif /* GKCM_INTERNAL_H */
