/* e2e_shm_first.c: what makes the arena's first call of a size cheap
 * (issue #25), against a real gkcd.
 *
 * - Population (gkc_shm_pages.c): bytes kept, only the pages asked for
 *   allocated (the memfd's st_blocks), with MADV_POPULATE_WRITE and with
 *   the fallback of a kernel without it, in one piece and on several
 *   threads; a fresh copy equal to its source.
 * - A new connection's first calls through fresh pages, both ways: every
 *   result equal to float64 (sampled) and to an inline connection's bytes.
 * - Kept regions (gkc_shm_keep.c): a closed connection's region serves the
 *   next connection's growth (its size, not a new one's), its stale bytes
 *   never leak into a result; gkcd lets go of it with each connection;
 *   GKC_SHM_KEEP bounds them (the oldest go first, 0 keeps none); gkcd
 *   serves such a region's registration from the mapping it kept; a region
 *   a cancelled request may still be written into is never kept; a forked
 *   child never takes its parent's.
 * e2e_shm_first_gpu runs it all on the CUDA backend (GKC_TEST_BACKEND=cuda),
 * skipped without a GPU.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "gkc_async.h"
#include "gkc_shm.h"
#include "test.h"

#define THR 4096
#define MiB ((size_t)1 << 20)

static uint64_t rng;

static float *rand_vec(size_t n) {
  float *v = malloc(n * sizeof *v + 4);
  ASSERT(v);
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

static gkc_conn *conn(const fixture *f, size_t threshold, size_t max_bytes) {
  gkc_conn *c;
  if (gkc_connect(&c, f->sock) != 0) TEST_FAIL("connect: %s", gkc_errmsg(c));
  ASSERT_EQ(gkc_set_shm(c, threshold, max_bytes), 0);
  return c;
}

static gkc_shm_info state(const gkc_conn *c) {
  gkc_shm_info i;
  gkc_shm_state(c, &i);
  return i;
}

static void keep_bound(const char *v) {
  if (v) setenv("GKC_SHM_KEEP", v, 1);
  else unsetenv("GKC_SHM_KEEP");
  gkc__shm_keep_reset();
}

/* A reduce of bytes by value on c, held to float64. */
static void reduce_checked(gkc_conn *c, size_t bytes) {
  size_t n = bytes / 4;
  float *x = rand_vec(n);
  double want = 0, mag = 0, v;
  for (size_t i = 0; i < n; i++) want += x[i], mag += fabs(x[i]);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  ASSERT_NEAR(v, want, 1e-6 * mag + 1e-6);
  free(x);
}

/* --- population ------------------------------------------------------------------------ */

static size_t allocated(int fd) {
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  return (size_t)st.st_blocks * 512;
}

static void test_populate(int fallback) {
  gkc__shm_populate_fallback(fallback);
  const size_t size = 48 * MiB;
  int fd = memfd_create("e2e_shm_first", MFD_CLOEXEC);
  ASSERT(fd >= 0);
  ASSERT_EQ(ftruncate(fd, (off_t)size), 0);
  char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT(p != MAP_FAILED);
  ASSERT_EQ(allocated(fd), 0);
  /* A slice's bytes written at an odd offset, then a piece around it
   * populated (one thread: under 16 MiB): the bytes stay. */
  memset(p + 100, 0x5a, 5000);
  gkc__shm_populate(p + 64, 3 * MiB + 100);
  for (size_t i = 100; i < 5100; i++) ASSERT_EQ(p[i], 0x5a);
  ASSERT_EQ(p[99], 0);
  size_t a = allocated(fd);
  ASSERT(a >= 3 * MiB + 164 && a <= 3 * MiB + 164 + 8192);
  /* 20 MiB further on: on several threads; nothing past it allocated. */
  gkc__shm_populate(p + 8 * MiB, 20 * MiB);
  a = allocated(fd);
  ASSERT(a >= 23 * MiB && a <= 23 * MiB + 16384);
  /* A fresh copy over the rest (several threads): the source's bytes, the
   * neighbours' kept. */
  size_t n = 17 * MiB + 44;
  char *src = malloc(n);
  ASSERT(src);
  for (size_t i = 0; i < n; i++) src[i] = (char)(i * 2654435761u >> 13);
  p[28 * MiB + 63] = 7;
  gkc__shm_copy(p + 28 * MiB + 64, src, n, 1);
  ASSERT(memcmp(p + 28 * MiB + 64, src, n) == 0);
  ASSERT_EQ(p[28 * MiB + 63], 7);
  ASSERT(allocated(fd) <= 23 * MiB + n + 16384 + 4096);
  free(src);
  munmap(p, size);
  close(fd);
  gkc__shm_populate_fallback(0);
}

/* --- a new connection's first calls, through fresh pages -------------------------------- */

/* 1 on the CPU backend, whose sgemm is the same kernel for every request;
 * on a GPU two requests of one shape may run on different lanes (the
 * latency lane's SMs, the bulk lane's slices) and round differently. */
static int same_kernels = 1;

static void test_first_calls(const fixture *f, int fallback) {
  keep_bound("0"); /* fresh regions only */
  gkc__shm_populate_fallback(fallback);
  gkc_conn *ci = conn(f, GKC_SHM_OFF, 0), *cs = conn(f, THR, 0);
  int32_t n = 512;
  size_t nn = (size_t)n * n;
  float *a = rand_vec(nn), *b = rand_vec(nn), *c1 = malloc(nn * 4), *c2 = malloc(nn * 4);
  ASSERT_EQ(gkc_sgemm(cs, n, n, n, 1.0f, a, 0, b, 0, 0.0f, c2, NULL, NULL), 0);
  ASSERT_EQ(state(cs).staged, 3);
  ASSERT_EQ(gkc_sgemm(ci, n, n, n, 1.0f, a, 0, b, 0, 0.0f, c1, NULL, NULL), 0);
  if (same_kernels) ASSERT(memcmp(c1, c2, nn * 4) == 0);
  for (int t = 0; t < 64; t++) {
    size_t i = ((size_t)t * 131 + 17) % (size_t)n, j = (size_t)t * 7 % (size_t)n;
    double ref = 0, mag = 0;
    for (int32_t k = 0; k < n; k++) {
      ref += (double)a[i * n + k] * b[(size_t)k * n + j];
      mag += fabs((double)a[i * n + k] * b[(size_t)k * n + j]);
    }
    ASSERT_NEAR(c2[i * n + j], ref, 1e-5 * mag + 1e-6);
    ASSERT_NEAR(c1[i * n + j], ref, 1e-5 * mag + 1e-6);
  }
  /* A bigger call grows the arena: fresh pages again, on several threads. */
  reduce_checked(cs, 24 * MiB);
  /* A result of a size the library cannot know: a tail slice, populated. */
  float *y = rand_vec(nn), *got = malloc(nn * 4);
  gkc_out o = gkc_out_mem(got, nn * 4);
  ASSERT_EQ(gkc_axpby(cs, 2, gkc_ref_mem(y, nn * 4), 0, gkc_ref_mem(y, nn * 4), &o, NULL), 0);
  for (size_t i = 0; i < nn; i++) ASSERT(got[i] == 2 * y[i]);
  ASSERT_EQ(state(cs).fallbacks, 0);
  free(a), free(b), free(c1), free(c2), free(y), free(got);
  gkc_close(ci);
  gkc_close(cs);
  gkc__shm_populate_fallback(0);
}

/* --- kept regions --------------------------------------------------------------------------- */

/* resident.KEY of gkcd's status. */
static long resident_field(const fixture *f, const char *key) {
  gkc_conn *probe = conn(f, GKC_SHM_OFF, 0);
  char *json, pat[64];
  ASSERT_EQ(gkc_status_json(probe, &json), 0);
  const char *r = strstr(json, "\"resident\"");
  ASSERT(r);
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  r = strstr(r, pat);
  ASSERT(r);
  long n = strtol(r + strlen(pat), NULL, 10);
  free(json);
  gkc_close(probe);
  return n;
}

/* Regions alive, all connections. */
static long live_regions(const fixture *f) { return resident_field(f, "regions"); }

static void wait_no_regions(const fixture *f) {
  for (int waited = 0; live_regions(f) != 0; waited += 10) {
    if (waited > 5000) TEST_FAIL("gkcd still holds %ld regions", live_regions(f));
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
}

static void test_keep(const fixture *f) {
  keep_bound(NULL); /* the default bound */
  ASSERT_EQ(gkc__shm_kept_bytes(), 0);
  gkc_conn *c = conn(f, THR, 0);
  reduce_checked(c, 20 * MiB); /* a 32 MiB region */
  ASSERT_EQ(state(c).arena_bytes, 32 * MiB);
  gkc_close(c);
  ASSERT_EQ(gkc__shm_kept_bytes(), 32 * MiB);
  wait_no_regions(f); /* gkcd let go of it with the connection */
  /* gkcd keeps its mapping (and registration) a while (pinner.h). */
  long hits = resident_field(f, "regions_kept_hits");
  for (int waited = 0; resident_field(f, "regions_kept_bytes") < 32 * (long)MiB; waited += 10) {
    if (waited > 5000) TEST_FAIL("gkcd keeps %ld bytes of regions", resident_field(f, "regions_kept_bytes"));
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  /* The next connection's first call takes it: 32 MiB, not a new 4 MiB;
   * and gkcd serves its registration from the mapping it kept. */
  c = conn(f, THR, 0);
  reduce_checked(c, 1 * MiB);
  ASSERT_EQ(state(c).arena_bytes, 32 * MiB);
  ASSERT_EQ(gkc__shm_kept_bytes(), 0);
  ASSERT_EQ(resident_field(f, "regions_kept_hits"), hits + 1);
  /* Its old bytes never show: a result through a tail slice. */
  size_t n = MiB / 4;
  float *x = rand_vec(n), *y = malloc(n * 4);
  gkc_out o = gkc_out_mem(y, n * 4);
  ASSERT_EQ(gkc_axpby(c, -1, gkc_ref_mem(x, n * 4), 0, gkc_ref_mem(x, n * 4), &o, NULL), 0);
  for (size_t i = 0; i < n; i++) ASSERT(y[i] == -x[i]);
  free(x), free(y);
  gkc_close(c);
  ASSERT_EQ(gkc__shm_kept_bytes(), 32 * MiB);
  wait_no_regions(f);

  /* A connection bounded under the kept one's size makes its own (8 MiB). */
  c = conn(f, THR, 16 * MiB);
  reduce_checked(c, 5 * MiB);
  ASSERT_EQ(state(c).arena_bytes, 8 * MiB);
  gkc_close(c);
  ASSERT_EQ(gkc__shm_kept_bytes(), 40 * MiB);

  /* The bound: 40 MiB.  Another 8 MiB one pushes out the oldest (32). */
  keep_bound("40M");
  c = conn(f, THR, 0);
  reduce_checked(c, 20 * MiB);
  gkc_conn *d = conn(f, THR, 16 * MiB);
  reduce_checked(d, 5 * MiB);
  gkc_conn *e = conn(f, THR, 16 * MiB);
  reduce_checked(e, 5 * MiB);
  ASSERT_EQ(gkc__shm_kept_bytes(), 0);
  gkc_close(c); /* oldest */
  gkc_close(d);
  ASSERT_EQ(gkc__shm_kept_bytes(), 40 * MiB);
  gkc_close(e);
  ASSERT_EQ(gkc__shm_kept_bytes(), 16 * MiB);
  /* Over the bound alone: freed. */
  keep_bound("16M");
  c = conn(f, THR, 0);
  reduce_checked(c, 20 * MiB);
  gkc_close(c);
  ASSERT_EQ(gkc__shm_kept_bytes(), 0);
  /* 0: none kept. */
  keep_bound("0");
  c = conn(f, THR, 0);
  reduce_checked(c, 5 * MiB);
  gkc_close(c);
  ASSERT_EQ(gkc__shm_kept_bytes(), 0);
  wait_no_regions(f);
}

typedef struct {
  int calls, status;
} side;

static void on_done(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  side *s = ud;
  s->calls++;
  s->status = res->status;
}

/* Requests cancelled in flight: gkcd may still write their slices, so
 * their region is not kept; one closed idle is. */
static void test_not_kept_in_flight(const fixture *f) {
  keep_bound(NULL);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, f->sock), 0);
  ASSERT_EQ(gkc_async_set_shm(ac, THR, 0), 0);
  ASSERT_EQ(gkc_async_shm_reserve(ac, 8 * MiB), 0);
  gkc_shm_info i;
  do {
    ASSERT(gkc_async_poll(ac, 1000) >= 0);
    gkc_async_shm_state(ac, &i);
  } while (i.regions == 0);
  size_t n = MiB / 4;
  float *x = rand_vec(n);
  gkc_reduce_args a = GKC_REDUCE_ARGS_INIT;
  a.x = gkc_ref_mem(x, n * 4);
  side s[4];
  memset(s, 0, sizeof s);
  for (int k = 0; k < 4; k++) ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s[k]), 0);
  gkc_async_shm_state(ac, &i);
  ASSERT_EQ(i.staged, 4);
  gkc_async_close(ac);
  for (int k = 0; k < 4; k++) ASSERT_EQ(s[k].status, GKC_ECANCELLED);
  ASSERT_EQ(gkc__shm_kept_bytes(), 0);
  /* The same, every reply read first: kept. */
  ASSERT_EQ(gkc_async_connect(&ac, f->sock), 0);
  ASSERT_EQ(gkc_async_set_shm(ac, THR, 0), 0);
  ASSERT_EQ(gkc_async_shm_reserve(ac, 8 * MiB), 0);
  do {
    ASSERT(gkc_async_poll(ac, 1000) >= 0);
    gkc_async_shm_state(ac, &i);
  } while (i.regions == 0);
  memset(s, 0, sizeof s);
  for (int k = 0; k < 4; k++) ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s[k]), 0);
  while (s[0].calls + s[1].calls + s[2].calls + s[3].calls < 4) ASSERT(gkc_async_poll(ac, 1000) >= 0);
  for (int k = 0; k < 4; k++) ASSERT_EQ(s[k].status, 0);
  gkc_async_close(ac);
  ASSERT_EQ(gkc__shm_kept_bytes(), 8 * MiB);
  free(x);
}

/* A child after fork shares its parent's kept memfd pages: it takes none. */
static void test_fork(const fixture *f) {
  ASSERT(gkc__shm_kept_bytes() > 0);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    ASSERT_EQ(gkc__shm_kept_bytes(), 0);
    gkc_conn *c = conn(f, THR, 0);
    reduce_checked(c, 1 * MiB);
    ASSERT_EQ(state(c).arena_bytes, 4 * MiB); /* its own, the smallest */
    gkc_close(c);
    _exit(0);
  }
  int st;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) TEST_FAIL("the child failed (status %d)", st);
  ASSERT_EQ(gkc__shm_kept_bytes(), 8 * MiB); /* the parent's, still there */
}

int main(void) {
  rng = test_seed();
  unsetenv("GKC_NO_SHM");
  unsetenv("GKC_SHM_THRESHOLD");
  unsetenv("GKC_SHM_MAX_BYTES");
  fixture f;
  /* e2e_shm_first_gpu: the CUDA backend, whose pinner registers each region
   * (a kept one again) in the background while the first calls run. */
  const char *be = getenv("GKC_TEST_BACKEND");
  if (be && strcmp(be, "cpu") != 0) {
    same_kernels = 0;
    if (fixture_try_start(&f, NULL, NULL) != -1) {
      fixture_stop(&f, SIGTERM);
      TEST_SKIP("gkcd --backend %s did not start (no usable GPU here)", be);
    }
  } else {
    fixture_start(&f, NULL, NULL);
  }
  test_populate(0);
  test_populate(1);
  test_first_calls(&f, 0);
  test_first_calls(&f, 1);
  test_keep(&f);
  test_not_kept_in_flight(&f);
  test_fork(&f);
  ASSERT_EQ(fixture_stop(&f, SIGTERM), 0);
  printf("e2e_shm_first: all passed\n");
  return 0;
}
