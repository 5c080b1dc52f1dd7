/* part.h: partitioned matrices (PROTOCOL.md, "Partitioned matrices").
 *
 * csr_upload with `devices` ("all", or a list of device indices) cuts the
 * matrix into contiguous row blocks balanced by nonzeros, one per device
 * (part_plan.h), and keeps each block in its device's resident memory as a
 * local CSR over [own columns | halo columns], with the indices of its send
 * list and, for a square matrix, its rows' inverse diagonal (pcg).  The
 * halo plan is computed once, at upload, and kept on the host.  The client
 * sees one matrix handle.
 *
 * Work on a partitioned matrix is a gang job: the scheduler dispatches it
 * only when every device of the matrix has a free slot in the bulk lane,
 * and takes those slots at once, on the loop (so two gang jobs can never
 * each hold half of what the other needs); the job runs on one worker
 * thread, the coordinator, which drives every device through the
 * backend's gkcd_part_ops and never waits for another job.
 *  - spmv: x (any kind of array) is read on the host once, each device gets
 *    its own and halo entries of it (host staging), computes its rows in
 *    float64, and y = alpha A x + beta y is assembled on the host in
 *    float64 and rounded to float32 once.
 *  - solve (cg, pcg): the vectors live on the devices in float64, each
 *    device updating its rows; every spmv first exchanges the halo of p
 *    (gather on the sender, in the step that wrote p; then one peer_copy
 *    per pair of devices that share columns, by the receiver, in the spmv's
 *    step); partial dots are combined in float64 by the coordinator in
 *    device order.  bicgstab is refused on a partitioned matrix.
 * Both poll cancel and the deadline as the single-device solve does, and
 * fail with device_lost naming the device when one of theirs is lost.
 */
/* Implemented in: part.c, part_solve.c */
#ifndef GKCD_PART_H
#define GKCD_PART_H

#include <msgpack.h>
#include <stdint.h>

#include "config.h"
#include "job.h"
#include "part_plan.h"

typedef struct gkcd_part {
  part_plan plan;                /* blocks, halo and send lists (host) */
  int dev[GKCD_MAX_DEVICES];     /* block j's device, ascending */
  uint64_t mask;                 /* those devices */
  void *mem[GKCD_MAX_DEVICES];   /* block j's resident memory (res_alloc) */
  size_t cap[GKCD_MAX_DEVICES];
  size_t bytes;                  /* all blocks' memory together */
  int32_t bad_diag;              /* square: first row whose diagonal is 0 or not finite, or -1 */
  int square;
} gkcd_part;

/* Where block j's arrays are in its memory. */
const int32_t *part_row_ptr(const gkcd_part *p, int j);
const int32_t *part_col_idx(const gkcd_part *p, int j);
const float *part_values(const gkcd_part *p, int j);
const int32_t *part_send(const gkcd_part *p, int j);
const double *part_dinv(const gkcd_part *p, int j); /* square only */

/* The coordinator's side of a gang job (csr_upload with devices, spmv or
 * solve on a partitioned matrix), on a worker thread.  part_gang_ready
 * first: 0 when every device of the gang still serves, else the job
 * failed (device_lost).  Then the method row's part_run (method.h), one of
 * these or part_solve: sets the results or job->err; the caller finishes
 * the job. */
int part_gang_ready(gkcd_job *job);
void part_run_upload(gkcd_job *job); /* csr_upload with `devices` */

/* Why part_build failed: the device to name (-1: host memory), what it
 * was doing there, and the backend's message. */
typedef struct {
  int device;
  const char *what;
  char msg[200];
} part_build_fail;
/* Cuts the host CSR (float32 values, checked) into blocks on the devices
 * of mask and copies them there: csr_upload's work, and the fd store's
 * when it brings a saved partitioned matrix back (fdstore.h).  Any thread;
 * 0 with *out, or a gkc_error with why. */
int part_build(uint64_t mask, int32_t rows, int32_t cols, const int32_t *rp, const int32_t *ci,
               const float *v, gkcd_part **out, part_build_fail *why);
/* The matrix p was made from, read back from its blocks: rp (rows + 1),
 * ci and v (nnz each), global columns in their original order.  For the
 * fd store's save; 0, or a gkc_error with msg. */
int part_to_csr(const gkcd_part *p, int32_t *rp, int32_t *ci, float *v, char *msg, size_t msglen);
void part_run_spmv(gkcd_job *job);   /* spmv on a partitioned matrix */

/* Frees the blocks' memory and the plan (loop thread, or a worker when
 * the upload failed). */
void part_free(gkcd_part *p);

/* The reply's "partition": [{device, row0, rows, nnz, halo}] per block. */
void part_pack(msgpack_packer *pk, const gkcd_part *p);

/* cg and pcg on a partitioned matrix (part_solve.c). */
void part_solve(gkcd_job *job);

/* The exchange of v's halo (v[j] is block j's [own | halo] vector, buf[j]
 * its packed send buffer), in two halves that part_solve.c runs on every
 * device at once: part_halo_pack packs block j's send entries of v[j] into
 * buf[j]; once every block has packed, part_halo_pull copies block j's
 * halo from the others' buffers into v[j] (one peer_copy per block it
 * reads from), adding what it moved to *moved.  Any thread; 0, or a
 * gkc_error with msg (and for a pull, *blame the block whose device to
 * name: the source's when that one was lost, else j). */
typedef struct {
  double bytes, us; /* copied, and the time spent copying */
  int direct;       /* some copy went peer to peer */
} part_halo_moved;
int part_halo_pack(const gkcd_part *p, int j, double *const *v, double *const *buf, char *msg,
                   size_t msglen);
int part_halo_pull(const gkcd_part *p, int j, double *const *v, double *const *buf,
                   part_halo_moved *moved, int *blame, char *msg, size_t msglen);
/* An input array (b, x0, x, y) as host float32, whatever kind it came as:
 * copied into dst.  0, or a gkc_error with job failed. */
int part_read_span(gkcd_job *job, const gkcd_span *s, float *dst);
/* The float32 result into its destination (job->out_kind), on device
 * home for a new handle.  0, or a gkc_error with job failed. */
int part_write_out(gkcd_job *job, const float *src, int home);
/* A failed primitive on device d: the job fails with rc, a lost device
 * named as devices.h does. */
int part_failed(gkcd_job *job, int d, int rc, const char *what, const char *msg);

#endif
