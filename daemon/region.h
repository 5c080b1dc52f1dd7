/* region.h: mapping a client's shared-memory region (shm_register's work,
 * on a worker thread).
 *
 * The descriptor must be a regular file (a memfd) of exactly the size the
 * client declared, sealed against shrinking and growing: a mapping of a file
 * that shrinks later would kill the daemon with SIGBUS on the next access.
 */
#ifndef GKCD_REGION_H
#define GKCD_REGION_H

#include "backend.h"
#include "job.h"

/* Checks and maps job->reg_fd (and closes it); on success job->out_ptr is
 * the mapping of job->out_bytes bytes, registered for DMA afterwards in the
 * background (pinner.h), or here with job->reg_pin (job->reg_pinned says
 * whether it was; be registers it, portable to every device). */
void region_map(gkcd_backend *be, gkcd_job *job);

#endif
