/* mtx.c: Matrix Market (coordinate) reader to CSR, see mtx.h.
 *
 * One pass over the file with gzgets (zlib reads plain files unchanged, so
 * .mtx and .mtx.gz take the same path) stores the entries as triplets; then
 * a counting pass builds CSR in O(nnz) and rows whose columns are out of
 * order are sorted.  Memory grows with the entries actually read, never with
 * what the size line claims.
 *
 * Values are parsed with strtod, which follows LC_NUMERIC: callers must not
 * switch to a locale whose decimal point is not '.'.
 */
#include "mtx.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Entry lines are short; only comments run long, and those are skipped. */
#define LINE_BUF 4096
#define GZ_BUFFER (256u * 1024u)
#define FIRST_CAPACITY (1u << 16)
/* Rows up to this long are sorted in place by insertion; longer ones by
 * qsort on a scratch array. */
#define INSERTION_MAX 32

typedef enum { FIELD_REAL, FIELD_INTEGER, FIELD_PATTERN } mtx_field;
typedef enum { SYM_GENERAL, SYM_SYMMETRIC, SYM_SKEW } mtx_symmetry;

/* The entries as read: 0-based, before expansion. */
typedef struct {
  int32_t *row, *col;
  float *val;
  int64_t n, cap;
} triplets;

typedef struct {
  gzFile f;
  const char *path;
  int64_t lineno;
  bool truncated;       /* the current line did not fit in line[] */
  char *err;
  size_t errlen;
  mtx_field field;
  mtx_symmetry sym;
  int64_t rows, cols, nnz;
  int64_t size_lineno;
  int64_t expanded;     /* entries after symmetric expansion */
  char line[LINE_BUF];
} mreader;

/* ------------------------------------------------------------- errors */

/* "path: message"; always returns -1. */
__attribute__((format(printf, 2, 3)))
static int fail(mreader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(r->err, r->errlen, "%s: %s", r->path, msg);
  return -1;
}

/* "path: line N: message", N being the line just read. */
__attribute__((format(printf, 2, 3)))
static int fail_line(mreader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(r->err, r->errlen, "%s: line %lld: %s", r->path, (long long)r->lineno, msg);
  return -1;
}

/* --------------------------------------------------------------- lines */

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static const char *skip_space(const char *s) {
  while (is_space(*s)) s++;
  return s;
}

/* After gzgets stopped short: 0 at a clean end of file, else -1 with the
 * reason. */
static int read_error(mreader *r) {
  int errnum;
  const char *msg = gzerror(r->f, &errnum);
  if (errnum == Z_OK || errnum == Z_STREAM_END) return 0;
  if (errnum == Z_ERRNO) return fail(r, "read error: %s", strerror(errno));
  /* zlib's message already starts with "path: "; don't say it twice. */
  size_t plen = strlen(r->path);
  if (strncmp(msg, r->path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0) msg += plen + 2;
  return fail(r, "read error (damaged or truncated gzip file?): %s", msg);
}

/* Reads the next line into r->line.  A line longer than the buffer is
 * consumed to its end and flagged in r->truncated (fine for a comment, an
 * error for anything else).  Returns 1, 0 at end of file, -1 on error. */
static int next_line(mreader *r) {
  if (!gzgets(r->f, r->line, sizeof r->line)) return read_error(r);
  r->lineno++;
  size_t len = strlen(r->line);
  /* A cut-off gzip stream hands over what it inflated, then flags the
   * error: check before taking a line without '\n' as the last one. */
  if ((len == 0 || r->line[len - 1] != '\n') && read_error(r) < 0) return -1;
  r->truncated = len == sizeof r->line - 1 && r->line[len - 1] != '\n';
  if (r->truncated) {
    char rest[LINE_BUF];
    size_t n;
    do {
      if (!gzgets(r->f, rest, sizeof rest)) break;
      n = strlen(rest);
    } while (n == sizeof rest - 1 && rest[n - 1] != '\n');
  }
  return 1;
}

/* Next line that is neither a comment nor blank; 1, 0 at end, -1 error. */
static int next_content_line(mreader *r) {
  for (;;) {
    int rc = next_line(r);
    if (rc <= 0) return rc;
    const char *s = skip_space(r->line);
    if (*s == '%' || *s == '\0') continue;
    if (r->truncated) return fail_line(r, "line longer than %d characters", LINE_BUF - 1);
    return 1;
  }
}

/* -------------------------------------------------------------- banner */

/* Splits the banner into lower-cased words; returns how many (at most max). */
static int banner_words(char *line, char **words, int max) {
  int n = 0;
  for (char *s = line; *s && n < max;) {
    while (is_space(*s)) s++;
    if (!*s) break;
    words[n++] = s;
    while (*s && !is_space(*s)) {
      *s = (char)tolower((unsigned char)*s);
      s++;
    }
    if (*s) *s++ = '\0';
  }
  return n;
}

static int parse_field(mreader *r, const char *w) {
  if (strcmp(w, "real") == 0) r->field = FIELD_REAL;
  else if (strcmp(w, "integer") == 0) r->field = FIELD_INTEGER;
  else if (strcmp(w, "pattern") == 0) r->field = FIELD_PATTERN;
  else if (strcmp(w, "complex") == 0)
    return fail(r, "complex matrices are not supported (gkc reads real, integer or pattern)");
  else
    return fail(r, "unknown field '%s' in the banner (expected real, integer or pattern)", w);
  return 0;
}

static int parse_symmetry(mreader *r, const char *w) {
  if (strcmp(w, "general") == 0) r->sym = SYM_GENERAL;
  else if (strcmp(w, "symmetric") == 0) r->sym = SYM_SYMMETRIC;
  else if (strcmp(w, "skew-symmetric") == 0) r->sym = SYM_SKEW;
  else if (strcmp(w, "hermitian") == 0)
    return fail(r, "hermitian matrices are not supported (they are complex)");
  else
    return fail(r, "unknown symmetry '%s' in the banner (expected general, symmetric or "
                "skew-symmetric)", w);
  return 0;
}

static int read_banner(mreader *r) {
  int rc = next_line(r);
  if (rc < 0) return -1;
  if (rc == 0) return fail(r, "empty file (expected a %%%%MatrixMarket banner)");
  if (r->truncated) return fail_line(r, "banner line is too long");
  char *w[6];
  int n = banner_words(r->line, w, 6);
  if (n < 1 || strcmp(w[0], "%%matrixmarket") != 0)
    return fail(r, "not a Matrix Market file: the first line must be "
                "'%%%%MatrixMarket matrix coordinate <field> <symmetry>'");
  if (n != 5)
    return fail_line(r, "banner must be '%%%%MatrixMarket matrix coordinate <field> <symmetry>'");
  if (strcmp(w[1], "matrix") != 0)
    return fail(r, "Matrix Market object '%s' is not supported (only 'matrix')", w[1]);
  if (strcmp(w[2], "array") == 0)
    return fail(r, "dense 'array' format is not supported; gkc reads sparse 'coordinate' matrices");
  if (strcmp(w[2], "coordinate") != 0)
    return fail(r, "unknown format '%s' in the banner (expected 'coordinate')", w[2]);
  if (parse_field(r, w[3]) < 0 || parse_symmetry(r, w[4]) < 0) return -1;
  return 0;
}

/* ------------------------------------------------------------- numbers */

/* An optionally signed decimal integer that fits in int64 and ends at
 * whitespace.  Returns the position after it, or NULL. */
static const char *parse_int(const char *s, int64_t *out) {
  s = skip_space(s);
  bool neg = *s == '-';
  if (*s == '-' || *s == '+') s++;
  if (*s < '0' || *s > '9') return NULL;
  int64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    int d = *s - '0';
    if (v > (INT64_MAX - d) / 10) return NULL;
    v = v * 10 + d;
  }
  if (*s && !is_space(*s)) return NULL;
  *out = neg ? -v : v;
  return s;
}

static int read_size(mreader *r) {
  int rc = next_content_line(r);
  if (rc < 0) return -1;
  if (rc == 0) return fail(r, "file ends before the size line (rows cols nnz)");
  r->size_lineno = r->lineno;
  const char *s = r->line;
  if (!(s = parse_int(s, &r->rows)) || !(s = parse_int(s, &r->cols)) ||
      !(s = parse_int(s, &r->nnz)) || *skip_space(s))
    return fail_line(r, "size line must be three integers: rows cols nnz");
  if (r->rows < 1 || r->rows > INT32_MAX || r->cols < 1 || r->cols > INT32_MAX)
    return fail_line(r, "matrix is %lld x %lld; rows and cols must be between 1 and %d",
                     (long long)r->rows, (long long)r->cols, INT32_MAX);
  if (r->nnz < 0 || r->nnz > INT32_MAX)
    return fail_line(r, "nnz %lld must be between 0 and %d", (long long)r->nnz, INT32_MAX);
  return 0;
}

/* ------------------------------------------------------------- entries */

static int grow(mreader *r, triplets *t) {
  int64_t cap = t->cap ? t->cap * 2 : FIRST_CAPACITY;
  if (cap > r->nnz) cap = r->nnz;
  int32_t *row = realloc(t->row, (size_t)cap * sizeof *row);
  if (row) t->row = row;
  int32_t *col = row ? realloc(t->col, (size_t)cap * sizeof *col) : NULL;
  if (col) t->col = col;
  float *val = col ? realloc(t->val, (size_t)cap * sizeof *val) : NULL;
  if (!val) return fail(r, "out of memory after reading %lld entries", (long long)t->n);
  t->val = val;
  t->cap = cap;
  return 0;
}

static int index_in_range(mreader *r, int64_t v, int64_t max, const char *what) {
  if (v >= 1 && v <= max) return 0;
  return fail_line(r, "%s index %lld is out of range 1..%lld", what, (long long)v, (long long)max);
}

/* The value field, converted to float; *end points after it. */
static int parse_value(mreader *r, const char *s, float *out, const char **end) {
  char *e;
  s = skip_space(s);
  double d = strtod(s, &e);
  if (e == s || (*e && !is_space(*e))) {
    if (!*s) return fail_line(r, "missing value (expected: row col value)");
    int len = (int)strcspn(s, " \t\r\n");
    return fail_line(r, "value '%.*s' is not a number", len < 40 ? len : 40, s);
  }
  float f = (float)d;
  if (isinf(f) && !isinf(d)) return fail_line(r, "value does not fit in float32");
  *out = f;
  *end = e;
  return 0;
}

static int parse_entry(mreader *r, int64_t *row, int64_t *col, float *val) {
  const char *s = r->line;
  if (!(s = parse_int(s, row)) || !(s = parse_int(s, col)))
    return fail_line(r, "expected an entry: row col value (integer indices)");
  if (index_in_range(r, *row, r->rows, "row") < 0) return -1;
  if (index_in_range(r, *col, r->cols, "column") < 0) return -1;
  *val = 1.0f;
  if (r->field != FIELD_PATTERN && parse_value(r, s, val, &s) < 0) return -1;
  if (*skip_space(s))
    return fail_line(r, r->field == FIELD_PATTERN
                            ? "unexpected text after 'row col' (a pattern matrix has no values)"
                            : "unexpected text after 'row col value'");
  if (r->sym == SYM_SKEW && *row == *col)
    return fail_line(r, "diagonal entry in a skew-symmetric matrix (its diagonal must be zero "
                        "and is not stored)");
  return 0;
}

static int add_entry(mreader *r, triplets *t, int64_t row, int64_t col, float val) {
  if (t->n == t->cap && grow(r, t) < 0) return -1;
  t->row[t->n] = (int32_t)(row - 1);
  t->col[t->n] = (int32_t)(col - 1);
  t->val[t->n] = val;
  t->n++;
  r->expanded += (r->sym != SYM_GENERAL && row != col) ? 2 : 1;
  if (r->expanded > INT32_MAX)
    return fail_line(r, "more than %d entries after symmetric expansion "
                     "(CSR row pointers are int32)", INT32_MAX);
  return 0;
}

static int read_entries(mreader *r, triplets *t) {
  while (t->n < r->nnz) {
    int rc = next_content_line(r);
    if (rc < 0) return -1;
    if (rc == 0)
      return fail(r, "file ends after %lld of the %lld entries declared on the size line "
                  "(line %lld)", (long long)t->n, (long long)r->nnz, (long long)r->size_lineno);
    int64_t row, col;
    float val = 0.0f;
    if (parse_entry(r, &row, &col, &val) < 0 || add_entry(r, t, row, col, val) < 0) return -1;
  }
  int rc = next_content_line(r);
  if (rc < 0) return -1;
  if (rc == 1)
    return fail_line(r, "more entries than the %lld declared on the size line (line %lld)",
                     (long long)r->nnz, (long long)r->size_lineno);
  return 0;
}

/* ----------------------------------------------------------------- CSR */

typedef struct {
  int32_t col;
  int32_t order; /* position in the row before sorting: keeps the sort stable */
  float val;
} col_val;

static int cmp_col_val(const void *a, const void *b) {
  const col_val *x = a, *y = b;
  if (x->col != y->col) return x->col < y->col ? -1 : 1;
  return (x->order > y->order) - (x->order < y->order);
}

static void insertion_sort(int32_t *col, float *val, int32_t n) {
  for (int32_t i = 1; i < n; i++) {
    int32_t c = col[i];
    float v = val[i];
    int32_t j = i;
    for (; j > 0 && col[j - 1] > c; j--) {
      col[j] = col[j - 1];
      val[j] = val[j - 1];
    }
    col[j] = c;
    val[j] = v;
  }
}

/* Sorts each row's columns (values follow, duplicates kept in file order).
 * Most files list entries column by column or row by row, which leaves every
 * row already sorted, so rows are checked before any sorting. */
static int sort_rows(mtx_csr *m) {
  col_val *scratch = NULL;
  int32_t scratch_cap = 0;
  for (int32_t i = 0; i < m->rows; i++) {
    int32_t lo = m->row_ptr[i], n = m->row_ptr[i + 1] - lo;
    int32_t *col = m->col_idx + lo;
    float *val = m->values + lo;
    int32_t k = 1;
    while (k < n && col[k - 1] <= col[k]) k++;
    if (k >= n) continue;
    if (n <= INSERTION_MAX) {
      insertion_sort(col, val, n);
      continue;
    }
    if (n > scratch_cap) {
      col_val *s = realloc(scratch, (size_t)n * sizeof *s);
      if (!s) {
        free(scratch);
        return -1;
      }
      scratch = s;
      scratch_cap = n;
    }
    for (int32_t j = 0; j < n; j++) scratch[j] = (col_val){col[j], j, val[j]};
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_col_val);
    for (int32_t j = 0; j < n; j++) {
      col[j] = scratch[j].col;
      val[j] = scratch[j].val;
    }
  }
  free(scratch);
  return 0;
}

/* Counting sort by row: count, prefix-sum, place (mirrored entries too). */
static int build_csr(mreader *r, const triplets *t, mtx_csr *m) {
  m->rows = (int32_t)r->rows;
  m->cols = (int32_t)r->cols;
  m->nnz = r->expanded;
  size_t nz = m->nnz ? (size_t)m->nnz : 1; /* never NULL, even when empty */
  m->row_ptr = calloc((size_t)m->rows + 1, sizeof *m->row_ptr);
  m->col_idx = malloc(nz * sizeof *m->col_idx);
  m->values = malloc(nz * sizeof *m->values);
  int32_t *next = malloc((size_t)m->rows * sizeof *next);
  if (!m->row_ptr || !m->col_idx || !m->values || !next) {
    free(next);
    return fail(r, "out of memory building the CSR matrix (%lld entries)", (long long)m->nnz);
  }
  bool mirror = r->sym != SYM_GENERAL;
  for (int64_t k = 0; k < t->n; k++) {
    m->row_ptr[t->row[k] + 1]++;
    if (mirror && t->row[k] != t->col[k]) m->row_ptr[t->col[k] + 1]++;
  }
  for (int32_t i = 0; i < m->rows; i++) {
    m->row_ptr[i + 1] += m->row_ptr[i];
    next[i] = m->row_ptr[i];
  }
  float sign = r->sym == SYM_SKEW ? -1.0f : 1.0f;
  for (int64_t k = 0; k < t->n; k++) {
    int32_t i = t->row[k], j = t->col[k], p = next[i]++;
    m->col_idx[p] = j;
    m->values[p] = t->val[k];
    if (mirror && i != j) {
      p = next[j]++;
      m->col_idx[p] = i;
      m->values[p] = sign * t->val[k];
    }
  }
  free(next);
  if (sort_rows(m) < 0) return fail(r, "out of memory sorting the rows");
  return 0;
}

/* ------------------------------------------------------------------ API */

static int read_all(mreader *r, mtx_csr *out) {
  triplets t = {0};
  int rc = -1;
  if (read_banner(r) == 0 && read_size(r) == 0 && read_entries(r, &t) == 0)
    rc = build_csr(r, &t, out);
  free(t.row);
  free(t.col);
  free(t.val);
  return rc;
}

int mtx_read_csr(const char *path, mtx_csr *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  mreader *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  r->path = path;
  r->err = err;
  r->errlen = errlen;
  errno = 0;
  r->f = gzopen(path, "rb");
  if (!r->f) {
    snprintf(err, errlen, "%s: %s", path, errno ? strerror(errno) : "cannot open (out of memory)");
    free(r);
    return -1;
  }
  gzbuffer(r->f, GZ_BUFFER);
  int rc = read_all(r, out);
  gzclose(r->f);
  free(r);
  if (rc < 0) mtx_free(out);
  return rc;
}

void mtx_free(mtx_csr *m) {
  if (!m) return;
  free(m->row_ptr);
  free(m->col_idx);
  free(m->values);
  memset(m, 0, sizeof *m);
}
