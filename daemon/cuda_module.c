/* cuda_module.c: finds and loads gkcd-cuda.so (cuda_module.h), and gives its
 * cuda_backends_create to the rest of gkcd under the name backend.h declares:
 * the callers do not know that the backend lives in a module. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_module.h"
#include "log.h"

/* ${libdir}/gkc relative to ${sbindir}; set by daemon/CMakeLists.txt. */
#ifndef GKCD_CUDA_MODULE_RELDIR
#define GKCD_CUDA_MODULE_RELDIR "../lib/gkc"
#endif

/* Loaded once, at start-up, from the main thread; never unloaded (the CUDA
 * runtime's threads and exit handlers live in the libraries it pulled in). */
static const gkcd_cuda_module *g_module;

/* gkcd's own directory, from /proc/self/exe: 0, or -1. */
static int exe_dir(char *out, size_t len) {
  ssize_t n = readlink("/proc/self/exe", out, len - 1);
  if (n <= 0 || (size_t)n >= len - 1) return -1;
  out[n] = '\0';
  char *slash = strrchr(out, '/');
  if (!slash) return -1;
  *slash = '\0';
  return 0;
}

/* The module's path (cuda_module.h says where gkcd looks): 0, or -1 with
 * msg naming the places tried. */
static int module_find(char *path, size_t len, char *msg, size_t msglen) {
  const char *env = getenv(GKCD_CUDA_MODULE_ENV);
  if (env && *env) {
    if ((size_t)snprintf(path, len, "%s", env) >= len) {
      snprintf(msg, msglen, "%s is longer than %zu bytes", GKCD_CUDA_MODULE_ENV, len - 1);
      return -1;
    }
    return 0; /* used alone: dlopen says what is wrong with it */
  }
  char dir[PATH_MAX];
  if (exe_dir(dir, sizeof dir) != 0) {
    snprintf(msg, msglen, "cannot read /proc/self/exe to find %s; set %s to its path",
             GKCD_CUDA_MODULE_FILE, GKCD_CUDA_MODULE_ENV);
    return -1;
  }
  static const char *const subdirs[] = {"", "/" GKCD_CUDA_MODULE_RELDIR};
  for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
    char cand[PATH_MAX];
    if ((size_t)snprintf(cand, sizeof cand, "%s%s/%s", dir, subdirs[i], GKCD_CUDA_MODULE_FILE) >=
        sizeof cand)
      continue;
    if (access(cand, F_OK) != 0) continue;
    /* The tidy form for the log (no "sbin/.."), else as found. */
    if (!realpath(cand, path)) snprintf(path, len, "%s", cand);
    return 0;
  }
  snprintf(msg, msglen,
           "the CUDA backend module %s is in neither %s nor %s/%s (install the gkcd-cuda "
           "package, or set %s to its path)",
           GKCD_CUDA_MODULE_FILE, dir, dir, GKCD_CUDA_MODULE_RELDIR, GKCD_CUDA_MODULE_ENV);
  return -1;
}

/* Whether the NVIDIA driver is there and sees a device, asked of the driver
 * library itself before the module is loaded: the module pulls in the CUDA
 * runtime, cuBLAS and cuSPARSE, ~190 MiB resident where gkcd alone is ~10,
 * only to find no GPU on a host that has the CUDA package but no driver (a
 * container without the GPU passed in, a CPU node of a cluster).  The
 * runtime loads the same library by the same name, so a driver the probe
 * cannot find the runtime could not find either.  0, or GKC_EDEVICE_ERROR
 * with msg.  libcuda stays loaded once cuInit has run in it. */
static int driver_probe(char *msg, size_t msglen) {
  void *h = dlopen(GKCD_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    snprintf(msg, msglen, "no NVIDIA driver (%s)", why ? why : "cannot load " GKCD_CUDA_DRIVER_LIB);
    return GKC_EDEVICE_ERROR;
  }
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
  if (!init || !count) {
    snprintf(msg, msglen, "%s is no NVIDIA driver (no cuInit or cuDeviceGetCount)",
             GKCD_CUDA_DRIVER_LIB);
    dlclose(h);
    return GKC_EDEVICE_ERROR;
  }
  int n = 0, rc = init(0);
  if (rc == 0) rc = count(&n);
  if (rc != 0) {
    snprintf(msg, msglen, "the NVIDIA driver did not start (CUresult %d)", rc);
    return GKC_EDEVICE_ERROR;
  }
  if (n < 1) {
    snprintf(msg, msglen, "the NVIDIA driver sees no device (CUDA_VISIBLE_DEVICES: %s)",
             getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
    return GKC_EDEVICE_ERROR;
  }
  return 0;
}

/* 0 with g_module set, or a negative gkc_error with msg. */
static int module_load(char *msg, size_t msglen) {
  if (g_module) return 0;
  char path[PATH_MAX];
  if (module_find(path, sizeof path, msg, msglen) != 0) return GKC_EDEVICE_ERROR;
  char why[300];
  if (driver_probe(why, sizeof why) != 0) {
    snprintf(msg, msglen, "%s; %s not loaded", why, path);
    return GKC_EDEVICE_ERROR;
  }
  /* RTLD_NOW: a symbol of gkcd's that the module needs and gkcd does not
   * export (daemon/gkcd.dynlist) is named here, not at its first call. */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    snprintf(msg, msglen, "cannot load the CUDA backend module %s: %s", path,
             why ? why : "unknown dlopen error");
    return GKC_EDEVICE_ERROR;
  }
  dlerror();
  const gkcd_cuda_module *m = dlsym(h, GKCD_CUDA_MODULE_SYMBOL);
  if (!m || !m->abi || !m->backends_create) {
    const char *why = dlerror();
    snprintf(msg, msglen, "%s is no gkcd CUDA backend module (no %s: %s)", path,
             GKCD_CUDA_MODULE_SYMBOL, why ? why : "empty table");
    dlclose(h);
    return GKC_EDEVICE_ERROR;
  }
  char want[128], have[128];
  gkcd_cuda_module_abi(want, sizeof want);
  m->abi(have, sizeof have);
  if (strcmp(want, have) != 0) {
    /* Its constructors may have run (the CUDA runtime's): keep it mapped. */
    snprintf(msg, msglen, "the CUDA backend module %s comes from another build (%s; this gkcd: %s)",
             path, have, want);
    return GKC_EDEVICE_ERROR;
  }
  log_info("CUDA backend module %s loaded", path);
  g_module = m;
  return 0;
}

int cuda_backends_create(gkcd_backend **out, int max, int *count, const gkcd_config *cfg, char *msg,
                         size_t msglen) {
  *count = 0;
  int rc = module_load(msg, msglen);
  if (rc != 0) return rc;
  return g_module->backends_create(out, max, count, cfg, msg, msglen);
}
