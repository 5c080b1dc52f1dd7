/* cpu_hugemem.h: big host scratch arrays in transparent huge pages.
 *
 * A fresh 4 KiB page costs a fault on its first touch, and on the hosts
 * we measured (VMs: the H200 machines, the CI machine) a fault costs 1 to
 * 3 us: the AMG setup of a 4M-row matrix writes about 1 GB of fresh
 * arrays (290,000 faults), about a quarter of its time on one thread
 * (perf, on the 2-core development VM).  Memory asked for in 2 MiB pages faults 512 times
 * less.  The kernel grants it only where THP is "always" or "madvise"
 * (the Debian default); elsewhere this is plain malloc.  Where huge pages
 * are scarce, "defrag" decides whether the fault compacts memory first
 * (a one-time stall: on the development VM, its page cache full, the first
 * 1 GB took 1.1 s, later ones 70-90 ms against 300 ms in 4 KiB pages).
 * Populating the pages up front (MADV_POPULATE_WRITE on 16 threads) was
 * tried and dropped: on the H200 host it made the AMG setup slower
 * (620-725 ms against 363-471, three fresh daemons each, 2026-11-29).
 *
 * Implemented in: cpu_hugemem.c
 */
#ifndef CPU_HUGEMEM_H
#define CPU_HUGEMEM_H

#include <stddef.h>

/* Arrays from this size up are asked for in huge pages. */
#define CPU_HUGEMEM_MIN ((size_t)4 << 20)

/* n bytes (at least 1), uninitialised, to be freed with free(); NULL when
 * out of memory.  From CPU_HUGEMEM_MIN up, 2 MiB-aligned and advised
 * MADV_HUGEPAGE (an advice refused is ignored: the memory is still good). */
void *cpu_hugemem_alloc(size_t n);

#endif
