/* cli_check.c: comparing a result with the client's double-precision reference. */
#include <math.h>

#include "cli.h"

double cli_max_scaled_err(const float *got, const double *ref, const double *scale, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double diff = fabs((double)got[i] - ref[i]);
    double e = scale[i] > 0.0 ? diff / scale[i] : diff;
    if (!(e <= worst)) worst = e; /* a NaN result must not compare its way past */
    if (isnan(worst)) return worst;
  }
  return worst;
}

int cli_report_check(cli_out *o, double err) { return cli_report_check_tol(o, err, CLI_CHECK_TOL); }

int cli_report_check_tol(cli_out *o, double err, double tol) {
  int ok = err <= tol;
  cli_out_num(o, "max_rel_err", "max rel err", err, "%.3g");
  cli_out_str(o, "check", "check", ok ? "passed" : "FAILED");
  if (ok) return CLI_OK;
  fprintf(stderr, "gkc: check failed: max relative error %.3g is over %g\n", err, tol);
  return CLI_FAIL;
}
