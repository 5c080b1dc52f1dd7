/* test.h: the few assertion macros our C tests use.
 *
 * A failed assertion prints file:line and the values, then exits 1 (this is
 * a test process, never the daemon).  TEST_SKIP exits 77, which ctest reports
 * as skipped (SKIP_RETURN_CODE 77).
 */
#ifndef GKC_TEST_H
#define GKC_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_FAIL(...)                                      \
  do {                                                      \
    fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);   \
    fprintf(stderr, __VA_ARGS__);                           \
    fputc('\n', stderr);                                    \
    exit(1);                                                \
  } while (0)

#define TEST_SKIP(...)                        \
  do {                                        \
    fprintf(stderr, "SKIP: ");                \
    fprintf(stderr, __VA_ARGS__);             \
    fputc('\n', stderr);                      \
    exit(77);                                 \
  } while (0)

#define ASSERT(cond) \
  do { if (!(cond)) TEST_FAIL("assertion failed: %s", #cond); } while (0)

#define ASSERT_EQ(a, b)                                                        \
  do {                                                                         \
    int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                              \
    if (a_ != b_) TEST_FAIL("%s == %s: %" PRId64 " != %" PRId64, #a, #b, a_, b_); \
  } while (0)

#define ASSERT_STR_EQ(a, b)                                                 \
  do {                                                                      \
    const char *a_ = (a), *b_ = (b);                                        \
    if (strcmp(a_, b_) != 0) TEST_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, a_, b_); \
  } while (0)

#define ASSERT_CONTAINS(hay, needle)                                          \
  do {                                                                        \
    const char *h_ = (hay), *n_ = (needle);                                   \
    if (!strstr(h_, n_)) TEST_FAIL("\"%s\" does not contain \"%s\"", h_, n_); \
  } while (0)

/* |got - want| <= tol */
#define ASSERT_NEAR(got, want, tol)                                             \
  do {                                                                          \
    double g_ = (double)(got), w_ = (double)(want), t_ = (double)(tol);         \
    if (!(fabs(g_ - w_) <= t_))                                                 \
      TEST_FAIL("%s ~ %s: %.9g vs %.9g (tol %.3g)", #got, #want, g_, w_, t_);   \
  } while (0)

#endif
