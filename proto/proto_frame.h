/* proto_frame.h: find msgpack-rpc frame boundaries without trusting them.
 *
 * msgpack has no length prefix around a message, and msgpack-c believes the
 * lengths a message declares: five bytes can announce a 4 GiB bin or an array
 * of four billion elements.  proto_frame_scan walks the structure of the first
 * message in a buffer, allocating nothing, and decides whether it is complete.
 * Only a complete frame is ever handed to msgpack_unpack, so every declared
 * length it sees is backed by bytes actually received, and the number of
 * objects it allocates is bounded by max_objects.
 *
 * Contract, in the style of picohttpparser: returns the length of the first
 * frame (> 0) when buf holds all of it, PROTO_PARTIAL when more bytes are
 * needed, or a negative PROTO_FRAME_E* when no amount of further bytes can
 * make it acceptable.  It reads nothing at or past buf[len].
 */
#ifndef PROTO_FRAME_H
#define PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_PARTIAL 0
#define PROTO_FRAME_EPARSE (-1)   /* a byte that is not msgpack (0xc1) */
#define PROTO_FRAME_ETOOBIG (-2)  /* the frame would exceed max_bytes */
#define PROTO_FRAME_ECOMPLEX (-3) /* more than max_objects, or nested deeper than max_depth */

typedef struct {
  size_t max_bytes;   /* largest frame accepted */
  uint32_t max_objects; /* most msgpack objects in one frame (containers count) */
  uint32_t max_depth;   /* deepest nesting of arrays and maps */
} proto_limits;

typedef struct {
  /* Set once the frame's prefix reads as a request or response header,
   * [0|1, msgid, ...], even when the frame is partial or in error, so that
   * an error reply can name the msgid. */
  int msgid_known;
  uint32_t msgid;
  /* On PROTO_PARTIAL: the buffer length at which scanning can next make
   * progress (the end of the object being received), so a caller may skip
   * rescans until that many bytes are in.  A hint only: never allocate
   * from it, it is what the peer *claims* it will send. */
  size_t need;
  /* On PROTO_PARTIAL inside a bin whose header is in: where its payload
   * starts (from buf) and its declared length, so that a client may receive
   * a big result straight into its destination.  0 and 0 otherwise. */
  size_t bin_at;
  uint64_t bin_len;
} proto_frame_info;

ssize_t proto_frame_scan(const uint8_t *buf, size_t len, const proto_limits *lim,
                         proto_frame_info *info);

#endif
