/* methods.h: what the method rows (method.h, one file per method or
 * family) share: argument rules that recur, sizes with overflow checks, and
 * the parts of a result map every job reply has.
 *
 * The rules every row's parse keeps: everything that can be checked in
 * constant time is checked on the loop, before any memory is allocated for
 * the request: argument names and types, dimensions >= 1, sizes computed
 * with overflow checks and compared with the bytes actually sent, results
 * bounded by max_bytes.  Checks that read whole arrays run later on a
 * worker (validate.h).
 */
#ifndef GKCD_METHODS_H
#define GKCD_METHODS_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "backend.h"
#include "job.h"
#include "method.h"
#include "refs.h"

#define METHODS_MAX_INPUTS 8 /* the most array inputs a row lists (spmv: 5) */

/* GKC_ETOO_LARGE: what would take bytes, over the request limit max. */
int methods_too_large(args_ctx *a, const char *what, uint64_t bytes, size_t max);
/* x*y elements of 4 bytes, or UINT64_MAX when that overflows (or does not
 * fit a size_t, so every later size computation is safe). */
uint64_t methods_f32_bytes(uint64_t x, uint64_t y);
/* A float argument (alpha, beta) of an operation on arrays of dtype: for
 * DT_F32 a finite float32 (*f, and *d the same value), for DT_F64 any
 * finite float64 (*d exactly as sent, *f rounded); a missing one keeps the
 * defaults stored in both beforehand. */
int methods_scalar(args_ctx *a, const char *key, int dtype, float *f, double *d);
/* The optional `algo` of method, in be's list: sets *algo. */
int methods_algo(args_ctx *a, const gkcd_backend *be, int method, int *algo);
/* The optional `shared` (upload, csr_upload). */
int methods_shared(args_ctx *a, gkcd_job *job);
/* The optional `device`: run (or keep the object) there. */
int methods_device(args_ctx *a, gkcd_job *job);
/* upload, csr_upload: `device`, or `replicate` (a copy on every device). */
int methods_where(args_ctx *a, gkcd_job *job);
/* The optional `deadline_ms`, every job method's: job->deadline_ns relative. */
int methods_deadline(args_ctx *a, gkcd_job *job);
/* The three arrays of a CSR matrix given by value (spmv, csr_upload): sets
 * *nnz; see methods.c. */
int methods_csr_arrays(refs_ctx *r, int32_t rows, gkcd_span *row_ptr, gkcd_span *col_idx,
                       gkcd_span *values, int64_t *nnz);

/* Bytes of a span that must cross from host memory to the backend's (a
 * row's work()). */
double methods_host_bytes(const gkcd_span *s);

/* How the array result is reported under name: a bin header (the body
 * follows), or where it was written.  new_id: the object the job created. */
void methods_pack_out(msgpack_packer *pk, const gkcd_job *job, const char *name, uint32_t new_id);
void methods_pack_timing(msgpack_packer *pk, const gkcd_job *job, double server_us);
/* How many keys methods_pack_timing always packs; methods_timing_extra
 * says how many more it packs for this job (h2d_us and d2h_us when the
 * backend copied, peer_bytes and peer_us when operands moved between
 * devices). */
#define METHODS_TIMING_KEYS 8
int methods_timing_extra(const gkcd_job *job);
/* "device": the device that ran it, or "devices": those a split ran on. */
void methods_pack_device(msgpack_packer *pk, const gkcd_job *job);
/* The whole result map of a job whose result is an array under name
 * (sgemm's c, spmv's y), or a scalar `value` over n elements. */
void methods_pack_array(msgpack_packer *pk, const gkcd_job *job, double server_us,
                        uint32_t new_id, const char *name);
void methods_pack_value(msgpack_packer *pk, const gkcd_job *job, double server_us, int64_t n);
/* release and shm_release (the loop answers them): frees the object of the
 * asker's that params names, packing {}; 0 or invalid_argument with msg. */
int methods_release(const method_env *env, int method, const msgpack_object *params,
                    msgpack_packer *pk, char *msg, size_t msglen);

#endif
