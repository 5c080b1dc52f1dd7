/* crc.h: the crc32 (zlib's) of a byte range, computed on several threads
 * when it is big.
 *
 * The fd store checksums every object it saves and checks it again before
 * restoring (fdstore.c): gigabytes of shared resident data.  One thread's
 * crc32 runs at ~1-2 GB/s, so a range of CRC_PARALLEL_MIN or more is cut
 * into pieces whose crcs threads compute at once, joined with
 * crc32_combine: the same value as one pass, whatever the pieces.  A
 * thread that cannot be started leaves its piece to the caller.
 */
#ifndef GKCD_CRC_H
#define GKCD_CRC_H

#include <stddef.h>
#include <stdint.h>

#define CRC_PARALLEL_MIN ((size_t)64 << 20)

uint32_t crc_bytes(const void *p, size_t n);

#endif
