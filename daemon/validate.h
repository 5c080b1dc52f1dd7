/* validate.h: checks that read a request's arrays, run on a worker thread
 * before the backend sees the job, so no backend can be handed an index
 * that would take it out of bounds.
 */
#ifndef GKCD_VALIDATE_H
#define GKCD_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* The checks the method rows name (method.h check): 0 when the job's
 * arrays are sound; otherwise the job failed (invalid_argument, naming the
 * first offending position) and nonzero.  CSR indices that sit in a
 * client's region are copied out first (job->priv), so the copy checked is
 * the copy used. */
int validate_spmv(gkcd_job *job);       /* by value; a resident matrix passes */
int validate_csr_upload(gkcd_job *job);

/* The CSR rules, on possibly unaligned arrays: row_ptr starts at 0, never
 * decreases, ends at nnz; every col_idx in [0, cols).  0 with the longest
 * row's length in *max_row, or GKC_EINVALID_ARGUMENT with a message. */
int validate_csr(int32_t rows, int32_t cols, int64_t nnz, const void *row_ptr,
                 const void *col_idx, int32_t *max_row, char *msg, size_t msglen);

#endif
