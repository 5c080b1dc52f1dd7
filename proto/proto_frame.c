/* proto_frame.c: structural msgpack scanner, see proto_frame.h. */
#include "proto_frame.h"

#include <string.h>

#define MAX_DEPTH_HARD 64

static uint64_t be(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = (v << 8) | p[i];
  return v;
}

/* What one object header says: bytes of header, bytes of payload that follow
 * it (str/bin/ext data, fixed-size numbers), and how many child objects it
 * contains (arrays: n, maps: 2n). */
typedef struct {
  int hdr;
  uint64_t payload;
  uint64_t children;
  int is_uint;      /* positive integer, value in uval */
  uint64_t uval;
} obj_head;

/* Decodes the header at p[0..avail).  Returns 1 on success, 0 when the
 * header itself is cut off, -1 on the never-used byte 0xc1. */
static int head(const uint8_t *p, size_t avail, obj_head *h) {
  uint8_t b = p[0];
  memset(h, 0, sizeof *h);
  h->hdr = 1;
  if (b <= 0x7f) { h->is_uint = 1; h->uval = b; return 1; }
  if (b >= 0xe0) return 1;                          /* negative fixint */
  if ((b & 0xf0) == 0x80) { h->children = 2u * (b & 0x0f); return 1; }
  if ((b & 0xf0) == 0x90) { h->children = b & 0x0f; return 1; }
  if ((b & 0xe0) == 0xa0) { h->payload = b & 0x1f; return 1; }
  int n = 0; /* width of the length/value field that follows */
  switch (b) {
    case 0xc0: case 0xc2: case 0xc3: return 1;      /* nil, false, true */
    case 0xc1: return -1;
    case 0xc4: case 0xd9: n = 1; break;             /* bin8, str8 */
    case 0xc5: case 0xda: n = 2; break;
    case 0xc6: case 0xdb: n = 4; break;
    case 0xc7: n = 1; break;                        /* ext8/16/32: len + type */
    case 0xc8: n = 2; break;
    case 0xc9: n = 4; break;
    case 0xca: h->payload = 4; return 1;            /* float32 */
    case 0xcb: h->payload = 8; return 1;
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
      int w = 1 << (b - 0xcc);
      if (avail < (size_t)1 + w) return 0;
      h->hdr = 1 + w; h->is_uint = 1; h->uval = be(p + 1, w);
      return 1;
    }
    case 0xd0: h->payload = 1; return 1;
    case 0xd1: h->payload = 2; return 1;
    case 0xd2: h->payload = 4; return 1;
    case 0xd3: h->payload = 8; return 1;
    case 0xd4: h->payload = 2; return 1;            /* fixext: type + data */
    case 0xd5: h->payload = 3; return 1;
    case 0xd6: h->payload = 5; return 1;
    case 0xd7: h->payload = 9; return 1;
    case 0xd8: h->payload = 17; return 1;
    case 0xdc: case 0xdd: {                         /* array16/32 */
      int w = b == 0xdc ? 2 : 4;
      if (avail < (size_t)1 + w) return 0;
      h->hdr = 1 + w; h->children = be(p + 1, w);
      return 1;
    }
    case 0xde: case 0xdf: {                         /* map16/32 */
      int w = b == 0xde ? 2 : 4;
      if (avail < (size_t)1 + w) return 0;
      h->hdr = 1 + w; h->children = 2 * be(p + 1, w);
      return 1;
    }
    default: return -1;
  }
  if (avail < (size_t)1 + n) return 0;
  h->hdr = 1 + n;
  h->payload = be(p + 1, n);
  if (b >= 0xc7 && b <= 0xc9) h->payload += 1;      /* ext type byte */
  return 1;
}

ssize_t proto_frame_scan(const uint8_t *buf, size_t len, const proto_limits *lim,
                         proto_frame_info *info) {
  uint64_t left[MAX_DEPTH_HARD]; /* children still to read at each open level */
  uint32_t depth = 0, objects = 0;
  uint32_t max_depth = lim->max_depth < MAX_DEPTH_HARD ? lim->max_depth : MAX_DEPTH_HARD;
  size_t pos = 0;
  uint64_t top_index = 0; /* position of the next child of the outermost array */
  int top_is_rpc = 0;
  int top_is_array = 0;

  info->msgid_known = 0;
  info->msgid = 0;
  info->need = len + 1;
  info->bin_at = 0;
  info->bin_len = 0;

  for (;;) {
    if (pos >= len) return PROTO_PARTIAL;
    obj_head h;
    int r = head(buf + pos, len - pos, &h);
    if (r < 0) return PROTO_FRAME_EPARSE;
    if (r == 0) return PROTO_PARTIAL;
    if (++objects > lim->max_objects) return PROTO_FRAME_ECOMPLEX;

    /* Remember [type, msgid, ...] of the outermost array as it goes by. */
    if (depth == 0) top_is_array = (buf[pos] & 0xf0) == 0x90 || buf[pos] == 0xdc || buf[pos] == 0xdd;
    if (depth == 1 && top_is_array) {
      if (top_index == 0) top_is_rpc = h.is_uint; /* as proto_request_parse reads it */
      else if (top_index == 1 && top_is_rpc && h.is_uint && h.uval <= UINT32_MAX) {
        info->msgid_known = 1;
        info->msgid = (uint32_t)h.uval;
      }
      top_index++;
    }

    /* Declared sizes are checked against the limit before waiting for them. */
    if ((uint64_t)h.hdr + h.payload > lim->max_bytes - pos) return PROTO_FRAME_ETOOBIG;
    if (h.children > lim->max_objects) return PROTO_FRAME_ECOMPLEX;
    size_t at = pos;
    pos += h.hdr + h.payload;
    if (pos > len) {
      info->need = pos;
      if (buf[at] >= 0xc4 && buf[at] <= 0xc6) { /* bin 8, 16, 32 */
        info->bin_at = at + (size_t)h.hdr;
        info->bin_len = h.payload;
      }
      return PROTO_PARTIAL;
    }

    if (depth > 0) left[depth - 1]--;
    if (h.children > 0) {
      if (depth >= max_depth) return PROTO_FRAME_ECOMPLEX;
      left[depth++] = h.children;
    }
    while (depth > 0 && left[depth - 1] == 0) depth--;
    if (depth == 0) return (ssize_t)pos;
  }
}
