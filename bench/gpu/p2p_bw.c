/* p2p_bw: GPU-to-GPU copy bandwidth between every pair of visible GPUs, both
 * directions (issue 14 (d)), with cudaMemcpyPeerAsync after enabling peer
 * access where cudaDeviceCanAccessPeer allows (as gkcd does at start-up):
 * --mib MiB per copy (256), the median of --reps (10) after a warm-up,
 * timed with events on the source GPU's stream.  Prints a table (how the
 * pair is linked comes from `nvidia-smi topo -m`, which multigpu.sh prints
 * beside it); --json FILE writes the figures.
 *
 *   p2p_bw [--mib M] [--reps R] [--json FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define CK(call)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "p2p_bw: %s: %s\n", #call, cudaGetErrorString(e_));           \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

static int cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int mib = 256, reps = 10;
  const char *json_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: p2p_bw [--mib M] [--reps R] [--json FILE]\n"
             "GPU-to-GPU copy bandwidth between every pair of GPUs, both directions.\n");
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "p2p_bw: %s needs a value\n", argv[i]);
      return 2;
    }
    const char *o = argv[i], *v = argv[++i];
    if (!strcmp(o, "--mib") && atoi(v) > 0 && atoi(v) <= 16384) mib = atoi(v);
    else if (!strcmp(o, "--reps") && atoi(v) > 0 && atoi(v) <= 100) reps = atoi(v);
    else if (!strcmp(o, "--json")) json_path = v;
    else {
      fprintf(stderr, "p2p_bw: bad option %s %s\n", o, v);
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    printf("p2p_bw: %d GPU visible: no pair to measure (skipped)\n", n);
    return 77;
  }
  size_t bytes = (size_t)mib << 20;
  void **buf = calloc((size_t)n, sizeof *buf);
  for (int d = 0; d < n; d++) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&buf[d], bytes));
    CK(cudaMemset(buf[d], d + 1, bytes));
    for (int p = 0; p < n; p++) {
      int can = 0;
      if (p == d) continue;
      CK(cudaDeviceCanAccessPeer(&can, d, p));
      if (can) {
        cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
        cudaGetLastError();
      }
    }
  }
  FILE *js = json_path ? fopen(json_path, "w") : NULL;
  if (js) fprintf(js, "{\"mib\": %d, \"pairs\": [", mib);
  printf("%-8s %-8s %6s %12s\n", "from", "to", "peer", "GB/s");
  int first = 1;
  float *t = malloc((size_t)reps * sizeof *t);
  for (int s = 0; s < n; s++)
    for (int d = 0; d < n; d++) {
      if (s == d) continue;
      int can = 0;
      CK(cudaDeviceCanAccessPeer(&can, d, s));
      CK(cudaSetDevice(s));
      cudaStream_t st;
      cudaEvent_t e0, e1;
      CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      CK(cudaMemcpyPeerAsync(buf[d], d, buf[s], s, bytes, st)); /* warm-up */
      CK(cudaStreamSynchronize(st));
      for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyPeerAsync(buf[d], d, buf[s], s, bytes, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
      }
      qsort(t, (size_t)reps, sizeof *t, cmp_f);
      double gbs = bytes / (t[reps / 2] * 1e-3) / 1e9;
      printf("GPU %-4d GPU %-4d %6s %12.1f\n", s, d, can ? "yes" : "no", gbs);
      if (js) fprintf(js, "%s{\"from\": %d, \"to\": %d, \"peer\": %s, \"gbps\": %.2f}", first ? "" : ", ", s, d,
                      can ? "true" : "false", gbs);
      first = 0;
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      CK(cudaStreamDestroy(st));
    }
  if (js) {
    fprintf(js, "]}\n");
    fclose(js);
  }
  free(t);
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    cudaFree(buf[d]);
  }
  free(buf);
  return 0;
}
