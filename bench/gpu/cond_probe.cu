/* cond_probe: the smallest CUDA Graph with a conditional while-node, to
 * tell a compute-sanitizer report on gkcu_solve's "while" loop apart from a
 * limitation of the tool: one kernel in the body counts a device integer
 * down, a second (the solve's k_cond, same shape) sets the condition from
 * it.  Every access is to a cudaMalloc'd int.  Exit 0 and "count 0, body
 * ran 100 times" when the graph ran right.
 *
 *   compute-sanitizer --tool memcheck ./cond_probe
 *
 * A memcheck error here, where nothing can be out of bounds, is the tool's.
 * Variant "--no-cond": the same body in an unrolled graph (no conditional
 * node): the control.  Variant "--relaunch": as gkcu_solve's loop does it,
 * the while graph launched again and again for chunks of 4 iterations, a
 * kernel setting the chunk's end before each launch, the state copied back
 * after each, two launches in flight.  "--early-destroy": the single
 * launch with the graph destroyed right after it was instantiated, as
 * gkcu_solve's while graph was until 2026-11-25 (legal by the API; the
 * question is whether memcheck's error 700 follows it).  "--wide": the
 * body shaped like gkcu_solve's iteration since 2026-11-25: a kernel of
 * many blocks (4 per SM, 256 threads) that sweeps a 4 MiB buffer, whose
 * last block (by ticket) counts down and sets the condition itself (no
 * kernel of its own for it), relaunched in chunks as in --relaunch.  Every
 * index is below the buffer's length by construction.  (H100, CUDA 13.0,
 * 2026-11-25: right without the tool; under memcheck 225 "out of bounds"
 * reads whose addresses the tool itself places inside the 4 MiB buffer:
 * memcheck cannot check a conditional node's body; cuda/NOTES.md.)
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define OK(call)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

__global__ void k_step(int *count, int *runs) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    (*count)--;
    (*runs)++;
  }
}

__global__ void k_cond_probe(const int *count, cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, *count > 0 ? 1u : 0u);
}

/* --relaunch: d[0] counts down, d[1] counts the body's runs, d[2] is the
 * run count at which this chunk stops. */
__global__ void k_set_stop_probe(int *d, int chunk) { d[2] = d[1] + chunk; }
__global__ void k_cond_chunk(const int *d, cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, d[0] > 0 && d[1] < d[2] ? 1u : 0u);
}

/* --wide: d[0] count, d[1] runs, d[2] chunk end, d[3] ticket. */
enum { WIDE_N = 1 << 20 };
__global__ void k_wide(float *buf, int *d, cudaGraphConditionalHandle h) {
  __shared__ bool last;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < WIDE_N; i += gridDim.x * blockDim.x)
    buf[i] = buf[i] * 0.5f + 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd((unsigned int *)&d[3], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x != 0) return;
  d[3] = 0;
  d[0]--;
  d[1]++;
  cudaGraphSetConditional(h, d[0] > 0 && d[1] < d[2] ? 1u : 0u);
}

int main(int argc, char **argv) {
  int no_cond = argc > 1 && !strcmp(argv[1], "--no-cond");
  int relaunch = argc > 1 && !strcmp(argv[1], "--relaunch");
  int early = argc > 1 && !strcmp(argv[1], "--early-destroy");
  int wide = argc > 1 && !strcmp(argv[1], "--wide");
  if (wide) relaunch = 1;
  int *d;
  float *buf = NULL;
  OK(cudaMalloc(&d, 4 * sizeof(int)));
  int h0[4] = {100, 0, 0, 0};
  int sms = 1;
  if (wide) {
    OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    OK(cudaMalloc(&buf, WIDE_N * sizeof(float)));
    OK(cudaMemset(buf, 0, WIDE_N * sizeof(float)));
  }
  OK(cudaMemcpy(d, h0, sizeof h0, cudaMemcpyHostToDevice));
  cudaStream_t s;
  OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ex;
  OK(cudaGraphCreate(&g, 0));
  if (!no_cond) {
    cudaGraphConditionalHandle h;
    OK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    cudaGraphNode_t node;
    OK(cudaGraphAddNode(&node, g, NULL, NULL, 0, &cp));
    OK(cudaStreamBeginCaptureToGraph(s, cp.conditional.phGraph_out[0], NULL, NULL, 0,
                                     cudaStreamCaptureModeThreadLocal));
    if (wide) {
      k_wide<<<4 * sms, 256, 0, s>>>(buf, d, h);
    } else {
      k_step<<<4, 64, 0, s>>>(d, d + 1);
      if (relaunch) k_cond_chunk<<<1, 1, 0, s>>>(d, h);
      else k_cond_probe<<<1, 1, 0, s>>>(d, h);
    }
    cudaGraph_t body;
    OK(cudaStreamEndCapture(s, &body));
  } else {
    cudaGraphDestroy(g);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 100; i++) k_step<<<4, 64, 0, s>>>(d, d + 1);
    OK(cudaStreamEndCapture(s, &g));
  }
  OK(cudaGraphInstantiate(&ex, g, 0));
  if (early) {
    OK(cudaGraphDestroy(g));
    g = NULL;
  }
  int h1[3];
  if (relaunch) {
    int *hs;
    cudaEvent_t ev[2];
    OK(cudaMallocHost(&hs, 2 * 3 * sizeof(int)));
    OK(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
    OK(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));
    int launches = 0;
    for (long q = 0;; q++) {
      k_set_stop_probe<<<1, 1, 0, s>>>(d, 4);
      OK(cudaGetLastError());
      OK(cudaGraphLaunch(ex, s));
      OK(cudaMemcpyAsync(hs + 3 * (q & 1), d, 3 * sizeof(int), cudaMemcpyDeviceToHost, s));
      OK(cudaEventRecord(ev[q & 1], s));
      launches++;
      if (q == 0) continue;
      OK(cudaEventSynchronize(ev[(q - 1) & 1]));
      if (hs[3 * ((q - 1) & 1)] <= 0 || launches > 200) break;
    }
    OK(cudaStreamSynchronize(s));
    printf("relaunch: %d launches of the while graph\n", launches);
  } else {
    OK(cudaGraphLaunch(ex, s));
    OK(cudaStreamSynchronize(s));
  }
  OK(cudaMemcpy(h1, d, sizeof h1, cudaMemcpyDeviceToHost));
  printf("%s: count %d, body ran %d times\n", no_cond ? "unrolled" : wide ? "while, wide" : "while",
         h1[0], h1[1]);
  cudaGraphExecDestroy(ex);
  if (g) cudaGraphDestroy(g);
  cudaFree(d);
  if (buf) cudaFree(buf);
  cudaStreamDestroy(s);
  /* --relaunch: each launch runs the body at least once (the handle's
   * default is 1), so the second launch in flight may run it once more */
  return h1[1] >= 100 && h1[1] <= 101 && h1[0] == 100 - h1[1] ? 0 : 1;
}
