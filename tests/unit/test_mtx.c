/* test_mtx.c: the Matrix Market reader (client/mtx.c).
 *
 * Small hand-written files check every rule exactly; the two real matrices
 * in GKC_TEST_DATA and, when present, the 13 shared matrices in
 * GKC_SHARED_MATRICES check structure and the published sizes.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "mtx.h"
#include "test.h"
#include "tmpfile.h"

static char err[1024];

static const char *write_text(const char *name, const char *text) {
  const char *p = tpath(name);
  FILE *f = fopen(p, "wb");
  size_t n = strlen(text);
  if (!f || fwrite(text, 1, n, f) != n || fclose(f) != 0) TEST_FAIL("cannot write %s", p);
  return p;
}

static const char *write_gz(const char *name, const char *text) {
  const char *p = tpath(name);
  gzFile g = gzopen(p, "wb");
  if (!g) TEST_FAIL("gzopen %s", p);
  if (gzwrite(g, text, (unsigned)strlen(text)) != (int)strlen(text)) TEST_FAIL("gzwrite %s", p);
  if (gzclose(g) != Z_OK) TEST_FAIL("gzclose %s", p);
  return p;
}

/* Reads path and compares every CSR array exactly. */
static void expect_csr(const char *path, int32_t rows, int32_t cols, int64_t nnz,
                       const int32_t *row_ptr, const int32_t *col_idx, const float *values) {
  mtx_csr m;
  if (mtx_read_csr(path, &m, err, sizeof err) != 0) TEST_FAIL("%s", err);
  ASSERT_EQ(m.rows, rows);
  ASSERT_EQ(m.cols, cols);
  ASSERT_EQ(m.nnz, nnz);
  ASSERT(m.row_ptr && m.col_idx && m.values);
  for (int32_t i = 0; i <= rows; i++)
    if (m.row_ptr[i] != row_ptr[i]) TEST_FAIL("%s: row_ptr[%d] = %d, want %d", path, i, m.row_ptr[i], row_ptr[i]);
  for (int64_t k = 0; k < nnz; k++) {
    if (m.col_idx[k] != col_idx[k])
      TEST_FAIL("%s: col_idx[%lld] = %d, want %d", path, (long long)k, m.col_idx[k], col_idx[k]);
    if (m.values[k] != values[k])
      TEST_FAIL("%s: values[%lld] = %g, want %g", path, (long long)k, m.values[k], values[k]);
  }
  mtx_free(&m);
  ASSERT(m.row_ptr == NULL && m.nnz == 0);
}

/* Reads text (as a file) expecting an error that names the file and
 * contains want. */
static void expect_error(const char *text, const char *want) {
  const char *p = write_text("bad.mtx", text);
  mtx_csr m;
  if (mtx_read_csr(p, &m, err, sizeof err) == 0)
    TEST_FAIL("read succeeded, expected an error containing \"%s\" for:\n%s", want, text);
  ASSERT(m.row_ptr == NULL && m.col_idx == NULL && m.values == NULL);
  ASSERT_CONTAINS(err, p);
  ASSERT_CONTAINS(err, want);
}

/* ------------------------------------------------------------ accepted */

/* Unsorted input, an explicit zero, an empty row, comments and blank lines. */
static const char general_text[] =
    "%%MatrixMarket matrix coordinate real general\n"
    "% a comment\n"
    "%\n"
    "\n"
    "3 4 6\n"
    "3 4 2.5\n"
    "1 3 -1\n"
    "% a comment between entries\n"
    "3 1 0\n"
    "\n"
    "1 1 1e1\n"
    "3 2 7\n"
    "1 2 -.5\n";
static const int32_t general_rp[] = {0, 3, 3, 6};
static const int32_t general_ci[] = {0, 1, 2, 0, 1, 3};
static const float general_v[] = {10.0f, -0.5f, -1.0f, 0.0f, 7.0f, 2.5f};

static void test_general(void) {
  expect_csr(write_text("general.mtx", general_text), 3, 4, 6, general_rp, general_ci, general_v);
}

/* Lower triangle plus one upper entry: every off-diagonal entry is
 * mirrored, the diagonal is not. */
static void test_symmetric(void) {
  const char *p = write_text("sym.mtx",
                             "%%MatrixMarket matrix coordinate real symmetric\n"
                             "3 3 4\n"
                             "1 1 4\n"
                             "2 1 -1\n"
                             "3 3 5\n"
                             "2 3 0.25\n");
  const int32_t rp[] = {0, 2, 4, 6};
  const int32_t ci[] = {0, 1, 0, 2, 1, 2};
  const float v[] = {4, -1, -1, 0.25f, 0.25f, 5};
  expect_csr(p, 3, 3, 6, rp, ci, v);
}

static void test_skew(void) {
  const char *p = write_text("skew.mtx",
                             "%%MatrixMarket matrix coordinate real skew-symmetric\n"
                             "3 3 3\n"
                             "2 1 3\n"
                             "3 1 -2\n"
                             "3 2 1.5\n");
  const int32_t rp[] = {0, 2, 4, 6};
  const int32_t ci[] = {1, 2, 0, 2, 0, 1};
  const float v[] = {-3, 2, 3, -1.5f, -2, 1.5f};
  expect_csr(p, 3, 3, 6, rp, ci, v);
}

static void test_pattern_and_integer(void) {
  const char *p = write_text("pat.mtx",
                             "%%MatrixMarket matrix coordinate pattern general\n"
                             "2 3 3\n"
                             "2 3\n"
                             "1 2\n"
                             "2 1\n");
  const int32_t rp[] = {0, 1, 3};
  const int32_t ci[] = {1, 0, 2};
  const float ones[] = {1, 1, 1, 1, 1, 1};
  expect_csr(p, 2, 3, 3, rp, ci, ones);

  p = write_text("patsym.mtx",
                 "%%MatrixMarket matrix coordinate pattern symmetric\n"
                 "3 3 2\n"
                 "3 1\n"
                 "2 2\n");
  const int32_t srp[] = {0, 1, 2, 3};
  const int32_t sci[] = {2, 1, 0};
  expect_csr(p, 3, 3, 3, srp, sci, ones);

  p = write_text("int.mtx",
                 "%%MatrixMarket matrix coordinate integer general\n"
                 "2 2 3\n"
                 "1 1 -7\n"
                 "2 2 0\n"
                 "2 1 16777216\n");
  const int32_t irp[] = {0, 1, 3};
  const int32_t ici[] = {0, 0, 1};
  const float iv[] = {-7, 16777216.0f, 0};
  expect_csr(p, 2, 2, 3, irp, ici, iv);
}

/* Mixed-case banner, CRLF line ends, tabs, a comment longer than the
 * reader's line buffer, a final line with no newline. */
static void test_spellings(void) {
  static char text[20000];
  char *s = text;
  s += sprintf(s, "%%%%matrixmarket MATRIX Coordinate Real GENERAL\r\n%%");
  memset(s, 'x', 12000);
  s += 12000;
  sprintf(s, "\r\n2\t2  2\r\n  2\t1\t+1.5E+2 \r\n1 2 -2.5e-1");
  const int32_t rp[] = {0, 1, 2};
  const int32_t ci[] = {1, 0};
  const float v[] = {-0.25f, 150.0f};
  expect_csr(write_text("spell.mtx", text), 2, 2, 2, rp, ci, v);
}

/* Duplicates are kept (in file order); a long unsorted row goes through the
 * qsort path, a short one through insertion sort. */
static void test_sorting_and_duplicates(void) {
  static char text[8192];
  char *s = text;
  s += sprintf(s, "%%%%MatrixMarket matrix coordinate real general\n2 100 103\n");
  for (int c = 100; c >= 1; c--) s += sprintf(s, "1 %d %d\n", c, c);
  sprintf(s, "1 50 -50\n2 9 1\n2 3 2\n");
  mtx_csr m;
  const char *p = write_text("dup.mtx", text);
  if (mtx_read_csr(p, &m, err, sizeof err) != 0) TEST_FAIL("%s", err);
  ASSERT_EQ(m.nnz, 103);
  ASSERT_EQ(m.row_ptr[1], 101);
  for (int k = 0; k < 101; k++) {
    int want_col = k < 50 ? k : k - 1; /* column 49 (0-based) appears twice */
    ASSERT_EQ(m.col_idx[k], want_col);
  }
  ASSERT(m.values[49] == 50.0f && m.values[50] == -50.0f); /* file order kept */
  ASSERT_EQ(m.col_idx[101], 2);
  ASSERT_EQ(m.col_idx[102], 8);
  ASSERT(m.values[101] == 2.0f && m.values[102] == 1.0f);
  mtx_free(&m);
}

static void test_empty_matrix(void) {
  const int32_t rp[] = {0, 0, 0, 0};
  expect_csr(write_text("empty.mtx", "%%MatrixMarket matrix coordinate real general\n3 2 0\n"),
             3, 2, 0, rp, NULL, NULL);
}

static void test_gzip(void) {
  const char *p = write_gz("general.mtx.gz", general_text);
  expect_csr(p, 3, 4, 6, general_rp, general_ci, general_v);

  /* A gzip file cut short anywhere is an error, never a silently short
   * matrix; past the 10-byte gzip header it is reported as a read error. */
  FILE *f = fopen(p, "rb");
  static uint8_t buf[4096];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  const char *q = tpath("cut.mtx.gz");
  for (size_t cut = 1; cut < n; cut++) {
    f = fopen(q, "wb");
    ASSERT(fwrite(buf, 1, cut, f) == cut);
    fclose(f);
    mtx_csr m;
    if (mtx_read_csr(q, &m, err, sizeof err) == 0) TEST_FAIL("%s cut to %zu bytes was read", q, cut);
    ASSERT_CONTAINS(err, q);
    if (cut > 10) ASSERT_CONTAINS(err, "read error");
  }
}

/* --------------------------------------------------------------- errors */

#define BANNER "%%MatrixMarket matrix coordinate real general\n"

static void test_errors(void) {
  expect_error(BANNER "2 2 2\n1 1 1\n3 1 1\n", "line 4: row index 3 is out of range 1..2");
  expect_error(BANNER "%c\n2 2 2\n1 1 1\n1 0 1\n", "line 5: column index 0 is out of range 1..2");
  expect_error(BANNER "2 2 2\n1 1 1\n1 -1 1\n", "line 4: column index -1");
  expect_error(BANNER "2 2 3\n1 1 1\n2 2 1\n", "file ends after 2 of the 3 entries declared on the size line (line 2)");
  expect_error(BANNER "2 2 1\n1 1 1\n2 2 1\n", "line 4: more entries than the 1 declared");
  /* None declared: the first entry is one too many (nothing is stored). */
  expect_error(BANNER "2 2 0\n1 1 1\n", "line 3: more entries than the 0 declared");
  expect_error("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 0\n% c\n2 1\n",
               "line 4: more entries than the 0 declared");
  expect_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "'array' format is not supported");
  expect_error("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "complex matrices are not supported");
  expect_error("%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n", "hermitian");
  expect_error("%%MatrixMarket vector coordinate real general\n1 1 1\n1 1 1\n", "object 'vector'");
  expect_error("%%MatrixMarket matrix coordinate quaternion general\n", "unknown field 'quaternion'");
  expect_error("%%MatrixMarket matrix coordinate real lopsided\n", "unknown symmetry 'lopsided'");
  expect_error("%%MatrixMarket matrix coordinate real\n1 1 1\n1 1 1\n", "line 1: banner must be");
  expect_error("1 1 1\n1 1 1\n", "not a Matrix Market file");
  expect_error("", "empty file");
  expect_error(BANNER "% only comments\n", "file ends before the size line");
  expect_error(BANNER "2 2\n", "line 2: size line must be three integers");
  expect_error(BANNER "2 2 x\n", "line 2: size line must be three integers");
  expect_error(BANNER "0 2 0\n", "line 2: matrix is 0 x 2");
  expect_error(BANNER "2147483648 2 0\n", "rows and cols must be between 1 and 2147483647");
  expect_error(BANNER "2 2 -1\n", "nnz -1 must be between 0");
  expect_error(BANNER "2 2 1\n1 1 abc\n", "line 3: value 'abc' is not a number");
  expect_error(BANNER "2 2 1\n1 1 1.5x\n", "value '1.5x' is not a number");
  expect_error(BANNER "2 2 1\n1 1\n", "line 3: missing value");
  expect_error(BANNER "2 2 1\n1 1 1 2\n", "unexpected text after 'row col value'");
  expect_error(BANNER "2 2 1\n1.5 1 1\n", "line 3: expected an entry");
  expect_error(BANNER "2 2 1\n1 1 1e39\n", "does not fit in float32");
  expect_error("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n", "a pattern matrix has no values");
  expect_error("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 2 1\n", "line 3: diagonal entry in a skew-symmetric");

  /* A tiny file that declares 2e9 entries fails on the count, having
   * allocated only for what it read. */
  expect_error(BANNER "5 5 2000000000\n1 1 1\n2 2 2\n", "file ends after 2 of the 2000000000 entries");

  static char longline[6000];
  strcpy(longline, BANNER "1 1 1\n1 1 ");
  char *s = longline + strlen(longline);
  memset(s, '1', 5000);
  expect_error(longline, "line 3: line longer than");

  mtx_csr m;
  const char *p = tpath("missing.mtx");
  ASSERT(mtx_read_csr(p, &m, err, sizeof err) == -1);
  ASSERT_CONTAINS(err, p);
  ASSERT_CONTAINS(err, "No such file");
}

/* ---------------------------------------------------- real matrices */

/* What a well-formed CSR matrix must satisfy.  Returns the number of
 * empty rows and the longest row through the pointers. */
static void check_structure(const char *path, const mtx_csr *m, bool strictly_sorted,
                            int32_t *empty_rows, int32_t *max_row) {
  ASSERT_EQ(m->row_ptr[0], 0);
  ASSERT_EQ(m->row_ptr[m->rows], m->nnz);
  *empty_rows = 0;
  *max_row = 0;
  for (int32_t i = 0; i < m->rows; i++) {
    int32_t lo = m->row_ptr[i], hi = m->row_ptr[i + 1];
    if (hi < lo) TEST_FAIL("%s: row_ptr decreases at row %d", path, i);
    if (hi == lo) (*empty_rows)++;
    if (hi - lo > *max_row) *max_row = hi - lo;
    for (int32_t k = lo; k < hi; k++) {
      if (m->col_idx[k] < 0 || m->col_idx[k] >= m->cols)
        TEST_FAIL("%s: row %d: column %d out of range", path, i, m->col_idx[k]);
      if (k > lo && (strictly_sorted ? m->col_idx[k] <= m->col_idx[k - 1]
                                     : m->col_idx[k] < m->col_idx[k - 1]))
        TEST_FAIL("%s: row %d: columns not sorted at position %d", path, i, k);
      if (!isfinite(m->values[k])) TEST_FAIL("%s: row %d: non-finite value", path, i);
    }
  }
}

/* A(i,j) by binary search in sorted row i; NAN when absent. */
static float entry(const mtx_csr *m, int32_t i, int32_t j) {
  int32_t lo = m->row_ptr[i], hi = m->row_ptr[i + 1];
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (m->col_idx[mid] < j) lo = mid + 1;
    else hi = mid;
  }
  return lo < m->row_ptr[i + 1] && m->col_idx[lo] == j ? m->values[lo] : NAN;
}

static void check_symmetric(const char *path, const mtx_csr *m) {
  ASSERT_EQ(m->rows, m->cols);
  for (int32_t i = 0; i < m->rows; i++)
    for (int32_t k = m->row_ptr[i]; k < m->row_ptr[i + 1]; k++)
      if (entry(m, m->col_idx[k], i) != m->values[k])
        TEST_FAIL("%s: A(%d,%d) has no equal mirror entry", path, i, m->col_idx[k]);
}

static void test_data_dir(void) {
  const char *dir = getenv("GKC_TEST_DATA");
  if (!dir) TEST_FAIL("GKC_TEST_DATA is not set (ctest sets it to tests/data)");
  char path[1024];
  mtx_csr m;
  int32_t empty, max_row;

  snprintf(path, sizeof path, "%s/west0067.mtx", dir);
  if (mtx_read_csr(path, &m, err, sizeof err) != 0) TEST_FAIL("%s", err);
  ASSERT_EQ(m.rows, 67);
  ASSERT_EQ(m.cols, 67);
  ASSERT_EQ(m.nnz, 294);
  check_structure(path, &m, true, &empty, &max_row);
  ASSERT_EQ(empty, 0);
  ASSERT_EQ(max_row, 6);
  ASSERT(entry(&m, 4, 0) == -0.2788416f); /* the file's first entry: "5 1 -.2788416" */
  ASSERT(entry(&m, 60, 1) == 1.0f);       /* "61 2 1" */
  mtx_free(&m);

  snprintf(path, sizeof path, "%s/lp_ship04l.mtx", dir);
  if (mtx_read_csr(path, &m, err, sizeof err) != 0) TEST_FAIL("%s", err);
  ASSERT_EQ(m.rows, 402);
  ASSERT_EQ(m.cols, 2166);
  ASSERT_EQ(m.nnz, 6380);
  check_structure(path, &m, true, &empty, &max_row);
  ASSERT_EQ(empty, 42);
  ASSERT_EQ(max_row, 84);
  ASSERT(entry(&m, 0, 0) == -1.0f); /* "1 1 -1" */
  mtx_free(&m);
}

/* The figures of shared/matrices/SOURCES.md: rows, cols, "nnz full",
 * symmetry, empty rows, max/row. */
static const struct {
  const char *file;
  int32_t rows, cols;
  int64_t nnz_full;
  bool symmetric;
  int32_t empty_rows, max_row;
} shared[] = {
    {"west0067.mtx", 67, 67, 294, false, 0, 6},
    {"lp_ship04l.mtx", 402, 2166, 6380, false, 42, 84},
    {"1138_bus.mtx", 1138, 1138, 4054, true, 0, 18},
    {"bcsstk13.mtx", 2003, 2003, 83883, true, 0, 95},
    {"add32.mtx", 4960, 4960, 23884, false, 0, 32},
    {"ca-GrQc.mtx", 5242, 5242, 28980, true, 0, 81},
    {"bcsstk33.mtx", 8738, 8738, 591904, true, 0, 141},
    {"cage10.mtx", 11397, 11397, 150645, false, 0, 25},
    {"ca-CondMat.mtx", 23133, 23133, 186936, true, 0, 280},
    {"vsp_model1_crew1_cr42_south31.mtx", 45101, 45101, 379952, true, 0, 17663},
    {"p2p-Gnutella31.mtx", 62586, 62586, 147892, false, 46199, 78},
    {"delaunay_n16.mtx", 65536, 65536, 393150, true, 0, 17},
    {"luxembourg_osm.mtx", 114599, 114599, 239332, true, 0, 6},
};
#define N_SHARED (int)(sizeof shared / sizeof shared[0])

static int shared_index(const char *name) {
  for (int i = 0; i < N_SHARED; i++)
    if (strcmp(shared[i].file, name) == 0) return i;
  return -1;
}

static void check_shared_file(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  mtx_csr m;
  if (mtx_read_csr(path, &m, err, sizeof err) != 0) TEST_FAIL("%s", err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int32_t empty, max_row;
  int i = shared_index(name);
  check_structure(path, &m, i >= 0, &empty, &max_row);
  if (i >= 0) {
    ASSERT_EQ(m.rows, shared[i].rows);
    ASSERT_EQ(m.cols, shared[i].cols);
    ASSERT_EQ(m.nnz, shared[i].nnz_full);
    ASSERT_EQ(empty, shared[i].empty_rows);
    ASSERT_EQ(max_row, shared[i].max_row);
    if (shared[i].symmetric) check_symmetric(path, &m);
  }
  printf("  %-36s %7d x %-7d nnz %8lld  %.3f s\n", name, m.rows, m.cols, (long long)m.nnz,
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
  mtx_free(&m);
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Every *.mtx in the shared folder; the 13 listed must all be there.  The
 * folder is absent on a plain clone, and then this part is skipped. */
static void test_shared_dir(void) {
  const char *dir = getenv("GKC_SHARED_MATRICES");
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) {
    printf("test_mtx: no shared matrices at %s, skipping that part\n", dir ? dir : "(unset)");
    return;
  }
  bool seen[N_SHARED] = {false};
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!has_suffix(e->d_name, ".mtx")) continue;
    check_shared_file(dir, e->d_name);
    int i = shared_index(e->d_name);
    if (i >= 0) seen[i] = true;
  }
  closedir(d);
  for (int i = 0; i < N_SHARED; i++)
    if (!seen[i]) TEST_FAIL("%s/%s is listed in SOURCES.md but missing", dir, shared[i].file);
}

int main(void) {
  make_tmpdir("gkc_test_mtx");
  atexit(remove_tmpdir); /* also after a failed assertion (exit 1) */
  test_general();
  test_symmetric();
  test_skew();
  test_pattern_and_integer();
  test_spellings();
  test_sorting_and_duplicates();
  test_empty_matrix();
  test_gzip();
  test_errors();
  test_data_dir();
  test_shared_dir();
  printf("test_mtx: all passed\n");
  return 0;
}
