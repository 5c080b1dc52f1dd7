/* sgemm_driver.h: what the three sgemm tests share (test_gpu_sgemm,
 * test_gpu_sgemm_tc, test_gpu_sgemm_wg).
 *
 * A case is one m x n x k product on fresh random inputs in [-1, 1)
 * (A, B and the input C), its float64 reference, and every variant of the
 * test run on the same device operands: C holds the input when beta != 0,
 * else NaN, which must not leak; operands shifted one float off 16-byte
 * alignment when asked, so that the scalar load paths run.  Every element
 * is checked, scaled by the sum of |terms| of its dot product, and the
 * whole normwise, against the variant's tolerances; a failure prints the
 * variant, the case and the worst element, and the test keeps going so
 * that one run reports them all.
 *
 * Each test keeps what differs: its variants (names, launch, tolerances),
 * its argument checks, its shapes and its own checks.
 */
#ifndef SGEMM_DRIVER_H
#define SGEMM_DRIVER_H

#include <stddef.h>

#include "gkcu.h"
#include "gpu_util.h"

/* C = alpha op(A) op(B) + beta C on the device, by variant v of a test (or
 * run i of an accuracy comparison); 0 or a gkcu error (message in ctx). */
typedef int (*sgemm_run_fn)(gkcu_ctx *ctx, int v, int m, int n, int k, float alpha, const float *a,
                            int ta, const float *b, int tb, float beta, float *c);

typedef struct {
  const char *name; /* the test's, for its summary line */
  gkcu_ctx *ctx;
  gpu_rng rng;
  int nvariants;
  /* Variant v's name, for the FAIL lines. */
  void (*variant_name)(int v, char *buf, size_t len);
  sgemm_run_fn run;
  /* Variant v's tolerances at depth k: elementwise (scaled) and normwise. */
  void (*tolerances)(int v, int k, double *elem, double *frob);
  int frob_vs_ref; /* the normwise error relative to ||ref|| (frob_ref), else
                    * to the epilogue's terms (frob; gpu_util.h) */
  int name_width;  /* the variant's name is printed in this many columns */
  int show_bad;    /* a failure (of the first 12) prints its first wrong elements */
  int runs, failures;
} sgemm_test;

/* One case (see above). */
void sgemm_test_case(sgemm_test *t, int m, int n, int k, int ta, int tb, float alpha, float beta,
                     int misalign);
/* Each shape {m, n, k} with the four transposes; (alpha, beta) cycling
 * through (1, 0), (-1.5, 0), (0.75, -1.25), (1, 1) and every third case
 * misaligned. */
void sgemm_test_shapes(sgemm_test *t, const int (*shapes)[3], int nshapes);
/* beta = 0 (C NaN), alpha 2, with the four transposes at shape `aligned`
 * and at shape `misaligned` (shifted off alignment). */
void sgemm_test_beta0(sgemm_test *t, const int aligned[3], const int misaligned[3]);
/* The accuracy inputs `what` (gpu_sgemm_accuracy_inputs), m x n x k, no
 * transposes, alpha 1, beta 0: run(ctx, i, ...) for i < nruns on the same
 * operands, e[i] its errors against the float64 reference.  A run that
 * fails fails the test. */
void sgemm_test_accuracy(sgemm_test *t, const char *what, int m, int n, int k, int nruns,
                         sgemm_run_fn run, gpu_sgemm_err *e);
/* Prints the summary ("name: R runs, F failures"); the exit status. */
int sgemm_test_end(sgemm_test *t);

#endif
