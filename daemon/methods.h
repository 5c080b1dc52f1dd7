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

/* 1 when method runs as a job on a worker, 0 when the loop answers it. */
int methods_is_compute(int method);

/* Fills job->in and job->algo from the params of a compute method.
 * Returns 0, GKC_EINVALID_ARGUMENT or GKC_ETOO_LARGE with a message. */
int methods_parse(int method, const gkcd_backend *be, args_ctx *a, gkcd_job *job,
                  size_t max_bytes);

/* Packs the result map of a successful job.  When the job has an array
 * result (job->out), the map's last value is a bin whose header is packed
 * here and whose job->out_bytes body the caller sends right after. */
void methods_pack_result(msgpack_packer *pk, const gkcd_job *job, double server_us);

#endif
