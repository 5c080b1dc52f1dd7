/* tmpfile.c: the unit tests' scratch directory (see tmpfile.h). */
#include "tmpfile.h"

#include <dirent.h>
#include <unistd.h>

#include "test.h"

char tmpdir[256];

const char *tpath(const char *name) {
  static char ring[4][512];
  static int next;
  char *p = ring[next++ % 4];
  snprintf(p, sizeof ring[0], "%s/%s", tmpdir, name);
  return p;
}

void make_tmpdir(const char *prefix) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/%s.XXXXXX", base && *base ? base : "/tmp", prefix);
  if (!mkdtemp(tmpdir)) TEST_FAIL("mkdtemp %s failed", tmpdir);
}

void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    unlink(tpath(e->d_name));
  }
  closedir(d);
  rmdir(tmpdir);
}
