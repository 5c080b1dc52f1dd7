/* npy.h: read and write NumPy .npy files holding float32 (or float64)
 * arrays.
 *
 * Only float32 in C order is accepted ('<f4'; big-endian '>f4' is swapped on
 * the way in), and float64 ('<f8', '>f8') by the readers that say so
 * (npy_read_any); any other dtype, Fortran order, a malformed header, or a data
 * size that differs from what the shape says is an error whose message says
 * exactly what the file holds and what was expected.  Nothing is allocated
 * from the header's word alone: the data size is checked against the file
 * size first (pipes are read as the bytes arrive).  Versions 1.0, 2.0 and
 * 3.0 of the format are read; version 1.0 is written, byte for byte as
 * numpy.save writes it (checked against numpy 1.24; data 64-byte aligned).
 */
#ifndef NPY_H
#define NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 8

typedef struct {
  int ndim;                     /* 0 .. NPY_MAX_DIMS */
  int64_t shape[NPY_MAX_DIMS];
  int64_t count;                /* product of shape (1 when ndim == 0) */
  float *data;                  /* malloc'd, count floats (NULL when count == 0 or f64) */
  int f64;                      /* the file holds float64: data64 has the values, data is NULL */
  double *data64;               /* malloc'd, count doubles when f64 */
} npy_array;

/* Returns 0, or -1 with a message naming path in err (out is then zeroed).
 * npy_write takes ndim 0 .. NPY_MAX_DIMS and shape[ndim] (NULL when ndim is
 * 0); a failed write removes the partial file. */
int npy_read(const char *path, npy_array *out, char *err, size_t errlen);
int npy_write(const char *path, int ndim, const int64_t *shape, const float *data,
              char *err, size_t errlen);
void npy_free(npy_array *a);

/* npy_read that calls check with the header's shape and element count
 * before any data is read or allocated (so a caller can refuse a file too
 * big for it); when check returns nonzero the read stops, out stays zeroed
 * and that value is returned, err untouched.  check may be NULL. */
typedef int (*npy_check_fn)(void *ctx, int ndim, const int64_t *shape, int64_t count);
int npy_read_checked(const char *path, npy_array *out, npy_check_fn check, void *ctx, char *err,
                     size_t errlen);
/* npy_read_checked that takes float64 files too (out->f64 set, values in
 * data64, never narrowed); out->f64 is set before check is called, so that
 * it can size the data. */
int npy_read_any(const char *path, npy_array *out, npy_check_fn check, void *ctx, char *err,
                 size_t errlen);
/* npy_write of float64 data ('<f8'). */
int npy_write_f64(const char *path, int ndim, const int64_t *shape, const double *data,
                  char *err, size_t errlen);

#endif
