/* cli_metrics.c: the metrics command. */
#include <stdlib.h>

#include "cli.h"

static void metrics_usage(FILE *f) {
  fprintf(f, "Usage: gkc metrics [OPTIONS]\n"
             "Prints gkcd's counters in the Prometheus text format (the same text\n"
             "gkcd --metrics-listen serves at GET /metrics).  With --json, prints\n"
             "{\"metrics\": TEXT}.\n"
             CLI_COMMON_HELP);
}

static int metrics_run(cli_globals *g, int argc, char **argv) {
  static const struct option opts[] = {CLI_COMMON_OPTIONS, {0, 0, 0, 0}};
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
    if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  gkc_conn *c;
  if ((rc = cli_connect(g, &c)) != CLI_OK) return rc;
  char *text = NULL;
  int err = gkc_metrics(c, &text);
  if (err) {
    rc = cli_call_failed(c, err);
    gkc_close(c);
    return rc;
  }
  gkc_close(c);
  if (g->json) {
    fputs("{\"metrics\": ", stdout);
    cli_json_str(stdout, text);
    fputs("}\n", stdout);
  } else {
    fputs(text, stdout);
  }
  free(text);
  return CLI_OK;
}

const cli_cmd cli_metrics_cmd = {"metrics", "print gkcd's counters in the Prometheus text format",
                                 metrics_usage, metrics_run};
