/* lanes.h: how the CUDA backend splits one GPU between its two lanes.
 *
 * The scheduler sends short requests to the latency lane and everything
 * else to the bulk lane (daemon/scheduler.h).  On the GPU the two lanes get
 * disjoint multiprocessors when the driver can make green contexts (CUDA
 * 12.4+ driver, not under MIG): one split of the device's SMs at start-up
 * gives the latency lane --latency-sms SMs (rounded up to the partition
 * granularity: on sm_90 at least 8 and a multiple of 8) and the bulk lane
 * the remainder, and every stream of a lane is made in its green context,
 * so no bulk kernel can occupy an SM the latency lane needs.  Nothing is
 * launched on the primary context once the lanes exist: every launch goes to
 * a lane's stream, and the runtime runs it in the stream's green context.
 *
 * Where green contexts cannot be made (an old driver, MIG, any error: the
 * reason is logged), or when GKCD_CUDA_LANES=streams asks for it, the lanes
 * share all SMs and fall back to stream priorities: the latency lane's
 * streams get the highest priority, so its blocks are scheduled before bulk
 * blocks that have not started; and since a running block is never
 * preempted, the backend cuts long bulk kernels into slices of about
 * --slice-us (cuda_slice.c).
 *
 * The driver functions are looked up at run time (through the runtime's
 * cudaGetDriverEntryPointByVersion), not linked: gkcd still starts on a
 * driver that lacks them, and on a machine with no driver at all (where it
 * serves from the CPU backend).  Every driver call's CUresult is checked.
 */
#ifndef CUDA_LANES_H
#define CUDA_LANES_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { LANES_BULK = 0, LANES_LATENCY = 1, LANES_MAX = 2 };

typedef struct cuda_lanes cuda_lanes;

/* Splits device (the current runtime device; its primary context is
 * initialised) for latency_sms SMs in the latency lane.  latency_sms <= 0:
 * one lane, no split.  force_streams: skip green contexts (the fallback).
 * Always returns a usable object in *out unless memory runs out (then
 * GKC_EOUT_OF_MEMORY); whether it got green contexts, and why not, is in
 * lanes_green() and lanes_why(), and is logged. */
int lanes_open(cuda_lanes **out, int device, int latency_sms, int force_streams);
void lanes_close(cuda_lanes *L);

/* --split-device N: out[0..nparts) each get an equal, disjoint share of
 * device's SMs (one split of the device; the driver's granularity leaves
 * *spare_sms unused), each share a green context whose own SMs are then
 * split between that part's lanes as lanes_open does (latency_sms <= 0:
 * one lane over the whole share).  Without green contexts (old driver,
 * MIG, force_streams, any failure: logged) every part falls back to the
 * whole device shared through streams, with lanes_green() 0 and
 * *spare_sms 0.  0, or GKC_EOUT_OF_MEMORY with nothing left open. */
int lanes_open_parts(cuda_lanes **out, int nparts, int device, int latency_sms, int force_streams,
                     int *spare_sms);
/* The SMs a part may use in all (its lanes' together), or the device's. */
int lanes_part_sms(const cuda_lanes *L);

/* 1, or 2 when a latency lane exists. */
int lanes_count(const cuda_lanes *L);
/* 1 when the lanes have disjoint SMs (green contexts). */
int lanes_green(const cuda_lanes *L);
/* SMs a lane's kernels may use: its partition, or the whole device. */
int lanes_sms(const cuda_lanes *L, int lane);
/* Why there are no green contexts ("" when there are). */
const char *lanes_why(const cuda_lanes *L);

/* A new non-blocking stream for lane: in its green context, or on the
 * primary context with the lane's priority (latency: highest).  0 or a CUDA
 * error (msg says which call). */
cudaError_t lanes_stream_create(cuda_lanes *L, int lane, cudaStream_t *out, char *msg,
                                size_t msglen);

/* Makes lane's green context current on this thread while a lane's
 * objects are created (its events and library handles then belong to the
 * same context as its streams), and restores what was current.  Start-up
 * only: a green context may be current on one thread at a time, so the
 * workers never make it current; they launch on the lane's streams, and the
 * runtime runs each launch in its stream's context.  Without green contexts
 * both do nothing.  0 or -1 with msg set. */
int lanes_enter(cuda_lanes *L, int lane, char *msg, size_t msglen);
int lanes_leave(cuda_lanes *L, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif
