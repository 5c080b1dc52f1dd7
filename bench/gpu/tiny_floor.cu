/* tiny_floor.cu: what the GPU itself charges a tiny request, without gkcd
 * (issue #28's ≤ 10 µs round trip for a 16-float reduce): the host's time
 * from a launch to the end of cudaStreamSynchronize, median of --reps, for
 *   empty      an empty 1-block kernel
 *   mapped     a 1-warp kernel summing 16 floats it reads from pinned host
 *              memory and writing the double back there (gkcd's tiny path,
 *              cuda/cuda_tiny.c)
 *   copies     the same 16 floats copied in, summed in device memory, the
 *              double copied back (two copies and the kernel on one stream)
 * on a default-priority stream and on the highest-priority one.
 *
 *   tiny_floor [--reps N]
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "bench_util.h" /* a C library */
}

__global__ void empty_kernel() {}

__global__ void sum16(const float *x, int n, double *out) {
  double v = threadIdx.x < n ? x[threadIdx.x] : 0.0;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  if (threadIdx.x == 0) *out = v;
}

static double median_us(std::vector<double> &v) { return bench_median(v.data(), (int)v.size()) * 1e6; }

int main(int argc, char **argv) {
  int reps = 20000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      printf("usage: tiny_floor [--reps N]\n");
      return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
    }
  }
  if (reps < 10) reps = 10;
  int lo, hi;
  CUDA_OK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  float *hx;
  double *hout, *dout;
  float *dx;
  CUDA_OK(cudaMallocHost(&hx, 4096));
  CUDA_OK(cudaMallocHost(&hout, 64));
  CUDA_OK(cudaMalloc(&dx, 4096));
  CUDA_OK(cudaMalloc(&dout, 64));
  for (int i = 0; i < 16; i++) hx[i] = (float)(i + 1);
  printf("| stream | empty us | mapped us | copies us |\n|---|---:|---:|---:|\n");
  for (int pri = 0; pri < 2; pri++) {
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, pri ? hi : lo));
    std::vector<double> te, tm, tc;
    for (int r = 0; r < reps + 100; r++) {
      double t0 = bench_now_s();
      empty_kernel<<<1, 32, 0, s>>>();
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaStreamSynchronize(s));
      double t1 = bench_now_s();
      sum16<<<1, 32, 0, s>>>(hx, 16, hout);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaStreamSynchronize(s));
      double t2 = bench_now_s();
      if (*hout != 136.0) {
        fprintf(stderr, "mapped sum %g, want 136\n", *hout);
        return 1;
      }
      CUDA_OK(cudaMemcpyAsync(dx, hx, 64, cudaMemcpyHostToDevice, s));
      sum16<<<1, 32, 0, s>>>(dx, 16, dout);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaMemcpyAsync(hout + 1, dout, 8, cudaMemcpyDeviceToHost, s));
      CUDA_OK(cudaStreamSynchronize(s));
      double t3 = bench_now_s();
      if (hout[1] != 136.0) {
        fprintf(stderr, "copied sum %g, want 136\n", hout[1]);
        return 1;
      }
      if (r >= 100) te.push_back(t1 - t0), tm.push_back(t2 - t1), tc.push_back(t3 - t2);
    }
    printf("| %s | %.2f | %.2f | %.2f |\n", pri ? "highest priority" : "default priority", median_us(te),
           median_us(tm), median_us(tc));
    CUDA_OK(cudaStreamDestroy(s));
  }
  return 0;
}
