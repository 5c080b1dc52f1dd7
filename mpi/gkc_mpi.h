/* gkc_mpi.h: distributed sparse solves over MPI, each rank's work on its node's gkcd.
 *
 * gkcd stays a node-local service; MPI carries the work between nodes.  A
 * square CSR matrix is split by rows across the ranks of a communicator
 * (balanced by nonzeros).  Each rank keeps its block resident in the gkcd it
 * is connected to (ranks on one node share that node's daemon) and exchanges
 * with its neighbours only the entries of x its rows read from theirs (the
 * halo, planned once at setup).  Global dot products are MPI_Allreduce.
 *
 *   gkcm_ctx *ctx;
 *   if (gkcm_init(MPI_COMM_WORLD, NULL, &ctx) != 0) { puts(gkcm_errmsg(ctx)); ... }
 *   gkcm_rows mine;                        // this rank's rows, global columns
 *   gkcm_poisson3d(ctx, 64, 64, 64, &mine);
 *   gkcm_matrix *A;
 *   gkcm_matrix_create(ctx, &mine, &A);
 *   gkcm_cg_params p = GKCM_CG_PARAMS_INIT;
 *   gkcm_cg_stats st;
 *   gkcm_cg(A, b_local, x_local, &p, &st);  // b, x: this rank's rows only
 *   gkcm_matrix_free(A); gkcm_rows_free(&mine); gkcm_free(ctx);
 *
 * Every collective call returns the same result on every rank: 0, or a
 * negative gkc_error after which gkcm_errmsg() names the rank, its host and
 * the gkcd socket where the failure happened (when one rank's gkcd dies,
 * every rank returns GKC_EIO with that rank's message at the next
 * collective step; nobody is left waiting).  Errors are agreed on at the
 * collective steps that already exist (each Allreduce carries one extra
 * slot), so the normal path costs no extra message.  MPI errors themselves
 * abort the job, as MPI_ERRORS_ARE_FATAL does.
 *
 * Which gkcd a rank uses: the socket argument of gkcm_init if not NULL, else
 * $GKC_MPI_SOCKET as a template (%r: the rank in the communicator, %l: the
 * rank among those on the same node, %h: the host name, %%: a percent sign),
 * else libgkc's usual choice ($GKC_SOCKET, $XDG_RUNTIME_DIR/gkcd.sock,
 * /run/gkcd/gkcd.sock).  docs/CLUSTER.md shows deployments.
 *
 * Implemented in: comm.c, dcg.c, dmat.c, rows.c
 */
#ifndef GKC_MPI_H
#define GKC_MPI_H

#include <gkc.h>
#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gkcm_ctx gkcm_ctx;
typedef struct gkcm_matrix gkcm_matrix;

/* --- ranks and their daemons ------------------------------------------------- */

/* Collective over comm: each rank connects to its gkcd.  On success *out is
 * a new context; on failure *out is still a context for gkcm_errmsg (unless
 * allocation failed): gkcm_free it.  comm is duplicated, so the library's
 * messages never mix with the caller's. */
int gkcm_init(MPI_Comm comm, const char *socket, gkcm_ctx **out);
void gkcm_free(gkcm_ctx *ctx); /* not collective; NULL is fine */
/* The last failure, agreed by all ranks: "rank R (host H, gkcd at S): ...". */
const char *gkcm_errmsg(const gkcm_ctx *ctx);
int gkcm_rank(const gkcm_ctx *ctx);
int gkcm_size(const gkcm_ctx *ctx);
MPI_Comm gkcm_comm(const gkcm_ctx *ctx); /* the duplicate */
const char *gkcm_socket(const gkcm_ctx *ctx); /* this rank's gkcd */
gkc_conn *gkcm_conn(const gkcm_ctx *ctx);

/* --- a rank's rows -------------------------------------------------------------- */

/* Rows [row0, row0 + rows) of an n x n matrix in CSR, with global column
 * indices.  Filled by gkcm_scatter_csr or gkcm_poisson3d (the arrays are then
 * malloc'd and gkcm_rows_free frees them), or by the caller. */
typedef struct {
  int64_t n;         /* global rows = global columns */
  int64_t row0;      /* the first row this rank holds */
  int32_t rows;      /* how many (>= 1) */
  int32_t *row_ptr;  /* rows + 1 entries, row_ptr[0] = 0 */
  int64_t *col_idx;  /* row_ptr[rows] entries in [0, n) */
  float *values;
} gkcm_rows;
void gkcm_rows_free(gkcm_rows *r);

/* offsets[0..nparts]: row ranges [offsets[q], offsets[q+1]) with about
 * equal nonzeros (+1 per row, so empty rows weigh something), each at least
 * one row.  GKC_EINVALID_ARGUMENT when n < nparts.  Not collective. */
int gkcm_partition_csr(const int32_t *row_ptr, int64_t n, int nparts, int64_t *offsets);

/* Collective: root holds the whole matrix (row_ptr, col_idx, values of n
 * rows; ignored elsewhere), partitions it with gkcm_partition_csr and sends
 * each rank its rows into *out.  GKC_EINVALID_ARGUMENT when n is less than
 * the ranks or over INT32_MAX, or row_ptr does not start at 0 or decreases. */
int gkcm_scatter_csr(gkcm_ctx *ctx, int root, int64_t n, const int32_t *row_ptr,
                     const int32_t *col_idx, const float *values, gkcm_rows *out);

/* Collective: this rank's rows of the 7-point Laplacian of an nx x ny x nz
 * grid (Dirichlet boundary: 6 on the diagonal, -1 to each neighbour; SPD),
 * row i = x + nx (y + ny z), partitioned by nonzeros.  Each rank builds only
 * its own rows. */
int gkcm_poisson3d(gkcm_ctx *ctx, int32_t nx, int32_t ny, int32_t nz, gkcm_rows *out);

/* --- the distributed matrix ------------------------------------------------------ */

/* Collective: the ranks' row ranges must tile [0, n) in rank order.  Plans
 * the halo (which rows each rank needs from which, exchanged once), splits
 * the block into the columns this rank owns and the ghost columns, and
 * uploads both, with the gather of the rows others need, to gkcd.  mine is
 * not kept. */
int gkcm_matrix_create(gkcm_ctx *ctx, const gkcm_rows *mine, gkcm_matrix **out);
void gkcm_matrix_free(gkcm_matrix *A); /* not collective; releases on gkcd */

typedef struct {
  int64_t n, row0;
  int32_t rows;        /* this rank's */
  int64_t nnz;         /* this rank's */
  int32_t ghosts;      /* entries of x received per spmv */
  int32_t sends;       /* entries of x sent per spmv */
  int neighbours;      /* ranks exchanged with */
  char spmv_algo[32];  /* what gkcd runs for the local block */
  int halo_in_region;  /* the halo travels through a shared-memory region
                        * registered with gkcd (else inline in the requests) */
} gkcm_matrix_info;
void gkcm_matrix_info_get(const gkcm_matrix *A, gkcm_matrix_info *info);

/* Collective: y = A x in float64 on the host (x, y: this rank's rows), with
 * the same halo plan; for right-hand sides and residual checks. */
int gkcm_host_spmv(gkcm_matrix *A, const float *x, double *y);

/* Collective: y = x gathered on root (n floats there; ignored elsewhere). */
int gkcm_gather(gkcm_matrix *A, int root, const float *x, float *y);

/* --- conjugate gradients --------------------------------------------------------- */

typedef enum { GKCM_PRECOND_NONE = 0, GKCM_PRECOND_JACOBI = 1 } gkcm_precond;

/* Which recurrence.  Both keep every vector resident on gkcd and move only
 * the halo (nsend + nghost floats down, nghost up, per spmv).
 *   CLASSICAL: Hestenes-Stiefel CG, two Allreduce per iteration (p.q, then
 *     r.z), 4 requests per iteration with a halo, 2 without; on a single
 *     rank (nothing to reduce) up to `chain` iterations run as one batch
 *     request, the step sizes taken on gkcd from the batch's own dots.
 *   SINGLE: Chronopoulos-Gear CG, the two dots of an iteration in one
 *     Allreduce that travels while the ghost columns are added: 3 requests
 *     and 1 Allreduce per iteration with a halo, 1 request without.  The
 *     same iterates as CLASSICAL in exact arithmetic; in float32 the counts
 *     agree within a few percent on well-conditioned problems (tests/mpi). */
typedef enum { GKCM_CG_CLASSICAL = 0, GKCM_CG_SINGLE = 1 } gkcm_cg_variant;

typedef struct {
  double tol;          /* stop when ||b - A x|| / ||b|| < tol (checked on gkcd) */
  int max_iter;
  int precond;         /* gkcm_precond */
  int variant;         /* gkcm_cg_variant */
  int chain;           /* CLASSICAL on one rank: at most this many iterations per
                        * request (1 to 8; 0: 8); fewer as tol comes near, so
                        * that the iteration count is what one at a time gives */
} gkcm_cg_params;
#define GKCM_CG_PARAMS_INIT {1e-6, 10000, GKCM_PRECOND_NONE, GKCM_CG_CLASSICAL, 0}
#define GKCM_CG_MAX_CHAIN 8

/* Per rank; iterations, converged and the residuals agree on every rank. */
typedef struct {
  int iterations, converged, restarts;
  double rec_residual;  /* the recurrence's ||r|| / ||b|| when CG stopped */
  double residual;      /* ||b - A x|| / ||b|| from gkcd (float32 spmv) at the end */
  double setup_s;       /* vector uploads and the preconditioner */
  double solve_s;       /* the iterations */
  double comm_s;        /* part of solve_s in MPI: halo waits and Allreduce */
  double local_s;       /* part of solve_s in calls to gkcd (round trips) */
  double server_s;      /* part of local_s inside gkcd, as gkcd reports it */
  double kernel_s;      /* part of server_s computing, as gkcd reports it */
  double host_s;        /* part of solve_s here: the ghost part of the dots */
  int64_t requests;     /* to gkcd, during the solve */
  int64_t allreduces;
  int64_t halo_bytes;   /* sent by this rank over MPI, during the solve */
  int64_t down_bytes;   /* array bytes from gkcd (the halo download), during the solve */
  int64_t up_bytes;     /* array bytes to gkcd (the ghosts), during the solve */
  int spmvs;            /* distributed products with A during the solve
                         * (iterations plus true-residual checks) */
} gkcm_cg_stats;

/* GKCM_EBREAKDOWN (on every rank) when p.Ap <= 0: A is not SPD. */
#define GKCM_EBREAKDOWN 1

/* Collective: solves A x = b from x0 = 0 by CG, or PCG with the Jacobi
 * preconditioner diag(A)^-1; b and x are this rank's rows.  p->variant
 * picks the recurrence (above).  The true residual b - A x is checked on
 * gkcd when the recurrence says converged; if it is not below tol the
 * iteration restarts from it (at most 8 times). */
int gkcm_cg(gkcm_matrix *A, const float *b, float *x, const gkcm_cg_params *p,
            gkcm_cg_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* GKC_MPI_H */
