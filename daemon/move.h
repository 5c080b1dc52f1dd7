/* move.h: a job's resident operands brought to the device it runs on.
 *
 * Placement (place.h) prefers a device that holds every operand; when none
 * does, the job runs where some are and the worker copies the others there
 * first, through the target backend's peer_copy (peer to peer on GPUs that
 * can, memcpy between the CPU's virtual devices), into memory of the
 * target's that lives as long as the job.  A replicated object needs no
 * copy: the job's pointers are turned to that device's copy.  The reply
 * says what was moved (peer_bytes, peer_us).  Worker thread.
 */
#ifndef GKCD_MOVE_H
#define GKCD_MOVE_H

#include "job.h"

/* 0 with the job's operand pointers all on job->device; nonzero after
 * failing the job (out of memory there, a source device lost). */
int move_operands(gkcd_job *job);

/* Loop thread, when the job is freed: frees the copies. */
void move_free(gkcd_job *job);

#endif
