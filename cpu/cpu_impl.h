/* cpu_impl.h: one CPU device's state (be->impl of a CPU backend), types
 * only: cpu_backend.c makes it, cpu_part.c reads its thread count, so that
 * neither file calls the other back. */
#ifndef GKC_CPU_IMPL_H
#define GKC_CPU_IMPL_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct {
  int nthreads;           /* kernel threads (<= 0: all) */
  int index, count;       /* virtual device index of count (--cpu-devices) */
  char name[128];         /* as status shows it */
  size_t mem_limit;       /* its memory pool; 0: no limit of its own */
  atomic_size_t mem_used; /* resident bytes allocated from it */
} cpu_impl;

#endif
