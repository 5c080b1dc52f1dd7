/* npy.h: read and write NumPy .npy files holding float32 arrays.
 *
 * Only little-endian float32 ('<f4') in C order is accepted; any other dtype,
 * Fortran order or a malformed header is an error whose message says exactly
 * what the file holds and what was expected.  Versions 1.0, 2.0 and 3.0 of
 * the format are read; version 1.0 is written.
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
  float *data;                  /* malloc'd, count floats (NULL when count == 0) */
} npy_array;

/* Returns 0, or -1 with a message naming path in err. */
int npy_read(const char *path, npy_array *out, char *err, size_t errlen);
int npy_write(const char *path, int ndim, const int64_t *shape, const float *data,
              char *err, size_t errlen);
void npy_free(npy_array *a);

#endif
