/* test_npy.c: the .npy reader and writer (client/npy.c). */
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npy.h"
#include "test.h"
#include "tmpfile.h"

static char err[1024];

static void write_bytes(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) TEST_FAIL("cannot write %s", path);
}

static size_t read_bytes(const char *path, uint8_t *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) TEST_FAIL("cannot open %s", path);
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

/* Builds a .npy file by hand: any version, any header text (used as is, no
 * padding added), then ndata bytes of data.  Returns the byte count. */
static size_t build_npy(uint8_t *buf, int major, const char *header, const void *data,
                        size_t ndata) {
  size_t hlen = strlen(header), n = 0;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major;
  buf[7] = 0;
  n = 8;
  buf[n++] = (uint8_t)(hlen & 0xff);
  buf[n++] = (uint8_t)(hlen >> 8);
  if (major >= 2) {
    buf[n++] = (uint8_t)(hlen >> 16);
    buf[n++] = (uint8_t)(hlen >> 24);
  }
  memcpy(buf + n, header, hlen);
  n += hlen;
  if (ndata) memcpy(buf + n, data, ndata);
  return n + ndata;
}

static const char *write_npy(const char *name, int major, const char *header, const void *data,
                             size_t ndata) {
  static uint8_t buf[8192];
  size_t n = build_npy(buf, major, header, data, ndata);
  const char *p = tpath(name);
  write_bytes(p, buf, n);
  return p;
}

/* Reads path expecting failure; returns the message. */
static const char *expect_fail(const char *path) {
  npy_array a;
  if (npy_read(path, &a, err, sizeof err) == 0) TEST_FAIL("%s: read succeeded, expected an error", path);
  ASSERT(a.data == NULL);
  ASSERT_CONTAINS(err, path);
  return err;
}

static const float six[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, 65504.0f};

/* ------------------------------------------------------------ round trip */

static void check_roundtrip(const char *name, int ndim, const int64_t *shape, int64_t count) {
  float data[64];
  for (int64_t i = 0; i < count; i++) data[i] = (float)i * 0.5f - 3.0f;
  const char *p = tpath(name);
  if (npy_write(p, ndim, shape, data, err, sizeof err) != 0) TEST_FAIL("write: %s", err);

  /* numpy's layout: 64-byte aligned data, header ends in '\n'. */
  struct stat st;
  ASSERT(stat(p, &st) == 0);
  ASSERT_EQ((st.st_size - count * 4) % 64, 0);
  uint8_t head[256];
  size_t n = read_bytes(p, head, sizeof head);
  ASSERT(n >= 64);
  size_t data_off = 10 + (size_t)(head[8] | head[9] << 8);
  ASSERT_EQ(data_off, st.st_size - count * 4);
  ASSERT_EQ(head[data_off - 1], '\n');

  npy_array a;
  if (npy_read(p, &a, err, sizeof err) != 0) TEST_FAIL("read: %s", err);
  ASSERT_EQ(a.ndim, ndim);
  for (int i = 0; i < ndim; i++) ASSERT_EQ(a.shape[i], shape[i]);
  ASSERT_EQ(a.count, count);
  if (count == 0) ASSERT(a.data == NULL);
  for (int64_t i = 0; i < count; i++) ASSERT(a.data[i] == data[i]);
  npy_free(&a);
  ASSERT(a.data == NULL && a.count == 0);
}

static void test_roundtrip(void) {
  int64_t s1[] = {5}, s2[] = {3, 4}, s3[] = {2, 3, 4}, e1[] = {0}, e3[] = {2, 0, 3};
  int64_t s8[NPY_MAX_DIMS] = {1, 2, 1, 2, 1, 2, 1, 2};
  check_roundtrip("d0.npy", 0, NULL, 1);
  check_roundtrip("d1.npy", 1, s1, 5);
  check_roundtrip("d2.npy", 2, s2, 12);
  check_roundtrip("d3.npy", 3, s3, 24);
  check_roundtrip("d8.npy", NPY_MAX_DIMS, s8, 16);
  check_roundtrip("e1.npy", 1, e1, 0);
  check_roundtrip("e3.npy", 3, e3, 0);
}

/* Byte-for-byte what numpy.save(f, numpy.zeros((3, 4), numpy.float32))
 * writes (numpy 1.24): the dict, 20 spare spaces for growing axis 0, padding
 * to 128 bytes, '\n'. */
static void test_exact_numpy_header(void) {
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  int64_t shape[] = {3, 4};
  float zeros[12] = {0};
  const char *p = tpath("exact.npy");
  if (npy_write(p, 2, shape, zeros, err, sizeof err) != 0) TEST_FAIL("write: %s", err);
  uint8_t b[256];
  size_t n = read_bytes(p, b, sizeof b);
  ASSERT_EQ(n, 128 + 48);
  ASSERT(memcmp(b, "\x93NUMPY\x01\x00\x76\x00", 10) == 0);
  ASSERT(memcmp(b + 10, dict, strlen(dict)) == 0);
  for (size_t i = 10 + strlen(dict); i < 127; i++) ASSERT_EQ(b[i], ' ');
  ASSERT_EQ(b[127], '\n');

  /* 0-d and 1-d tuples are spelled the Python way. */
  int64_t five[] = {5};
  p = tpath("exact1.npy");
  ASSERT(npy_write(p, 1, five, zeros, err, sizeof err) == 0);
  n = read_bytes(p, b, sizeof b);
  ASSERT_EQ(n, 128 + 20);
  ASSERT(memcmp(b + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 57) == 0);
  p = tpath("exact0.npy");
  ASSERT(npy_write(p, 0, NULL, zeros, err, sizeof err) == 0);
  n = read_bytes(p, b, sizeof b);
  ASSERT_EQ(n, 128 + 4);
  ASSERT(memcmp(b + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 55) == 0);
}

/* ---------------------------------------------------------- header forms */

static void expect_read(const char *path, int ndim, const int64_t *shape, const float *want,
                        int64_t count) {
  npy_array a;
  if (npy_read(path, &a, err, sizeof err) != 0) TEST_FAIL("%s: %s", path, err);
  ASSERT_EQ(a.ndim, ndim);
  for (int i = 0; i < ndim; i++) ASSERT_EQ(a.shape[i], shape[i]);
  ASSERT_EQ(a.count, count);
  for (int64_t i = 0; i < count; i++) ASSERT(a.data[i] == want[i]);
  npy_free(&a);
}

static void test_versions_and_spellings(void) {
  int64_t s23[] = {2, 3}, s6[] = {6};
  const char *std = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n";
  expect_read(write_npy("v1.npy", 1, std, six, sizeof six), 2, s23, six, 6);
  expect_read(write_npy("v2.npy", 2, std, six, sizeof six), 2, s23, six, 6);
  expect_read(write_npy("v3.npy", 3, std, six, sizeof six), 2, s23, six, 6);

  /* Keys in any order, odd whitespace, double quotes, no trailing comma. */
  const char *odd = "{ \"shape\" : ( 2 ,3 , ) ,'fortran_order':False,\t'descr' :'<f4'}\n";
  expect_read(write_npy("odd.npy", 1, odd, six, sizeof six), 2, s23, six, 6);
  const char *tight = "{'descr':'<f4','fortran_order':False,'shape':(6,)}";
  expect_read(write_npy("tight.npy", 1, tight, six, sizeof six), 1, s6, six, 6);

  /* Big-endian float32 is byte-swapped on the way in. */
  uint8_t be[sizeof six];
  memcpy(be, six, sizeof six);
  for (size_t i = 0; i < sizeof be; i += 4) {
    uint8_t t0 = be[i], t1 = be[i + 1];
    be[i] = be[i + 3]; be[i + 1] = be[i + 2]; be[i + 2] = t1; be[i + 3] = t0;
  }
  const char *big = "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }\n";
  expect_read(write_npy("big.npy", 1, big, be, sizeof be), 1, s6, six, 6);
}

/* -------------------------------------------------------------- errors */

static void test_dtype_errors(void) {
  double d[3] = {1, 2, 3};
  const char *p = write_npy("f8.npy", 1,
                            "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", d,
                            sizeof d);
  const char *m = expect_fail(p);
  ASSERT_CONTAINS(m, "'<f8' (float64)");
  ASSERT_CONTAINS(m, "float32 ('<f4')");
  ASSERT_CONTAINS(m, "numpy.float32");

  p = write_npy("i4.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n", d, 12);
  ASSERT_CONTAINS(expect_fail(p), "'<i4' (int32)");

  p = write_npy("fo.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", six,
                sizeof six);
  m = expect_fail(p);
  ASSERT_CONTAINS(m, "Fortran");
  ASSERT_CONTAINS(m, "C order");

  p = write_npy("rec.npy", 1,
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", six, 4);
  ASSERT_CONTAINS(expect_fail(p), "structured");
}

static void test_malformed_headers(void) {
  static const struct { const char *header, *msg; } cases[] = {
      {"hello world", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,) ", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing 'shape'"},
      {"{'fortran_order': False, 'shape': (6,)}", "missing 'descr'"},
      {"{'descr': '<f4', 'shape': (6,)}", "missing 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", "unexpected or repeated key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", "repeated key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", "non-negative integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (six,)}", "non-negative integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 6}", "must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6 6)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6)}", "more than 8 dimensions"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "too large"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (6,)}", "expected ':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", "unexpected text after '}'"},
      {"{'descr': '<f4", "unterminated string"},
      {"", "expected '{'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *p = write_npy("bad.npy", 1, cases[i].header, six, sizeof six);
    const char *m = expect_fail(p);
    ASSERT_CONTAINS(m, cases[i].msg);
  }
}

static void test_file_errors(void) {
  const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }\n";

  /* Short or long data names both byte counts. */
  const char *m = expect_fail(write_npy("short.npy", 1, hdr, six, 20));
  ASSERT_CONTAINS(m, "24 bytes of data");
  ASSERT_CONTAINS(m, "has 20 bytes");
  ASSERT_CONTAINS(m, "truncated");
  hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }\n";
  m = expect_fail(write_npy("long.npy", 1, hdr, six, sizeof six));
  ASSERT_CONTAINS(m, "20 bytes of data");
  ASSERT_CONTAINS(m, "has 24 bytes");

  /* A tiny file that claims 10^12 floats: rejected from the file size,
   * never allocated (ASan would flag a 4 TB malloc). */
  m = expect_fail(write_npy("huge.npy", 1,
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }\n",
                            six, sizeof six));
  ASSERT_CONTAINS(m, "4000000000000 bytes");
  m = expect_fail(write_npy("ovf.npy", 1,
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }\n",
                            six, sizeof six));
  ASSERT_CONTAINS(m, "overflows");

  m = expect_fail(write_npy("v9.npy", 9, hdr, six, 20));
  ASSERT_CONTAINS(m, "version 9.0");

  const char *p = tpath("magic.npy");
  write_bytes(p, "\x93NUMPZ\x01\x00\x10\x00{}              ", 26);
  ASSERT_CONTAINS(expect_fail(p), "magic");
  p = tpath("tiny.npy");
  write_bytes(p, "\x93NUM", 4);
  ASSERT_CONTAINS(expect_fail(p), "not a .npy file");
  p = tpath("hlen.npy");
  write_bytes(p, "\x93NUMPY\x01\x00\xff\x7f{'descr'", 17);
  ASSERT_CONTAINS(expect_fail(p), "header length 32767");
  p = tpath("text.npy");
  write_bytes(p, "x,y\n1,2\n3,4\n", 12);
  ASSERT_CONTAINS(expect_fail(p), "magic");

  p = tpath("missing.npy");
  ASSERT_CONTAINS(expect_fail(p), "No such file");
  ASSERT_CONTAINS(expect_fail(tmpdir), "directory");
}

/* Pipes have no size to check in advance: data is read as it arrives. */
static const char *pipe_path(const uint8_t *buf, size_t n, pid_t *child) {
  int fds[2];
  if (pipe(fds) != 0) TEST_FAIL("pipe");
  *child = fork();
  if (*child < 0) TEST_FAIL("fork");
  if (*child == 0) {
    close(fds[0]);
    size_t off = 0;
    while (off < n) {
      ssize_t w = write(fds[1], buf + off, n - off);
      if (w <= 0) _exit(1);
      off += (size_t)w;
    }
    _exit(0);
  }
  close(fds[1]);
  static char path[64];
  snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
  return path;
}

static void pipe_done(const char *path, pid_t child) {
  close(atoi(path + strlen("/dev/fd/")));
  int status;
  waitpid(child, &status, 0);
}

static void test_pipe(void) {
  static uint8_t buf[4096];
  int64_t s6[] = {6};
  pid_t child;
  size_t n = build_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }\n",
                       six, sizeof six);
  const char *p = pipe_path(buf, n, &child);
  expect_read(p, 1, s6, six, 6);
  pipe_done(p, child);

  n = build_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }\n",
                six, sizeof six);
  p = pipe_path(buf, n, &child);
  const char *m = expect_fail(p);
  ASSERT_CONTAINS(m, "only 24 bytes followed");
  pipe_done(p, child);

  /* An empty big-endian array: nothing to read, nothing to swap, no data. */
  int64_t s20[] = {2, 0};
  n = build_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 0), }\n", NULL, 0);
  p = pipe_path(buf, n, &child);
  npy_array a;
  if (npy_read(p, &a, err, sizeof err) != 0) TEST_FAIL("%s: %s", p, err);
  ASSERT_EQ(a.ndim, 2);
  ASSERT_EQ(a.shape[0], s20[0]);
  ASSERT_EQ(a.shape[1], s20[1]);
  ASSERT_EQ(a.count, 0);
  ASSERT(a.data == NULL);
  npy_free(&a);
  pipe_done(p, child);

  /* ... and one followed by bytes it does not declare. */
  n = build_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (0,), }\n", six, 4);
  p = pipe_path(buf, n, &child);
  ASSERT_CONTAINS(expect_fail(p), "more than the 0 bytes of data the header declares");
  pipe_done(p, child);
}

static void test_write_errors(void) {
  int64_t shape[NPY_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const char *p = tpath("nodir/x.npy");
  ASSERT(npy_write(p, 1, shape, six, err, sizeof err) == -1);
  ASSERT_CONTAINS(err, p);
  p = tpath("w.npy");
  ASSERT(npy_write(p, NPY_MAX_DIMS + 1, shape, six, err, sizeof err) == -1);
  ASSERT_CONTAINS(err, "dimensions");
  int64_t neg[] = {-1};
  ASSERT(npy_write(p, 1, neg, six, err, sizeof err) == -1);
  ASSERT_CONTAINS(err, "invalid shape");
  ASSERT(npy_write(p, 1, shape, NULL, err, sizeof err) == -1);
  ASSERT_CONTAINS(err, "no data");

  /* A full disk is reported, and a device is never unlinked. */
  if (access("/dev/full", W_OK) == 0) {
    ASSERT(npy_write("/dev/full", 1, shape, six, err, sizeof err) == -1);
    ASSERT_CONTAINS(err, "/dev/full: write failed");
    ASSERT(access("/dev/full", F_OK) == 0);
  }
}

/* npy_read_checked: the check sees the header's shape before any data is
 * read; its refusal is returned as is, with nothing allocated; its consent
 * reads the file as npy_read does.  Over a pipe the refusal comes after the
 * header alone (the data never arrives). */
typedef struct {
  int calls, refuse, ndim;
  int64_t shape[NPY_MAX_DIMS], count;
} seen;

static int record(void *ctx, int ndim, const int64_t *shape, int64_t count) {
  seen *s = ctx;
  s->calls++;
  s->ndim = ndim;
  memcpy(s->shape, shape, sizeof s->shape);
  s->count = count;
  return s->refuse;
}

static void test_checked(void) {
  const char *p = tpath("checked.npy");
  int64_t shape[2] = {2, 3};
  const float data[6] = {1, -2, 3.5f, 4, 5, 6.25f};
  if (npy_write(p, 2, shape, data, err, sizeof err)) TEST_FAIL("write: %s", err);
  npy_array a;
  seen s = {0};
  ASSERT_EQ(npy_read_checked(p, &a, record, &s, err, sizeof err), 0);
  ASSERT(s.calls == 1 && s.ndim == 2 && s.shape[0] == 2 && s.shape[1] == 3 && s.count == 6);
  ASSERT(a.count == 6 && memcmp(a.data, data, sizeof data) == 0);
  npy_free(&a);
  s = (seen){.refuse = 7};
  ASSERT_EQ(npy_read_checked(p, &a, record, &s, err, sizeof err), 7);
  ASSERT(s.calls == 1 && a.data == NULL && a.count == 0);

  /* A header that promises 4e12 bytes over a pipe: refused, not read. */
  static uint8_t buf[4096];
  pid_t child;
  size_t n = build_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }\n",
                       six, sizeof six);
  const char *pp = pipe_path(buf, n, &child);
  s = (seen){.refuse = 1};
  ASSERT_EQ(npy_read_checked(pp, &a, record, &s, err, sizeof err), 1);
  ASSERT(s.calls == 1 && s.count == 1000000000000LL && a.data == NULL);
  pipe_done(pp, child);

  /* A regular file whose size disagrees with its header is reported as such
   * (a usage error), without asking the check. */
  n = build_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }\n",
                six, sizeof six);
  write_bytes(tpath("short.npy"), buf, n);
  s = (seen){.refuse = 1};
  ASSERT_EQ(npy_read_checked(tpath("short.npy"), &a, record, &s, err, sizeof err), -1);
  ASSERT(s.calls == 0);
}

int main(void) {
  make_tmpdir("gkc_test_npy");
  atexit(remove_tmpdir); /* also after a failed assertion (exit 1) */
  test_roundtrip();
  test_exact_numpy_header();
  test_versions_and_spellings();
  test_dtype_errors();
  test_malformed_headers();
  test_file_errors();
  test_pipe();
  test_write_errors();
  test_checked();
  printf("test_npy: all passed\n");
  return 0;
}
