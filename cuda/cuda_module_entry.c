/* cuda_module_entry.c: the one symbol gkcd-cuda.so exports (cuda_module.h).
 * The module is linked with its archives' symbols hidden, so that the
 * backend's own functions (cuda_backends_create included) bind inside it
 * and never meet gkcd's of the same name. */
#include "cuda_module.h"

static void module_abi(char *out, size_t len) { gkcd_cuda_module_abi(out, len); }

__attribute__((visibility("default"))) const gkcd_cuda_module gkcd_cuda_module_v1 = {
    .abi = module_abi,
    .backends_create = cuda_backends_create,
};
