/* cli_csr.c: the sparse matrix of gkc spmv, from a Matrix Market file or random. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli_csr.h"

/* Files with more entries than this take seconds to parse: say so. */
#define BIG_MTX_ENTRIES 5000000

int cli_csr_peek(const char *path, int64_t *rows, int64_t *cols, int64_t *nnz, int *symmetric) {
  gzFile f = gzopen(path, "rb");
  if (!f) return -1;
  char line[1024];
  long long r, c, n;
  int rc = -1, first = 1;
  *symmetric = 0;
  while (gzgets(f, line, sizeof line)) {
    /* The banner: "%%MatrixMarket matrix coordinate real symmetric". */
    if (first && strncmp(line, "%%MatrixMarket", 14) == 0)
      *symmetric = strstr(line, "symmetric") != NULL; /* skew-symmetric too */
    first = 0;
    if (line[0] == '%' || line[strspn(line, " \t\r\n")] == '\0') continue;
    if (sscanf(line, "%lld %lld %lld", &r, &c, &n) == 3 && r > 0 && c > 0 && n >= 0) {
      *rows = r, *cols = c, *nnz = n;
      rc = 0;
    }
    break;
  }
  gzclose(f);
  return rc;
}

int cli_csr_read(const cli_globals *g, const char *opt, const char *path, mtx_csr *m) {
  int64_t rows, cols, entries = -1;
  int sym;
  if (cli_csr_peek(path, &rows, &cols, &entries, &sym)) entries = -1;
  int big = entries > BIG_MTX_ENTRIES;
  double t0 = cli_now_us();
  if (big) fprintf(stderr, "gkc: reading %s (%lld entries)...\n", path, (long long)entries);
  char err[512];
  if (mtx_read_csr(path, m, err, sizeof err) != 0) return cli_usage_error(g, "%s: %s", opt, err);
  if (big) fprintf(stderr, "gkc: read %s in %.1f s\n", path, (cli_now_us() - t0) / 1e6);
  return CLI_OK;
}

/* Appends an entry, doubling the arrays as needed. */
static int push(mtx_csr *m, int64_t *cap, int32_t col, float val) {
  if (m->nnz == *cap) {
    int64_t ncap = *cap ? 2 * *cap : 1024;
    int32_t *ci = realloc(m->col_idx, (size_t)ncap * sizeof *ci);
    if (ci) m->col_idx = ci;
    float *v = realloc(m->values, (size_t)ncap * sizeof *v);
    if (v) m->values = v;
    if (!ci || !v) return -1;
    *cap = ncap;
  }
  m->col_idx[m->nnz] = col;
  m->values[m->nnz++] = val;
  return 0;
}

int cli_csr_random(int32_t rows, int32_t cols, double density, cli_rng *r, mtx_csr *m) {
  memset(m, 0, sizeof *m);
  m->rows = rows, m->cols = cols;
  int64_t cap = 0;
  if (!(m->row_ptr = malloc(((size_t)rows + 1) * sizeof *m->row_ptr))) goto oom;
  /* Each column is kept with probability density: rather than draw once per
   * column, jump ahead by geometrically distributed gaps, O(nnz) in all. */
  double log_skip = log1p(-density); /* -inf when density is 1: no gaps */
  m->row_ptr[0] = 0;
  for (int32_t i = 0; i < rows; i++) {
    int64_t c = -1;
    for (;;) {
      double gap = floor(log(cli_rng_unit(r)) / log_skip);
      if (!(gap < (double)cols)) break; /* also catches NaN */
      c += 1 + (int64_t)gap;
      if (c >= cols) break;
      if (m->nnz == INT32_MAX) goto oom; /* int32 row_ptr is full */
      if (push(m, &cap, (int32_t)c, (float)(2.0 * cli_rng_unit(r) - 1.0))) goto oom;
    }
    m->row_ptr[i + 1] = (int32_t)m->nnz;
  }
  if (m->nnz == 0) { /* a tiny density can draw nothing; keep the demo meaningful */
    int32_t row = (int32_t)(cli_rng_next(r) % (uint64_t)rows);
    if (push(m, &cap, (int32_t)(cli_rng_next(r) % (uint64_t)cols), 1.0f)) goto oom;
    for (int32_t i = row + 1; i <= rows; i++) m->row_ptr[i] = 1;
  }
  return CLI_OK;
oom:
  fprintf(stderr, "gkc: cannot allocate a random %d x %d matrix of density %g\n", rows, cols,
          density);
  mtx_free(m);
  return CLI_FAIL;
}
