/* servers.c: the servers bench_rpc measures, gkcd and the echo server:
 * started pinned for each placement, stopped after it, and stopped on every
 * way out (exit, SIGINT, SIGTERM) with their files removed. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "rpc.h"

pid_t echo_server_start(const char *path, const cpu_set_t *cpus); /* echo_server.c */

run_state g_run;
char g_flags[400];

static void cleanup(void) {
  bench_stop_child(&g_run.gkcd_pid, 10);
  bench_stop_child(&g_run.echo_pid, 2);
  if (!g_run.dir[0]) return;
  unlink(g_run.echo_sock);
  unlink(g_run.gkcd_sock);
  if (!g_run.keep_log) {
    unlink(g_run.gkcd_log);
    rmdir(g_run.dir);
  }
}

/* Interrupted: no child may outlive the bench, nor any file.  Only
 * async-signal-safe calls; SIGKILL because a clean stop is not needed. */
static void on_signal(int sig) {
  pid_t pids[2] = {g_run.gkcd_pid, g_run.echo_pid};
  for (int i = 0; i < 2; i++)
    if (pids[i] > 0 && kill(pids[i], SIGKILL) == 0) waitpid(pids[i], NULL, 0);
  if (g_run.dir[0]) {
    unlink(g_run.echo_sock);
    unlink(g_run.gkcd_sock);
    unlink(g_run.gkcd_log);
    rmdir(g_run.dir);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void servers_init(void) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  atexit(cleanup);
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(g_run.dir, sizeof g_run.dir, "%s/gkc-bench-XXXXXX", tmp);
  if (!mkdtemp(g_run.dir)) bench_die("mkdtemp in %s: %s", tmp, strerror(errno));
  snprintf(g_run.gkcd_sock, sizeof g_run.gkcd_sock, "%s/gkcd.sock", g_run.dir);
  snprintf(g_run.gkcd_log, sizeof g_run.gkcd_log, "%s/gkcd.log", g_run.dir);
  snprintf(g_run.echo_sock, sizeof g_run.echo_sock, "%s/echo.sock", g_run.dir);
}

void servers_start_gkcd(const options *o, const placement *pl) {
  const char *bin = o->gkcd_bin ? o->gkcd_bin : getenv("GKCD_BIN");
  if (!bin) bench_die("no gkcd binary: pass --gkcd PATH, set GKCD_BIN, or use --socket PATH");
  char threads[16];
  const char *argv[16];
  int n = 0;
  argv[n++] = bin;
  argv[n++] = "--socket";
  argv[n++] = g_run.gkcd_sock;
  argv[n++] = "--backend";
  argv[n++] = o->backend;
  if (o->threads > 0) {
    snprintf(threads, sizeof threads, "%d", o->threads);
    argv[n++] = "--threads";
    argv[n++] = threads;
  }
  argv[n] = NULL;
  size_t len = 0;
  for (int i = 1; i < n && len < sizeof g_flags; i++)
    len += (size_t)snprintf(g_flags + len, sizeof g_flags - len, "%s%s", i > 1 ? " " : "",
                            i == 2 ? "$TMP/gkcd.sock" : argv[i]);
  char why[128];
  const cpu_set_t *cpus = pl->mode != PIN_NONE ? &pl->server : NULL;
  if (bench_gkcd_start(argv, g_run.gkcd_sock, g_run.gkcd_log, cpus, &g_run.gkcd_pid, why,
                       sizeof why) != 0) {
    g_run.keep_log = 1;
    bench_die("%s; see %s", why, g_run.gkcd_log);
  }
}

pid_t servers_start_echo(const placement *pl) {
  pid_t pid = echo_server_start(g_run.echo_sock, pl->mode == PIN_NONE ? NULL : &pl->server);
  if (pid < 0) bench_die("echo server on %s: %s", g_run.echo_sock, strerror(errno));
  g_run.echo_pid = pid;
  return pid;
}

void servers_stop(void) {
  if (g_run.gkcd_pid > 0) {
    int status = bench_stop_child(&g_run.gkcd_pid, 10);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      g_run.keep_log = 1;
      bench_die("gkcd did not exit cleanly on SIGTERM (status %d); see %s", status,
                g_run.gkcd_log);
    }
  }
  bench_stop_child(&g_run.echo_pid, 2);
  unlink(g_run.echo_sock);
}

pid_t servers_peer_pid(const char *sock) {
  int fd = client_connect(sock);
  struct ucred cr;
  socklen_t len = sizeof cr;
  pid_t pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 ? cr.pid : 0;
  close(fd);
  return pid;
}

void servers_check_status(const char *sock) {
  gkc_conn *c;
  gkc_status_info si;
  if (gkc_connect(&c, sock) != 0 || gkc_status(c, &si) != 0)
    bench_die("status: %s", gkc_errmsg(c));
  gkc_close(c);
  for (int i = 0; i < si.n_methods; i++)
    if (si.methods[i].errors)
      bench_die("gkcd counted %llu failed %s requests",
                (unsigned long long)si.methods[i].errors, si.methods[i].name);
}
