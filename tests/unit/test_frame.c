/* test_frame.c: the frame scanner on valid, truncated, oversized and hostile
 * input.  Inputs are placed right before a PROT_NONE page, so reading one
 * byte past the end crashes the test instead of passing silently. */
#include <msgpack.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proto_frame.h"
#include "proto_rpc.h"
#include "test.h"

static const proto_limits LIM = {1 << 20, 4096, 16};

/* Copies p[0..n) to the end of a readable region followed by a guard page. */
static const uint8_t *guarded(const void *p, size_t n) {
  static uint8_t *region;
  static size_t region_len;
  long page = sysconf(_SC_PAGESIZE);
  size_t data_pages = (n + (size_t)page - 1) / (size_t)page + 1;
  if (region) munmap(region, region_len);
  region_len = (data_pages + 1) * (size_t)page;
  region = mmap(NULL, region_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT(region != MAP_FAILED);
  uint8_t *guard = region + data_pages * (size_t)page;
  ASSERT(mprotect(guard, (size_t)page, PROT_NONE) == 0);
  memcpy(guard - n, p, n);
  return guard - n;
}

static ssize_t scan(const void *p, size_t n, const proto_limits *lim, proto_frame_info *info) {
  return proto_frame_scan(guarded(p, n), n, lim, info);
}

/* A request frame packed with msgpack-c: [0, id, "sgemm", [{"a": bin(nbin)}]]. */
static msgpack_sbuffer request(uint32_t id, size_t nbin) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_request_head(&pk, id, "sgemm");
  msgpack_pack_map(&pk, 2);
  proto_pack_cstr(&pk, "a");
  msgpack_pack_bin(&pk, nbin);
  for (size_t i = 0; i < nbin; i++) msgpack_pack_bin_body(&pk, "x", 1);
  proto_pack_cstr(&pk, "alpha");
  msgpack_pack_double(&pk, 1.5);
  return sb;
}

static void test_complete_and_every_prefix(void) {
  msgpack_sbuffer sb = request(42, 300);
  proto_frame_info info;
  ASSERT_EQ(scan(sb.data, sb.size, &LIM, &info), (ssize_t)sb.size);
  ASSERT(info.msgid_known);
  ASSERT_EQ(info.msgid, 42);
  /* Every strict prefix is partial, never an error, never a frame. */
  for (size_t n = 1; n < sb.size; n++) {
    ssize_t r = scan(sb.data, n, &LIM, &info);
    if (r != PROTO_PARTIAL) TEST_FAIL("prefix of %zu/%zu bytes gave %zd", n, sb.size, r);
    ASSERT(info.need > n); /* the hint always asks for more than we have */
    if (n >= 3) ASSERT(info.msgid_known && info.msgid == 42);
  }
  msgpack_sbuffer_destroy(&sb);
}

static void test_two_frames_back_to_back(void) {
  msgpack_sbuffer a = request(1, 10), b = request(2, 20);
  uint8_t buf[512];
  memcpy(buf, a.data, a.size);
  memcpy(buf + a.size, b.data, b.size);
  proto_frame_info info;
  ASSERT_EQ(scan(buf, a.size + b.size, &LIM, &info), (ssize_t)a.size);
  ASSERT_EQ(info.msgid, 1);
  ASSERT_EQ(scan(buf + a.size, b.size, &LIM, &info), (ssize_t)b.size);
  ASSERT_EQ(info.msgid, 2);
  msgpack_sbuffer_destroy(&a);
  msgpack_sbuffer_destroy(&b);
}

static void test_scalars_are_frames(void) {
  proto_frame_info info;
  const uint8_t one[] = {0x05};
  ASSERT_EQ(scan(one, 1, &LIM, &info), 1);
  ASSERT(!info.msgid_known);
  const uint8_t f64[] = {0xcb, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f};
  ASSERT_EQ(scan(f64, 9, &LIM, &info), 9);
  ASSERT_EQ(scan(f64, 8, &LIM, &info), PROTO_PARTIAL);
  const uint8_t empty_map[] = {0x80};
  ASSERT_EQ(scan(empty_map, 1, &LIM, &info), 1);
}

static void test_never_used_byte(void) {
  proto_frame_info info;
  const uint8_t c1[] = {0xc1};
  ASSERT_EQ(scan(c1, 1, &LIM, &info), PROTO_FRAME_EPARSE);
  ASSERT(!info.msgid_known);
  const uint8_t inside[] = {0x94, 0x00, 0x07, 0xc1};
  ASSERT_EQ(scan(inside, sizeof inside, &LIM, &info), PROTO_FRAME_EPARSE);
  ASSERT(info.msgid_known && info.msgid == 7);
}

static void test_hostile_lengths(void) {
  proto_frame_info info;
  /* bin32 declaring 4 GiB - 1: too big at once, without waiting for data. */
  const uint8_t bin4g[] = {0xc6, 0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(scan(bin4g, sizeof bin4g, &LIM, &info), PROTO_FRAME_ETOOBIG);
  /* ...also inside a request, where the msgid is already known. */
  const uint8_t req[] = {0x94, 0x00, 0x09, 0xa1, 'x', 0x91, 0x81, 0xa1, 'a',
                         0xc6, 0x7f, 0xff, 0xff, 0xff};
  ASSERT_EQ(scan(req, sizeof req, &LIM, &info), PROTO_FRAME_ETOOBIG);
  ASSERT(info.msgid_known && info.msgid == 9);
  /* str32 and ext32 likewise. */
  const uint8_t str4g[] = {0xdb, 0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(scan(str4g, sizeof str4g, &LIM, &info), PROTO_FRAME_ETOOBIG);
  const uint8_t ext4g[] = {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01};
  ASSERT_EQ(scan(ext4g, sizeof ext4g, &LIM, &info), PROTO_FRAME_ETOOBIG);
  /* array32 / map32 of 2^32-1 elements: more objects than allowed. */
  const uint8_t arr[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(scan(arr, sizeof arr, &LIM, &info), PROTO_FRAME_ECOMPLEX);
  const uint8_t map[] = {0xdf, 0x80, 0x00, 0x00, 0x00};
  ASSERT_EQ(scan(map, sizeof map, &LIM, &info), PROTO_FRAME_ECOMPLEX);
  /* A bin that fits the limit exactly is fine; one byte more is not. */
  proto_limits small = {1 + 4 + 100, 16, 4};
  uint8_t fit[105] = {0xc6, 0, 0, 0, 100};
  ASSERT_EQ(scan(fit, sizeof fit, &small, &info), 105);
  fit[4] = 101;
  ASSERT_EQ(scan(fit, 5, &small, &info), PROTO_FRAME_ETOOBIG);
}

static void test_object_and_depth_limits(void) {
  proto_frame_info info;
  proto_limits lim = {1 << 20, 8, 3};
  /* 8 objects are allowed: an array of 7 nils.  An array of 8 nils is 9. */
  uint8_t seven[8] = {0x97};
  memset(seven + 1, 0xc0, 7);
  ASSERT_EQ(scan(seven, sizeof seven, &lim, &info), 8);
  uint8_t eight[9] = {0x98};
  memset(eight + 1, 0xc0, 8);
  ASSERT_EQ(scan(eight, sizeof eight, &lim, &info), PROTO_FRAME_ECOMPLEX);
  /* Depth 3 is allowed, depth 4 is not. */
  const uint8_t d3[] = {0x91, 0x91, 0x91, 0xc0};
  ASSERT_EQ(scan(d3, sizeof d3, &lim, &info), 4);
  const uint8_t d4[] = {0x91, 0x91, 0x91, 0x91, 0xc0};
  ASSERT_EQ(scan(d4, sizeof d4, &lim, &info), PROTO_FRAME_ECOMPLEX);
  /* 1000 nested arrays against the default limits. */
  uint8_t deep[1001];
  memset(deep, 0x91, 1000);
  deep[1000] = 0xc0;
  ASSERT_EQ(scan(deep, sizeof deep, &LIM, &info), PROTO_FRAME_ECOMPLEX);
}

/* Random bytes: the scanner must never crash, read past the end, or return
 * a length beyond the buffer; msgpack-c must accept whatever it accepts. */
static void test_random_garbage(void) {
  uint64_t s = 0x1234567;
  uint8_t buf[256];
  proto_frame_info info;
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = 1 + (size_t)(s % sizeof buf);
    for (size_t i = 0; i < n; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      buf[i] = (uint8_t)s;
    }
    const uint8_t *g = guarded(buf, n);
    ssize_t r = proto_frame_scan(g, n, &LIM, &info);
    ASSERT(r <= (ssize_t)n);
    if (r > 0) {
      /* A frame the scanner accepts must decode with msgpack-c exactly. */
      msgpack_zone zone;
      msgpack_zone_init(&zone, 1024);
      msgpack_object obj;
      size_t off = 0;
      int ur = msgpack_unpack((const char *)g, (size_t)r, &off, &zone, &obj);
      if (ur != MSGPACK_UNPACK_SUCCESS || off != (size_t)r)
        TEST_FAIL("scanner accepted %zd bytes msgpack-c rejects (%d, off %zu)", r, ur, off);
      msgpack_zone_destroy(&zone);
    }
  }
}

int main(void) {
  test_complete_and_every_prefix();
  test_two_frames_back_to_back();
  test_scalars_are_frames();
  test_never_used_byte();
  test_hostile_lengths();
  test_object_and_depth_limits();
  test_random_garbage();
  printf("test_frame: all passed\n");
  return 0;
}
