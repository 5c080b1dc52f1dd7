/* cli_csr.h: the sparse matrix of gkc spmv, from a Matrix Market file or random. */
#ifndef GKC_CLI_CSR_H
#define GKC_CLI_CSR_H

#include "cli.h"
#include "mtx.h"

/* The size line of a .mtx or .mtx.gz (rows, cols, entries in the file) and
 * whether the banner says symmetric (then up to twice the entries after
 * expansion), without reading the entries: 0, or -1 when the header cannot
 * be read (cli_csr_read then says what is wrong). */
int cli_csr_peek(const char *path, int64_t *rows, int64_t *cols, int64_t *nnz, int *symmetric);

/* Reads a .mtx or .mtx.gz into m, with a note on stderr when the file is big
 * enough to take a while.  Returns CLI_OK or a usage error naming opt. */
int cli_csr_read(const cli_globals *g, const char *opt, const char *path, mtx_csr *m);

/* A rows x cols matrix whose entries are present with probability density
 * (0 < density <= 1), values uniform in [-1, 1], at least one entry.
 * Returns CLI_OK or, out of memory, CLI_FAIL; free m with mtx_free. */
int cli_csr_random(int32_t rows, int32_t cols, double density, cli_rng *r, mtx_csr *m);

#endif
