/* e2e_fdstore.c: shared resident objects across a planned restart, through
 * a stand-in for systemd's file-descriptor store (issue 30).
 *
 * The stand-in (tests/lib/fdstore_standin.h) listens on NOTIFY_SOCKET as
 * systemd does, keeps what FDSTORE=1 sends, and starts the next gkcd with
 * the store's descriptors as systemd hands them over.
 *
 *  1. SIGTERM saves the shared array and matrix (not the private array);
 *     the next gkcd restores them byte for byte under the same ids, the
 *     same shared_instance and a new instance; the client that held them
 *     goes on using them after reconnecting, and its private handle is
 *     named stale; the restored gkcd removed the entries from the store;
 *  2. a manifest with one byte changed is refused (checksum), gkcd starts
 *     clean and says so;
 *  3. a store holding something else (junk under the manifest's name, a
 *     descriptor of another name), or a manifest naming more than
 *     --restore-max-bytes, or objects without a manifest (a save cut
 *     short): a clear log line and a clean start;
 *  4. SIGINT, or no NOTIFY_SOCKET: nothing saved, the log says so;
 *  5. on three (CPU) devices, a replicated array and a matrix partitioned
 *     over all three are saved and come back: the array byte for byte on
 *     each device, the matrix's spmv bit for bit; restarted on two devices,
 *     the array is on both and the matrix cut again over both, its spmv
 *     unchanged; a manifest of version 1 (before the masks) still restores.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdstore_standin.h"
#include "fixture.h"
#include "gkc.h"
#include "test.h"

static char dir[64], sock[100], notify_path[100], log_path[100];
static fs_notify S; /* the stand-in store: S.store is what it holds */

/* Starts gkcd with the descriptors of pass (may be NULL) as systemd would
 * hand them over; notify: whether NOTIFY_SOCKET is set. */
static pid_t spawn_on(const fs_set *pass, int notify, const char *max_bytes, const char *ndev) {
  char *argv[] = {getenv("GKCD_BIN"), "--socket", sock, "--backend", "cpu", "--threads", "1",
                  "--restore-max-bytes", (char *)(max_bytes ? max_bytes : "1G"),
                  ndev ? "--cpu-devices" : NULL, (char *)ndev, NULL};
  pid_t pid = fs_spawn(pass, notify ? notify_path : NULL, log_path, argv);
  ASSERT(pid > 0);
  for (int i = 0; i < 500; i++) {
    gkc_conn *c;
    int ok = gkc_connect(&c, sock) == 0 && gkc_ping(c, NULL) == 0;
    gkc_close(c);
    if (ok) return pid;
    usleep(20000);
  }
  TEST_FAIL("gkcd did not come up; see %s", log_path);
}

static pid_t spawn(const fs_set *pass, int notify, const char *max_bytes) {
  return spawn_on(pass, notify, max_bytes, NULL);
}

static void drain_notify(void) { ASSERT_EQ(fs_notify_drain(&S), 0); }

static void stop(pid_t pid, int sig) {
  ASSERT_EQ(kill(pid, sig), 0);
  int status;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  drain_notify();
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  ASSERT(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* status's restored.objects */
static uint64_t restored_objects(gkc_conn *c) {
  char *json = NULL;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  const char *p = strstr(json, "\"restored\"");
  ASSERT(p);
  p = strstr(p, "\"objects\"");
  ASSERT(p);
  p += strlen("\"objects\"");
  while (*p == ':' || *p == ' ') p++;
  uint64_t v = strtoull(p, NULL, 10);
  free(json);
  return v;
}

/* A memfd named name holding bytes (for forged stores). */
static int memfd_with(const char *name, const void *bytes, size_t n) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  ASSERT(fd >= 0);
  ASSERT_EQ(write(fd, bytes, n), (ssize_t)n);
  return fd;
}

/* Starts gkcd on pass, checks its log says why, that it restored nothing
 * and serves; pass is closed. */
static void refused(fs_set *pass, const char *extra, const char *why) {
  pid_t pid = spawn(pass, 1, extra);
  fs_set_clear(pass);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  ASSERT_EQ(restored_objects(c), 0);
  gkc_close(c);
  stop(pid, SIGINT);
  const char *log = slurp(log_path);
  ASSERT_CONTAINS(log, why);
  ASSERT_CONTAINS(log, "starting clean");
  fs_set_clear(&S.store);
}

/* CRC-32 (zlib's), for a manifest the test writes itself. */
static uint32_t crc32_of(const unsigned char *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = c >> 1 ^ (0xedb88320u & -(c & 1));
  }
  return ~c;
}

/* y = A x through gkcd for the resident matrix m; info (may be NULL). */
static void spmv_of(gkc_conn *c, uint32_t m, const float *x, float *y, int n, gkc_info *info) {
  gkc_spmv_args sp = GKC_SPMV_ARGS_INIT;
  sp.use_matrix = 1, sp.matrix = m, sp.x = gkc_ref_mem(x, (size_t)n * 4);
  gkc_out out = gkc_out_mem(y, (size_t)n * 4);
  ASSERT_EQ(gkc_spmv_ref(c, &sp, &out, info), 0);
}

/* The replicated array h (n floats) is x on every device d < ndev: a sum
 * run there from the handle, against x's sum in double. */
static void replica_sums(gkc_conn *c, uint32_t h, const float *x, int n, int ndev) {
  double want = 0, mag = 0;
  for (int i = 0; i < n; i++) want += x[i], mag += fabs(x[i]);
  for (int d = 0; d < ndev; d++) {
    double got = 0;
    gkc_info info;
    ASSERT_EQ(gkc_set_device(c, d), 0);
    ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_handle(h, (size_t)n * 4), GKC_SUM, &got, NULL, NULL, &info), 0);
    ASSERT_EQ(info.device, d);
    ASSERT(fabs(got - want) <= 1e-12 * mag);
  }
  ASSERT_EQ(gkc_set_device(c, GKC_DEVICE_AUTO), 0);
}

/* Section 5: replicated and partitioned shared objects. */
static void test_spread(const float *x, int n) {
  fs_set_clear(&S.store);
  pid_t pid = spawn_on(NULL, 1, NULL, "3");
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  ASSERT_EQ(gkc_set_reconnect(c, 40, 50, 0), 0);
  uint32_t rep, m;
  gkc_placement everywhere = {GKC_DEVICE_AUTO, 1, 1};
  ASSERT_EQ(gkc_upload_placed(c, gkc_ref_mem(x, (size_t)n * 4), GKC_F32, &everywhere, &rep, NULL), 0);
  /* A random sparse matrix of n rows: a diagonal and 6 entries a row
   * anywhere, so every block reads columns the others own (a halo). */
  enum { PER = 7 };
  int32_t *rp = malloc(((size_t)n + 1) * 4), *ci = malloc((size_t)n * PER * 4);
  float *v = malloc((size_t)n * PER * 4), *y0 = malloc((size_t)n * 4), *y1 = malloc((size_t)n * 4);
  ASSERT(rp && ci && v && y0 && y1);
  uint64_t seed = test_seed();
  rp[0] = 0;
  for (int i = 0; i < n; i++) {
    int32_t at = rp[i];
    ci[at] = i, v[at] = 4.0f;
    for (int k = 1; k < PER; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      ci[at + k] = (int32_t)((seed >> 33) % (uint64_t)n);
      v[at + k] = (float)((seed >> 20) & 0xfff) / 4096.0f - 0.5f;
    }
    rp[i + 1] = at + PER;
  }
  gkc_csr A = {n, n, (int64_t)n * PER, rp, ci, v};
  ASSERT_EQ(gkc_csr_upload_partitioned(c, &A, GKC_DEVICES_ALL, 1, &m), 0);
  gkc_info info;
  spmv_of(c, m, x, y0, n, &info);
  ASSERT_EQ(info.ndevices, 3);
  stop(pid, SIGTERM);
  ASSERT_CONTAINS(slurp(log_path), "saved 2 shared object(s)");
  ASSERT_EQ(S.store.n, 3);
  fs_set keep;
  fs_set_copy(&keep, &S.store);

  /* The same three devices: everything where it was. */
  fs_set pass;
  fs_set_copy(&pass, &keep);
  fs_set_clear(&S.store);
  pid = spawn_on(&pass, 1, NULL, "3");
  fs_set_clear(&pass);
  drain_notify();
  ASSERT_CONTAINS(slurp(log_path), "restored 2 shared object(s)");
  float *back = malloc((size_t)n * 4);
  ASSERT(back);
  ASSERT_EQ(gkc_download(c, rep, back, (size_t)n * 4), 0);
  ASSERT(memcmp(back, x, (size_t)n * 4) == 0);
  replica_sums(c, rep, x, n, 3);
  spmv_of(c, m, x, y1, n, &info);
  ASSERT_EQ(info.ndevices, 3);
  ASSERT(memcmp(y0, y1, (size_t)n * 4) == 0); /* the same rows, summed in the same order */
  stop(pid, SIGINT); /* an interactive stop: released, nothing saved */
  ASSERT_EQ(S.store.n, 0);

  /* Two devices now: the replica on both, the matrix cut again over both. */
  fs_set_copy(&pass, &keep);
  pid = spawn_on(&pass, 1, NULL, "2");
  fs_set_clear(&pass);
  drain_notify();
  ASSERT_CONTAINS(slurp(log_path), "restored 2 shared object(s)");
  replica_sums(c, rep, x, n, 2);
  spmv_of(c, m, x, y1, n, &info);
  ASSERT_EQ(info.ndevices, 2);
  ASSERT(memcmp(y0, y1, (size_t)n * 4) == 0);
  stop(pid, SIGINT);

  /* What a gkcd before the masks saved (version 1, 72-byte entries): the
   * same objects, restored as one-device ones. */
  fs_set_copy(&pass, &keep);
  int at = fs_set_find(&pass, "gkc-manifest");
  static unsigned char m2[1 << 12], m1[1 << 12];
  ssize_t len = pread(pass.fd[at], m2, sizeof m2, 0);
  ASSERT_EQ(len, 40 + 2 * 88 + 4);
  memcpy(m1, m2, 40);
  m1[8] = 1;
  for (int i = 0; i < 2; i++) memcpy(m1 + 40 + 72 * i, m2 + 40 + 88 * i, 72);
  size_t len1 = 40 + 2 * 72 + 4;
  uint32_t crc = crc32_of(m1, len1 - 4);
  for (int i = 0; i < 4; i++) m1[len1 - 4 + (size_t)i] = (unsigned char)(crc >> (8 * i));
  close(pass.fd[at]);
  pass.fd[at] = memfd_with("gkc-manifest", m1, len1);
  pid = spawn_on(&pass, 1, NULL, "3");
  fs_set_clear(&pass);
  drain_notify();
  ASSERT_CONTAINS(slurp(log_path), "restored 2 shared object(s)");
  ASSERT_EQ(gkc_download(c, rep, back, (size_t)n * 4), 0);
  ASSERT(memcmp(back, x, (size_t)n * 4) == 0);
  stop(pid, SIGINT);

  /* Masks that cannot be, under a right checksum: the save refused whole
   * and a clean start (a matrix both replicated and partitioned; an array
   * said to be partitioned). */
  const char *whys[2] = {"both replicated and partitioned", "a partitioned object must be a float32 matrix"};
  for (int k = 0; k < 2; k++) {
    memcpy(m1, m2, (size_t)len);
    for (int i = 0; i < 2; i++) {
      unsigned char *e = m1 + 40 + 88 * i;
      if (k == 0 && e[4] == 2) e[72] = 1;                /* the matrix: a rep_mask too */
      if (k == 1 && e[4] == 1) memset(e + 72, 0, 8), e[80] = 1; /* the array: a part_mask */
    }
    crc = crc32_of(m1, (size_t)len - 4);
    for (int i = 0; i < 4; i++) m1[len - 4 + i] = (unsigned char)(crc >> (8 * i));
    fs_set_copy(&pass, &keep);
    at = fs_set_find(&pass, "gkc-manifest");
    close(pass.fd[at]);
    pass.fd[at] = memfd_with("gkc-manifest", m1, (size_t)len);
    refused(&pass, NULL, whys[k]);
  }

  fs_set_clear(&keep);
  gkc_close(c);
  free(rp), free(ci), free(v), free(y0), free(y1), free(back);
}

int main(void) {
  if (!getenv("GKCD_BIN")) TEST_SKIP("GKCD_BIN is not set (run through ctest)");
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%.40s/gkc-fdstore-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ASSERT(mkdtemp(dir));
  snprintf(sock, sizeof sock, "%s/gkcd.sock", dir);
  snprintf(notify_path, sizeof notify_path, "%s/notify.sock", dir);
  snprintf(log_path, sizeof log_path, "%s/gkcd.log", dir);
  ASSERT_EQ(fs_notify_open(&S, notify_path), 0);

  /* --- 1. a planned restart keeps the shared objects ------------------------------ */
  pid_t pid = spawn(NULL, 1, NULL);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  ASSERT_EQ(gkc_set_reconnect(c, 40, 50, 0), 0);
  enum { N = 100003 };
  float *x = malloc(N * 4), *back = malloc(N * 4);
  uint64_t seed = 12345;
  for (int i = 0; i < N; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
  }
  uint32_t hs, hp, m;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, N * 4), GKC_F32, 1, &hs), 0);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, 64), GKC_F32, 0, &hp), 0);
  int32_t rp[] = {0, 2, 3, 5};
  int32_t ci[] = {0, 2, 1, 0, 2};
  float v[] = {1, 2, 3, 4, 5};
  gkc_csr A = {3, 3, 5, rp, ci, v};
  ASSERT_EQ(gkc_csr_upload(c, &A, 1, &m, NULL), 0);
  char inst_a[17], shared_a[17], inst_b[17], shared_b[17];
  ASSERT_EQ(gkc_ping(c, NULL), 0);
  gkc_instance(c, inst_a, shared_a);
  stop(pid, SIGTERM);
  ASSERT_CONTAINS(slurp(log_path), "saved 2 shared object(s)");
  ASSERT_EQ(S.store.n, 3);
  char name[64];
  snprintf(name, sizeof name, "gkc-obj-%u", hs);
  ASSERT(fs_set_find(&S.store, name) >= 0);
  snprintf(name, sizeof name, "gkc-obj-%u", m);
  ASSERT(fs_set_find(&S.store, name) >= 0);
  int mi = fs_set_find(&S.store, "gkc-manifest");
  ASSERT(mi >= 0);
  /* Kept for the refusals below: the manifest's bytes, and a copy of all. */
  static unsigned char man[1 << 16];
  ssize_t mlen = pread(S.store.fd[mi], man, sizeof man, 0);
  ASSERT(mlen > 40);
  fs_set keep;
  fs_set_copy(&keep, &S.store);

  fs_set pass;
  fs_set_copy(&pass, &keep);
  S.removed = 0;
  pid = spawn(&pass, 1, NULL);
  fs_set_clear(&pass);
  drain_notify();
  ASSERT_CONTAINS(slurp(log_path), "restored 2 shared object(s)");
  ASSERT_EQ(S.removed, 3); /* every entry taken out of the store */
  ASSERT_EQ(S.store.n, 0);
  /* The client goes on: its shared handle and matrix work after reconnecting. */
  memset(back, 0, N * 4);
  ASSERT_EQ(gkc_download(c, hs, back, N * 4), 0);
  ASSERT_EQ(gkc_reconnects(c), 1);
  ASSERT(memcmp(back, x, N * 4) == 0); /* byte for byte */
  gkc_instance(c, inst_b, shared_b);
  ASSERT(strcmp(inst_a, inst_b) != 0);
  ASSERT_STR_EQ(shared_a, shared_b);
  float xv[3] = {1, 1, 1}, y[3];
  gkc_spmv_args sp = GKC_SPMV_ARGS_INIT;
  sp.use_matrix = 1, sp.matrix = m, sp.x = gkc_ref_mem(xv, sizeof xv);
  gkc_out out = gkc_out_mem(y, sizeof y);
  ASSERT_EQ(gkc_spmv_ref(c, &sp, &out, NULL), 0);
  ASSERT_EQ(y[0], 3.0f);
  ASSERT_EQ(y[1], 3.0f);
  ASSERT_EQ(y[2], 9.0f);
  double s;
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_handle(hp, 64), GKC_SUM, &s, NULL, NULL, NULL),
            GKC_ESTALE_HANDLE);
  ASSERT_EQ(restored_objects(c), 2);
  ASSERT_EQ(gkc_release(c, hs), 0);
  gkc_close(c);
  stop(pid, SIGTERM); /* the matrix is saved again */
  ASSERT_EQ(S.store.n, 2);
  fs_set_clear(&S.store);

  /* --- 2. a corrupted manifest ----------------------------------------------------- */
  fs_set_copy(&pass, &keep);
  int at = fs_set_find(&pass, "gkc-manifest");
  close(pass.fd[at]);
  man[50] ^= 0x40; /* inside the first entry */
  pass.fd[at] = memfd_with("gkc-manifest", man, (size_t)mlen);
  man[50] ^= 0x40;
  refused(&pass, NULL, "checksum does not match");

  /* --- 3. something else in the store, over the budget, a save cut short ------------ */
  pass.n = 0;
  fs_set_put(&pass, memfd_with("gkc-manifest", "hello", 5), "gkc-manifest");
  fs_set_put(&pass, memfd_with("x", "x", 1), "somebody-else");
  refused(&pass, NULL, "not a gkcd manifest");
  ASSERT_CONTAINS(slurp(log_path), "descriptor 'somebody-else' is not gkcd's");

  fs_set_copy(&pass, &keep);
  refused(&pass, "1K", "more than --restore-max-bytes");

  fs_set_copy(&pass, &keep);
  fs_set_remove(&pass, fs_set_find(&pass, "gkc-manifest"));
  refused(&pass, NULL, "holds no manifest");

  /* An object whose bytes changed: its checksum refuses the whole save. */
  fs_set_copy(&pass, &keep);
  snprintf(name, sizeof name, "gkc-obj-%u", hs);
  at = fs_set_find(&pass, name);
  close(pass.fd[at]);
  for (int i = 0; i < N; i++) back[i] = x[i];
  back[N / 2] += 1.0f;
  pass.fd[at] = memfd_with(name, back, N * 4);
  refused(&pass, NULL, "checksum does not match");
  fs_set_clear(&keep);

  /* --- 4. SIGINT, and no NOTIFY_SOCKET: released, and said so ----------------------- */
  pid = spawn(NULL, 0, NULL);
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, 64), GKC_F32, 1, &hs), 0);
  gkc_close(c);
  stop(pid, SIGTERM);
  ASSERT_CONTAINS(slurp(log_path), "not under systemd (no NOTIFY_SOCKET): releasing 1 shared");
  ASSERT_EQ(S.store.n, 0);

  test_spread(x, N);

  free(x);
  free(back);
  fs_notify_close(&S);
  unlink(sock);
  unlink(log_path);
  rmdir(dir);
  fprintf(stderr, "e2e_fdstore: passed\n");
  return 0;
}
