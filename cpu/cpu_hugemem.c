/* cpu_hugemem.c: see cpu_hugemem.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cpu_hugemem.h"

#include <stdlib.h>
#include <sys/mman.h>

enum { HUGE_PAGE = 2 << 20 };

void *cpu_hugemem_alloc(size_t n) {
  if (n < CPU_HUGEMEM_MIN) return malloc(n ? n : 1);
  void *p = NULL;
  if (posix_memalign(&p, HUGE_PAGE, n)) return NULL;
#ifdef MADV_HUGEPAGE
  /* whole huge pages only: the block's tail shares its page with nothing
   * we own past n */
  (void)madvise(p, n & ~((size_t)HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
  return p;
}
