/* cli_conn.c: connecting to gkcd and reporting its errors. */
#include <string.h>
#include <time.h>

#include "cli.h"

/* The message without the error name, which libgkc puts in front of the
 * daemon's text ("invalid_argument: argument 'algo': ..."). */
static const char *message_of(gkc_conn *c, int rc) {
  const char *msg = gkc_errmsg(c), *name = gkc_errname(rc);
  size_t n = strlen(name);
  if (!msg || !*msg) return gkc_strerror(rc);
  if (strncmp(msg, name, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  return msg;
}

int cli_connect(const cli_globals *g, gkc_conn **out) {
  char path[128];
  *out = NULL;
  if (gkc_socket_path(path, sizeof path, g->socket) != 0)
    return cli_usage_error(g, "socket path%s%s is longer than a Unix socket allows (107 bytes)",
                           g->socket ? " given with --socket " : " (from $GKC_SOCKET or "
                                                                  "$XDG_RUNTIME_DIR)",
                           g->socket ? g->socket : "");
  gkc_conn *c = NULL;
  int rc = gkc_connect(&c, path);
  if (rc == 0) {
    /* GKC_NO_SHM in the environment is libgkc's own to read. */
    if (g->no_shm) gkc_set_shm(c, GKC_SHM_OFF, 0);
    *out = c;
    return CLI_OK;
  }
  fprintf(stderr, "gkc: %s: %s\n", gkc_errname(rc), c ? message_of(c, rc) : gkc_strerror(rc));
  fprintf(stderr,
          "gkc: cannot talk to gkcd at %s: is gkcd running? start it with: gkcd --socket %s\n",
          path, path);
  gkc_close(c);
  return CLI_FAIL;
}

int cli_call_failed(gkc_conn *c, int rc) {
  fprintf(stderr, "gkc: %s: %s\n", gkc_errname(rc), message_of(c, rc));
  return CLI_FAIL;
}

double cli_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
