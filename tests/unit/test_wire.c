/* test_wire.c: the client's output queue (gkc_wire.c) on its own, over a
 * socketpair whose far end we read ourselves: no daemon.
 *
 * The queue is a list of segments (bytes in the connection's buffer, or
 * references to the caller's arrays) consumed from seg_head.  When the list
 * is full and its front has been sent, seg_push compacts it, shifting every
 * segment down by seg_head; a request being packed at that moment must
 * still count its own bytes, and a refused one (over the in-flight bound)
 * must come back out of the queue without touching the requests before it.
 * What gkcd would receive is read back and decoded request by request.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gkc_internal.h"
#include "test.h"

#define BIN_BYTES 8192 /* over the queue's 4 KiB threshold: each array is referenced */

/* A request's params: {"x": [bin, bin, ...]}, each bin BIN_BYTES taken from
 * a pattern at its own seed, so that misplaced bytes show.  Each bin takes
 * two segments (its header, then the referenced bytes). */
typedef struct {
  int nbin;
  unsigned char *data; /* nbin * BIN_BYTES */
} payload;

static void fill(payload *p, int nbin, uint32_t seed) {
  p->nbin = nbin;
  p->data = malloc((size_t)nbin * BIN_BYTES);
  ASSERT(p->data);
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < (size_t)nbin * BIN_BYTES; i++) {
    s = s * 1664525u + 1013904223u;
    p->data[i] = (unsigned char)(s >> 24);
  }
}

static void pack_payload(msgpack_packer *pk, const gkc__req *r) {
  const payload *p = r->userdata;
  msgpack_pack_map(pk, 1);
  msgpack_pack_str(pk, 1), msgpack_pack_str_body(pk, "x", 1);
  msgpack_pack_array(pk, (size_t)p->nbin);
  for (int i = 0; i < p->nbin; i++) {
    msgpack_pack_bin(pk, BIN_BYTES);
    msgpack_pack_bin_body(pk, p->data + (size_t)i * BIN_BYTES, BIN_BYTES);
  }
}

static void done_noop(gkc_conn *c, gkc__req *r, gkc_result *res) { (void)c, (void)r, (void)res; }

static void req_for(gkc__req *r, payload *p) {
  gkc__req_init(r);
  r->method = "t";
  r->pack = pack_payload;
  r->done = done_noop;
  r->userdata = p;
}

/* Everything received so far. */
typedef struct {
  unsigned char *buf;
  size_t len, cap;
} stream;

/* Reads up to max bytes (SIZE_MAX: all there is) from the far end. */
static void drain(int fd, stream *st, size_t max) {
  size_t got = 0;
  while (got < max) {
    if (st->cap - st->len < 65536) {
      st->cap = st->cap ? st->cap * 2 : 1 << 20;
      st->buf = realloc(st->buf, st->cap);
      ASSERT(st->buf);
    }
    size_t want = st->cap - st->len;
    if (want > max - got) want = max - got;
    ssize_t n = read(fd, st->buf + st->len, want);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    ASSERT(n > 0);
    st->len += (size_t)n, got += (size_t)n;
  }
}

/* Flushes the whole queue through the far end into st. */
static void flush_all(gkc_conn *c, int far, stream *st) {
  for (int spins = 0; gkc__want_write(c); spins++) {
    ASSERT(spins < 100000);
    ASSERT_EQ(gkc__flush(c), 0);
    drain(far, st, SIZE_MAX);
  }
  drain(far, st, SIZE_MAX);
}

/* The next request in st at *off must be [0, msgid, "t", [{"x": p's bins}]]
 * and take exactly `bytes` bytes. */
static void expect_request(const stream *st, size_t *off, uint32_t msgid, const payload *p,
                           uint64_t bytes) {
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  size_t at = *off;
  ASSERT_EQ(msgpack_unpack_next(&u, (const char *)st->buf, st->len, off), MSGPACK_UNPACK_SUCCESS);
  ASSERT_EQ(*off - at, bytes);
  const msgpack_object *o = &u.data;
  ASSERT(o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 4);
  const msgpack_object *a = o->via.array.ptr;
  ASSERT_EQ(a[0].via.u64, 0);
  ASSERT_EQ(a[1].via.u64, msgid);
  ASSERT(a[2].type == MSGPACK_OBJECT_STR && a[2].via.str.size == 1 && a[2].via.str.ptr[0] == 't');
  ASSERT(a[3].type == MSGPACK_OBJECT_ARRAY && a[3].via.array.size == 1);
  const msgpack_object *m = &a[3].via.array.ptr[0];
  ASSERT(m->type == MSGPACK_OBJECT_MAP && m->via.map.size == 1);
  const msgpack_object *x = &m->via.map.ptr[0].val;
  ASSERT(x->type == MSGPACK_OBJECT_ARRAY);
  ASSERT_EQ(x->via.array.size, p->nbin);
  for (int i = 0; i < p->nbin; i++) {
    const msgpack_object *b = &x->via.array.ptr[i];
    ASSERT(b->type == MSGPACK_OBJECT_BIN && b->via.bin.size == BIN_BYTES);
    if (memcmp(b->via.bin.ptr, p->data + (size_t)i * BIN_BYTES, BIN_BYTES) != 0)
      TEST_FAIL("request %u, array %d: the bytes differ from what was queued", msgid, i);
  }
  msgpack_unpacked_destroy(&u);
}

/* A request refused over the bound while its packing compacted the queue
 * leaves the queue as it was; one accepted while compacting counts all its
 * bytes. */
static void test_compaction_mid_request(void) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int small = 4096; /* the kernel doubles it; far less than a request */
  ASSERT_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  ASSERT_EQ(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
  gkc_conn c;
  gkc__conn_init(&c);
  c.fd = sv[0];
  c.nonblock = 1;
  stream st = {0};

  /* A: 40 arrays, 80 segments; partly sent, so the front is consumed. */
  payload pa, pb, pd, pe;
  gkc__req ra, rb, rd, re;
  fill(&pa, 40, 1);
  req_for(&ra, &pa);
  ASSERT_EQ(gkc__submit(&c, &ra, 0, 0), 0);
  ASSERT_EQ(gkc__flush(&c), 0);
  ASSERT(c.seg_head > 0 && c.seg_head < c.nseg); /* the case under test */

  /* B: enough arrays to reach the end of the segment list while packing
   * (so it compacts), and over the bound (A is pending): refused. */
  fill(&pb, (int)(c.segcap - c.nseg) / 2 + 8, 2);
  req_for(&rb, &pb);
  uint64_t bound = ra.bytes + 1000;
  ASSERT_EQ(gkc__submit(&c, &rb, 0, bound), GKC_EBUSY);
  ASSERT_CONTAINS(c.errmsg, "over the context's bound");
  ASSERT_EQ(c.npending, 1);
  ASSERT_EQ(c.pending_bytes, ra.bytes);

  /* Some of A arrives; the front is consumed again before D. */
  drain(sv[1], &st, 3 * BIN_BYTES);
  ASSERT_EQ(gkc__flush(&c), 0);
  ASSERT(c.seg_head > 0 && c.seg_head < c.nseg);

  /* D: accepted while its packing compacts; E: a small one after it. */
  fill(&pd, (int)(c.segcap - c.nseg) / 2 + 8, 3), fill(&pe, 1, 4);
  req_for(&rd, &pd), req_for(&re, &pe);
  ASSERT_EQ(gkc__submit(&c, &rd, 0, 0), 0);
  ASSERT_EQ(gkc__submit(&c, &re, 0, 0), 0);
  ASSERT_EQ(c.npending, 3);
  ASSERT_EQ(c.pending_bytes, ra.bytes + rd.bytes + re.bytes);
  flush_all(&c, sv[1], &st);

  /* gkcd sees A, D and E whole and in order, and nothing of B (msgid 2). */
  size_t off = 0;
  expect_request(&st, &off, 1, &pa, ra.bytes);
  expect_request(&st, &off, 3, &pd, rd.bytes);
  expect_request(&st, &off, 4, &pe, re.bytes);
  ASSERT_EQ(off, st.len);

  gkc__conn_destroy(&c); /* cancels A, D, E and closes sv[0] */
  close(sv[1]);
  free(st.buf);
  free(pa.data), free(pb.data), free(pd.data), free(pe.data);
}

int main(void) {
  test_compaction_mid_request();
  printf("test_wire: ok\n");
  return 0;
}
