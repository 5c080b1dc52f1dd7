/* methods.h: turning a request's arguments into a job, and a job into a result.
 *
 * Everything that can be checked in constant time is checked here, on the
 * loop, before any memory is allocated for the request: argument names and
 * types, dimensions >= 1, sizes computed with overflow checks and compared
 * with the bytes actually sent, results bounded by max_bytes.  Checks that
 * read whole arrays run later on a worker (validate.h).
 */
#ifndef GKCD_METHODS_H
#define GKCD_METHODS_H

#include <msgpack.h>
#include <stddef.h>

#include "args.h"
#include "backend.h"
#include "job.h"
#include "refs.h"

/* 1 when method runs as a job on a worker, 0 when the loop answers it. */
int methods_is_compute(int method);
/* 1 when the backend runs the job; 0 when the daemon does (shm_register). */
int methods_is_backend(int method);

/* Fills r->job from the params of a job method.  Returns 0,
 * GKC_EINVALID_ARGUMENT or GKC_ETOO_LARGE with a message. */
int methods_parse(int method, refs_ctx *r, size_t max_bytes);

/* Packs the result map of a successful job.  When the job has an array
 * result returned by value (OUT_BIN), the map's last value is a bin whose
 * header is packed here and whose job->out_bytes body the caller sends right
 * after.  new_id: the object the job created (handle, matrix, region). */
void methods_pack_result(msgpack_packer *pk, const gkcd_job *job, double server_us,
                         uint32_t new_id);

/* The parts of methods.c that the methods in their own files share. */
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

/* solve (method_solve.c) and batch (method_batch.c). */
int methods_parse_solve(refs_ctx *r, size_t max_bytes);
void methods_pack_solve(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id);
int methods_parse_batch(refs_ctx *r, size_t max_bytes);
void methods_pack_batch(msgpack_packer *pk, const gkcd_job *job, double server_us);
/* Wire names: of a solve method (SOLVE_*), a reason (SOLVE_R_*), a batch op
 * (BATCH_*); "?" when out of range. */
const char *solve_method_name(int m);
const char *solve_reason_name(int r);


#endif
