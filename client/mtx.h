/* mtx.h: read Matrix Market files into CSR.
 *
 * Reads `coordinate` matrices whose field is real, integer or pattern and
 * whose symmetry is general, symmetric or skew-symmetric, from .mtx or
 * .mtx.gz (zlib reads both).  Pattern entries become 1.0; symmetric files
 * are expanded to both triangles (skew-symmetric with the sign flipped);
 * explicit zeros are kept as entries.  Column indices are sorted within each
 * row; duplicate (row, col) entries, if a file has them, are kept in file
 * order.  Anything else (array format, complex, hermitian, an index out of
 * range, too few or too many entries, more than INT32_MAX entries after
 * expansion) is an error that names the file and, where there is one, the
 * line.  Memory grows with the entries read, not with the size line's claim.
 */
#ifndef MTX_H
#define MTX_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int32_t rows, cols;
  int64_t nnz;        /* entries after symmetric expansion */
  int32_t *row_ptr;   /* rows + 1, malloc'd */
  int32_t *col_idx;   /* nnz, malloc'd (never NULL on success, even if nnz == 0) */
  float *values;      /* nnz, malloc'd (likewise) */
} mtx_csr;

/* Returns 0, or -1 with a message in err (out is then zeroed). */
int mtx_read_csr(const char *path, mtx_csr *out, char *err, size_t errlen);
void mtx_free(mtx_csr *m);

#endif
