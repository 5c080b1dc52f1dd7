/* halo.h: row partitions and halo plans, without MPI or gkcd.
 *
 * A rank owning rows [row0, row0 + rows) of an n x n matrix reads x at
 * every column its rows touch.  Columns in its own range are its own
 * entries; the others ("ghosts") belong to the rank whose range holds them
 * and must be received before each spmv.  The plan, built once:
 *
 *   - ghost[]: the ghost columns, sorted and unique; as ranges are in rank
 *     order, that also groups them by owner, so recv_count/recv_displ per
 *     rank index straight into ghost[] (and into the receive buffer);
 *   - the block split into diag (rows x rows, local column = global - row0)
 *     and offd (rows x nghost, column = position in ghost[]), so that
 *     y = diag * x_own + offd * x_ghost;
 *   - send_idx[]: the local rows each other rank asked for, grouped by rank
 *     (send_count/send_displ), filled by halo_plan_set_sends from what those
 *     ranks computed as their ghosts.
 *
 * Everything here is plain computation on arrays, so the unit test checks it
 * on matrices whose coupling is known, for every rank in one process.
 * Functions return 0, or -1 with a message in msg that names the problem.
 */
#ifndef GKCM_HALO_H
#define GKCM_HALO_H

#include <stddef.h>
#include <stdint.h>

/* offsets[0..nparts] with about equal weight per part, each part at least
 * one row; weight(i) = row_nnz(i) + 1.  -1 when n < nparts or nparts < 1. */
int halo_partition(int64_t n, int nparts, int64_t (*row_nnz)(int64_t i, const void *arg),
                   const void *arg, int64_t *offsets);

/* The owner of global row i under offsets (binary search). */
int halo_owner(const int64_t *offsets, int nparts, int64_t i);

typedef struct {
  int nranks, rank;
  int64_t n, row0;
  int32_t rows;
  int32_t nghost;
  int64_t *ghost;            /* nghost global columns, sorted */
  int *recv_count, *recv_displ; /* nranks each */
  int32_t nsend;
  int32_t *send_idx;         /* nsend local rows, grouped by destination rank */
  int *send_count, *send_displ; /* nranks each */
  /* diag: rows x rows; offd: rows x nghost (empty arrays when nghost = 0) */
  int32_t *d_row_ptr, *d_col;
  float *d_val;
  int32_t *o_row_ptr, *o_col;
  float *o_val;
  int64_t d_nnz, o_nnz;
} halo_plan;

/* Builds the receive side and the split from this rank's rows (CSR with
 * global column indices).  Checks: offsets tile [0, n) with offsets[rank] =
 * row0 and offsets[rank+1] = row0 + rows; row_ptr starts at 0 and never
 * decreases; every column is in [0, n).  p is zeroed first and, on failure,
 * freed again. */
int halo_plan_build(halo_plan *p, const int64_t *offsets, int nranks, int rank, int64_t n,
                    int32_t rows, const int32_t *row_ptr, const int64_t *col_idx,
                    const float *values, char *msg, size_t msglen);

/* The send side: count[q] global rows rank q asked this rank for, listed
 * in ids[] grouped by q in rank order (what q's plan has in its ghost[]
 * between its recv_displ[rank] and recv_count[rank]).  Each must be one of
 * this rank's rows: a request for anything else is refused, naming it. */
int halo_plan_set_sends(halo_plan *p, const int *count, const int64_t *ids, char *msg,
                        size_t msglen);

void halo_plan_free(halo_plan *p);

#endif /* GKCM_HALO_H */
