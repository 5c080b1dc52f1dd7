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

int cli_write_npy(const char *path, int ndim, const int64_t *shape, const float *data) {
  char err[512];
  if (npy_write(path, ndim, shape, data, err, sizeof err) == 0) return CLI_OK;
  fprintf(stderr, "gkc: %s\n", err);
  return CLI_FAIL;
}
