/* cuda_module.h: the CUDA backend as a loadable module (gkcd-cuda.so).
 *
 * gkcd itself links no CUDA library, so that one binary (and one Debian
 * package) runs on machines without them.  The CUDA backend (cuda/) is built
 * into a shared module that gkcd dlopen()s at start-up when --backend is auto
 * or cuda (daemon/cuda_module.c), once the NVIDIA driver (libcuda.so.1) has
 * said it sees a device; if the driver, a device, the module, or a CUDA
 * library it needs is missing, gkcd says why and serves from the CPU backend
 * (auto) or stops (cuda).
 *
 * The module exports one symbol, GKCD_CUDA_MODULE_SYMBOL, a gkcd_cuda_module
 * table; everything else in it is hidden.  It calls back into gkcd (job_finish,
 * job_fail, log_msg, backend_fatal, ...), which the executable exports by the
 * list in daemon/gkcd.dynlist: a function the backend starts to call must be
 * added there (gkcd refuses a module with an unresolved symbol, naming it).
 *
 * Where gkcd looks, first found wins:
 *   $GKCD_CUDA_MODULE                    a path, used alone when set
 *   <gkcd's directory>/gkcd-cuda.so      the build tree
 *   <gkcd's directory>/GKCD_CUDA_MODULE_RELDIR/gkcd-cuda.so
 *                                        an install: ${libdir}/gkc from
 *                                        ${sbindir}, so any --prefix works
 */
#ifndef GKCD_CUDA_MODULE_H
#define GKCD_CUDA_MODULE_H

#include <stddef.h>
#include <stdio.h>

#include "backend.h"
#include "gkc.h"

#define GKCD_CUDA_MODULE_FILE "gkcd-cuda.so"
#define GKCD_CUDA_MODULE_ENV "GKCD_CUDA_MODULE"
#define GKCD_CUDA_MODULE_SYMBOL "gkcd_cuda_module_v1"
/* The driver library asked for a device before the module is loaded (by
 * the name the CUDA runtime loads it by). */
#define GKCD_CUDA_DRIVER_LIB "libcuda.so.1"

typedef struct {
  /* gkcd_cuda_module_abi() as compiled in the module: the module and gkcd
   * share structures (gkcd_backend, gkcd_job, gkcd_config), so they must
   * come from the same build.  The version and the sizes catch a module
   * left over from another one. */
  void (*abi)(char *out, size_t len);
  /* cuda_backends_create (backend.h), as the module implements it. */
  int (*backends_create)(gkcd_backend **out, int max, int *count, const gkcd_config *cfg,
                         char *msg, size_t msglen);
} gkcd_cuda_module;

/* The version and sizes as this compilation unit sees them. */
static inline void gkcd_cuda_module_abi(char *out, size_t len) {
  snprintf(out, len, "gkc %s backend %zu job %zu config %zu", GKC_VERSION, sizeof(gkcd_backend),
           sizeof(gkcd_job), sizeof(gkcd_config));
}

#endif
