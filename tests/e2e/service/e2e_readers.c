/* e2e_readers.c: big inline frames received, and big replies sent, off the
 * event loop by gkcd's reader threads (daemon/reader.h, conn.c's hand_off
 * and hand_off_write), against real gkcd processes:
 *
 *  1. eight connections at once sending big inline frames (upload, axpby)
 *     and getting big replies (axpby, download) under a budget whose input
 *     allowance cannot hold them all (so some wait, and one at a time goes
 *     on past it), and one connection pipelining big frames back to
 *     back: every result byte for byte right, the readers used (status
 *     readers.frames, readers.replies), and the books back to zero
 *     afterwards (memory.input, memory.replies, budget_used,
 *     readers.receiving, readers.sending);
 *  2. clients that die while a reader receives their frame (a plain close,
 *     and a half close, which is told its request was cut short): their
 *     input is given back and gkcd serves on;
 *  3. --request-timeout while a reader has the socket: the client is told
 *     `timeout` and closed, the reader let go, the books right;
 *  4. descriptors sent in the middle of a big frame (the reader receives
 *     them): the next shm_register takes the first, the surplus beyond 16
 *     is closed, and none is left open once the connection has gone;
 *  5. big replies sent by writer threads to clients that stop reading: one
 *     that goes (its charges given back), one closed after --send-timeout
 *     (the writer cancelled), and a slow but steady one, not timed out
 *     (the writer's progress counts);
 *  6. SIGTERM while readers receive frames from three clients: gkcd exits 0
 *     and the clients see their connections closed.
 *
 * "A reader has it" is read from status (readers.receiving), never from a
 * time.  Checks do not stop the test; the exit status is 0 only when all
 * passed.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "probe.h"
#include "rawrpc.h"
#include "svcutil.h"
#include "test.h"

#define MiB ((size_t)1 << 20)

static pthread_mutex_t g_check_mu = PTHREAD_MUTEX_INITIALIZER;
#define TCHECK(...)                    \
  do {                                 \
    pthread_mutex_lock(&g_check_mu);   \
    CHECK(__VA_ARGS__);                \
    pthread_mutex_unlock(&g_check_mu); \
  } while (0)

/* Small integers as floats: sums of two are exact whatever the backend. */
static float *ints(size_t n, uint64_t seed) {
  float *v = malloc(n * 4);
  if (!v) TEST_FAIL("out of memory");
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) v[i] = (float)((int)(test_rand_u64(&s) % 2001) - 1000);
  return v;
}

/* Waits (a bounded number of status calls) until path reaches at least
 * want; its last value. */
static double wait_status_at_least(rr_conn *rc, const char *path, double want) {
  double v = NAN;
  for (int i = 0; i < 400; i++) {
    v = status_on(rc, path);
    if (v >= want) break;
    rr_sleep_ms(25);
  }
  return v;
}

/* Waits until path is exactly want (books settling after a close). */
static double wait_status_is(rr_conn *rc, const char *path, double want) {
  double v = NAN;
  for (int i = 0; i < 400; i++) {
    v = status_on(rc, path);
    if (v == want) break;
    rr_sleep_ms(25);
  }
  return v;
}

/* gkcd's descriptors once rc is surely accepted (a status answered on it):
 * counted right after the connect, the count could miss rc's own socket
 * and then find one too many at the end (seen once in ten runs under ASan
 * beside other tests). */
static int settled_fds(const fixture *f, rr_conn *rc) {
  (void)status_on(rc, "connections");
  return fixture_nfds(f);
}

/* gkcd's descriptors back to fds0 (its reader threads' own were made at
 * start-up: they are in fds0). */
static void check_fds(const fixture *f, int fds0, const char *when) {
  int fds = fds0;
  for (int i = 0; i < 400 && (fds = fixture_nfds(f)) > fds0; i++) rr_sleep_ms(25);
  CHECK(fds <= fds0, "%s: gkcd has %d descriptors open, %d before", when, fds, fds0);
  if (fds <= fds0) return;
  char dir[64], path[400], target[256];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)f->pid);
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    fprintf(stderr, "  gkcd fd %s -> %s\n", e->d_name, target);
  }
  if (d) closedir(d);
  rr_dump_log(f, 80);
}

static void check_books(rr_conn *rc, const char *when) {
  CHECK(wait_status_is(rc, "memory.input", 0) == 0, "%s: memory.input = %g", when,
        status_on(rc, "memory.input"));
  CHECK(wait_status_is(rc, "readers.receiving", 0) == 0, "%s: readers.receiving = %g", when,
        status_on(rc, "readers.receiving"));
  CHECK(wait_status_is(rc, "readers.sending", 0) == 0, "%s: readers.sending = %g", when,
        status_on(rc, "readers.sending"));
  CHECK(wait_status_is(rc, "memory.replies", 0) == 0, "%s: memory.replies = %g", when,
        status_on(rc, "memory.replies"));
  CHECK(wait_status_is(rc, "budget_used", 0) == 0, "%s: budget_used = %g", when, status_on(rc, "budget_used"));
}

/* ------------------------------------------------------------------------ */
/* 1. eight connections at once, and one pipelining                          */

typedef struct {
  const fixture *f;
  int id, rounds, right;
} client_arg;

static void *client_main(void *vp) {
  client_arg *a = vp;
  gkc_conn *c = NULL;
  if (gkc_connect(&c, a->f->sock) != 0) {
    TCHECK(0, "client %d: connect: %s", a->id, gkc_errmsg(c));
    return NULL;
  }
  /* The socket: reader and writer threads move socket bytes; a ring's
   * bytes are copied by the loop (e2e_ring). */
  gkc_set_ring(c, 0);
  gkc_set_shm(c, GKC_SHM_OFF, 0);
  for (int r = 0; r < a->rounds; r++) {
    /* 1.5-3 MiB arrays, all different: axpby frames of 3-6 MiB; kept small
     * so that the test stays light beside others under ctest -j2 */
    size_t n = (size_t)(3 + (a->id + r) % 4) * MiB / 8 + (size_t)a->id * 1000 + 3;
    float *x = ints(n, (uint64_t)(a->id * 100 + r)), *y = ints(n, (uint64_t)(a->id * 100 + r + 50));
    float *out = malloc(n * 4), *want = malloc(n * 4);
    if (!out || !want) TEST_FAIL("out of memory");
    for (size_t i = 0; i < n; i++) want[i] = x[i] + y[i];
    gkc_out o = gkc_out_mem(out, n * 4);
    int rc = gkc_axpby(c, 1.0f, gkc_ref_mem(x, n * 4), 1.0f, gkc_ref_mem(y, n * 4), &o, NULL);
    int ok = rc == 0 && memcmp(out, want, n * 4) == 0;
    TCHECK(ok, "client %d round %d: axpby of %zu floats: %d %s", a->id, r, n, rc,
           rc ? gkc_errmsg(c) : "wrong bytes");
    a->right += ok;
    uint32_t h = 0;
    rc = gkc_upload(c, gkc_ref_mem(x, n * 4), GKC_F32, 0, &h);
    TCHECK(rc == 0, "client %d round %d: upload: %s", a->id, r, gkc_errmsg(c));
    if (rc == 0) {
      memset(out, 0, n * 4);
      rc = gkc_download(c, h, out, n * 4);
      ok = rc == 0 && memcmp(out, x, n * 4) == 0;
      TCHECK(ok, "client %d round %d: download: %d %s", a->id, r, rc, rc ? gkc_errmsg(c) : "wrong bytes");
      a->right += ok;
      gkc_release(c, h);
    }
    free(x), free(y), free(out), free(want);
  }
  gkc_close(c);
  return NULL;
}

/* Three uploads of different sizes in one write, then their downloads: a
 * reader's receive may run past one frame into the next. */
static void pipelined(const fixture *f) {
  rr_conn c;
  rr_open(&c, f);
  enum { NF = 3 };
  const size_t n[NF] = {3 * MiB / 2 + 1, 5 * MiB / 4 + 7, 2 * MiB + 11};
  float *x[NF];
  rr_frame fr;
  rr_frame_init(&fr);
  for (int i = 0; i < NF; i++) {
    x[i] = ints(n[i], 900 + (uint64_t)i);
    rr_pack_request(&fr, 10 + (uint32_t)i, "upload", ARGS(AB("data", x[i], n[i] * 4), AS("dtype", "f32")));
  }
  rr_sender s = {c.fd, fr.sb.data, fr.sb.size, 0};
  pthread_t th;
  pthread_create(&th, NULL, rr_sender_main, &s);
  int64_t h[NF] = {0};
  for (int i = 0; i < NF; i++) {
    rr_reply r;
    rr_get_reply(&c, &r, 60000);
    int j = r.valid && !r.msgid_nil ? (int)r.msgid - 10 : -1;
    const msgpack_object *ho = NULL;
    if (j >= 0 && j < NF && r.result && r.result->type == MSGPACK_OBJECT_MAP)
      for (uint32_t k = 0; k < r.result->via.map.size; k++) {
        const msgpack_object_kv *kv = &r.result->via.map.ptr[k];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 6 &&
            !memcmp(kv->key.via.str.ptr, "handle", 6))
          ho = &kv->val;
      }
    CHECK(ho != NULL, "pipelined upload %d: %s", i, rr_reply_desc(&r));
    if (ho) h[j] = (int64_t)rr_num(ho);
    rr_reply_free(&r);
  }
  pthread_join(th, NULL);
  CHECK(s.err == 0, "sending the pipelined uploads: %s", strerror(s.err));
  for (int i = 0; i < NF; i++) {
    if (!h[i]) continue;
    rr_reply r;
    rr_call(&c, 20 + (uint32_t)i, "download", ARGS(AI("handle", h[i])), &r, 60000);
    const msgpack_object *d = rr_result_bin(&r, "data", n[i] * 4);
    CHECK(d && memcmp(d->via.bin.ptr, x[i], n[i] * 4) == 0, "pipelined upload %d read back: %s", i,
          d ? "wrong bytes" : rr_reply_desc(&r));
    rr_reply_free(&r);
    rr_call(&c, 30 + (uint32_t)i, "release", ARGS(AI("handle", h[i])), &r, 10000);
    rr_reply_free(&r);
  }
  for (int i = 0; i < NF; i++) free(x[i]);
  rr_frame_free(&fr);
  rr_close(&c);
}

static void test_many(void) {
  fixture f;
  /* A 128 MiB budget: an input allowance of 32 MiB (the least), less than
   * eight connections' frames of 3-6 MiB at once; --queue-wait 0 lets requests
   * wait for memory as long as it takes. */
  const char *const args[] = {"--memory-budget", "128M", "--queue-wait", "0", NULL};
  fixture_start(&f, args, NULL);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "eight connections at once";
  CHECK(status_on(&rc, "memory.input_limit") == 32.0 * MiB, "memory.input_limit = %g with a 128 MiB budget",
        status_on(&rc, "memory.input_limit"));
  enum { NC = 8, ROUNDS = 2 };
  client_arg a[NC];
  pthread_t th[NC];
  for (int i = 0; i < NC; i++) {
    a[i] = (client_arg){&f, i, ROUNDS, 0};
    pthread_create(&th[i], NULL, client_main, &a[i]);
  }
  for (int i = 0; i < NC; i++) {
    pthread_join(th[i], NULL);
    TCHECK(a[i].right == 2 * ROUNDS, "client %d: %d of %d calls right", i, a[i].right, 2 * ROUNDS);
  }
  double frames = status_on(&rc, "readers.frames"), threads = status_on(&rc, "readers.threads");
  fprintf(stderr, "many: readers %g threads, %g parts of frames, %g bytes\n", threads, frames,
          status_on(&rc, "readers.bytes"));
  CHECK(frames >= NC, "readers.frames = %g: the big frames were not received by readers", frames);
  double replies = status_on(&rc, "readers.replies");
  fprintf(stderr, "many: %g replies sent by writers, %g bytes\n", replies, status_on(&rc, "readers.reply_bytes"));
  CHECK(replies >= NC, "readers.replies = %g: the big replies were not sent by writers", replies);
  CHECK(threads >= 1 && threads <= 8, "readers.threads = %g", threads);
  check_books(&rc, "after eight connections");
  rr_ctx = "one connection pipelining big frames";
  pipelined(&f);
  check_books(&rc, "after the pipelined frames");
  rr_close(&rc);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 2. dying while a reader has the socket                                    */

/* A 24 MiB upload request, of which the first `part` bytes are sent on a
 * fresh connection; returns once a reader receives it. */
static void send_part(const fixture *f, rr_conn *rc, rr_conn *d, const rr_frame *fr, size_t part,
                      double receiving_before) {
  rr_open(d, f);
  CHECK(rr_send_some(d->fd, fr->sb.data, part) == 0, "sending part of a frame");
  double v = wait_status_at_least(rc, "readers.receiving", receiving_before + 1);
  CHECK(v >= receiving_before + 1, "readers.receiving = %g: no reader took the frame", v);
}

static void test_dies(void) {
  fixture f;
  fixture_start(&f, NULL, NULL);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "clients that die while a reader receives";
  size_t n = 24 * MiB / 4;
  float *x = ints(n, 5);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 7, "upload", ARGS(AB("data", x, n * 4), AS("dtype", "f32")));
  int fds0 = settled_fds(&f, &rc);

  /* A plain close: EOF in the middle. */
  rr_conn d;
  send_part(&f, &rc, &d, &fr, 3 * MiB, 0);
  rr_close(&d);
  check_books(&rc, "after a close mid-frame");
  CHECK(wait_status_is(&rc, "connections", 1) == 1, "connections = %g", status_on(&rc, "connections"));

  /* A reset: a ping first, whose answer the client never reads; closing
   * a socket with unread bytes makes gkcd's next receive fail
   * (ECONNRESET) instead of seeing the end. */
  rr_frame pf;
  rr_frame_init(&pf);
  rr_pack_request(&pf, 1, "ping", NULL, 0);
  rr_open(&d, &f);
  CHECK(rr_send_some(d.fd, pf.sb.data, pf.sb.size) == 0, "sending a ping");
  struct pollfd pp = {d.fd, POLLIN, 0};
  CHECK(poll(&pp, 1, 30000) == 1, "no answer to the ping");
  CHECK(rr_send_some(d.fd, fr.sb.data, 5 * MiB) == 0, "sending part of a frame");
  CHECK(wait_status_at_least(&rc, "readers.receiving", 1) >= 1, "readers.receiving = %g: no reader took the frame",
        status_on(&rc, "readers.receiving"));
  rr_close(&d);
  rr_frame_free(&pf);
  check_books(&rc, "after a reset mid-frame");

  /* A half close: told the request was cut short, then closed. */
  send_part(&f, &rc, &d, &fr, 2 * MiB, 0);
  shutdown(d.fd, SHUT_WR);
  rr_reply r;
  rr_get_reply(&d, &r, 30000);
  CHECK(r.is_error && !strcmp(r.code, "parse_error") && strstr(r.msg, "middle of a request"),
        "half close mid-frame: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  CHECK(rr_recv_frame(&d, 30000) == RF_CLOSED, "the connection was not closed after the answer");
  rr_close(&d);
  check_books(&rc, "after a half close mid-frame");

  /* gkcd serves on: the same frame whole, read back byte for byte. */
  rr_open(&d, &f);
  rr_reply u;
  CHECK(rr_send_some(d.fd, fr.sb.data, fr.sb.size) == 0, "sending the whole frame");
  rr_get_reply(&d, &u, 60000);
  CHECK(rr_reply_ok(&u, 7), "upload after: %s", rr_reply_desc(&u));
  rr_reply_free(&u);
  rr_close(&d);
  check_books(&rc, "after the whole frame");
  check_fds(&f, fds0, "after the clients");
  rr_frame_free(&fr);
  free(x);
  rr_close(&rc);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 3. --request-timeout while a reader has the socket                        */

static void test_timeout(void) {
  fixture f;
  /* Long enough that the reader surely has the frame before it passes
   * (the hand-over follows the first read of the frame's header). */
  const char *const args[] = {"--request-timeout", "4", NULL};
  fixture_start(&f, args, NULL);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "--request-timeout while a reader receives";
  size_t n = 16 * MiB / 4;
  float *x = ints(n, 6);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 8, "upload", ARGS(AB("data", x, n * 4), AS("dtype", "f32")));
  rr_conn d;
  send_part(&f, &rc, &d, &fr, 2 * MiB, 0);
  rr_reply r;
  rr_get_reply(&d, &r, 60000);
  CHECK(r.notification && !strcmp(r.code, "timeout") && strstr(r.msg, "--request-timeout"),
        "a slow request: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  CHECK(rr_recv_frame(&d, 30000) == RF_CLOSED, "the connection was not closed after the timeout");
  rr_close(&d);
  CHECK(status_on(&rc, "closed_request_timeout") == 1, "closed_request_timeout = %g",
        status_on(&rc, "closed_request_timeout"));
  check_books(&rc, "after the timeout");
  rr_frame_free(&fr);
  free(x);
  rr_close(&rc);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 4. descriptors in the middle of a big frame                               */

static void test_fds(void) {
  fixture f;
  fixture_start(&f, NULL, NULL);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "descriptors sent in the middle of a big frame";
  int fds0 = settled_fds(&f, &rc);
  size_t n = 12 * MiB / 4, region = 1 * MiB;
  float *x = ints(n, 7);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 9, "upload", ARGS(AB("data", x, n * 4), AS("dtype", "f32")));
  rr_conn d;
  size_t at = 2 * MiB;
  send_part(&f, &rc, &d, &fr, at, 0);
  /* Twenty descriptors, each with a few bytes of the frame, while the
   * reader has it: the first is a memfd for shm_register, the others
   * pipes' ends; 16 may wait, the rest are closed. */
  int memfd = pb_memfd(region);
  CHECK(memfd >= 0, "memfd: %s", strerror(errno));
  int pipes[19][2];
  for (int i = 0; i < 20; i++) {
    int fd = memfd;
    if (i > 0) {
      if (pipe(pipes[i - 1]) != 0) TEST_FAIL("pipe");
      fd = pipes[i - 1][0];
    }
    CHECK(pb_send_with_fd(d.fd, fr.sb.data + at, 8, fd) == 0, "sending descriptor %d", i);
    at += 8;
  }
  CHECK(status_on(&rc, "readers.receiving") == 1, "readers.receiving = %g while the descriptors came",
        status_on(&rc, "readers.receiving"));
  CHECK(rr_send_some(d.fd, fr.sb.data + at, fr.sb.size - at) == 0, "sending the rest");
  rr_reply r;
  rr_get_reply(&d, &r, 60000);
  CHECK(rr_reply_ok(&r, 9), "upload: %s", rr_reply_desc(&r));
  int64_t h = 0;
  if (r.result && r.result->type == MSGPACK_OBJECT_MAP)
    for (uint32_t k = 0; k < r.result->via.map.size; k++)
      if (r.result->via.map.ptr[k].key.via.str.size == 6 && !memcmp(r.result->via.map.ptr[k].key.via.str.ptr, "handle", 6))
        h = (int64_t)rr_num(&r.result->via.map.ptr[k].val);
  rr_reply_free(&r);
  /* The bytes around the descriptors arrived in order. */
  rr_call(&d, 10, "download", ARGS(AI("handle", h)), &r, 60000);
  const msgpack_object *data = rr_result_bin(&r, "data", n * 4);
  CHECK(data && memcmp(data->via.bin.ptr, x, n * 4) == 0, "download: %s", data ? "wrong bytes" : rr_reply_desc(&r));
  rr_reply_free(&r);
  /* The oldest descriptor, the memfd, goes to shm_register. */
  rr_call(&d, 11, "shm_register", ARGS(AI("bytes", (int64_t)region)), &r, 30000);
  CHECK(rr_reply_ok(&r, 11), "shm_register with the memfd sent mid-frame: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  CHECK(status_on(&rc, "resident.regions") == 1, "resident.regions = %g", status_on(&rc, "resident.regions"));
  /* The next one is a pipe: refused as not a memfd, yet it was kept. */
  rr_call(&d, 12, "shm_register", ARGS(AI("bytes", (int64_t)region)), &r, 30000);
  CHECK(rr_reply_err(&r, 12, "invalid_argument"), "shm_register with a pipe: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_close(&d);
  close(memfd);
  for (int i = 0; i < 19; i++) close(pipes[i][0]), close(pipes[i][1]);
  check_books(&rc, "after the descriptors");
  CHECK(wait_status_is(&rc, "resident.regions", 0) == 0, "resident.regions = %g after the close",
        status_on(&rc, "resident.regions"));
  check_fds(&f, fds0, "descriptors received mid-frame");
  rr_frame_free(&fr);
  free(x);
  rr_close(&rc);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 5. clients that stop reading while a writer sends their reply             */

/* Uploads n floats on c (msgid id) and asks for them back (id + 1) without
 * reading the answer; its handle. */
static int64_t upload_then_download(rr_conn *c, const float *x, size_t n, uint32_t id) {
  rr_reply r;
  rr_call(c, id, "upload", ARGS(AB("data", x, n * 4), AS("dtype", "f32")), &r, 60000);
  int64_t h = 0;
  if (r.result && r.result->type == MSGPACK_OBJECT_MAP)
    for (uint32_t k = 0; k < r.result->via.map.size; k++)
      if (r.result->via.map.ptr[k].key.via.str.size == 6 && !memcmp(r.result->via.map.ptr[k].key.via.str.ptr, "handle", 6))
        h = (int64_t)rr_num(&r.result->via.map.ptr[k].val);
  CHECK(h > 0, "upload: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, id + 1, "download", ARGS(AI("handle", h)));
  CHECK(rr_send_some(c->fd, fr.sb.data, fr.sb.size) == 0, "sending a download");
  rr_frame_free(&fr);
  return h;
}

static void test_writer(void) {
  fixture f;
  const char *const args[] = {"--send-timeout", "2", NULL};
  fixture_start(&f, args, NULL);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "clients that stop reading while a writer sends";
  int fds0 = settled_fds(&f, &rc);
  size_t n = 32 * MiB / 4;
  float *x = ints(n, 9);
  /* Reads a little of its 32 MiB reply, then goes. */
  rr_conn d;
  rr_open(&d, &f);
  upload_then_download(&d, x, n, 1);
  CHECK(wait_status_at_least(&rc, "readers.sending", 1) >= 1, "readers.sending = %g: no writer took the reply",
        status_on(&rc, "readers.sending"));
  char some[65536];
  CHECK(recv(d.fd, some, sizeof some, 0) > 0, "reading the start of the reply");
  rr_close(&d);
  check_books(&rc, "after a client went in the middle of a reply");
  CHECK(wait_status_is(&rc, "resident.arrays", 0) == 0, "resident.arrays = %g", status_on(&rc, "resident.arrays"));
  /* Stops reading and stays: closed after --send-timeout, the writer
   * cancelled. */
  rr_open(&d, &f);
  upload_then_download(&d, x, n, 3);
  CHECK(wait_status_at_least(&rc, "readers.sending", 1) >= 1, "readers.sending = %g: no writer took the reply",
        status_on(&rc, "readers.sending"));
  CHECK(wait_status_at_least(&rc, "closed_send_timeout", 1) >= 1, "closed_send_timeout = %g",
        status_on(&rc, "closed_send_timeout"));
  check_books(&rc, "after --send-timeout closed a client a writer was sending to");
  rr_close(&d);
  /* A slow but steady reader is not timed out: the writer's progress
   * counts (64 KiB at a time, 30 ms apart: about 2 MiB/s, some 4 s for
   * the 8 MiB reply, twice --send-timeout). */
  rr_open(&d, &f);
  size_t m = 8 * MiB / 4;
  upload_then_download(&d, x, m, 5);
  size_t got = 0;
  for (int i = 0; i < 2000 && got < m * 4; i++) {
    ssize_t k = recv(d.fd, some, sizeof some, 0);
    if (k <= 0) break;
    got += (size_t)k;
    rr_sleep_ms(30);
  }
  CHECK(got > m * 4, "a slow reader got %zu bytes of a %zu-byte reply: closed?", got, m * 4);
  CHECK(status_on(&rc, "closed_send_timeout") == 1, "closed_send_timeout = %g: the slow reader was timed out",
        status_on(&rc, "closed_send_timeout"));
  rr_close(&d);
  check_books(&rc, "after the slow reader");
  check_fds(&f, fds0, "after the writers' clients");
  free(x);
  rr_close(&rc);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 6. SIGTERM while readers receive                                          */

static void test_sigterm(void) {
  fixture f;
  fixture_start(&f, NULL, NULL);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "SIGTERM while readers receive frames";
  size_t n = 16 * MiB / 4;
  float *x = ints(n, 8);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 11, "reduce", ARGS(AB("x", x, n * 4), AS("op", "sum")));
  enum { ND = 3 };
  rr_conn d[ND];
  for (int i = 0; i < ND; i++) send_part(&f, &rc, &d[i], &fr, (size_t)(i + 1) * MiB + 12345, i);
  rr_close(&rc);
  int st = fixture_stop(&f, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exit status %#x with readers out", st);
  for (int i = 0; i < ND; i++) {
    ssize_t got = rr_recv_frame(&d[i], 30000);
    CHECK(got == RF_CLOSED, "client %d: %s, not closed", i, rr_rf_name((int)got));
    rr_close(&d[i]);
  }
  rr_frame_free(&fr);
  free(x);
}

int main(void) {
  svc_init();
  double t0 = rr_now_s();
  SECTION(test_many());
  SECTION(test_dies());
  SECTION(test_timeout());
  SECTION(test_fds());
  SECTION(test_writer());
  SECTION(test_sigterm());
  return svc_finish("e2e_readers", t0);
}
