/* rawrpc.c: see rawrpc.h. */
#include "rawrpc.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proto_frame.h"
#include "test.h"

int rr_checks, rr_failed;
const char *rr_ctx = "";
_Thread_local uint64_t rr_rng;

/* --- checks -------------------------------------------------------------- */

void rr_check_at(const char *file, int line, int ok, const char *fmt, ...) {
  rr_checks++;
  if (ok) return;
  rr_failed++;
  fprintf(stderr, "%s:%d: CHECK FAILED [%s]: ", file, line, rr_ctx);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void rr_print_totals(const char *name, double t0) {
  printf("%s: %d checks, %d passed, %d failed (%.1f s)\n", name, rr_checks, rr_checks - rr_failed,
         rr_failed, rr_now_s() - t0);
}

/* --- small things -------------------------------------------------------- */

double rr_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void rr_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void rr_sort_doubles(double *v, size_t n) { qsort(v, n, sizeof *v, cmp_double); }

int rr_env_flag(const char *name) {
  const char *e = getenv(name);
  return e && *e && strcmp(e, "0") != 0;
}

char *rr_slurp(const char *path) {
  static char buf[1 << 18];
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  return buf;
}

void rr_dump_log(const fixture *f, int max_lines) {
  FILE *fp = fopen(f->log, "r");
  if (!fp) return;
  char line[512];
  if (max_lines > 0)
    fprintf(stderr, "---- %s (first %d lines) ----\n", f->log, max_lines);
  else
    fprintf(stderr, "---- %s ----\n", f->log);
  for (int n = 0; (max_lines <= 0 || n < max_lines) && fgets(line, sizeof line, fp); n++)
    fputs(line, stderr);
  fprintf(stderr, "----\n");
  fclose(fp);
}

float *rr_rand_floats(size_t n) {
  float *p = malloc(n * sizeof *p);
  if (!p) TEST_FAIL("out of memory");
  for (size_t i = 0; i < n; i++) p[i] = test_rand_f32(&rr_rng);
  return p;
}

/* --- a raw connection ---------------------------------------------------- */

void rr_open(rr_conn *c, const fixture *f) {
  memset(c, 0, sizeof *c);
  c->fd = fixture_connect(f);
}

int rr_open_path(rr_conn *c, const char *path) {
  memset(c, 0, sizeof *c);
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) TEST_FAIL("socket: %s", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", path);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    return e;
  }
  return 0;
}

void rr_close(rr_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  free(c->buf);
  c->buf = NULL;
  c->cap = c->have = 0;
}

int rr_send_some(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n > 0) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

void *rr_sender_main(void *sender) {
  rr_sender *s = sender;
  s->err = rr_send_some(s->fd, s->p, s->n);
  return NULL;
}

const char *rr_rf_name(int rf) {
  switch (rf) {
    case RF_CLOSED: return "connection closed";
    case RF_TIMEOUT: return "timed out";
    case RF_ERROR: return "recv error";
    case RF_MIDFRAME: return "closed inside a frame";
    case RF_BADFRAME: return "malformed frame";
  }
  return "?";
}

ssize_t rr_recv_frame(rr_conn *c, int timeout_ms) {
  static const proto_limits lim = {(size_t)1 << 40, 1u << 20, 32};
  double deadline = rr_now_s() + timeout_ms / 1000.0;
  for (;;) {
    if (c->have > 0) {
      proto_frame_info info;
      ssize_t r = proto_frame_scan(c->buf, c->have, &lim, &info);
      if (r < 0) return RF_BADFRAME;
      if (r > 0) return r;
    }
    if (c->cap - c->have < 65536) {
      c->cap = c->cap * 2 + 65536;
      c->buf = realloc(c->buf, c->cap);
      if (!c->buf) TEST_FAIL("out of memory");
    }
    int left = (int)((deadline - rr_now_s()) * 1000);
    if (left < 0) left = 0;
    struct pollfd p = {c->fd, POLLIN, 0};
    int pr = poll(&p, 1, left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return RF_TIMEOUT;
    ssize_t n = recv(c->fd, c->buf + c->have, c->cap - c->have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == ECONNRESET || errno == EPIPE)) n = 0;
    if (n < 0) return RF_ERROR;
    if (n == 0) return c->have ? RF_MIDFRAME : RF_CLOSED;
    c->have += (size_t)n;
  }
}

/* --- replies ------------------------------------------------------------- */

static void copy_str(char *dst, size_t cap, const msgpack_object *o) {
  size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
  memcpy(dst, o->via.str.ptr, n);
  dst[n] = 0;
}

void rr_get_reply(rr_conn *c, rr_reply *r, int timeout_ms) {
  memset(r, 0, sizeof *r);
  ssize_t len = rr_recv_frame(c, timeout_ms);
  if (len <= 0) {
    r->rf = (int)len;
    return;
  }
  r->got = 1;
  r->frame = malloc((size_t)len);
  if (!r->frame) TEST_FAIL("out of memory");
  memcpy(r->frame, c->buf, (size_t)len);
  memmove(c->buf, c->buf + len, c->have - (size_t)len);
  c->have -= (size_t)len;
  msgpack_unpacked_init(&r->up);
  size_t off = 0;
  if (msgpack_unpack_next(&r->up, r->frame, (size_t)len, &off) != MSGPACK_UNPACK_SUCCESS) return;
  const msgpack_object *o = &r->up.data;
  if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 3) { /* a notification? */
    const msgpack_object *a = o->via.array.ptr;
    if (a[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[0].via.u64 == 2 && a[1].type == MSGPACK_OBJECT_STR &&
        a[1].via.str.size == 5 && !memcmp(a[1].via.str.ptr, "error", 5) && a[2].type == MSGPACK_OBJECT_ARRAY &&
        a[2].via.array.size == 1 && a[2].via.array.ptr[0].type == MSGPACK_OBJECT_MAP) {
      const msgpack_object *code = proto_map_get(&a[2].via.array.ptr[0], "code");
      const msgpack_object *msg = proto_map_get(&a[2].via.array.ptr[0], "message");
      if (code && code->type == MSGPACK_OBJECT_STR && msg && msg->type == MSGPACK_OBJECT_STR) {
        copy_str(r->code, sizeof r->code, code);
        copy_str(r->msg, sizeof r->msg, msg);
        r->notification = 1;
      }
    }
    return;
  }
  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4) return;
  const msgpack_object *a = o->via.array.ptr;
  if (a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || a[0].via.u64 != 1) return;
  if (a[1].type == MSGPACK_OBJECT_NIL) {
    r->msgid_nil = 1;
  } else if (a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[1].via.u64 <= UINT32_MAX) {
    r->msgid = (uint32_t)a[1].via.u64;
  } else {
    return;
  }
  if (a[2].type == MSGPACK_OBJECT_NIL) {
    r->result = &a[3];
    r->valid = 1;
    return;
  }
  if (a[2].type != MSGPACK_OBJECT_MAP || a[3].type != MSGPACK_OBJECT_NIL) return;
  const msgpack_object *code = proto_map_get(&a[2], "code");
  const msgpack_object *msg = proto_map_get(&a[2], "message");
  if (!code || code->type != MSGPACK_OBJECT_STR || !msg || msg->type != MSGPACK_OBJECT_STR) return;
  copy_str(r->code, sizeof r->code, code);
  copy_str(r->msg, sizeof r->msg, msg);
  r->is_error = 1;
  r->valid = 1;
}

void rr_reply_free(rr_reply *r) {
  if (r->frame) {
    msgpack_unpacked_destroy(&r->up);
    free(r->frame);
  }
  memset(r, 0, sizeof *r);
}

const char *rr_reply_desc(const rr_reply *r) {
  static _Thread_local char buf[800];
  if (!r->got)
    snprintf(buf, sizeof buf, "no reply (%s)", rr_rf_name(r->rf));
  else if (r->notification)
    snprintf(buf, sizeof buf, "notification %s: %s", r->code, r->msg);
  else if (!r->valid)
    snprintf(buf, sizeof buf, "a malformed reply");
  else if (r->is_error)
    snprintf(buf, sizeof buf, "error %s: %s", r->code, r->msg);
  else
    snprintf(buf, sizeof buf, "success");
  return buf;
}

int rr_reply_ok(const rr_reply *r, uint32_t msgid) {
  return r->valid && !r->is_error && !r->msgid_nil && r->msgid == msgid;
}

int rr_reply_err(const rr_reply *r, uint32_t msgid, const char *code) {
  return r->valid && r->is_error && !r->msgid_nil && r->msgid == msgid && !strcmp(r->code, code);
}

double rr_num(const msgpack_object *o) {
  if (!o) return NAN;
  switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
    default: return NAN;
  }
}

const msgpack_object *rr_result_bin(const rr_reply *r, const char *key, size_t bytes) {
  if (!r->valid || r->is_error) return NULL;
  const msgpack_object *o = proto_map_get(r->result, key);
  if (!o || o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != bytes) return NULL;
  return o;
}

float rr_ld_f32(const void *p, size_t i) {
  float v;
  memcpy(&v, (const char *)p + 4 * i, 4);
  return v;
}

int rr_sgemm_entries_ok(const void *c, const float *a, const float *b, int m, int n, int k,
                        double alpha, int samples, char *why, size_t whylen) {
  for (int s = 0; s < samples; s++) {
    int i = (int)(test_rand_u64(&rr_rng) % (uint64_t)m), j = (int)(test_rand_u64(&rr_rng) % (uint64_t)n);
    double ref = 0, mag = 0;
    for (int p = 0; p < k; p++) {
      double t = (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
      ref += t;
      mag += fabs(t);
    }
    ref *= alpha;
    mag *= fabs(alpha);
    double got = rr_ld_f32(c, (size_t)i * n + j);
    if (!(fabs(got - ref) <= 2e-4 * mag + 1e-6)) {
      snprintf(why, whylen, "C[%d][%d] = %.9g, reference %.9g", i, j, got, ref);
      return 0;
    }
  }
  return 1;
}

/* --- requests ------------------------------------------------------------ */

void rr_pack_int(msgpack_packer *pk, const char *key, int64_t v) {
  proto_pack_cstr(pk, key);
  msgpack_pack_int64(pk, v);
}

void rr_pack_f64(msgpack_packer *pk, const char *key, double v) {
  proto_pack_cstr(pk, key);
  msgpack_pack_double(pk, v);
}

void rr_pack_bool(msgpack_packer *pk, const char *key, int v) {
  proto_pack_cstr(pk, key);
  v ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
}

void rr_pack_str(msgpack_packer *pk, const char *key, const char *v) {
  proto_pack_cstr(pk, key);
  proto_pack_cstr(pk, v);
}

void rr_pack_bin(msgpack_packer *pk, const char *key, const void *p, size_t n) {
  proto_pack_cstr(pk, key);
  msgpack_pack_bin(pk, n);
  msgpack_pack_bin_body(pk, p, n);
}

void rr_frame_init(rr_frame *f) {
  msgpack_sbuffer_init(&f->sb);
  msgpack_packer_init(&f->pk, &f->sb, msgpack_sbuffer_write);
}

void rr_frame_free(rr_frame *f) { msgpack_sbuffer_destroy(&f->sb); }

static void pack_arg(msgpack_packer *pk, const rr_arg *a) {
  switch (a->t) {
    case A_INT: rr_pack_int(pk, a->key, a->i); break;
    case A_F64: rr_pack_f64(pk, a->key, a->f); break;
    case A_F32:
      proto_pack_cstr(pk, a->key);
      msgpack_pack_float(pk, (float)a->f);
      break;
    case A_STR: rr_pack_str(pk, a->key, a->p); break;
    case A_BIN: rr_pack_bin(pk, a->key, a->p, a->n); break;
    case A_BOOL: rr_pack_bool(pk, a->key, a->i != 0); break;
    default:
      proto_pack_cstr(pk, a->key);
      msgpack_pack_nil(pk);
  }
}

void rr_pack_request(rr_frame *f, uint32_t msgid, const char *method, const rr_arg *args,
                     size_t n) {
  proto_pack_request_head(&f->pk, msgid, method);
  msgpack_pack_map(&f->pk, n);
  for (size_t i = 0; i < n; i++) pack_arg(&f->pk, &args[i]);
}

int rr_call(rr_conn *c, uint32_t msgid, const char *method, const rr_arg *args, size_t n,
            rr_reply *r, int timeout_ms) {
  rr_frame f;
  rr_frame_init(&f);
  rr_pack_request(&f, msgid, method, args, n);
  int e = rr_send_some(c->fd, f.sb.data, f.sb.size);
  rr_frame_free(&f);
  if (e) {
    memset(r, 0, sizeof *r);
    r->rf = RF_CLOSED;
    return e;
  }
  rr_get_reply(c, r, timeout_ms);
  return 0;
}

int rr_ping(rr_conn *c, int timeout_ms, char *why, size_t whylen) {
  static uint32_t next_id = 0x70000000u;
  uint32_t id = next_id++;
  rr_reply r;
  int e = rr_call(c, id, "ping", NULL, 0, &r, timeout_ms);
  const msgpack_object *p = rr_reply_ok(&r, id) ? proto_map_get(r.result, "protocol") : NULL;
  int ok = p && p->type == MSGPACK_OBJECT_POSITIVE_INTEGER && p->via.u64 == 1;
  if (!ok && why)
    snprintf(why, whylen, "%s",
             e ? strerror(e) : !r.got ? rr_rf_name(r.rf) : r.is_error ? r.code : "got a wrong reply");
  rr_reply_free(&r);
  return ok;
}

/* --- set-up steps -------------------------------------------------------- */

void rr_decode(const void *buf, size_t len, msgpack_zone *z, proto_response *r) {
  msgpack_zone_init(z, 4096);
  msgpack_object root;
  size_t off = 0;
  ASSERT_EQ(msgpack_unpack((const char *)buf, len, &off, z, &root), MSGPACK_UNPACK_SUCCESS);
  ASSERT_EQ(proto_response_parse(&root, r), 0);
}

void rr_fetch(const fixture *f, uint32_t msgid, const char *method, rr_fetched *out) {
  int fd = fixture_connect(f);
  rr_frame fr;
  rr_frame_init(&fr);
  proto_pack_request_head(&fr.pk, msgid, method);
  msgpack_pack_map(&fr.pk, 0);
  test_send_all(fd, fr.sb.data, fr.sb.size);
  rr_frame_free(&fr);
  size_t cap = 0, have = 0;
  out->buf = NULL;
  size_t len = test_recv_frame(fd, &out->buf, &cap, &have);
  close(fd);
  if (len == 0) TEST_FAIL("%s: connection closed", method);
  rr_decode(out->buf, len, &out->zone, &out->r);
}

void rr_fetched_free(rr_fetched *out) {
  msgpack_zone_destroy(&out->zone);
  free(out->buf);
}
