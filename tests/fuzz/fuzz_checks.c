/* fuzz_checks.c: the invariants fuzz_request checks on accepted jobs and on
 * replies (fuzz_harness.h). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_harness.h"
#include "proto_errors.h"
#include "proto_methods.h"
#include "proto_rpc.h"

/* --- helpers --------------------------------------------------------------- */

static int32_t ld_i32(const void *p, int64_t i) {
  int32_t v;
  memcpy(&v, (const unsigned char *)p + 4 * i, 4);
  return v;
}

static float ld_f32(const void *p, int64_t i) {
  float v;
  memcpy(&v, (const unsigned char *)p + 4 * i, 4);
  return v;
}

int inside(const void *p, size_t n, const void *base, size_t len) {
  const uint8_t *q = p, *b = base;
  return q >= b && q <= b + len && n <= (size_t)(b + len - q);
}

void check_span(const gkcd_job *job, const gkcd_span *s, uint64_t want, int dtype,
                const uint8_t *frame, size_t len) {
  if (want != UINT64_MAX) CHECK(s->bytes == want);
  CHECK(s->bytes % 4 == 0);
  if (s->ptr == NULL) {
    CHECK(s->bytes == 0);
    return;
  }
  if (s->where == SPAN_RES) {
    fake_obj *o = obj_holding(s->ptr, s->bytes);
    CHECK(o && o->kind != RES_REGION && job_holds(job, o));
    CHECK(!s->shared && !s->pinned);
    if (o->kind == RES_ARRAY) CHECK(s->ptr == o->mem && s->bytes == o->bytes && o->dtype == dtype);
    return;
  }
  CHECK(s->where == SPAN_HOST);
  if (s->shared) {
    fake_obj *o = obj_holding(s->ptr, s->bytes);
    CHECK(o && o->kind == RES_REGION && job_holds(job, o));
    CHECK(((const char *)s->ptr - (const char *)o->mem) % 4 == 0);
    CHECK(s->pinned == res_region_pinned(o->res));
    return;
  }
  CHECK(!s->pinned);
  CHECK(inside(s->ptr, s->bytes, frame, len) ||
        (job->priv[0] && s->ptr == job->priv[0]) || (job->priv[1] && s->ptr == job->priv[1]));
}

void check_out_arg(const msgpack_object *params, const gkcd_job *job) {
  const msgpack_object *o = proto_map_get(params, "out");
  if (!o) {
    CHECK(job->out_kind == OUT_BIN);
    return;
  }
  CHECK(o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 1);
  const msgpack_object *t = &o->via.map.ptr[0].val;
  if (t->type == MSGPACK_OBJECT_STR) {
    CHECK(job->out_kind == OUT_RES_NEW);
    return;
  }
  CHECK(t->type == MSGPACK_OBJECT_MAP);
  CHECK(t->via.map.size == (job->out_kind == OUT_RES ? 1u : 2u));
}

void check_out(const gkcd_job *job, const gkcd_span *const *inputs, int ninputs) {
  switch (job->out_kind) {
    case OUT_BIN: CHECK(job->out_ptr == NULL && job->out_res == NULL); break;
    case OUT_RES_NEW: CHECK(job->out_res == NULL); break;
    case OUT_HOST: {
      fake_obj *o = obj_holding(job->out_ptr, job->out_bytes);
      CHECK(o && o->kind == RES_REGION && o->res == job->out_res && job_holds(job, o));
      CHECK((char *)job->out_ptr == (char *)o->mem + job->out_offset);
      CHECK(job->out_offset % 4 == 0);
      break;
    }
    case OUT_RES: {
      fake_obj *o = obj_holding(job->out_ptr, job->out_bytes);
      CHECK(o && o->kind == RES_ARRAY && o->res == job->out_res && job_holds(job, o));
      CHECK(job->out_ptr == o->mem && o->bytes == job->out_bytes && o->dtype == DT_F32);
      /* Never an input too, except axpby's y (updated in place). */
      int in_place = job->method == PROTO_M_AXPBY && job->in.vec.y.ptr == job->out_ptr;
      for (int i = 0; i < ninputs; i++)
        if (inputs[i]->ptr == job->out_ptr) CHECK(in_place);
      break;
    }
    default: CHECK(0);
  }
}

int csr_sound(int32_t rows, int32_t cols, int64_t nnz, const void *rp, const void *ci,
              int32_t *longest) {
  *longest = 0;
  if (ld_i32(rp, 0) != 0) return 0;
  for (int64_t r = 1; r <= rows; r++) {
    int32_t a = ld_i32(rp, r - 1), b = ld_i32(rp, r);
    if (b < a) return 0;
    if (b - a > *longest) *longest = b - a;
  }
  if ((int64_t)ld_i32(rp, rows) != nnz) return 0;
  for (int64_t j = 0; j < nnz; j++) {
    int32_t c = ld_i32(ci, j);
    if (c < 0 || c >= cols) return 0;
  }
  return 1;
}

static void *copy_span(const gkcd_span *s) {
  void *p = xmalloc(s->bytes ? s->bytes : 1);
  if (s->bytes) memcpy(p, s->ptr, s->bytes);
  return p;
}

void reference_spmv(const gkcd_job *job) {
  const __typeof__(job->in.spmv) *s = &job->in.spmv;
  int32_t *rp = copy_span(&s->row_ptr), *ci = copy_span(&s->col_idx);
  float *val = copy_span(&s->values), *x = copy_span(&s->x);
  float *y = xmalloc((size_t)s->rows * 4);
  for (int32_t r = 0; r < s->rows; r++) {
    float acc = 0.0f;
    for (int32_t j = rp[r]; j < rp[r + 1]; j++) acc += val[j] * x[ci[j]];
    float old = s->y.ptr ? ld_f32(s->y.ptr, r) : 0.0f;
    y[r] = s->alpha * acc + (s->beta != 0.0f ? s->beta * old : 0.0f);
  }
  free(rp), free(ci), free(val), free(x), free(y);
}

/* --- replies --------------------------------------------------------------- */

/* msgpack's str is UTF-8 (and Python's msgpack.Unpacker(raw=False), as in
 * tests/e2e/protocol/e2e_python.py, refuses anything else). */
static int utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4, cp = c & 0x07;
    } else {
      return 0;
    }
    if (n - i < len) return 0;
    for (size_t j = 1; j < len; j++) {
      if ((s[i + j] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (s[i + j] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    i += len;
  }
  return 1;
}

void check_reply(msgpack_sbuffer *sb, uint64_t body_bytes, uint32_t want_msgid, int want_error) {
  proto_frame_info info;
  if (body_bytes > 0) {
    /* Without the body the reply is partial, and the scanner asks for
     * exactly the body's bytes (libgkc sizes its buffer from that). */
    ssize_t r = proto_frame_scan((const uint8_t *)sb->data, sb->size, &CLIENT_LIM, &info);
    CHECK(r == PROTO_PARTIAL);
    CHECK(info.msgid_known && info.msgid == want_msgid);
    CHECK(info.need == sb->size + body_bytes);
    static const char zeros[65536];
    if (body_bytes > sizeof zeros) return; /* keep executions fast */
    msgpack_sbuffer_write(sb, zeros, (size_t)body_bytes);
  }
  ssize_t r = proto_frame_scan((const uint8_t *)sb->data, sb->size, &CLIENT_LIM, &info);
  CHECK(r == (ssize_t)sb->size);
  msgpack_zone zone;
  CHECK(msgpack_zone_init(&zone, 1024));
  msgpack_object root;
  size_t off = 0;
  CHECK(msgpack_unpack(sb->data, sb->size, &off, &zone, &root) == MSGPACK_UNPACK_SUCCESS);
  CHECK(off == sb->size);
  proto_response resp;
  CHECK(proto_response_parse(&root, &resp) == 0);
  CHECK(resp.msgid == want_msgid);
  CHECK(resp.error == want_error);
  if (want_error)
    CHECK(resp.message != NULL && resp.message_len > 0);
  else
    CHECK(resp.result && resp.result->type == MSGPACK_OBJECT_MAP);
  msgpack_zone_destroy(&zone);
}

void reply_error(int msgid_known, uint32_t msgid, int code, const char *msg) {
  /* Every code the daemon sends has a wire name and a message. */
  CHECK(code < 0 && strcmp(proto_err_wire(code), "unknown") != 0);
  CHECK(msg && msg[0]);
  /* Names from the request are echoed through proto_echo: whatever bytes
   * came, the message is UTF-8 (crashers/README.md). */
  if (!utf8_valid((const unsigned char *)msg, strlen(msg))) {
    fprintf(stderr, "fuzz_request: error message is not UTF-8: %s\n", msg);
    CHECK(0);
  }
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error(&pk, msgid_known, msgid, code, msg);
  check_reply(&sb, 0, msgid_known ? msgid : UINT32_MAX, code);
  msgpack_sbuffer_destroy(&sb);
}

void reply_empty_map(uint32_t msgid) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_result_head(&pk, msgid);
  msgpack_pack_map(&pk, 0);
  check_reply(&sb, 0, msgid, 0);
  msgpack_sbuffer_destroy(&sb);
}
