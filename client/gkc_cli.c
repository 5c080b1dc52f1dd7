/* gkc_cli.c: gkc, the command-line client of gkcd: global options and dispatch.
 *
 * gkc [--socket PATH] [--json] COMMAND [OPTIONS]; each command lives in its
 * own cli_<command>.c (or cli_info.c for ping and status) and may also take
 * the global options after its name.
 */
#include <string.h>

#include "cli.h"

static const cli_cmd *const commands[] = {&cli_ping_cmd,    &cli_status_cmd, &cli_sgemm_cmd,
                                          &cli_reduce_cmd,  &cli_dot_cmd,    &cli_nrm2_cmd,
                                          &cli_axpby_cmd,   &cli_spmv_cmd,   &cli_solve_cmd,
                                          &cli_batch_cmd,   &cli_metrics_cmd, &cli_top_cmd, NULL};

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gkc [--socket PATH] [--json] [--no-shm] COMMAND [OPTIONS]\n"
          "Client of gkcd, the GPU compute daemon: runs sgemm, reduce, dot, nrm2, axpby,\n"
          "spmv and solve on arrays from .npy and Matrix Market files or on random data.\n\n"
          "Commands:\n");
  for (const cli_cmd *const *c = commands; *c; c++)
    fprintf(f, "  %-8s %s\n", (*c)->name, (*c)->summary);
  fprintf(f,
          "\nOptions:\n"
          "  --socket PATH   gkcd's socket (default: $GKC_SOCKET, else\n"
          "                  $XDG_RUNTIME_DIR/gkcd.sock, else /run/gkcd/gkcd.sock)\n"
          "  --json          print one JSON object instead of text\n"
          "  --no-shm        send every array through the socket: libgkc otherwise\n"
          "                  passes arrays of %zu KiB or more through shared memory\n"
          "                  it registers with gkcd (also GKC_NO_SHM=1; the size:\n"
          "                  GKC_SHM_THRESHOLD)\n"
          "  -h, --help      show this help and exit\n"
          "  -V, --version   show the version and exit\n\n"
          "'gkc COMMAND --help' describes a command's options.\n"
          "Exit status: 0 success, 1 server, connection or --check failure, 2 usage error.\n",
          (size_t)GKC_SHM_DEFAULT_THRESHOLD >> 10);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                       {"version", no_argument, 0, 'V'},
                                       {0, 0, 0, 0}};
  cli_globals g = {0};
  int o, rc;
  opterr = 0;
  /* '+': stop at the command; what follows is the command's to parse. */
  while ((o = getopt_long(argc, argv, "+:hV", opts, NULL)) != -1) {
    switch (o) {
      case 'h': usage(stdout); return CLI_OK;
      case 'V': printf("gkc %s (protocol %d)\n", GKC_VERSION, GKC_PROTOCOL); return CLI_OK;
      default:
        if ((rc = cli_common_opt(&g, opts, o, argv)) >= 0) return rc;
    }
  }
  if (optind >= argc)
    return cli_usage_error(&g, "missing command (one of ping, status, sgemm, reduce, dot,"
                                 " nrm2, axpby, spmv, solve, batch, metrics, top)");
  for (const cli_cmd *const *c = commands; *c; c++) {
    if (strcmp((*c)->name, argv[optind]) == 0) {
      g.cmd = *c;
      return g.cmd->run(&g, argc - optind, argv + optind);
    }
  }
  return cli_usage_error(&g, "unknown command '%s'", argv[optind]);
}
