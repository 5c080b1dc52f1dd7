/* cuda_layout.h: where one request's arrays live on the device, and the
 * copies that put them there (the array path, cuda_array.h).
 *
 * cuda_layout_plan says, for the job's array inputs in its launcher's
 * order (its row's inputs, daemon/method.h), which are used where they are
 * (resident, or absent) and which get a place in one temporary device
 * allocation, how many bytes go through the slot's pinned stage, and where
 * the result goes; cuda_layout_plan_into does the same for an upload,
 * whose inputs are packed into the new resident array itself.
 * cuda_layout_copy_in then enqueues the host-to-device copies on the
 * slot's stream, and the method's launcher (cuda_launch_fn) runs its
 * kernel on the addresses it filled in.
 */
#ifndef CUDA_LAYOUT_H
#define CUDA_LAYOUT_H

#include <stddef.h>

#include "cuda_impl.h"
#include "job.h"

#define CUDA_ALIGN 256 /* every place in a temporary, and in the stage */
/* Copies of up to this many bytes go through the slot's stage in one
 * piece (one DMA, no ring events: small requests keep their latency);
 * bigger ones through its ring, chunked and overlapped (cuda_ring.h). */
#define CUDA_STAGE_SMALL ((size_t)4 << 20)
#define CUDA_MAX_INPUTS 6

static inline size_t cuda_up(size_t n) { return (n + CUDA_ALIGN - 1) / CUDA_ALIGN * CUDA_ALIGN; }

/* Where one job's data lives on the device.  Inputs already resident are
 * used where they are; the others get a place in one temporary allocation,
 * as does the result unless it is to stay resident. */
typedef struct {
  const gkcd_span *in[CUDA_MAX_INPUTS];
  const void *dev[CUDA_MAX_INPUTS]; /* device address of each input */
  size_t off[CUDA_MAX_INPUTS];      /* its offset in tmp (when copied) or in the output (uploads) */
  int nin;
  int ncopies;          /* inputs copied to the device (0: every one is resident) */
  size_t tmp_bytes;     /* inputs to copy, then the result */
  size_t res_off;       /* offset of the result in tmp, when it goes there */
  size_t res_bytes;     /* the result (8 for a scalar: reduce, dot, nrm2) */
  size_t stage_bytes;   /* unpinned host inputs, packed: through the stage when
                         * at most CUDA_STAGE_SMALL, else through the ring */
  char *tmp, *out_dev;
  size_t tmp_cap;
} cuda_layout;

/* A method's launcher (cuda_launch.h): enqueues job's kernel on s's
 * stream, reading the inputs at l->dev[] (in its row's order) and writing
 * the result at l->out_dev (a double for a scalar method); sets
 * job->algo_name.  0, or a gkc error with its message in s->ctx. */
typedef int (*cuda_launch_fn)(cuda_impl *impl, cuda_slot *s, gkcd_job *job, cuda_layout *l);

/* Input i of l as floats on the device. */
static inline const float *cuda_layout_f32(const cuda_layout *l, int i) {
  return (const float *)l->dev[i];
}

/* Fills l for job's inputs (job->row->inputs) and its result (a double
 * when job->row->scalar, else out_bytes).  copy_only: the job has no
 * kernel (download): its one input, resident, is the result, read where it
 * lives, and nothing is allocated.  0, or -1 when job has no row or more
 * inputs than a layout holds (a bug: the caller fails the job). */
int cuda_layout_plan(gkcd_job *job, int copy_only, cuda_layout *l);
/* Uploads: the nin inputs are copied straight into the new resident
 * array, one after the other, each at its elements' alignment (a float64
 * matrix's values 8-byte aligned, at res_values_offset). */
void cuda_layout_plan_into(cuda_layout *l, const gkcd_span *const in[], int nin);
/* Enqueues the host-to-device copies into base (the temporary, or for an
 * upload the new array) on s's stream and fills l->dev; inputs in pinned
 * regions are copied from the client's registered pages directly, the
 * others through the slot's stage (small) or ring (big). */
cudaError_t cuda_layout_copy_in(cuda_slot *s, cuda_layout *l, char *base, int upload);
/* memcpy, over a few threads when n is large. */
void cuda_copy_host(void *dst, const void *src, size_t n);

#endif
