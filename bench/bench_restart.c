/* bench_restart: how long a planned restart keeps shared resident data away
 * (issue #30: "a restart with 8 GiB of shared resident arrays is back
 * serving them, checked, within 10 s").
 *
 *   bench_restart --gkcd PATH [--backend B] [--gib N] [--objects K] [--json FILE]
 *
 * It plays systemd (tests/lib/fdstore_standin.h: the notify socket and the
 * descriptor store), starts gkcd, uploads K shared float32 arrays of N GiB
 * in all (default 8 GiB in 16), then times what `systemctl restart` does:
 * SIGTERM (gkcd drains and saves the shared objects into memfds it hands
 * to the store), the exit, the next gkcd started with the store's
 * descriptors (it restores them before it accepts), its first answer, and
 * then every array downloaded by its id and compared byte for byte with
 * what was uploaded.  Prints each step and the total from SIGTERM to the
 * last array checked.
 */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "fdstore_standin.h"
#include "gkc.h"

static char dir[64], sock[128], notify_path[128], log_path[128];

static void fill(float *x, size_t n, uint32_t obj) {
  /* Distinct in every object and position, cheap to make and to make again. */
  for (size_t i = 0; i < n; i++) x[i] = (float)((uint32_t)(i * 2654435761u + obj * 40503u) >> 8);
}

static pid_t start(const char *gkcd, const char *backend, const fs_set *pass, const char *restore_max) {
  char *argv[] = {(char *)gkcd, "--socket", sock, "--backend", (char *)backend,
                  "--restore-max-bytes", (char *)restore_max, "--memory-budget", (char *)restore_max,
                  NULL};
  pid_t pid = fs_spawn(pass, notify_path, log_path, argv);
  if (pid < 0) bench_die("fork: cannot start gkcd");
  return pid;
}

/* Waits for gkcd to exit, reading the store's datagrams meanwhile as
 * systemd does (a full notify socket would hold gkcd's sends); 0 when it
 * exited with status 0. */
static int wait_exit(fs_notify *S, pid_t pid) {
  int st;
  pid_t w;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0) {
    if (fs_notify_drain(S) != 0) bench_die("reading the notify socket failed");
    usleep(500);
  }
  return w == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* gkcd's log, to stderr: what a failure needs (the temporary directory
 * goes with the machine). */
static void show_log(void) {
  FILE *f = fopen(log_path, "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "--- gkcd's log (%s):\n", log_path);
  while (fgets(line, sizeof line, f)) fputs(line, stderr);
  fclose(f);
}

/* Seconds until gkcd (pid) answers a ping, reading the notify socket
 * meanwhile (a restore sends FDSTOREREMOVE for every object, more
 * datagrams than a unix socket queues: systemd reads them as they come);
 * dies, showing its log, if gkcd exits first or takes more than 300 s. */
static double wait_up(fs_notify *S, pid_t pid, double t0) {
  while (bench_clock_s() - t0 < 300) {
    if (fs_notify_drain(S) != 0) bench_die("reading the notify socket failed");
    gkc_conn *c;
    int ok = gkc_connect(&c, sock) == 0 && gkc_ping(c, NULL) == 0;
    gkc_close(c);
    if (ok) return bench_clock_s() - t0;
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      show_log();
      bench_die("gkcd exited (status %d) before answering", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    usleep(1000);
  }
  show_log();
  bench_die("gkcd did not come up in 300 s");
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_restart --gkcd PATH [--backend B] [--gib N] [--objects K] [--json FILE]\n"
             "  plays systemd's descriptor store, uploads N GiB (default 8) of shared arrays in\n"
             "  K objects (default 16), restarts gkcd with SIGTERM, and times it back to serving\n"
             "  them, every byte checked\n");
}

int main(int argc, char **argv) {
  bench_prog = "bench_restart";
  const char *gkcd = NULL, *backend = "auto", *json_path = NULL;
  double gib = 8;
  long objects = 16;
  static const struct option opts[] = {{"gkcd", 1, 0, 'g'}, {"backend", 1, 0, 'b'},
                                       {"gib", 1, 0, 'n'},  {"objects", 1, 0, 'k'},
                                       {"json", 1, 0, 'j'}, {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'g': gkcd = optarg; break;
      case 'b': backend = optarg; break;
      case 'n': gib = atof(optarg); break;
      case 'k': objects = atol(optarg); break;
      case 'j': json_path = optarg; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (!gkcd || gib <= 0 || objects < 1 || objects > FS_MAXFD - 1) {
    usage(stderr);
    return 2;
  }
  size_t per = (size_t)(gib * (double)(1 << 30) / (double)objects) & ~(size_t)4095;
  size_t n = per / 4;
  if (n == 0) bench_die("--gib %g in %ld objects leaves nothing in each", gib, objects);
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%.40s/gkc-restart-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) bench_die("mkdtemp: cannot make %s", dir);
  snprintf(sock, sizeof sock, "%s/gkcd.sock", dir);
  snprintf(notify_path, sizeof notify_path, "%s/notify.sock", dir);
  snprintf(log_path, sizeof log_path, "%s/gkcd.log", dir);
  fs_notify S;
  if (fs_notify_open(&S, notify_path) != 0) bench_die("cannot bind %s", notify_path);
  char restore_max[32];
  snprintf(restore_max, sizeof restore_max, "%zuM", (per * (size_t)objects >> 20) * 2 + 1024);

  pid_t pid = start(gkcd, backend, NULL, restore_max);
  wait_up(&S, pid, bench_clock_s());
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) bench_die("connect: %s", gkc_errmsg(c));
  /* Every object's bytes kept here: the check after the restart compares,
   * it does not make them again (what a restart costs, not the bench). */
  float **x = calloc((size_t)objects, sizeof *x), *back = malloc(per);
  uint32_t *ids = calloc((size_t)objects, sizeof *ids);
  if (!x || !back || !ids) bench_die("out of memory for %zu-byte buffers", per);
  for (long k = 0; k < objects; k++) {
    if (!(x[k] = malloc(per))) bench_die("out of memory for object %ld's %zu bytes", k, per);
    fill(x[k], n, (uint32_t)k);
  }
  double t = bench_clock_s();
  for (long k = 0; k < objects; k++) {
    if (gkc_upload(c, gkc_ref_mem(x[k], per), GKC_F32, 1, &ids[k]) != 0)
      bench_die("upload %ld: %s", k, gkc_errmsg(c));
    fprintf(stderr, "\ruploaded %ld/%ld", k + 1, objects);
  }
  fprintf(stderr, "\n");
  double t_upload = bench_clock_s() - t;
  gkc_close(c);

  /* What systemctl restart does: stop, then start with the store. */
  double t0 = bench_clock_s();
  if (kill(pid, SIGTERM) != 0) bench_die("kill: gkcd %d is gone", (int)pid);
  if (wait_exit(&S, pid) != 0) {
    show_log();
    bench_die("gkcd did not exit cleanly after SIGTERM");
  }
  double t_stop = bench_clock_s() - t0;
  show_log(); /* the first gkcd's account of its save (the next start truncates the log) */
  if (fs_notify_drain(&S) != 0) bench_die("reading the notify socket failed");
  int stored = S.store.n;
  if (stored != objects + 1) {
    show_log();
    bench_die("the store holds %d descriptors, not %ld objects and a manifest", stored, objects);
  }
  double t1 = bench_clock_s();
  pid = start(gkcd, backend, &S.store, restore_max);
  fs_set_clear(&S.store); /* gkcd has them now */
  double t_up = wait_up(&S, pid, t1);
  if (gkc_connect(&c, sock) != 0) bench_die("connect: %s", gkc_errmsg(c));
  for (long k = 0; k < objects; k++) {
    if (gkc_download(c, ids[k], back, per) != 0)
      bench_die("download of id %u after the restart: %s", ids[k], gkc_errmsg(c));
    if (memcmp(back, x[k], per) != 0) bench_die("object %ld (id %u) differs after the restart", k, ids[k]);
  }
  double t_all = bench_clock_s() - t0;
  double t_check = t_all - t_stop - t_up - (t1 - t0 - t_stop);
  gkc_close(c);
  kill(pid, SIGINT); /* no save this time */
  if (wait_exit(&S, pid) != 0) bench_die("gkcd did not exit cleanly after SIGINT; see %s", log_path);

  show_log(); /* its own account of the save and the restore */
  double total = (double)per * (double)objects;
  printf("| step | s |\n|---|---:|\n");
  printf("| upload %.2f GiB shared, %ld objects (before) | %.2f |\n", total / (1 << 30), objects, t_upload);
  printf("| SIGTERM to exit (drain, save to the store) | %.2f |\n", t_stop);
  printf("| start to first answer (restore before accepting) | %.2f |\n", t_up);
  printf("| every object downloaded and checked | %.2f |\n", t_check);
  printf("| **SIGTERM to all checked** | **%.2f** |\n", t_all);
  if (json_path) {
    FILE *j = fopen(json_path, "w");
    if (!j) bench_die("cannot write %s", json_path);
    fprintf(j, "{\"bytes\": %.0f, \"objects\": %ld, \"backend\": \"%s\", \"upload_s\": %.4f, "
               "\"stop_s\": %.4f, \"up_s\": %.4f, \"check_s\": %.4f, \"total_s\": %.4f}\n",
            total, objects, backend, t_upload, t_stop, t_up, t_check, t_all);
    fclose(j);
  }
  fs_notify_close(&S);
  unlink(sock);
  unlink(log_path);
  rmdir(dir);
  for (long k = 0; k < objects; k++) free(x[k]);
  free(x), free(back), free(ids);
  return 0;
}
