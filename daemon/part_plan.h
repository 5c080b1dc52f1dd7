/* part_plan.h: how a CSR matrix is cut into row blocks for several devices,
 * and which entries of x each block needs from the others (its halo).
 *
 * Rows are cut into k contiguous blocks balanced by nonzeros: boundary j is
 * the row where the running count of nonzeros comes closest to j * nnz / k
 * (so each boundary is within one row of the ideal), every block keeping
 * at least one row.  x is cut alike: block j owns the columns of its rows
 * (clipped to cols; the last block also owns any columns past the last
 * row), so on a square matrix the vectors of a solve split as its rows do.
 *
 * Each block keeps its rows as a local CSR whose column indices are
 * renumbered into [own columns | halo columns]: own column c is local
 * c - col0, halo column halo[i] is local ncols + i.  The halo holds the
 * global columns the block reads that other blocks own, ascending, and so
 * grouped by owner: halo[recv_off[e] .. recv_off[e+1]) comes from block e.
 * Its mirror is the send list: send[send_off[j] .. send_off[j+1]) are this
 * block's own (local) columns that block j reads.  An exchange is then,
 * per pair of blocks, one gather of the sender's entries into a packed
 * buffer and one contiguous copy into the receiver's halo: nothing is sent
 * that is not read, and no index is translated while iterating.
 *
 * Pure host code, no backend: unit-tested by tests/unit/test_part_plan.c.
 */
#ifndef GKCD_PART_PLAN_H
#define GKCD_PART_PLAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int32_t row0, rows;  /* its rows [row0, row0 + rows) */
  int32_t col0, ncols; /* the entries of x it owns [col0, col0 + ncols) */
  int64_t nnz;
  int32_t nhalo;       /* columns it reads that other blocks own */
  int32_t *halo;       /* their global indices, ascending */
  int32_t *recv_off;   /* [k + 1]: halo[recv_off[e] .. recv_off[e+1]) are block e's */
  int32_t nsend;
  int32_t *send;       /* own local columns other blocks read, by reader */
  int32_t *send_off;   /* [k + 1]: send[send_off[j] .. send_off[j+1]) go to block j */
  int32_t *row_ptr;    /* [rows + 1], from 0 */
  int32_t *col_idx;    /* [nnz], local: [0, ncols + nhalo) */
} part_block;

typedef struct {
  int k;
  int32_t rows, cols;
  int64_t nnz;
  part_block *b; /* [k] */
} part_plan;

/* The k + 1 row boundaries (start[0] = 0, start[k] = rows) balanced by
 * nonzeros, each block at least one row; needs 1 <= k <= rows. */
void part_plan_bounds(int32_t rows, const int32_t *row_ptr, int k, int32_t *start);

/* Cuts the validated CSR matrix (rows x cols, row_ptr[rows] nonzeros) into
 * k blocks with their local CSRs and halo plans.  0, or -1 when out of
 * memory (nothing left allocated).  Needs 1 <= k <= rows. */
int part_plan_make(part_plan *p, int k, int32_t rows, int32_t cols, const int32_t *row_ptr,
                   const int32_t *col_idx);

/* Frees the local CSRs only (once they are on the devices). */
void part_plan_drop_csr(part_plan *p);
void part_plan_free(part_plan *p);

#endif
