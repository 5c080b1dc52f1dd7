/* resutil.c: what the e2e_resident_* tests share (resutil.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <math.h>

#include "proto_rpc.h"
#include "resutil.h"

uint64_t rng;
fixture F;

float *rand_vec(size_t n) {
  float *v = malloc(n * sizeof *v + 4);
  ASSERT(v);
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

gkc_conn *conn_open(void) {
  gkc_conn *c;
  if (gkc_connect(&c, F.sock) != 0) TEST_FAIL("connect: %s", gkc_errmsg(c));
  return c;
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}


void res_stop(gkc_conn *c) {
  if (c) gkc_close(c);
  int st = fixture_stop(&F, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* --- references computed here ----------------------------------------------------------- */

/* C = alpha A B + beta C0 (no transposes), checked against got. */
void check_gemm(const char *what, int m, int n, int k, float alpha, const float *a,
                       const float *b, float beta, const float *c0, const float *got) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double t = (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
        acc += t, mag += fabs(t);
      }
      double want = alpha * acc, tol = 1e-5 * fabs(alpha) * mag + 1e-30;
      if (beta != 0.0f) {
        want += beta * (double)c0[(size_t)i * n + j];
        tol += 1e-5 * fabs(beta * c0[(size_t)i * n + j]);
      }
      double g = got[(size_t)i * n + j];
      if (!(fabs(g - want) <= tol))
        TEST_FAIL("%s: C[%d,%d] = %.9g, want %.9g", what, i, j, g, want);
    }
}
test_csr rand_csr(int32_t rows, int32_t cols, double density) {
  test_csr A = {rows, cols, NULL, NULL, NULL, 0};
  A.row_ptr = malloc(((size_t)rows + 1) * 4);
  size_t cap = (size_t)(rows * (double)cols * density * 1.5) + 16;
  A.col_idx = malloc(cap * 4);
  A.values = malloc(cap * 4);
  ASSERT(A.row_ptr && A.col_idx && A.values);
  A.row_ptr[0] = 0;
  for (int32_t i = 0; i < rows; i++) {
    for (int32_t j = 0; j < cols && (size_t)A.nnz < cap; j++)
      if ((double)(test_rand_u64(&rng) >> 11) / 9007199254740992.0 < density) {
        A.col_idx[A.nnz] = j;
        A.values[A.nnz++] = test_rand_f32(&rng);
      }
    A.row_ptr[i + 1] = (int32_t)A.nnz;
  }
  return A;
}

void free_csr(test_csr *A) { free(A->row_ptr), free(A->col_idx), free(A->values); }

gkc_csr as_gkc(const test_csr *A) {
  gkc_csr g = {A->rows, A->cols, A->nnz, A->row_ptr, A->col_idx, A->values};
  return g;
}

void check_spmv(const char *what, const test_csr *A, float alpha, const float *x,
                       float beta, const float *y0, const float *got) {
  for (int32_t i = 0; i < A->rows; i++) {
    double acc = 0, mag = 0;
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++) {
      double t = (double)A->values[j] * x[A->col_idx[j]];
      acc += t, mag += fabs(t);
    }
    double want = alpha * acc, tol = 1e-5 * fabs(alpha) * mag + 1e-30;
    if (beta != 0.0f) want += beta * (double)y0[i], tol += 1e-5 * fabs(beta * y0[i]);
    if (!(fabs(got[i] - want) <= tol))
      TEST_FAIL("%s: y[%d] = %.9g, want %.9g", what, i, got[i], want);
  }
}
/* --- status and the daemon's mappings ------------------------------------------------------ */

/* A top-level number of the status reply, or NAN when gkcd does not report it. */
double status_num(gkc_conn *c, const char *key) {
  char *json;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(json, pat);
  double v = p ? strtod(p + strlen(pat), NULL) : NAN;
  free(json);
  return v;
}

/* A count under status's "resident" map ("arrays", "matrices", "regions",
 * "bytes"), or NAN when gkcd does not report it. */
double resident_num(gkc_conn *c, const char *key) {
  char *json;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  double v = NAN;
  char *m = strstr(json, "\"resident\": {");
  if (m) {
    char *end = strchr(m, '}'), pat[80];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    char *p = strstr(m, pat);
    if (p && end && p < end) v = strtod(p + strlen(pat), NULL);
  }
  free(json);
  return v;
}

/* Mappings of our memfds ("gkc-region", "test-region") in the daemon. */
int daemon_region_maps(void) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)F.pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "memfd:gkc-region") || strstr(line, "memfd:test-region")) n++;
  fclose(f);
  return n;
}

/* Waits (up to 5 s) for fn() to reach want; returns the last value. */
double wait_for(double (*fn)(void *), void *arg, double want) {
  double v = fn(arg);
  for (int i = 0; i < 250 && v != want; i++) {
    sleep_ms(20);
    v = fn(arg);
  }
  return v;
}

double maps_fn(void *arg) {
  (void)arg;
  return daemon_region_maps();
}

double status_fn(void *arg) {
  status_arg *s = arg;
  return status_num(s->c, s->key);
}

double resident_fn(void *arg) {
  status_arg *s = arg;
  return resident_num(s->c, s->key);
}

/* Waits until status's resident.key is want; fails the test otherwise.
 * A no-op (with a note) when gkcd reports no "resident" map. */
void expect_resident(gkc_conn *c, const char *key, double want) {
  if (!isfinite(resident_num(c, key))) {
    fprintf(stderr, "  (status has no resident.%s)\n", key);
    return;
  }
  status_arg sa = {c, key};
  double got = wait_for(resident_fn, &sa, want);
  if (got != want) TEST_FAIL("status resident.%s = %.0f, want %.0f", key, got, want);
}


/* A memfd of size bytes, sealed with seals (0: none). */
int test_memfd(size_t bytes, int seals) {
  int fd = memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT(fd >= 0);
  ASSERT_EQ(ftruncate(fd, (off_t)bytes), 0);
  if (seals) ASSERT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}
/* --- raw requests ------------------------------------------------------------------------ */

/* Sends [0, msgid, method, [map packed by fn]] on fd (with send_fd as
 * SCM_RIGHTS when >= 0) and reads its reply, failing the test when none
 * comes within 10 s. */
raw_reply raw_call(int fd, const char *method, raw_pack_fn fn, void *arg, int send_fd) {
  static uint32_t msgid = 1000;
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_request_head(&pk, ++msgid, method);
  fn(&pk, arg);
  if (send_fd >= 0) {
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {sb.data, 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    h->cmsg_level = SOL_SOCKET, h->cmsg_type = SCM_RIGHTS, h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &send_fd, sizeof(int));
    if (sendmsg(fd, &mh, MSG_NOSIGNAL) != 1) TEST_FAIL("sendmsg: %s", strerror(errno));
    test_send_all(fd, sb.data + 1, sb.size - 1);
  } else {
    test_send_all(fd, sb.data, sb.size);
  }
  msgpack_sbuffer_destroy(&sb);
  struct pollfd pfd = {fd, POLLIN, 0};
  if (poll(&pfd, 1, 10000) != 1) TEST_FAIL("%s: no reply within 10 s", method);
  unsigned char *buf = NULL;
  size_t cap = 0, have = 0;
  size_t len = test_recv_frame(fd, &buf, &cap, &have);
  if (len == 0) TEST_FAIL("%s: gkcd closed the connection", method);
  msgpack_zone zone;
  msgpack_zone_init(&zone, 4096);
  msgpack_object root;
  size_t off = 0;
  proto_response resp;
  raw_reply r = {0};
  if (msgpack_unpack((const char *)buf, len, &off, &zone, &root) != MSGPACK_UNPACK_SUCCESS ||
      proto_response_parse(&root, &resp) != 0)
    TEST_FAIL("%s: malformed reply", method);
  ASSERT_EQ(resp.msgid, msgid);
  ASSERT_EQ(have, len); /* one request, one reply */
  r.err = resp.error;
  if (resp.error) {
    snprintf(r.code, sizeof r.code, "%.*s", (int)resp.code_len, resp.code);
    snprintf(r.message, sizeof r.message, "%.*s", (int)resp.message_len, resp.message);
    fprintf(stderr, "  ok: raw %s -> %s: %s\n", method, r.code, r.message);
  } else {
    const msgpack_object *h = proto_map_get(resp.result, "handle");
    if (!h) h = proto_map_get(resp.result, "region");
    if (!h) h = proto_map_get(resp.result, "matrix");
    if (h && h->type == MSGPACK_OBJECT_POSITIVE_INTEGER) r.id = h->via.u64;
  }
  msgpack_zone_destroy(&zone);
  free(buf);
  return r;
}

void raw_expect(int fd, const char *method, raw_pack_fn fn, void *arg, const char *code,
                       const char *word) {
  raw_reply r = raw_call(fd, method, fn, arg, -1);
  if (!r.err) TEST_FAIL("raw %s succeeded; want %s", method, code);
  ASSERT_STR_EQ(r.code, code);
  if (word) ASSERT_CONTAINS(r.message, word);
}

void pk_key(msgpack_packer *pk, const char *k) { proto_pack_cstr(pk, k); }

void pk_bin(msgpack_packer *pk, const char *k, const void *p, size_t n) {
  pk_key(pk, k);
  msgpack_pack_bin(pk, n);
  msgpack_pack_bin_body(pk, p, n);
}

void noargs(msgpack_packer *pk, void *arg) {
  (void)arg;
  msgpack_pack_map(pk, 0);
}

void reg_args(msgpack_packer *pk, void *arg) {
  msgpack_pack_map(pk, 1);
  pk_key(pk, "bytes"), msgpack_pack_uint64(pk, *(size_t *)arg);
}
