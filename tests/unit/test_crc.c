/* test_crc.c: crc_bytes (daemon/crc.h) equals zlib's one-pass crc32 of the
 * same bytes, below and above the size from which it runs in pieces on
 * threads, at lengths that do not divide evenly; a changed byte anywhere
 * changes it. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>

#include "crc.h"
#include "test.h"

static uint32_t one_pass(const unsigned char *p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, p, k);
    p += k, n -= k;
  }
  return (uint32_t)c;
}

int main(void) {
  uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
  size_t max = CRC_PARALLEL_MIN + 12345;
  unsigned char *b = malloc(max);
  ASSERT(b);
  for (size_t i = 0; i < max; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    b[i] = (unsigned char)(rng >> 56);
  }
  static const size_t sizes[] = {0, 1, 7, 4096, 1000003};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    ASSERT_EQ(crc_bytes(b, sizes[i]), one_pass(b, sizes[i]));
  /* Pieces on threads: 8 that do not divide the length evenly, and a
   * length exactly at the threshold. */
  ASSERT_EQ(crc_bytes(b, max), one_pass(b, max));
  ASSERT_EQ(crc_bytes(b, CRC_PARALLEL_MIN), one_pass(b, CRC_PARALLEL_MIN));
  ASSERT_EQ(crc_bytes(b + 3, max - 3), one_pass(b + 3, max - 3));
  uint32_t whole = crc_bytes(b, max);
  static const size_t at[] = {0, CRC_PARALLEL_MIN / 8, CRC_PARALLEL_MIN / 8 - 1, CRC_PARALLEL_MIN + 12344};
  for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
    b[at[i]] ^= 0x10;
    ASSERT(crc_bytes(b, max) != whole);
    b[at[i]] ^= 0x10;
  }
  free(b);
  printf("test_crc: passed\n");
  return 0;
}
