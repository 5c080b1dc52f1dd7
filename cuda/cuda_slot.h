/* cuda_slot.h: the stream slots a backend's workers run jobs on.
 *
 * A fixed set of slots (--streams for the bulk lane, and the latency
 * lane's own), made at start-up, each with its stream (in its lane's green
 * context, or at its lane's priority: lanes.h), gkcu context, timing
 * events, a small pinned stage that grows as scalars and tiny requests
 * need it, and (bulk lane) the pinned ring big copies go through, made
 * here so that no request waits for pinned memory (cuda_ring.h).  A worker
 * takes a free slot of its job's lane for the whole job and gives it back;
 * with more workers than slots, the others wait for one.
 */
#ifndef CUDA_SLOT_H
#define CUDA_SLOT_H

#include <stddef.h>

#include "cuda_impl.h"
#include "job.h"

/* Makes slot s of lane (number i, for the message): its stream in the
 * lane (the caller has entered it: lanes_enter), events, and a gkcu
 * context told its lane's SM count.  0, or a gkc error with msg; what was
 * made is left for cuda_slot_destroy. */
int cuda_slot_init(cuda_impl *impl, cuda_slot *s, int lane, int i, char *msg, size_t msglen);
/* Frees what cuda_slot_init made (any part of it). */
void cuda_slot_destroy(cuda_slot *s);

/* A free slot of lane (waits for one), and giving it back. */
cuda_slot *cuda_slot_take(cuda_impl *impl, int lane);
void cuda_slot_give(cuda_impl *impl, cuda_slot *s);
/* The lane whose slots run job: the scheduler's choice, when there are two. */
int cuda_slot_lane(const cuda_impl *impl, const gkcd_job *job);

/* Grows s's pinned stage to at least bytes; -1 with job failed
 * (out_of_memory) when it cannot. */
int cuda_slot_grow_stage(cuda_slot *s, size_t bytes, gkcd_job *job);
/* Where s's temporaries come from (each lane has its own budget). */
devcache *cuda_slot_cache(cuda_impl *impl, const cuda_slot *s);
/* The slice budget of s's long launches (cuda_slice.h), or NULL when they
 * run whole: only the bulk lane slices, and only where the lanes share
 * the SMs. */
const slice_budget *cuda_slot_slices(const cuda_impl *impl, const cuda_slot *s);

#endif
