/* probe.c: status by path, RSS watching, checked requests (probe.h). */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define STATUS_MSGID 0x60000000u

/* --- status ---------------------------------------------------------------- */

double pb_path(const msgpack_object *m, const char *path) {
  char key[64];
  while (m && m->type == MSGPACK_OBJECT_MAP) {
    size_t n = strcspn(path, ".");
    snprintf(key, sizeof key, "%.*s", (int)n, path);
    m = proto_map_get(m, key);
    if (!path[n]) return rr_num(m);
    path += n + 1;
  }
  return NAN;
}

int pb_status_on(rr_conn *c, const char *const *paths, int n, double *out) {
  rr_reply r;
  rr_call(c, STATUS_MSGID, "status", NULL, 0, &r, 10000);
  int ok = rr_reply_ok(&r, STATUS_MSGID);
  for (int i = 0; i < n; i++) out[i] = ok ? pb_path(r.result, paths[i]) : NAN;
  rr_reply_free(&r);
  return ok ? 0 : -1;
}

double pb_status(const fixture *f, const char *path) {
  rr_conn c;
  if (rr_open_path(&c, f->sock)) return NAN;
  double v;
  pb_status_on(&c, &path, 1, &v);
  rr_close(&c);
  return v;
}

double pb_wait_status(const fixture *f, const char *path, double want, int ms) {
  double v = NAN, t0 = rr_now_s();
  for (;;) {
    v = pb_status(f, path);
    if (v == want || (rr_now_s() - t0) * 1000 >= ms) return v;
    rr_sleep_ms(20);
  }
}

/* --- the daemon's memory ---------------------------------------------------- */

static void *rss_main(void *p) {
  pb_rss_watch *w = p;
  while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
    long kib = fixture_rss_kib(w->f);
    if (kib > w->max_kib) w->max_kib = kib;
    w->samples++;
    rr_sleep_ms(w->period_ms);
  }
  return NULL;
}

void pb_rss_start(pb_rss_watch *w, const fixture *f, int period_ms) {
  memset(w, 0, sizeof *w);
  w->f = f;
  w->period_ms = period_ms;
  w->max_kib = fixture_rss_kib(f);
  if (pthread_create(&w->th, NULL, rss_main, w) != 0) TEST_FAIL("pthread_create failed");
}

long pb_rss_stop(pb_rss_watch *w) {
  __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
  pthread_join(w->th, NULL);
  return w->max_kib;
}

const char *pb_asan_env(void) {
  static char buf[1024];
  if (!rr_env_flag("GKC_SANITIZE")) return NULL;
  const char *cur = getenv("ASAN_OPTIONS");
  snprintf(buf, sizeof buf, "ASAN_OPTIONS=%s%squarantine_size_mb=16", cur ? cur : "", cur && *cur ? ":" : "");
  return buf;
}

/* --- a well-behaved client ---------------------------------------------------- */

int pb_reduce_ok(rr_conn *c, uint32_t id, size_t n, int timeout_ms, char *why, size_t whylen) {
  return pb_reduce_with(c, id, n, NULL, timeout_ms, why, whylen);
}

int pb_reduce_with(rr_conn *c, uint32_t id, size_t n, const rr_arg *extra, int timeout_ms,
                   char *why, size_t whylen) {
  float *x = rr_rand_floats(n);
  double ref = 0, mag = 0;
  for (size_t i = 0; i < n; i++) ref += x[i], mag += fabs(x[i]);
  rr_reply r;
  if (extra)
    rr_call(c, id, "reduce", ARGS(AB("x", x, n * 4), *extra), &r, timeout_ms);
  else
    rr_call(c, id, "reduce", ARGS(AB("x", x, n * 4)), &r, timeout_ms);
  double got = rr_reply_ok(&r, id) ? rr_num(proto_map_get(r.result, "value")) : NAN;
  int ok = fabs(got - ref) <= 1e-5 * mag + 1e-6;
  if (!ok && why) {
    if (rr_reply_ok(&r, id))
      snprintf(why, whylen, "reduce of %zu: sum %.9g, reference %.9g", n, got, ref);
    else
      snprintf(why, whylen, "reduce of %zu: %s", n, rr_reply_desc(&r));
  }
  rr_reply_free(&r);
  free(x);
  return ok;
}

int pb_sgemm_ok(rr_conn *c, uint32_t id, int m, int n, int k, int timeout_ms, char *why,
                size_t whylen) {
  float *a = rr_rand_floats((size_t)m * k), *b = rr_rand_floats((size_t)k * n);
  rr_reply r;
  rr_call(c, id, "sgemm",
          ARGS(AI("m", m), AI("n", n), AI("k", k), AB("a", a, (size_t)m * k * 4), AB("b", b, (size_t)k * n * 4)),
          &r, timeout_ms);
  const msgpack_object *cb = rr_result_bin(&r, "c", (size_t)m * n * 4);
  char w[200] = "";
  int ok = cb && r.msgid == id && rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, m, n, k, 1.0, 64, w, sizeof w);
  if (!ok && why)
    snprintf(why, whylen, "sgemm %dx%dx%d: %s", m, n, k, cb ? w : rr_reply_desc(&r));
  rr_reply_free(&r);
  free(a);
  free(b);
  return ok;
}

/* --- shared memory ------------------------------------------------------------ */

int pb_memfd(size_t bytes) {
  int fd = memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)bytes) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int pb_send_with_fd(int sock, const void *p, size_t n, int fd) {
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct iovec iov = {(void *)p, n};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                      .msg_controllen = sizeof ctl.buf};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  ssize_t w = sendmsg(sock, &mh, MSG_NOSIGNAL);
  if (w < 0) return errno;
  /* The descriptor went with the first byte; the rest is plain bytes. */
  return (size_t)w < n ? rr_send_some(sock, (const char *)p + w, n - (size_t)w) : 0;
}

/* --- a client that asks for more than it takes ------------------------------------- */

void pb_pack_outer_sgemms(rr_frame *fr, uint32_t id0, int nreq, int m, int n, const float *a,
                          size_t a_step, const float *b, size_t b_step) {
  rr_frame_init(fr);
  for (int i = 0; i < nreq; i++)
    rr_pack_request(fr, id0 + (uint32_t)i, "sgemm",
                    ARGS(AI("m", m), AI("n", n), AI("k", 1), AB("a", a + (size_t)i * a_step, (size_t)m * 4),
                         AB("b", b + (size_t)i * b_step, (size_t)n * 4)));
}

/* --- the end of a test ----------------------------------------------------------- */

void pb_stop_daemon_(const char *file, int line, fixture *f) {
  int st = fixture_stop(f, SIGTERM);
  int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  rr_check_at(file, line, ok, "WIFEXITED(st) && WEXITSTATUS(st) == 0: gkcd exit status %#x", st);
  if (!ok) rr_dump_log(f, 60);
}

/* --- configuration ------------------------------------------------------------ */

double pb_env_num(const char *name, double dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  double x = strtod(v, &end);
  if (end == v || *end) TEST_FAIL("%s=%s is not a number", name, v);
  return x;
}
