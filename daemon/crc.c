/* crc.c: see crc.h. */
#include "crc.h"

#include <pthread.h>
#include <zlib.h>

#define CRC_PIECES 8

static uint32_t crc_serial(const void *p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const Bytef *b = p;
  while (n > 0) { /* zlib's length is a uInt */
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, b, k);
    b += k, n -= k;
  }
  return (uint32_t)c;
}

typedef struct {
  const unsigned char *p;
  size_t n;
  uint32_t c;
} crc_piece;

static void *crc_run(void *arg) {
  crc_piece *q = arg;
  q->c = crc_serial(q->p, q->n);
  return NULL;
}

uint32_t crc_bytes(const void *p, size_t n) {
  if (n < CRC_PARALLEL_MIN) return crc_serial(p, n);
  crc_piece q[CRC_PIECES];
  pthread_t tid[CRC_PIECES];
  int started[CRC_PIECES] = {0};
  size_t step = (n + CRC_PIECES - 1) / CRC_PIECES;
  for (int i = 0; i < CRC_PIECES; i++) {
    size_t at = (size_t)i * step;
    size_t len = at < n ? (n - at < step ? n - at : step) : 0;
    q[i] = (crc_piece){(const unsigned char *)p + (at < n ? at : n), len, 0};
  }
  for (int i = 1; i < CRC_PIECES; i++) started[i] = pthread_create(&tid[i], NULL, crc_run, &q[i]) == 0;
  crc_run(&q[0]);
  uLong c = q[0].c;
  for (int i = 1; i < CRC_PIECES; i++) {
    if (started[i])
      pthread_join(tid[i], NULL);
    else
      crc_run(&q[i]);
    c = crc32_combine(c, q[i].c, (z_off_t)q[i].n);
  }
  return (uint32_t)c;
}
