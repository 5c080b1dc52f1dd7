/* cuda_layout.h: where one request's data lives on the device, and the
 * copies that put it there (cuda_run.c's path for every method but the
 * tiny ones, solve and batch).
 *
 * layout_plan / layout_plan_upload say, for the job's inputs in order,
 * which are used where they are (resident, or absent) and which get a place
 * in one temporary device allocation, how many bytes go through the slot's
 * pinned stage, and where the result goes.  layout_copy_in then enqueues
 * the host-to-device copies on the slot's stream; cuda_launch (cuda_launch.c)
 * runs the method's kernel on the addresses it filled in.
 */
#ifndef CUDA_LAYOUT_H
#define CUDA_LAYOUT_H

#include <stddef.h>

#include "cuda_backend_int.h"

#define CUDA_ALIGN 256 /* every place in a temporary, and in the stage */

static inline size_t cuda_up(size_t n) { return (n + CUDA_ALIGN - 1) / CUDA_ALIGN * CUDA_ALIGN; }

/* Where one job's data lives on the device.  Inputs already resident are
 * used where they are; the others get a place in one temporary allocation,
 * as does the result unless it is to stay resident. */
typedef struct {
  const gkcd_span *in[6];
  const void *dev[6];   /* device address of each input */
  size_t off[6];        /* its offset in tmp (when copied) or in the output (uploads) */
  int nin;
  int ncopies;          /* inputs copied to the device (0: every one is resident) */
  size_t tmp_bytes;     /* inputs to copy, then the result */
  size_t res_off;       /* offset of the result in tmp, when it goes there */
  size_t res_bytes;     /* the result (8 for a reduce or dot) */
  size_t stage_bytes;   /* unpinned host inputs, packed */
  char *tmp, *out_dev;
  size_t tmp_cap;
} layout;

/* Fills l for job (every method with a layout but the uploads). */
void layout_plan(gkcd_job *job, layout *l);
/* Uploads: the inputs are copied straight into the new resident array. */
void layout_plan_upload(gkcd_job *job, layout *l);
/* Enqueues the host-to-device copies into base (the temporary, or for an
 * upload the new array) on s's stream and fills l->dev; inputs outside
 * regions go through the slot's pinned stage, region inputs are copied
 * from the client's registered pages directly. */
cudaError_t layout_copy_in(slot *s, layout *l, char *base, int upload);
/* memcpy, over a few threads when n is large. */
void cuda_copy_host(void *dst, const void *src, size_t n);

/* cuda_launch.c: launches job's kernel on s's stream, on the addresses in l
 * (result into l->out_dev); a launcher error leaves its message in s->ctx. */
int cuda_launch(cuda_impl *impl, slot *s, gkcd_job *job, layout *l);

#endif
