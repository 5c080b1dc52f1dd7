/* main.c: gkcd's start-up: settings, backend choice, event loop. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fault.h"
#include "gkc.h"
#include "log.h"
#include "options.h"
#include "server.h"

/* Opens the devices to serve from into be[], *n of them: every selected
 * GPU (each cut into --split-device parts), or the CPU backend's
 * --cpu-devices virtual devices. */
static int open_backend(const gkcd_config *cfg, gkcd_backend **be, int *n) {
  char msg[256] = "";
  int want_cuda = strcmp(cfg->backend, "cpu") != 0;
#ifdef GKC_HAVE_CUDA
  if (want_cuda) {
    if (cuda_backends_create(be, GKCD_MAX_DEVICES, n, cfg, msg, sizeof msg) == 0) return 0;
    if (strcmp(cfg->backend, "cuda") == 0) {
      log_err("CUDA backend unavailable: %s", msg);
      return -1;
    }
    log_warn("no usable GPU (%s); serving from the CPU backend", msg);
  }
#else
  if (strcmp(cfg->backend, "cuda") == 0) {
    log_err("this gkcd was built without CUDA; use --backend cpu or auto");
    return -1;
  }
  if (want_cuda) log_info("built without CUDA; serving from the CPU backend");
#endif
  /* The virtual devices share the host's cores: each gets its share of
   * --kernel-threads (all of them when 0), at least one. */
  int count = cfg->cpu_devices > 0 ? cfg->cpu_devices : 1;
  int threads = cfg->kernel_threads;
  if (count > 1) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int total = threads > 0 ? threads : (int)(ncpu > 0 ? ncpu : 1);
    threads = total / count > 0 ? total / count : 1;
  }
  if (cpu_backends_create(be, count, threads, cfg->cpu_device_memory, msg, sizeof msg) != 0) {
    log_err("CPU backend: %s", msg);
    return -1;
  }
  *n = count;
  if (count > 1) log_info("CPU backend as %d virtual devices, %d kernel threads each", count, threads);
  return 0;
}

/* Each connection is a descriptor: lift the soft limit to the hard one so
 * that max-connections, not a default of 1024, is what bounds them. */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* OpenMP's idle threads in gkcd sleep rather than spin.  libgomp's default
 * is to spin after each parallel region (up to 300,000 pause loops), and
 * gkcd has several: each worker thread that runs a parallel region (the
 * ring's chunk copies, the AMG setup, the CPU kernels) gets its own team.
 * Spinning teams took the cores from the one that had work: on the H200
 * host a 4M-row AMG setup stalled ~100 ms in one step or another (the
 * download's copies, the float32 rounding) in most fresh daemons, 384-533
 * ms in all; with OMP_WAIT_POLICY=passive, 423-432 ms in every one
 * (bench/RESULTS.md, 2026-11-29).  libgomp reads the policy once, when it
 * loads, before main: so gkcd sets it and executes itself again, once (the
 * variable is then set).  A policy the caller chose, OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT, is kept; without /proc/self/exe gkcd runs on as it is. */
static void omp_wait_passive(char **argv) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
  omp_wait_passive(argv);
  static gkcd_server srv; /* lives as long as the process */
  gkcd_config *cfg = &srv.cfg;
  int rc = options_load(cfg, argc, argv);
  if (rc >= 0) return rc;
  log_set_level(cfg->log_level);
  if (options_resolve_access(cfg) != 0) return 2;
  if (fault_init() != 0) {
    log_err("GKCD_FAULT must be METHOD:CODE, METHOD:delay=MS or device_lost:dev=N[:after=K],"
            " e.g. sgemm:device_error");
    return 2;
  }
  raise_fd_limit();
  if (cfg->config_path[0]) log_info("read settings from %s", cfg->config_path);

  /* SIGINT and SIGTERM go to the loop thread only: every thread created
   * from here on (workers, BLAS, OpenMP, CUDA's own) inherits them blocked,
   * and the loop thread unblocks them while it runs and blocks them again
   * in server_close.  A late signal during teardown then stays pending
   * instead of meeting the default action in some other thread after
   * libuv has given the handler back. */
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

  static gkcd_backend *be[GKCD_MAX_DEVICES];
  int ndev = 0;
  if (open_backend(cfg, be, &ndev) != 0) return 1;
  uv_loop_t *loop = uv_default_loop();
  if (server_start(&srv, loop, be, ndev) != 0) {
    if (srv.bound) unlink(cfg->socket_path);
    server_destroy_devices(&srv, be, ndev);
    return 1;
  }
  log_info("gkcd %s listening on %s%s (backend %s, %d device(s), %d threads each, max request"
           " %zu bytes)", GKC_VERSION, cfg->socket_path, srv.activated ? " (from systemd)" : "",
           be[0]->name, ndev, cfg->threads, cfg->max_request_bytes);
  server_ready(&srv);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, NULL);
  server_run(&srv);
  server_close(&srv);
  uv_loop_close(loop);
  server_destroy_devices(&srv, be, ndev);
  return backend_failed() ? 1 : 0;
}
