/* backend.c: what all backends share. */
#include "backend.h"

#include <string.h>

int backend_algo_lookup(const gkcd_backend *be, int method, const char *name, size_t len) {
  if (len == 4 && memcmp(name, "auto", 4) == 0) return GKCD_ALGO_AUTO;
  const char *const *list = be->algos[method];
  for (int i = 0; list && list[i]; i++)
    if (strlen(list[i]) == len && memcmp(list[i], name, len) == 0) return i;
  return -2;
}
