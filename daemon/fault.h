/* fault.h: failures on purpose, so tests can see every error path.
 *
 * Only in builds configured with GKC_FAULT_INJECTION (tests); otherwise
 * these do nothing.  GKCD_FAULT="METHOD:CODE" (e.g. "sgemm:device_error")
 * makes every request of that method fail with that wire error code on the
 * worker thread, as a failing backend would; "METHOD:delay=MS" (1 to 60000)
 * makes each one wait MS milliseconds on its worker before it runs, as a
 * slow device would, so tests can hold work in flight.
 */
#ifndef GKCD_FAULT_H
#define GKCD_FAULT_H

#include "job.h"

/* "device_lost:dev=N[:after=K]" fails device N through backend_device_lost
 * when its job number K+1 (default 1) starts: the first K run normally.
 */

/* Reads GKCD_FAULT once at start-up; returns -1 when it is malformed. */
int fault_init(void);
/* 0 normally; nonzero when job was failed on purpose. */
int fault_inject(gkcd_job *job);
/* Worker thread, before a job runs on job->be: counts the device's jobs and
 * loses the device when its time has come.  Always 0 (the job then finds
 * its device lost). */
int fault_device(gkcd_job *job);
/* The same for a device a gang job holds (part.h), each one counted as
 * running a job when the gang job starts. */
struct gkcd_backend;
int fault_device_be(struct gkcd_backend *be);

#endif
