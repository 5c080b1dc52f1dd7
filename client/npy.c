/* npy.c: NumPy .npy reader and writer for float32, see npy.h.
 *
 * Format (numpy/lib/format.py): "\x93NUMPY", major, minor, a little-endian
 * header length (uint16 for 1.0, uint32 for 2.0 and 3.0), then a Python dict
 * literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and a final '\n', then the raw data in C order.
 */
#include "npy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
/* numpy refuses headers over 10000 bytes unless told otherwise; a float32
 * array of at most NPY_MAX_DIMS dims never needs more than a few hundred. */
#define MAX_HEADER_LEN 65536
#define ARRAY_ALIGN 64
/* numpy pads the header so the first axis can grow in place up to this many
 * digits; we copy that so our files are byte-identical to numpy.save's. */
#define GROWTH_AXIS_MAX_DIGITS 21
/* Non-regular files (pipes) are read in chunks, so a lying header cannot
 * make us allocate more than the bytes that actually arrive. */
#define PIPE_CHUNK (1u << 20)

static bool host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

static void swap4(void *data, int64_t count) {
  uint8_t *p = (uint8_t *)data;
  for (int64_t i = 0; i < count; i++, p += 4) {
    uint8_t t0 = p[0], t1 = p[1];
    p[0] = p[3]; p[1] = p[2]; p[2] = t1; p[3] = t0;
  }
}

static void swap8(void *data, int64_t count) {
  uint8_t *p = (uint8_t *)data;
  for (int64_t i = 0; i < count; i++, p += 8)
    for (int k = 0; k < 4; k++) {
      uint8_t t = p[k];
      p[k] = p[7 - k];
      p[7 - k] = t;
    }
}

/* ---------------------------------------------------------------- header */

/* What the header dict says, before we decide whether we can read it. */
typedef struct {
  char descr[64];
  bool have_descr, have_fortran, have_shape;
  bool fortran_order;
  int ndim;
  int64_t shape[NPY_MAX_DIMS];
} npy_header;

typedef struct {
  const char *p, *end;
  const char *path;
  char *err;
  size_t errlen;
} hparser;

static int hfail(hparser *h, const char *what) {
  snprintf(h->err, h->errlen, "%s: malformed .npy header: %s", h->path, what);
  return -1;
}

static void skip_ws(hparser *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
    h->p++;
}

/* Consumes c (after optional whitespace) if it is next. */
static bool accept(hparser *h, char c) {
  skip_ws(h);
  if (h->p < h->end && *h->p == c) {
    h->p++;
    return true;
  }
  return false;
}

/* A Python string literal in ' or " quotes; numpy never writes escapes in
 * the keys or descr we accept, so a backslash is simply an error. */
static int parse_str(hparser *h, char *out, size_t outlen) {
  skip_ws(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return hfail(h, "expected a quoted string");
  char q = *h->p++;
  size_t n = 0;
  while (h->p < h->end && *h->p != q) {
    if (*h->p == '\\' || *h->p == '\n') return hfail(h, "unsupported character in a string");
    if (n + 1 >= outlen) return hfail(h, "string too long");
    out[n++] = *h->p++;
  }
  if (h->p >= h->end) return hfail(h, "unterminated string");
  h->p++;
  out[n] = '\0';
  return 0;
}

static int parse_bool(hparser *h, bool *out) {
  skip_ws(h);
  size_t left = (size_t)(h->end - h->p);
  if (left >= 4 && memcmp(h->p, "True", 4) == 0) { *out = true; h->p += 4; return 0; }
  if (left >= 5 && memcmp(h->p, "False", 5) == 0) { *out = false; h->p += 5; return 0; }
  return hfail(h, "'fortran_order' must be True or False");
}

/* A non-negative decimal integer that fits in int64 (Python may append 'L'
 * in files written by Python 2). */
static int parse_dim(hparser *h, int64_t *out) {
  skip_ws(h);
  if (h->p >= h->end || *h->p < '0' || *h->p > '9')
    return hfail(h, "'shape' must hold non-negative integers");
  int64_t v = 0;
  while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
    int d = *h->p++ - '0';
    if (v > (INT64_MAX - d) / 10) return hfail(h, "a dimension in 'shape' is too large");
    v = v * 10 + d;
  }
  if (h->p < h->end && *h->p == 'L') h->p++;
  *out = v;
  return 0;
}

/* "()", "(5,)", "(3, 4)", "(3, 4,)" */
static int parse_shape(hparser *h, npy_header *hd) {
  if (!accept(h, '(')) return hfail(h, "'shape' must be a tuple");
  hd->ndim = 0;
  while (!accept(h, ')')) {
    if (hd->ndim == NPY_MAX_DIMS) {
      snprintf(h->err, h->errlen, "%s: arrays of more than %d dimensions are not supported",
               h->path, NPY_MAX_DIMS);
      return -1;
    }
    if (parse_dim(h, &hd->shape[hd->ndim]) < 0) return -1;
    hd->ndim++;
    if (accept(h, ')')) break;
    if (!accept(h, ',')) return hfail(h, "expected ',' or ')' in 'shape'");
  }
  return 0;
}

static int parse_entry(hparser *h, npy_header *hd) {
  char key[32];
  if (parse_str(h, key, sizeof key) < 0) return -1;
  if (!accept(h, ':')) return hfail(h, "expected ':' after a key");
  if (strcmp(key, "descr") == 0 && !hd->have_descr) {
    hd->have_descr = true;
    skip_ws(h);
    if (h->p < h->end && *h->p == '[') {
      snprintf(h->err, h->errlen, "%s: structured dtype (a list of fields in 'descr') is not "
               "supported; gkc needs a plain float32 ('<f4') array", h->path);
      return -1;
    }
    return parse_str(h, hd->descr, sizeof hd->descr);
  }
  if (strcmp(key, "fortran_order") == 0 && !hd->have_fortran) {
    hd->have_fortran = true;
    return parse_bool(h, &hd->fortran_order);
  }
  if (strcmp(key, "shape") == 0 && !hd->have_shape) {
    hd->have_shape = true;
    return parse_shape(h, hd);
  }
  snprintf(h->err, h->errlen, "%s: malformed .npy header: unexpected or repeated key '%s'",
           h->path, key);
  return -1;
}

/* The whole dict: keys in any order, whitespace anywhere, trailing comma
 * allowed, only padding after the closing brace. */
static int parse_header(hparser *h, npy_header *hd) {
  memset(hd, 0, sizeof *hd);
  if (!accept(h, '{')) return hfail(h, "expected '{'");
  while (!accept(h, '}')) {
    if (parse_entry(h, hd) < 0) return -1;
    if (accept(h, '}')) break;
    if (!accept(h, ',')) return hfail(h, "expected ',' or '}'");
  }
  skip_ws(h);
  if (h->p != h->end) return hfail(h, "unexpected text after '}'");
  if (!hd->have_descr) return hfail(h, "missing 'descr'");
  if (!hd->have_fortran) return hfail(h, "missing 'fortran_order'");
  if (!hd->have_shape) return hfail(h, "missing 'shape'");
  return 0;
}

/* --------------------------------------------------------------- dtype */

/* A human name for a numpy type string like '<f8', for the error message. */
static const char *dtype_name(const char *descr) {
  static const struct { const char *code, *name; } names[] = {
      {"f2", "float16"}, {"f4", "float32"}, {"f8", "float64"}, {"f16", "float128"},
      {"i1", "int8"},    {"i2", "int16"},   {"i4", "int32"},   {"i8", "int64"},
      {"u1", "uint8"},   {"u2", "uint16"},  {"u4", "uint32"},  {"u8", "uint64"},
      {"b1", "bool"},    {"c8", "complex64"}, {"c16", "complex128"},
      {"c32", "complex256"}, {"O", "Python objects"},
  };
  const char *code = descr;
  if (*code == '<' || *code == '>' || *code == '|' || *code == '=') code++;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(code, names[i].code) == 0) return names[i].name;
  if (*code == 'U') return "unicode string";
  if (*code == 'S' || *code == 'a') return "byte string";
  if (*code == 'M' || *code == 'm') return "datetime";
  return NULL;
}

/* Returns 0 and sets *swap when the data must be byte-swapped and *esize
 * (4, or 8 for float64 where any), or -1. */
static int check_dtype(const char *path, const npy_header *hd, bool any, bool *swap, int *esize,
                       char *err, size_t errlen) {
  bool little = strcmp(hd->descr, "<f4") == 0;
  *esize = 4;
  if (any && (strcmp(hd->descr, "<f8") == 0 || strcmp(hd->descr, ">f8") == 0)) {
    little = hd->descr[0] == '<';
    *esize = 8;
  } else if (!little && strcmp(hd->descr, ">f4") != 0) {
    const char *name = dtype_name(hd->descr);
    snprintf(err, errlen,
             "%s: dtype '%s'%s%s%s is not supported%s; gkc needs float32 ('<f4')%s, "
             "e.g. numpy.asarray(x, dtype=numpy.float32)",
             path, hd->descr, name ? " (" : "", name ? name : "", name ? ")" : "",
             any ? "" : " here", any ? " or float64 ('<f8')" : "");
    return -1;
  }
  if (hd->fortran_order) {
    snprintf(err, errlen,
             "%s: array is in Fortran (column-major) order; gkc needs C order, "
             "e.g. numpy.ascontiguousarray(x)", path);
    return -1;
  }
  *swap = little != host_is_little_endian();
  return 0;
}

/* Product of the shape, or -1 when count * 4 bytes would not fit in int64
 * or size_t. */
static int64_t shape_count(int ndim, const int64_t *shape) {
  int64_t limit = INT64_MAX / 4;
  if ((uint64_t)limit > SIZE_MAX / 4) limit = (int64_t)(SIZE_MAX / 4);
  int64_t count = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] == 0) return 0; /* an empty axis makes the rest irrelevant */
  }
  for (int i = 0; i < ndim; i++) {
    if (count > limit / shape[i]) return -1;
    count *= shape[i];
  }
  return count;
}

/* ---------------------------------------------------------------- read */

typedef struct {
  FILE *f;
  const char *path;
  bool regular;
  int64_t size;  /* file size when regular */
  char *err;
  size_t errlen;
  npy_check_fn check; /* may be NULL */
  void *ctx;
  bool any;      /* float64 files accepted */
  int esize;     /* the file's element size: 4, or 8 for float64 */
} reader;

static int read_exact(reader *r, void *buf, size_t n, const char *what) {
  size_t got = fread(buf, 1, n, r->f);
  if (got == n) return 0;
  if (ferror(r->f))
    snprintf(r->err, r->errlen, "%s: read error in %s: %s", r->path, what, strerror(errno));
  else
    snprintf(r->err, r->errlen, "%s: file ends inside the %s (not a complete .npy file)",
             r->path, what);
  return -1;
}

/* Reads the magic, version and header length; returns the offset where the
 * header dict starts (10 or 12), or -1. */
static int read_preamble(reader *r, uint32_t *hlen) {
  uint8_t pre[12];
  if (r->regular && r->size < 10) {
    snprintf(r->err, r->errlen, "%s: not a .npy file (only %lld bytes)", r->path,
             (long long)r->size);
    return -1;
  }
  if (read_exact(r, pre, 10, "file preamble") < 0) return -1;
  if (memcmp(pre, MAGIC, MAGIC_LEN) != 0) {
    snprintf(r->err, r->errlen, "%s: not a .npy file (missing the \\x93NUMPY magic)", r->path);
    return -1;
  }
  int major = pre[6], minor = pre[7];
  if (major == 1 && minor == 0) {
    *hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    return 10;
  }
  if ((major == 2 || major == 3) && minor == 0) {
    if (read_exact(r, pre + 10, 2, "file preamble") < 0) return -1;
    *hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 |
            (uint32_t)pre[11] << 24;
    return 12;
  }
  snprintf(r->err, r->errlen, "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)",
           r->path, major, minor);
  return -1;
}

static int read_header(reader *r, npy_header *hd, int64_t *data_off) {
  uint32_t hlen;
  int pre = read_preamble(r, &hlen);
  if (pre < 0) return -1;
  if (hlen > MAX_HEADER_LEN || (r->regular && (int64_t)hlen > r->size - pre)) {
    snprintf(r->err, r->errlen, "%s: malformed .npy header: declared header length %u "
             "exceeds the file size or the %d-byte limit", r->path, hlen, MAX_HEADER_LEN);
    return -1;
  }
  char *text = malloc(hlen ? hlen : 1);
  if (!text) {
    snprintf(r->err, r->errlen, "%s: out of memory", r->path);
    return -1;
  }
  int rc = read_exact(r, text, hlen, "header");
  if (rc == 0) {
    hparser h = {text, text + hlen, r->path, r->err, r->errlen};
    rc = parse_header(&h, hd);
  }
  free(text);
  *data_off = pre + (int64_t)hlen;
  return rc;
}

/* Regular files: the size is known, so check it before allocating. */
static int read_data_regular(reader *r, int64_t data_off, int64_t count, void **out) {
  int64_t want = count * r->esize, have = r->size - data_off;
  if (have != want) {
    snprintf(r->err, r->errlen, "%s: header says %lld %s values (%lld bytes of data) but "
             "the file has %lld bytes of data%s", r->path, (long long)count,
             r->esize == 8 ? "float64" : "float32", (long long)want,
             (long long)have, have < want ? " (truncated file?)" : "");
    return -1;
  }
  if (count == 0) return 0;
  char *d = malloc((size_t)want);
  if (!d) {
    snprintf(r->err, r->errlen, "%s: out of memory for %lld bytes", r->path, (long long)want);
    return -1;
  }
  if (read_exact(r, d, (size_t)want, "data") < 0) {
    free(d);
    return -1;
  }
  *out = d;
  return 0;
}

/* Pipes: grow the buffer as bytes arrive, so memory follows the data. */
static int read_data_stream(reader *r, int64_t count, void **out) {
  size_t want = (size_t)count * (size_t)r->esize, have = 0, cap = 0;
  char *d = NULL;
  while (have < want) {
    if (have == cap) {
      size_t ncap = cap ? (cap < want / 2 ? cap * 2 : want) : (want < PIPE_CHUNK ? want : PIPE_CHUNK);
      char *nd = realloc(d, ncap);
      if (!nd) {
        free(d);
        snprintf(r->err, r->errlen, "%s: out of memory", r->path);
        return -1;
      }
      d = nd;
      cap = ncap;
    }
    size_t got = fread(d + have, 1, cap - have, r->f);
    have += got;
    if (got == 0) break;
  }
  if (have < want) {
    free(d);
    snprintf(r->err, r->errlen, "%s: header says %lld %s values (%zu bytes of data) but "
             "only %zu bytes followed%s", r->path, (long long)count,
             r->esize == 8 ? "float64" : "float32", want, have,
             ferror(r->f) ? " (read error)" : " (truncated file?)");
    return -1;
  }
  if (fgetc(r->f) != EOF) {
    free(d);
    snprintf(r->err, r->errlen, "%s: more than the %zu bytes of data the header declares",
             r->path, want);
    return -1;
  }
  *out = d;
  return 0;
}

static int read_open(reader *r, npy_array *out) {
  struct stat st;
  if (fstat(fileno(r->f), &st) != 0) {
    snprintf(r->err, r->errlen, "%s: %s", r->path, strerror(errno));
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    snprintf(r->err, r->errlen, "%s: is a directory, not a .npy file", r->path);
    return -1;
  }
  r->regular = S_ISREG(st.st_mode);
  r->size = (int64_t)st.st_size;

  npy_header hd;
  int64_t data_off;
  bool swap;
  if (read_header(r, &hd, &data_off) < 0) return -1;
  if (check_dtype(r->path, &hd, r->any, &swap, &r->esize, r->err, r->errlen) < 0) return -1;
  int64_t count = shape_count(hd.ndim, hd.shape);
  if (count > INT64_MAX / 8 || (uint64_t)count > SIZE_MAX / 8) count = -1; /* room for 8 bytes each */
  if (count < 0) {
    snprintf(r->err, r->errlen, "%s: shape is too large (element count overflows)", r->path);
    return -1;
  }
  /* A regular file whose size disagrees with the header is reported as
   * such (without allocating) by read_data_regular, not to check. */
  out->f64 = r->esize == 8;
  if (r->check && !(r->regular && r->size - data_off != count * r->esize)) {
    int crc = r->check(r->ctx, hd.ndim, hd.shape, count);
    if (crc) {
      out->f64 = 0;
      return crc;
    }
  }
  void *data = NULL;
  int rc = r->regular ? read_data_regular(r, data_off, count, &data)
                      : read_data_stream(r, count, &data);
  if (rc < 0) {
    out->f64 = 0;
    return -1;
  }
  if (swap && r->esize == 4) swap4(data, count);
  if (swap && r->esize == 8) swap8(data, count);
  out->ndim = hd.ndim;
  memcpy(out->shape, hd.shape, sizeof hd.shape);
  out->count = count;
  if (out->f64) out->data64 = data;
  else out->data = data;
  return 0;
}

static int read_path(const char *path, npy_array *out, npy_check_fn check, void *ctx, bool any,
                     char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  reader r = {f, path, false, 0, err, errlen, check, ctx, any, 4};
  int rc = read_open(&r, out);
  fclose(f);
  return rc;
}

int npy_read_checked(const char *path, npy_array *out, npy_check_fn check, void *ctx, char *err,
                     size_t errlen) {
  return read_path(path, out, check, ctx, false, err, errlen);
}

int npy_read_any(const char *path, npy_array *out, npy_check_fn check, void *ctx, char *err,
                 size_t errlen) {
  return read_path(path, out, check, ctx, true, err, errlen);
}

int npy_read(const char *path, npy_array *out, char *err, size_t errlen) {
  return npy_read_checked(path, out, NULL, NULL, err, errlen);
}

void npy_free(npy_array *a) {
  if (!a) return;
  free(a->data);
  free(a->data64);
  memset(a, 0, sizeof *a);
}

/* --------------------------------------------------------------- write */

/* The dict exactly as numpy 1.24+ writes it, including the spare spaces for
 * growing axis 0 and the padding to a 64-byte boundary.  Returns the
 * length of the header text (dict + padding + '\n'), or -1. */
static int format_header(int ndim, const int64_t *shape, const char *descr, char *buf,
                         size_t buflen) {
  char tuple[NPY_MAX_DIMS * 24 + 4];
  size_t n = 0;
  tuple[n++] = '(';
  for (int i = 0; i < ndim; i++)
    n += (size_t)snprintf(tuple + n, sizeof tuple - n, "%s%lld", i ? ", " : "",
                          (long long)shape[i]);
  if (ndim == 1) tuple[n++] = ',';  /* Python's one-element tuple: (5,) */
  tuple[n++] = ')';
  tuple[n] = '\0';

  int len = snprintf(buf, buflen, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                     tuple);
  if (ndim > 0) {
    int digits = snprintf(NULL, 0, "%lld", (long long)shape[0]);
    for (int i = digits; i < GROWTH_AXIS_MAX_DIGITS; i++) buf[len++] = ' ';
  }
  /* numpy: padlen = 64 - ((10 + len + 1) % 64), so a full 64 when aligned. */
  int pad = ARRAY_ALIGN - ((MAGIC_LEN + 4 + len + 1) % ARRAY_ALIGN);
  memset(buf + len, ' ', (size_t)pad);
  len += pad;
  buf[len++] = '\n';
  return len;
}

static int write_all(FILE *f, int ndim, const int64_t *shape, const void *data, int esize,
                     int64_t count) {
  char header[512];
  int hlen = format_header(ndim, shape, esize == 8 ? "<f8" : "<f4", header, sizeof header);
  uint8_t pre[10];
  memcpy(pre, MAGIC, MAGIC_LEN);
  pre[6] = 1;
  pre[7] = 0;
  pre[8] = (uint8_t)(hlen & 0xff);
  pre[9] = (uint8_t)(hlen >> 8);
  if (fwrite(pre, 1, sizeof pre, f) != sizeof pre) return -1;
  if (fwrite(header, 1, (size_t)hlen, f) != (size_t)hlen) return -1;
  if (count == 0) return 0;
  if (host_is_little_endian())
    return fwrite(data, (size_t)esize, (size_t)count, f) == (size_t)count ? 0 : -1;
  for (int64_t i = 0; i < count; i++) { /* big-endian host: swap on the way out */
    unsigned char v[8];
    memcpy(v, (const char *)data + (size_t)i * (size_t)esize, (size_t)esize);
    if (esize == 8) swap8(v, 1);
    else swap4(v, 1);
    if (fwrite(v, (size_t)esize, 1, f) != 1) return -1;
  }
  return 0;
}

static int write_path(const char *path, int ndim, const int64_t *shape, const void *data, int esize,
                      char *err, size_t errlen);

int npy_write(const char *path, int ndim, const int64_t *shape, const float *data,
              char *err, size_t errlen) {
  return write_path(path, ndim, shape, data, 4, err, errlen);
}

int npy_write_f64(const char *path, int ndim, const int64_t *shape, const double *data,
                  char *err, size_t errlen) {
  return write_path(path, ndim, shape, data, 8, err, errlen);
}

static int write_path(const char *path, int ndim, const int64_t *shape, const void *data, int esize,
                      char *err, size_t errlen) {
  if (ndim < 0 || ndim > NPY_MAX_DIMS || (ndim > 0 && !shape)) {
    snprintf(err, errlen, "%s: cannot write an array of %d dimensions (0..%d supported)", path,
             ndim, NPY_MAX_DIMS);
    return -1;
  }
  int64_t count = shape_count(ndim, shape);
  if (count < 0) {
    snprintf(err, errlen, "%s: invalid shape (negative dimension or too many elements)", path);
    return -1;
  }
  if (count > 0 && !data) {
    snprintf(err, errlen, "%s: no data to write", path);
    return -1;
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  bool regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
  int rc = write_all(f, ndim, shape, data, esize, count);
  int saved = errno;
  if (fclose(f) != 0 && rc == 0) {
    rc = -1;
    saved = errno;
  }
  if (rc < 0) {
    snprintf(err, errlen, "%s: write failed: %s", path, strerror(saved));
    /* A partial file would later read back as truncated; but never remove
     * what is not a plain file (/dev/full, a pipe). */
    if (regular) unlink(path);
  }
  return rc;
}
