/* tmpfile.h: a per-run scratch directory for the unit tests.
 *
 * make_tmpdir creates $TMPDIR/<prefix>.XXXXXX (TMPDIR unset or empty: /tmp);
 * tpath names a file inside it; remove_tmpdir deletes its files and the
 * directory (register it with atexit so a failed assertion cleans up too).
 */
#ifndef GKC_TEST_TMPFILE_H
#define GKC_TEST_TMPFILE_H

/* The scratch directory's path, set by make_tmpdir. */
extern char tmpdir[256];

void make_tmpdir(const char *prefix);
void remove_tmpdir(void);
/* A path inside the scratch directory (a small ring, so a test can hold a
 * few at once). */
const char *tpath(const char *name);

#endif
