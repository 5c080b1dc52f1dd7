/* gpu_hog.c: holds all but LEAVE_MB of the GPU's free memory until killed,
 * so that a test can watch gkcd run out of device memory.
 *   gpu_hog LEAVE_MB */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  size_t leave = (size_t)(argc > 1 ? atol(argv[1]) : 512) << 20, free_b, total_b;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    fprintf(stderr, "gpu_hog: no GPU\n");
    return 77;
  }
  size_t held = 0, chunk = (size_t)1 << 30;
  while (chunk >= ((size_t)1 << 20)) {
    void *p;
    cudaMemGetInfo(&free_b, &total_b);
    if (free_b < leave + chunk) {
      chunk /= 2;
      continue;
    }
    if (cudaMalloc(&p, chunk) != cudaSuccess) {
      cudaGetLastError();
      chunk /= 2;
      continue;
    }
    held += chunk;
  }
  cudaMemGetInfo(&free_b, &total_b);
  printf("gpu_hog: holding %zu MiB, %zu MiB left free\n", held >> 20, free_b >> 20);
  fflush(stdout);
  pause();
  return 0;
}
