/* split.h: one request run as parts on several devices at once.
 *
 * Three kinds of request split (split_kind):
 *  - sgemm by row blocks of C: part i computes rows [r_i, r_i+1) from the
 *    same rows of A (and C when beta != 0) and all of B (B is broadcast);
 *    each part writes its rows straight into the parent's result, so
 *    nothing is gathered afterwards.  A part's rows are the same dot
 *    products as on one device; only the library's blocking may order the
 *    additions differently (float32 rounding).
 *  - reduce by contiguous slices of x; the parts' float64 partials combine
 *    in part order (sum adds them, min/max compare, as cpu_reduce combines
 *    its threads).
 *  - upload and csr_upload with replicate: every live device gets a whole
 *    copy (always split, whatever the cost).
 * Only requests whose arrays are host memory (sent, or in a region) and
 * whose result goes back to the host split: resident operands stay where
 * they live.
 *
 * Whether a split pays (split_worth) is measured, not guessed: a split into
 * k parts costs its hand-offs (k workers woken, the last part handing the
 * parent back), whose time the daemon measures at start-up
 * (split_measure_handoff: two threads passing a token through a condition
 * variable, as the pool's workers are woken) and then refines from every
 * split it runs (the parent's worker time beyond its slowest part), plus
 * the extra copies of B to each device over the host link (cost model
 * rates).  A request splits when the parts' predicted time plus twice
 * that overhead is still below its time on one device: the gain must
 * cover the overhead with the same again to spare, since the cost model
 * is ~10-30% off.
 *
 * Parts are jobs of their own (job->parent set): they run on their devices'
 * workers like any job, but their finish hook (job.h on_finish, set by
 * split_make) counts them into their parent instead of handing them to the
 * loop, and the last part to finish completes the parent with job_finish,
 * which hands it to the loop like any job.
 */
#ifndef GKCD_SPLIT_H
#define GKCD_SPLIT_H

#include <stdint.h>

#include "job.h"

#define SPLIT_REDUCE_MIN_PART 65536 /* elements: below this a part is all overhead */

enum { SPLIT_NONE = 0, SPLIT_ROWS, SPLIT_REDUCE, SPLIT_COPIES };

/* How job may split (SPLIT_*). */
int split_kind(const gkcd_job *job);
/* The rules a method row's split names (method.h): SPLIT_ROWS when an
 * sgemm's operands are host memory, A not transposed and C goes back to
 * the host; SPLIT_REDUCE for a reduce of host memory of at least two
 * parts; SPLIT_COPIES for an upload or csr_upload with replicate. */
int split_rule_rows(const gkcd_job *job);
int split_rule_reduce(const gkcd_job *job);
int split_rule_copies(const gkcd_job *job);

/* 1 when splitting job, predicted to take cost_us on one device, into k
 * parts pays: cost_us / k + 2 * (k * handoff_us + extra_us) < cost_us,
 * extra_us being the extra copies of B (host_bytes_per_us of the device's
 * rates, 0: same memory). */
int split_worth(const gkcd_job *job, double cost_us, int k, double handoff_us,
                double host_bytes_per_us);

/* Loop thread: makes the k parts of parent for devices dev[0..k) (each part
 * gets its device index in part->device and its finish hook; the caller
 * sets be, lane, cost, gives the parent its own finish hook and hands the
 * parts to the pool).  0, or GKC_EOUT_OF_MEMORY with parent failed. */
int split_make(gkcd_job *parent, const int *dev, int k);

/* Loop thread, when the parent is freed: frees its parts, and the copies a
 * failed or unclaimed replicate made. */
void split_free(gkcd_job *parent);

/* Microseconds one thread takes to wake another and be woken back, the
 * best of a few rounds (start-up). */
double split_measure_handoff(void);

/* Per-part overhead a finished split showed (the parent's worker time
 * beyond its slowest part, over its parts), to refine handoff_us. */
double split_observed_overhead(const gkcd_job *parent);

#endif
