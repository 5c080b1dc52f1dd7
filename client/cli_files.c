/* cli_files.c: reading inputs and writing results as .npy files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

const char *cli_shape_str(int ndim, const int64_t *shape, char *buf, size_t len) {
  size_t n = 0;
  n += (size_t)snprintf(buf, len, "(");
  for (int i = 0; i < ndim && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < len) snprintf(buf + n, len - n, "%s)", ndim == 1 ? "," : "");
  return buf;
}

int cli_check_writable(const cli_globals *g, const char *opt, const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return cli_usage_error(g, "%s %s: is a directory", opt, path);
  char *dir = strdup(path);
  if (!dir) return cli_usage_error(g, "out of memory");
  char *slash = strrchr(dir, '/');
  const char *d = ".";
  if (slash == dir)
    d = "/";
  else if (slash) {
    *slash = '\0';
    d = dir;
  }
  int rc = CLI_OK;
  if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode))
    rc = cli_usage_error(g, "%s %s: folder '%s' does not exist", opt, path, d);
  else if (access(d, W_OK) != 0 && (stat(path, &st) != 0 || access(path, W_OK) != 0))
    rc = cli_usage_error(g, "%s %s: cannot write in folder '%s': %s", opt, path, d,
                         strerror(errno));
  free(dir);
  return rc;
}

int cli_write_npy_f64(const char *path, int ndim, const int64_t *shape, const double *data) {
  char err[512];
  if (npy_write_f64(path, ndim, shape, data, err, sizeof err) == 0) return CLI_OK;
  fprintf(stderr, "gkc: %s\n", err);
  return CLI_FAIL;
}

int cli_npy_convert(npy_array *a, int f64) {
  if (a->f64 == f64 || a->count == 0) {
    a->f64 = f64;
    return CLI_OK;
  }
  size_t n = (size_t)a->count;
  if (f64) {
    double *d = malloc(n * sizeof *d);
    if (!d) goto oom;
    for (size_t i = 0; i < n; i++) d[i] = a->data[i];
    free(a->data), a->data = NULL, a->data64 = d;
  } else {
    float *f = malloc(n * sizeof *f);
    if (!f) goto oom;
    for (size_t i = 0; i < n; i++) f[i] = (float)a->data64[i]; /* --dtype f32 asked for it */
    free(a->data64), a->data64 = NULL, a->data = f;
  }
  a->f64 = f64;
  return CLI_OK;
oom:
  fprintf(stderr, "gkc: cannot allocate %zu values to convert to %s\n", n, f64 ? "float64" : "float32");
  return CLI_FAIL;
}

int cli_write_npy(const char *path, int ndim, const int64_t *shape, const float *data) {
  char err[512];
  if (npy_write(path, ndim, shape, data, err, sizeof err) == 0) return CLI_OK;
  fprintf(stderr, "gkc: %s\n", err);
  return CLI_FAIL;
}
